// Chart export: PNG, SVG and PDF files of the requested size that look like the plot (graph,
// axis labels, legend, title), stacked plots, and failures that leave no file behind.
#include <cmath>
#include <memory>

#include <QDir>
#include <QFile>
#include <QImage>
#include <QPainter>
#include <QRegularExpression>
#include <QSet>
#include <QSvgRenderer>
#include <QTemporaryDir>
#include <QXmlStreamReader>
#include <QtTest>
#include <qcustomplot.h>

#include "chart_export.h"
#include "plot_layout.h"

using namespace pipescope::app;

namespace {

const QColor kRed(200, 30, 30);
const QColor kGreen(20, 160, 60);
const QString kXLabel = QStringLiteral("Time (ms)");
const QString kYLabel = QStringLiteral("Memory (GiB)");
const QString kTitle = QStringLiteral("Stage timeline");

// A plot as the app shows one: a graph, axis labels, a legend and a title element.
std::unique_ptr<QCustomPlot> makePlot(const QColor& color, const QString& title, int width,
                                      int height) {
    auto plot = std::make_unique<QCustomPlot>();
    plot->resize(width, height);
    plot->plotLayout()->insertRow(0);
    plot->plotLayout()->addElement(
        0, 0,
        new QCPTextElement(plot.get(), title, QFont(QStringLiteral("sans"), 12, QFont::Bold)));
    QCPGraph* graph = plot->addGraph();
    graph->setName(QStringLiteral("stage 0"));
    graph->setPen(QPen(color, 3));
    graph->setBrush(QColor(color.red(), color.green(), color.blue(), 60));
    QVector<double> x;
    QVector<double> y;
    for (int i = 0; i <= 100; ++i) {
        x.push_back(i);
        y.push_back(5 + 4 * std::sin(i / 10.0));
    }
    graph->setData(x, y);
    plot->xAxis->setLabel(kXLabel);
    plot->yAxis->setLabel(kYLabel);
    plot->rescaleAxes();
    plot->legend->setVisible(true);
    plot->replot();
    return plot;
}

QByteArray readAll(const QString& path) {
    QFile file(path);
    if (!file.open(QIODevice::ReadOnly)) {
        return {};
    }
    return file.readAll();
}

bool near(const QColor& a, const QColor& b, int tolerance) {
    return std::abs(a.red() - b.red()) <= tolerance &&
           std::abs(a.green() - b.green()) <= tolerance &&
           std::abs(a.blue() - b.blue()) <= tolerance;
}

// Rows of the image [top, bottom) that hold a pixel close to color.
int rowsWithColor(const QImage& image, const QColor& color, int top, int bottom) {
    int rows = 0;
    for (int y = top; y < bottom; ++y) {
        for (int x = 0; x < image.width(); ++x) {
            if (near(image.pixelColor(x, y), color, 12)) {
                ++rows;
                break;
            }
        }
    }
    return rows;
}

int distinctColors(const QImage& image) {
    QSet<QRgb> colors;
    for (int y = 0; y < image.height(); y += 2) {
        for (int x = 0; x < image.width(); x += 2) {
            colors.insert(image.pixel(x, y));
        }
    }
    return static_cast<int>(colors.size());
}

struct SvgInfo {
    bool ok = false;
    QString width;
    QString height;
    QString view_box;
    QString text;  // all <text> content
    int images = 0;
};

SvgInfo parseSvg(const QByteArray& bytes) {
    SvgInfo info;
    QXmlStreamReader xml(bytes);
    bool root = true;
    int text_depth = 0;
    while (!xml.atEnd()) {
        xml.readNext();
        if (xml.isStartElement()) {
            if (root) {
                if (xml.name() != QLatin1String("svg")) {
                    return info;
                }
                info.width = xml.attributes().value(QLatin1String("width")).toString();
                info.height = xml.attributes().value(QLatin1String("height")).toString();
                info.view_box = xml.attributes().value(QLatin1String("viewBox")).toString();
                root = false;
            }
            if (xml.name() == QLatin1String("text")) {
                ++text_depth;
            }
            if (xml.name() == QLatin1String("image")) {
                ++info.images;
            }
        } else if (xml.isEndElement() && xml.name() == QLatin1String("text")) {
            --text_depth;
            info.text += QLatin1Char('\n');
        } else if (xml.isCharacters() && text_depth > 0) {
            info.text += xml.text();
        }
    }
    info.ok = !xml.hasError() && !root;
    return info;
}

// A PDF's page size in points from its MediaBox.
std::optional<QSizeF> pdfMediaBox(const QByteArray& pdf) {
    static const QRegularExpression box(QStringLiteral(
        R"(/MediaBox\s*\[\s*(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*\])"));
    const QRegularExpressionMatch match = box.match(QString::fromLatin1(pdf));
    if (!match.hasMatch()) {
        return std::nullopt;
    }
    return QSizeF(match.captured(3).toDouble() - match.captured(1).toDouble(),
                  match.captured(4).toDouble() - match.captured(2).toDouble());
}

// The directory's entries, to see that a failed export left nothing (no temporary file).
QStringList entries(const QTemporaryDir& dir) {
    return QDir(dir.path()).entryList(QDir::AllEntries | QDir::Hidden | QDir::NoDotAndDotDot);
}

}  // namespace

