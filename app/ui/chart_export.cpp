#include "chart_export.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <QBuffer>
#include <QDir>
#include <QFileInfo>
#include <QFontMetricsF>
#include <QGuiApplication>
#include <QImage>
#include <QImageWriter>
#include <QPageLayout>
#include <QPageSize>
#include <QPdfWriter>
#include <QRegularExpression>
#include <QSaveFile>
#include <QScreen>
#include <QSvgGenerator>
#include <qcustomplot.h>

#include "clipping_device.h"
#include "plot_layout.h"

namespace pipescope::app {
namespace {

constexpr double kMetersPerInch = 0.0254;
constexpr double kPointsPerPx = 72.0 / 96.0;

// What the export draws, checked and laid out: every size in logical px.
struct Plan {
    ExportFormat format = ExportFormat::Png;
    std::vector<QCustomPlot*> plots;
    std::vector<int> heights;
    int width = 0;
    int height = 0;
    int title_height = 0;
    QFont title_font;
    QString title;
    // PNG: the image's size in pixels.
    int pixel_width = 0;
    int pixel_height = 0;
};

QString fileLabel(const QString& path) {
    return QDir::toNativeSeparators(path);
}

ExportResult failure(const QString& path, const QString& problem) {
    return {false, QStringLiteral("%1: %2").arg(fileLabel(path), problem)};
}

// The DPI at which QCustomPlot lays out text: QFontMetrics without a device uses the primary
// screen's logical DPI. Painting on a device of the same DPI, in logical px, keeps the text
// where the layout expects it.
int layoutDpi() {
    if (QCoreApplication::testAttribute(Qt::AA_Use96Dpi)) {
        return 96;
    }
    if (const QScreen* screen = QGuiApplication::primaryScreen()) {
        const int dpi = qRound(screen->logicalDotsPerInchY());
        if (dpi > 0) {
            return dpi;
        }
    }
    return 96;
}

int dotsPerMeter(double dpi) {
    return static_cast<int>(std::lround(dpi / kMetersPerInch));
}

QString sideError(const char* what, int value) {
    return QStringLiteral("%1 %2 px is out of range (%3 to %4 logical px)")
        .arg(QLatin1String(what))
        .arg(value)
        .arg(kExportMinSide)
        .arg(kExportMaxSide);
}

QFont titleFont(const QCustomPlot& plot) {
    QFont font = plot.font();
    font.setBold(true);
    if (font.pointSizeF() > 0) {
        font.setPointSizeF(font.pointSizeF() * 1.3);
    } else if (font.pixelSize() > 0) {
        font.setPixelSize(static_cast<int>(std::lround(font.pixelSize() * 1.3)));
    }
    return font;
}

// Checks the request and lays it out; an empty string when it can be drawn.
QString makePlan(const std::vector<std::pair<QCustomPlot*, int>>& plots,
                 const ExportOptions& options, Plan& plan) {
    if (plots.empty()) {
        return QStringLiteral("nothing to export (no plot given)");
    }
    int natural_width = 0;
    std::int64_t natural_height = 0;
    for (std::size_t i = 0; i < plots.size(); ++i) {
        const auto& [plot, height] = plots[i];
        if (plot == nullptr) {
            return plots.size() == 1 ? QStringLiteral("no plot to export (null plot)")
                                     : QStringLiteral("plot %1 of %2 is missing (null plot)")
                                           .arg(i + 1)
                                           .arg(plots.size());
        }
        if (height < 0) {
            return QStringLiteral("plot %1 has a negative height (%2 px)").arg(i + 1).arg(height);
        }
        plan.plots.push_back(plot);
        plan.heights.push_back(height > 0 ? height : plot->height());
        natural_width = std::max(natural_width, plot->width());
        natural_height += plan.heights.back();
    }

    plan.width = options.width != 0 ? options.width : natural_width;
    if (plan.width < kExportMinSide || plan.width > kExportMaxSide) {
        return sideError("width", plan.width);
    }
    const std::int64_t height = options.height != 0 ? options.height : natural_height;
    if (height < kExportMinSide || height > kExportMaxSide) {
        return sideError("height", static_cast<int>(std::min<std::int64_t>(
                                       height, std::numeric_limits<int>::max())));
    }
    plan.height = static_cast<int>(height);

    if (plan.format == ExportFormat::Png) {
        if (!std::isfinite(options.dpi) || options.dpi < kExportMinDpi ||
            options.dpi > kExportMaxDpi) {
            return QStringLiteral("%1 dpi is out of range (%2 to %3 dpi)")
                .arg(options.dpi)
                .arg(kExportMinDpi)
                .arg(kExportMaxDpi);
        }
        const double scale = options.dpi / 96.0;
        const std::int64_t pixel_width = std::llround(plan.width * scale);
        const std::int64_t pixel_height = std::llround(plan.height * scale);
        if (pixel_width * pixel_height > kExportMaxPngPixels) {
            return QStringLiteral(
                       "a PNG of %1 x %2 px at %3 dpi would have %4 megapixels, over the limit "
                       "of %5 megapixels; use a smaller size or dpi, or SVG or PDF")
                .arg(pixel_width)
                .arg(pixel_height)
                .arg(options.dpi)
                .arg(static_cast<double>(pixel_width * pixel_height) / 1e6, 0, 'f', 1)
                .arg(kExportMaxPngPixels / 1'000'000);
        }
        plan.pixel_width = static_cast<int>(pixel_width);
        plan.pixel_height = static_cast<int>(pixel_height);
    }

    plan.title = options.title.simplified();
    if (!plan.title.isEmpty()) {
        plan.title_font = titleFont(*plan.plots.front());
        const QFontMetricsF metrics(plan.title_font);
        plan.title_height = static_cast<int>(std::ceil(metrics.height() * 1.6));
    }

    // The plots share what the title leaves in proportion to their heights (equally if those
    // are all 0); rounding the running sum makes the shares add up to it exactly.
    const std::int64_t content = plan.height - plan.title_height;
    std::vector<std::int64_t> weights(plan.heights.begin(), plan.heights.end());
    if (natural_height == 0) {
        std::fill(weights.begin(), weights.end(), 1);
    }
    std::int64_t total = 0;
    for (const std::int64_t weight : weights) {
        total += weight;
    }
    std::int64_t sum = 0;
    int top = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        sum += weights[i];
        const auto bottom = static_cast<int>(std::llround(
            static_cast<double>(content) * static_cast<double>(sum) / static_cast<double>(total)));
        const int share = bottom - top;
        if (share < kExportMinSide) {
            return QStringLiteral(
                       "a height of %1 px leaves plot %2 only %3 px (at least %4 logical px "
                       "each)")
                .arg(plan.height)
                .arg(i + 1)
                .arg(share)
                .arg(kExportMinSide);
        }
        plan.heights[i] = share;
        top = bottom;
    }
    return {};
}

// Draws the plan in logical px; the painter maps them onto the device.
void paintPlan(QCPPainter& painter, const Plan& plan) {
    if (plan.title_height > 0) {
        const QRectF band(0, 0, plan.width, plan.title_height);
        painter.fillRect(band, Qt::white);
        painter.setFont(plan.title_font);
        painter.setPen(QPen(Qt::black));
        const QFontMetricsF metrics(plan.title_font);
        const double margin = metrics.height() * 0.5;
        const QString text =
            metrics.elidedText(plan.title, Qt::ElideRight, std::max(0.0, plan.width - 2 * margin));
        painter.drawText(band, Qt::AlignCenter, text);
    }
    int top = plan.title_height;
    for (std::size_t i = 0; i < plan.plots.size(); ++i) {
        painter.save();
        painter.translate(0, top);
        // Legends wrap into the columns the export's width has room for, then back to the
        // widget's, as a resize of the window would do.
        fitPlotLegends(plan.plots[i], QSize(plan.width, plan.heights[i]));
        plan.plots[i]->toPainter(&painter, plan.width, plan.heights[i]);
        fitPlotLegends(plan.plots[i], plan.plots[i]->size());
        painter.restore();
        top += plan.heights[i];
    }
}

// Renders the plan into the bytes of the file; an empty string when it worked.
QString renderPng(const Plan& plan, const ExportOptions& options, QByteArray& bytes) {
    QImage image(plan.pixel_width, plan.pixel_height, QImage::Format_ARGB32_Premultiplied);
    if (image.isNull()) {
        return QStringLiteral("not enough memory for a PNG of %1 x %2 px")
            .arg(plan.pixel_width)
            .arg(plan.pixel_height);
    }
    image.fill(Qt::transparent);
    // Text at the layout's DPI in logical px, then scaled as a whole (see layoutDpi).
    image.setDotsPerMeterX(dotsPerMeter(layoutDpi()));
    image.setDotsPerMeterY(dotsPerMeter(layoutDpi()));
    {
        QCPPainter painter;
        if (!painter.begin(&image)) {
            return QStringLiteral("could not draw the PNG");
        }
        const double sx = static_cast<double>(plan.pixel_width) / plan.width;
        const double sy = static_cast<double>(plan.pixel_height) / plan.height;
        if (sx > 1.0 || sy > 1.0) {
            // As QCustomPlot::toPixmap: hairlines grow with the scale like everything else.
            painter.setMode(QCPPainter::pmNonCosmetic);
        }
        painter.scale(sx, sy);
        paintPlan(painter, plan);
        painter.end();
    }
    image.setDotsPerMeterX(dotsPerMeter(options.dpi));
    image.setDotsPerMeterY(dotsPerMeter(options.dpi));
    if (!plan.title.isEmpty()) {
        image.setText(QStringLiteral("Title"), plan.title);
    }
    image.setText(QStringLiteral("Software"), QStringLiteral("PipeScope " PIPESCOPE_VERSION));

    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    QImageWriter writer(&buffer, "png");
    if (!writer.write(image)) {
        return QStringLiteral("could not encode the PNG: %1").arg(writer.errorString());
    }
    return {};
}

// QSvgGenerator gives the root element's size in mm; the file's size is the logical px.
void setSvgRootSize(QByteArray& svg, int width, int height) {
    const qsizetype start = svg.indexOf("<svg");
    const qsizetype end = start < 0 ? -1 : svg.indexOf('>', start);
    if (end < 0) {
        return;
    }
    QString tag = QString::fromUtf8(svg.mid(start, end - start));
    static const QRegularExpression width_attr(QStringLiteral(R"((\s)width="[^"]*")"));
    static const QRegularExpression height_attr(QStringLiteral(R"((\s)height="[^"]*")"));
    tag.replace(width_attr, QStringLiteral("\\1width=\"%1\"").arg(width));
    tag.replace(height_attr, QStringLiteral("\\1height=\"%1\"").arg(height));
    svg.replace(start, end - start, tag.toUtf8());
}

QString renderSvg(const Plan& plan, const QString& path, QByteArray& bytes) {
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    QSvgGenerator generator;
    generator.setOutputDevice(&buffer);
    generator.setSize(QSize(plan.width, plan.height));
    generator.setViewBox(QRect(0, 0, plan.width, plan.height));
    generator.setResolution(layoutDpi());
    generator.setTitle(plan.title.isEmpty() ? QFileInfo(path).completeBaseName() : plan.title);
    generator.setDescription(QStringLiteral("Exported by PipeScope " PIPESCOPE_VERSION));
    {
        QPainter out;
        if (!out.begin(&generator)) {
            return QStringLiteral("could not draw the SVG");
        }
        ClippingDevice device(generator, out);
        QCPPainter painter;
        if (!painter.begin(&device)) {
            return QStringLiteral("could not draw the SVG");
        }
        painter.setModes(QCPPainter::pmVectorized | QCPPainter::pmNonCosmetic);
        paintPlan(painter, plan);
        painter.end();
        out.end();
    }
    buffer.close();
    setSvgRootSize(bytes, plan.width, plan.height);
    return {};
}

QString renderPdf(const Plan& plan, QByteArray& bytes) {
    QBuffer buffer(&bytes);
    buffer.open(QIODevice::WriteOnly);
    {
        QPdfWriter writer(&buffer);
        writer.setCreator(QStringLiteral("PipeScope " PIPESCOPE_VERSION));
        writer.setTitle(plan.title);
        const QPageSize page(QSizeF(plan.width * kPointsPerPx, plan.height * kPointsPerPx),
                             QPageSize::Point, QString(), QPageSize::ExactMatch);
        if (!writer.setPageLayout(QPageLayout(page, QPageLayout::Portrait, QMarginsF()))) {
            return QStringLiteral("could not set up a PDF page of %1 x %2 px")
                .arg(plan.width)
                .arg(plan.height);
        }
        // Device units of 1/dpi inch; logical px are 1/96 inch.
        const int dpi = layoutDpi();
        writer.setResolution(dpi);
        QCPPainter painter;
        if (!painter.begin(&writer)) {
            return QStringLiteral("could not draw the PDF");
        }
        painter.setModes(QCPPainter::pmVectorized | QCPPainter::pmNonCosmetic);
        painter.scale(dpi / 96.0, dpi / 96.0);
        paintPlan(painter, plan);
        painter.end();
    }
    buffer.close();
    return {};
}

// Replaces path with bytes in one rename, or leaves it alone.
QString writeAtomically(const QString& path, const QByteArray& bytes) {
    QSaveFile file(path);
    const QString dir = QDir::toNativeSeparators(QFileInfo(path).absolutePath());
    if (!file.open(QIODevice::WriteOnly)) {
        return QStringLiteral("cannot write to %1: %2").arg(dir, file.errorString());
    }
    if (file.write(bytes) != bytes.size()) {
        const QString error = file.errorString();
        file.cancelWriting();
        return QStringLiteral("cannot write to %1: %2").arg(dir, error);
    }
    if (!file.commit()) {
        return QStringLiteral("cannot save the file: %1").arg(file.errorString());
    }
    return {};
}

}  // namespace

std::optional<ExportFormat> formatForPath(const QString& path) {
    const QString suffix = QFileInfo(path).suffix().toLower();
    if (suffix == QLatin1String("png")) {
        return ExportFormat::Png;
    }
    if (suffix == QLatin1String("svg")) {
        return ExportFormat::Svg;
    }
    if (suffix == QLatin1String("pdf")) {
        return ExportFormat::Pdf;
    }
    return std::nullopt;
}

QString exportFileFilter() {
    return QStringLiteral("PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)");
}

ExportResult exportPlot(QCustomPlot* plot, const QString& path, const ExportOptions& options) {
    return exportPlots({{plot, 0}}, path, options);
}

ExportResult exportPlots(const std::vector<std::pair<QCustomPlot*, int>>& plots,
                         const QString& path, const ExportOptions& options) {
    if (path.isEmpty()) {
        return {false, QStringLiteral("Cannot export: no file name given")};
    }
    const std::optional<ExportFormat> format = formatForPath(path);
    if (!format) {
        const QString suffix = QFileInfo(path).suffix();
        return failure(
            path,
            suffix.isEmpty()
                ? QStringLiteral("no image type (file suffix); use .png, .svg or .pdf")
                : QStringLiteral("unknown image type \"%1\"; use .png, .svg or .pdf").arg(suffix));
    }
    if (QFileInfo(path).isDir()) {
        return failure(path, QStringLiteral("is a directory"));
    }

    Plan plan;
    plan.format = *format;
    if (QString problem = makePlan(plots, options, plan); !problem.isEmpty()) {
        ExportResult refused = failure(path, problem);
        refused.bad_request = true;
        return refused;
    }

    QByteArray bytes;
    QString problem;
    switch (plan.format) {
        case ExportFormat::Png:
            problem = renderPng(plan, options, bytes);
            break;
        case ExportFormat::Svg:
            problem = renderSvg(plan, path, bytes);
            break;
        case ExportFormat::Pdf:
            problem = renderPdf(plan, bytes);
            break;
    }
    // Drawing at the export size moved the plots' layout; lay them out for the screen again.
    for (QCustomPlot* plot : plan.plots) {
        plot->replot(QCustomPlot::rpQueuedReplot);
    }
    if (problem.isEmpty() && bytes.isEmpty()) {
        problem = QStringLiteral("the export came out empty");
    }
    if (problem.isEmpty()) {
        problem = writeAtomically(path, bytes);
    }
    if (!problem.isEmpty()) {
        return failure(path, problem);
    }
    return {true, {}};
}

}  // namespace pipescope::app
