// Chart export: one or more QCustomPlots into a PNG, SVG or PDF file that looks like the screen
// (legend, axis labels and title elements as the plot has them) at a requested size.
//
// Sizes are logical pixels at 96 dpi, the unit of the widgets on screen:
//  - PNG: width x height logical px scaled by dpi / 96 (dpi 192 gives twice the pixels); the DPI
//    is stored in the PNG (dots per meter). Fonts keep their size relative to the plot, so a
//    192 dpi export is the 96 dpi one at twice the resolution.
//  - SVG: width, height and viewBox of exactly width x height (unitless, i.e. CSS px); text stays
//    text. The dpi is not used.
//  - PDF: one page of width x height px at 0.75 pt per px, vector content. The dpi is not used.
// Files are written atomically (a temporary file in the same directory, renamed over the target
// when complete): a failed export leaves neither a partial file nor a changed existing file.
#pragma once

#include <optional>
#include <utility>
#include <vector>

#include <QString>

class QCustomPlot;

namespace pipescope::app {

enum class ExportFormat { Png, Svg, Pdf };

// The limits an export is refused beyond, with a message that names them.
inline constexpr int kExportMinSide = 16;
inline constexpr int kExportMaxSide = 20000;
inline constexpr double kExportMinDpi = 24;
inline constexpr double kExportMaxDpi = 2400;
inline constexpr long long kExportMaxPngPixels = 400'000'000;

struct ExportOptions {
    // Output size in logical px (96 dpi); 0 = the plot's current size (for several plots: the
    // widest plot's width and the sum of the plots' heights). Each must be 16 to 20000.
    int width = 0;
    int height = 0;
    // PNG only: pixels per inch (24 to 2400); the PNG has width * dpi / 96 pixels across and
    // must stay within 400 megapixels.
    double dpi = 96;
    // Optional heading, drawn centred in bold black on a white band across the top. The band is
    // part of the requested height: the plots are drawn below it in the height that remains.
    // Empty = no band (the plots' own QCPTextElement titles are drawn either way).
    QString title;
};

struct ExportResult {
    bool ok = false;
    // Empty when ok; otherwise one line naming the file and the problem, for a message box.
    QString error;
    // The request itself cannot be met (a size, dpi or image type out of range), as opposed to
    // drawing or writing the file failing.
    bool bad_request = false;
};

// The format a file name asks for, by its suffix (case-insensitive): .png, .svg or .pdf.
std::optional<ExportFormat> formatForPath(const QString& path);

// The filter string of a QFileDialog for the formats above ("PNG image (*.png);;...").
QString exportFileFilter();

// Writes one plot to path in the format of its suffix. The plot is drawn at the requested size
// (its layout adapts as on a resized window) and is left as it was.
ExportResult exportPlot(QCustomPlot* plot, const QString& path, const ExportOptions& options = {});

// Several plots stacked top to bottom in one file (e.g. a timeline above a memory chart), all
// of the same width. Each pair is a plot and its height in logical px (0 = its current height).
// With options.height 0 the file is exactly the sum of those heights high; otherwise the plots
// share options.height (less a title band) in proportion to those heights.
ExportResult exportPlots(const std::vector<std::pair<QCustomPlot*, int>>& plots,
                         const QString& path, const ExportOptions& options);

}  // namespace pipescope::app