class TstChartExport : public QObject {
    Q_OBJECT

  private slots:
    void formatBySuffix();
    void png_data();
    void png();
    void pngDefaultsToPlotSize();
    void svg_data();
    void svg();
    void pdf_data();
    void pdf();
    void svgClipsToAxisRect();
    void titleBand();
    void stackedPng();
    void stackedVector();
    void legendsFitExportWidth();
    void replacesExistingFile();
    void errors_data();
    void errors();
    void unwritableDirectory();
    void nullPlots();
};

void TstChartExport::formatBySuffix() {
    QCOMPARE(formatForPath(QStringLiteral("a.png")), ExportFormat::Png);
    QCOMPARE(formatForPath(QStringLiteral("/tmp/B.SVG")), ExportFormat::Svg);
    QCOMPARE(formatForPath(QStringLiteral("dir.x/c.Pdf")), ExportFormat::Pdf);
    QCOMPARE(formatForPath(QStringLiteral("d.jpg")), std::nullopt);
    QCOMPARE(formatForPath(QStringLiteral("png")), std::nullopt);
    QCOMPARE(formatForPath(QString()), std::nullopt);
    QVERIFY(exportFileFilter().contains(QLatin1String("*.svg")));
}

void TstChartExport::png_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::addColumn<double>("dpi");
    QTest::addColumn<QSize>("pixels");
    QTest::newRow("640x480 at 96 dpi") << 640 << 480 << 96.0 << QSize(640, 480);
    QTest::newRow("640x480 at 192 dpi") << 640 << 480 << 192.0 << QSize(1280, 960);
    QTest::newRow("333x250 at 144 dpi") << 333 << 250 << 144.0 << QSize(500, 375);
    QTest::newRow("1000x300 at 72 dpi") << 1000 << 300 << 72.0 << QSize(750, 225);
}

void TstChartExport::png() {
    QFETCH(int, width);
    QFETCH(int, height);
    QFETCH(double, dpi);
    QFETCH(QSize, pixels);
    const auto plot = makePlot(kRed, kTitle, 500, 400);
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const QString path = dir.filePath(QStringLiteral("chart.PNG"));
    ExportOptions options;
    options.width = width;
    options.height = height;
    options.dpi = dpi;
    const ExportResult result = exportPlot(plot.get(), path, options);
    QVERIFY2(result.ok, qPrintable(result.error));
    QVERIFY(result.error.isEmpty());

    QImage image;
    QVERIFY(image.load(path, "png"));
    QCOMPARE(image.size(), pixels);
    QVERIFY(std::abs(image.dotsPerMeterX() - dpi / 0.0254) <= 1);
    QVERIFY(std::abs(image.dotsPerMeterY() - dpi / 0.0254) <= 1);
    QVERIFY2(distinctColors(image) >= 8, "the PNG looks blank");
    // The graph's line is there, and the background is the plot's white.
    QVERIFY(rowsWithColor(image, kRed, 0, image.height()) > 0);
    QCOMPARE(image.pixelColor(0, image.height() - 1), QColor(Qt::white));
    QCOMPARE(entries(dir), QStringList{QStringLiteral("chart.PNG")});
}

void TstChartExport::pngDefaultsToPlotSize() {
    const auto plot = makePlot(kRed, kTitle, 520, 310);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("chart.png"));
    const ExportResult result = exportPlot(plot.get(), path);
    QVERIFY2(result.ok, qPrintable(result.error));
    QImage image(path);
    QCOMPARE(image.size(), QSize(520, 310));

    // The plot is drawn at the export size and left at its own.
    ExportOptions options;
    options.width = 1600;
    options.height = 900;
    QVERIFY(exportPlot(plot.get(), path, options).ok);
    QVERIFY(exportPlot(plot.get(), path).ok);
    QCOMPARE(QImage(path).size(), QSize(520, 310));
    QCOMPARE(plot->size(), QSize(520, 310));
}

void TstChartExport::svg_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::newRow("640x480") << 640 << 480;
    QTest::newRow("1200x300") << 1200 << 300;
}

void TstChartExport::svg() {
    QFETCH(int, width);
    QFETCH(int, height);
    const auto plot = makePlot(kRed, kTitle, 500, 400);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("chart.svg"));
    ExportOptions options;
    options.width = width;
    options.height = height;
    options.dpi = 300;  // not used by SVG
    const ExportResult result = exportPlot(plot.get(), path, options);
    QVERIFY2(result.ok, qPrintable(result.error));

    const SvgInfo svg = parseSvg(readAll(path));
    QVERIFY2(svg.ok, "the SVG does not parse or its root is not <svg>");
    QCOMPARE(QString(svg.width).remove(QLatin1String("px")), QString::number(width));
    QCOMPARE(QString(svg.height).remove(QLatin1String("px")), QString::number(height));
    QCOMPARE(svg.view_box.simplified(), QStringLiteral("0 0 %1 %2").arg(width).arg(height));
    QVERIFY2(svg.text.contains(kXLabel), qPrintable(svg.text));
    QVERIFY2(svg.text.contains(kYLabel), qPrintable(svg.text));
    QVERIFY2(svg.text.contains(kTitle), qPrintable(svg.text));
    QVERIFY2(svg.text.contains(QLatin1String("stage 0")), qPrintable(svg.text));  // legend
    QCOMPARE(svg.images, 0);  // vector content, nothing rasterised
}

void TstChartExport::pdf_data() {
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::newRow("800x600") << 800 << 600;
    QTest::newRow("333x222") << 333 << 222;
    QTest::newRow("300x900") << 300 << 900;
}

void TstChartExport::pdf() {
    QFETCH(int, width);
    QFETCH(int, height);
    const auto plot = makePlot(kRed, kTitle, 500, 400);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("chart.pdf"));
    ExportOptions options;
    options.width = width;
    options.height = height;
    const ExportResult result = exportPlot(plot.get(), path, options);
    QVERIFY2(result.ok, qPrintable(result.error));

    const QByteArray pdf = readAll(path);
    QVERIFY(pdf.startsWith("%PDF-"));
    QVERIFY(pdf.trimmed().endsWith("%%EOF"));
    const std::optional<QSizeF> page = pdfMediaBox(pdf);
    QVERIFY2(page, "no MediaBox");
    QVERIFY2(std::abs(page->width() - width * 0.75) <= 1,
             qPrintable(QString::number(page->width())));
    QVERIFY2(std::abs(page->height() - height * 0.75) <= 1,
             qPrintable(QString::number(page->height())));
    static const QRegularExpression page_object(QStringLiteral(R"(/Type\s*/Page(?!s))"));
    QCOMPARE(QString::fromLatin1(pdf).count(page_object), 1);
    QVERIFY2(!pdf.contains("/Subtype /Image"), "the PDF should be vector content");
    QVERIFY(pdf.contains("/FontFile"));  // text is text
}

// QSvgGenerator (Qt < 6.7) drops clipping; the export clips itself, so a zoomed graph stays
// inside its axis rect instead of spilling over the tick labels.
void TstChartExport::svgClipsToAxisRect() {
    const auto plot = makePlot(kRed, kTitle, 600, 400);
    plot->xAxis->setRange(30, 70);
    plot->yAxis->setRange(3, 7);
    plot->replot();
    QTemporaryDir dir;
    ExportOptions options;
    options.width = 600;
    options.height = 400;
    const auto reddish = [](const QImage& image, const QRect& area) {
        int count = 0;
        for (int y = area.top(); y <= area.bottom(); ++y) {
            for (int x = area.left(); x <= area.right(); ++x) {
                const QColor c = image.pixelColor(x, y);
                count += c.red() - c.green() > 30 ? 1 : 0;
            }
        }
        return count;
    };
    const QRect left_margin(0, 0, 25, 400);
    const QRect bottom_margin(0, 380, 600, 20);
    const QRect plot_area(100, 60, 400, 250);

    const QString svg_path = dir.filePath(QStringLiteral("zoomed.svg"));
    const ExportResult result = exportPlot(plot.get(), svg_path, options);
    QVERIFY2(result.ok, qPrintable(result.error));
    QSvgRenderer renderer(svg_path);
    QVERIFY(renderer.isValid());
    QImage svg(600, 400, QImage::Format_ARGB32);
    svg.fill(Qt::white);
    {
        QPainter painter(&svg);
        renderer.render(&painter);
    }
    QVERIFY(reddish(svg, plot_area) > 0);
    QCOMPARE(reddish(svg, left_margin), 0);
    QCOMPARE(reddish(svg, bottom_margin), 0);
    QVERIFY(parseSvg(readAll(svg_path)).text.contains(kXLabel));

    const QString png_path = dir.filePath(QStringLiteral("zoomed.png"));
    QVERIFY(exportPlot(plot.get(), png_path, options).ok);
    const QImage png(png_path);
    QVERIFY(reddish(png, plot_area) > 0);
    QCOMPARE(reddish(png, left_margin), 0);
    QCOMPARE(reddish(png, bottom_margin), 0);
}

void TstChartExport::titleBand() {
    const auto plot = makePlot(kRed, kTitle, 500, 400);
    QTemporaryDir dir;
    ExportOptions options;
    options.width = 600;
    options.height = 400;
    options.title = QStringLiteral("Run 42: interleaved 1F1B");

    const QString png = dir.filePath(QStringLiteral("titled.png"));
    QVERIFY(exportPlot(plot.get(), png, options).ok);
    const QImage image(png);
    QCOMPARE(image.size(), QSize(600, 400));
    // The band's text is black on white, above the plot.
    QVERIFY(rowsWithColor(image, Qt::black, 0, 20) > 0);

    const QString svg = dir.filePath(QStringLiteral("titled.svg"));
    QVERIFY(exportPlot(plot.get(), svg, options).ok);
    const SvgInfo info = parseSvg(readAll(svg));
    QVERIFY(info.ok);
    QCOMPARE(info.height, QStringLiteral("400"));
    QVERIFY(info.text.contains(options.title));
    QVERIFY(info.text.contains(kTitle));
}

void TstChartExport::stackedPng() {
    const auto top = makePlot(kRed, QStringLiteral("Timeline"), 500, 300);
    const auto bottom = makePlot(kGreen, QStringLiteral("Memory"), 500, 300);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("stacked.png"));
    ExportOptions options;
    options.width = 500;
    for (const double dpi : {96.0, 192.0}) {
        options.dpi = dpi;
        const ExportResult result =
            exportPlots({{top.get(), 200}, {bottom.get(), 150}}, path, options);
        QVERIFY2(result.ok, qPrintable(result.error));
        const QImage image(path);
        const int scale = dpi > 100 ? 2 : 1;
        QCOMPARE(image.size(), QSize(500 * scale, 350 * scale));
        // The red graph is in the upper 200 px, the green one in the lower 150.
        QVERIFY(rowsWithColor(image, kRed, 0, 200 * scale) > 0);
        QCOMPARE(rowsWithColor(image, kRed, 200 * scale, 350 * scale), 0);
        QVERIFY(rowsWithColor(image, kGreen, 200 * scale, 350 * scale) > 0);
        QCOMPARE(rowsWithColor(image, kGreen, 0, 200 * scale), 0);
    }

    // Heights 0: the plots' own; a given total height is shared in proportion.
    options.dpi = 96;
    QVERIFY(exportPlots({{top.get(), 0}, {bottom.get(), 0}}, path, options).ok);
    QCOMPARE(QImage(path).size(), QSize(500, 600));
    options.height = 300;
    QVERIFY(exportPlots({{top.get(), 200}, {bottom.get(), 100}}, path, options).ok);
    const QImage shared(path);
    QCOMPARE(shared.size(), QSize(500, 300));
    QCOMPARE(rowsWithColor(shared, kRed, 200, 300), 0);
    QCOMPARE(rowsWithColor(shared, kGreen, 0, 200), 0);
}

void TstChartExport::stackedVector() {
    const auto top = makePlot(kRed, QStringLiteral("Timeline"), 500, 300);
    const auto bottom = makePlot(kGreen, QStringLiteral("Memory"), 500, 300);
    QTemporaryDir dir;
    ExportOptions options;
    options.width = 700;
    const std::vector<std::pair<QCustomPlot*, int>> plots = {{top.get(), 400}, {bottom.get(), 200}};

    const QString svg = dir.filePath(QStringLiteral("stacked.svg"));
    QVERIFY(exportPlots(plots, svg, options).ok);
    const SvgInfo info = parseSvg(readAll(svg));
    QVERIFY(info.ok);
    QCOMPARE(info.width, QStringLiteral("700"));
    QCOMPARE(info.height, QStringLiteral("600"));
    QVERIFY(info.text.contains(QLatin1String("Timeline")));
    QVERIFY(info.text.contains(QLatin1String("Memory")));

    const QString pdf = dir.filePath(QStringLiteral("stacked.pdf"));
    QVERIFY(exportPlots(plots, pdf, options).ok);
    const std::optional<QSizeF> page = pdfMediaBox(readAll(pdf));
    QVERIFY(page);
    QVERIFY(std::abs(page->width() - 525) <= 1);
    QVERIFY(std::abs(page->height() - 450) <= 1);
}

// A legend in its own row (as the app's charts have them) is drawn with as many columns as the
// export's width has room for, not the narrow widget's, and is left fitted to the widget.
void TstChartExport::legendsFitExportWidth() {
    QCustomPlot plot;
    plot.resize(300, 300);
    plot.legend = new QCPLegend;
    plot.plotLayout()->addElement(1, 0, plot.legend);
    plot.plotLayout()->setRowStretchFactor(1, 0.001);
    const std::vector<QColor> colors = {kRed,
                                        kGreen,
                                        QColor(30, 60, 220),
                                        QColor(230, 150, 0),
                                        QColor(150, 40, 180),
                                        QColor(0, 170, 190)};
    for (std::size_t i = 0; i < colors.size(); ++i) {
        // No data: the legend's icons are the only pixels of these colours.
        QCPGraph* graph = plot.addGraph();
        graph->setName(QStringLiteral("series number %1").arg(i));
        graph->setPen(QPen(colors[i], 6));
    }
    fitPlotLegends(&plot);
    const int on_screen = plot.legend->wrap();
    QVERIFY2(on_screen < static_cast<int>(colors.size()), "the widget is too wide for the test");

    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("legend.png"));
    ExportOptions options;
    options.width = 1600;
    options.height = 300;
    QVERIFY(exportPlot(&plot, path, options).ok);
    QImage image(path);
    QVERIFY(!image.isNull());
    // One row: every icon starts on the same line of pixels.
    const auto firstRow = [&](const QColor& color) {
        for (int y = 0; y < image.height(); ++y) {
            if (rowsWithColor(image, color, y, y + 1) > 0) {
                return y;
            }
        }
        return -1;
    };
    const int top = firstRow(colors.front());
    QVERIFY(top >= 0);
    for (const QColor& color : colors) {
        QCOMPARE(firstRow(color), top);
    }
    QCOMPARE(plot.legend->wrap(), on_screen);
}

void TstChartExport::replacesExistingFile() {
    const auto plot = makePlot(kRed, kTitle, 400, 300);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("chart.png"));
    {
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("old contents");
    }
    QVERIFY(exportPlot(plot.get(), path).ok);
    QCOMPARE(QImage(path).size(), QSize(400, 300));
    QCOMPARE(entries(dir), QStringList{QStringLiteral("chart.png")});
}

void TstChartExport::errors_data() {
    QTest::addColumn<QString>("name");
    QTest::addColumn<int>("width");
    QTest::addColumn<int>("height");
    QTest::addColumn<double>("dpi");
    QTest::addColumn<QStringList>("message");
    const QString types = QStringLiteral(".png, .svg or .pdf");
    QTest::newRow("unknown suffix")
        << "chart.xyz" << 400 << 300 << 96.0 << QStringList{"chart.xyz", "\"xyz\"", types};
    QTest::newRow("no suffix") << "chart" << 400 << 300 << 96.0 << QStringList{"chart", types};
    QTest::newRow("narrow") << "chart.png" << 10 << 300 << 96.0
                            << QStringList{"chart.png", "width 10", "16"};
    QTest::newRow("negative") << "chart.svg" << -5 << 300 << 96.0
                              << QStringList{"chart.svg", "width -5", "16"};
    QTest::newRow("too wide") << "chart.pdf" << 20001 << 300 << 96.0
                              << QStringList{"chart.pdf", "width 20001", "20000"};
    QTest::newRow("too high") << "chart.svg" << 400 << 50000 << 96.0
                              << QStringList{"chart.svg", "height 50000", "20000"};
    QTest::newRow("megapixels") << "chart.png" << 15000 << 15000 << 192.0
                                << QStringList{"chart.png", "400 megapixels"};
    QTest::newRow("zero dpi") << "chart.png" << 400 << 300 << 0.0
                              << QStringList{"chart.png", "dpi", "24"};
    QTest::newRow("nan dpi") << "chart.png" << 400 << 300 << std::nan("")
                             << QStringList{"chart.png", "dpi"};
}

void TstChartExport::errors() {
    QFETCH(QString, name);
    QFETCH(int, width);
    QFETCH(int, height);
    QFETCH(double, dpi);
    QFETCH(QStringList, message);
    const auto plot = makePlot(kRed, kTitle, 400, 300);
    QTemporaryDir dir;
    const QString path = dir.filePath(name);
    ExportOptions options;
    options.width = width;
    options.height = height;
    options.dpi = dpi;

    ExportResult result = exportPlot(plot.get(), path, options);
    QVERIFY(!result.ok);
    for (const QString& part : message) {
        QVERIFY2(result.error.contains(part), qPrintable(result.error));
    }
    QVERIFY(entries(dir).isEmpty());

    // An existing file at the path is left as it was.
    {
        QFile file(path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("precious");
    }
    result = exportPlot(plot.get(), path, options);
    QVERIFY(!result.ok);
    QCOMPARE(readAll(path), QByteArray("precious"));
    QCOMPARE(entries(dir), QStringList{name});
}

void TstChartExport::unwritableDirectory() {
    const auto plot = makePlot(kRed, kTitle, 400, 300);
    QTemporaryDir dir;
    // A directory that does not exist, and one that is a file.
    const QString missing = dir.filePath(QStringLiteral("no/such/dir/chart.png"));
    ExportResult result = exportPlot(plot.get(), missing);
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QDir::toNativeSeparators(missing)), qPrintable(result.error));
    QVERIFY(entries(dir).isEmpty());

    const QString file_path = dir.filePath(QStringLiteral("file"));
    {
        QFile file(file_path);
        QVERIFY(file.open(QIODevice::WriteOnly));
        file.write("x");
    }
    const QString under_file = dir.filePath(QStringLiteral("file/chart.svg"));
    result = exportPlot(plot.get(), under_file);
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QDir::toNativeSeparators(under_file)), qPrintable(result.error));

    // The path is a directory: it stays one.
    const QString sub = dir.filePath(QStringLiteral("sub.pdf"));
    QVERIFY(QDir(dir.path()).mkdir(QStringLiteral("sub.pdf")));
    result = exportPlot(plot.get(), sub);
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QDir::toNativeSeparators(sub)), qPrintable(result.error));
    QVERIFY(QFileInfo(sub).isDir());
    QCOMPARE(entries(dir).size(), 2);

    result = exportPlot(plot.get(), QString());
    QVERIFY(!result.ok);
    QVERIFY(!result.error.isEmpty());
}

void TstChartExport::nullPlots() {
    const auto plot = makePlot(kRed, kTitle, 400, 300);
    QTemporaryDir dir;
    const QString path = dir.filePath(QStringLiteral("chart.png"));
    ExportResult result = exportPlot(nullptr, path);
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QLatin1String("chart.png")), qPrintable(result.error));

    result = exportPlots({}, path, {});
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QLatin1String("chart.png")), qPrintable(result.error));

    result = exportPlots({{plot.get(), 100}, {nullptr, 100}}, path, {});
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QLatin1String("plot 2")), qPrintable(result.error));

    result = exportPlots({{plot.get(), -3}}, path, {});
    QVERIFY(!result.ok);

    // A total height too small for the plots sharing it.
    ExportOptions options;
    options.height = 20;
    result = exportPlots({{plot.get(), 100}, {plot.get(), 100}}, path, options);
    QVERIFY(!result.ok);
    QVERIFY2(result.error.contains(QLatin1String("16")), qPrintable(result.error));
    QVERIFY(entries(dir).isEmpty());
}

QTEST_MAIN(TstChartExport)
#include "tst_chart_export.moc"
