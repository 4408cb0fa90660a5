// pipescope: the desktop app, or with --export a headless renderer (architecture.md, CLIs).
#include <csignal>
#include <cstdio>
#include <optional>

#include <QApplication>
#include <QRegularExpression>

#include "headless.h"
#include "main_window.h"

namespace {

// X11's -geometry WxH+X+Y (size, position or both), which Qt applies only to a window that has
// not sized itself: the main window has (1280x800, or last session's), so it is applied here.
struct Geometry {
    std::optional<QSize> size;
    std::optional<QPoint> position;
};

std::optional<Geometry> geometryArgument(const QStringList& args) {
    const qsizetype at = args.indexOf(QStringLiteral("-geometry"));
    if (at < 0 || at + 1 >= args.size()) {
        return std::nullopt;
    }
    static const QRegularExpression spec(
        QStringLiteral("^(?:(\\d+)x(\\d+))?(?:([+-]\\d+)([+-]\\d+))?$"));
    const auto m = spec.match(args[at + 1]);
    if (!m.hasMatch()) {
        return std::nullopt;
    }
    Geometry g;
    if (m.hasCaptured(1)) {
        g.size = QSize(m.captured(1).toInt(), m.captured(2).toInt());
    }
    if (m.hasCaptured(3)) {
        g.position = QPoint(m.captured(3).toInt(), m.captured(4).toInt());
    }
    return g;
}

}  // namespace

int main(int argc, char** argv) {
    // A file size limit (ulimit -f) reached by a save or an export fails that write (the message
    // names the file; the file it would have replaced stays), rather than SIGXFSZ killing the
    // app with every unsaved change.
    std::signal(SIGXFSZ, SIG_IGN);
    QStringList args;
    for (int i = 0; i < argc; ++i) {
        args << QString::fromLocal8Bit(argv[i]);
    }
    const bool headless = pipescope::app::wantsHeadless(args);
    if (const QString bad = pipescope::app::argumentNotUtf8(argc, argv);
        headless && !bad.isEmpty()) {
        std::fprintf(stderr, "pipescope: %s\n", bad.toUtf8().constData());
        return 2;
    }
    // With no display a Qt GUI program aborts; an export needs none, so it chooses the offscreen
    // platform itself unless the user picked one.
    if (headless && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        qputenv("QT_QPA_PLATFORM", "offscreen");
    }
    if (args.contains(QStringLiteral("--help")) || args.contains(QStringLiteral("-h"))) {
        return pipescope::app::printOut(pipescope::app::headlessUsage());
    }
    if (args.contains(QStringLiteral("--version"))) {
        return pipescope::app::printOut(QStringLiteral("pipescope " PIPESCOPE_VERSION "\n"));
    }
    if (!headless && qEnvironmentVariableIsEmpty("DISPLAY") &&
        qEnvironmentVariableIsEmpty("WAYLAND_DISPLAY") &&
        qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) {
        std::fprintf(stderr,
                     "pipescope: no display (DISPLAY and WAYLAND_DISPLAY are unset). Render views "
                     "to files with --export (see --help), or run under a display.\n");
        return 2;
    }
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("PipeScope"));
    QApplication::setApplicationName(QStringLiteral("PipeScope"));
    QApplication::setApplicationVersion(QStringLiteral(PIPESCOPE_VERSION));
    if (headless) {
        return pipescope::app::runHeadless(args);
    }
    // Qt has taken its own options (-geometry, -style, ...) out of the arguments by now.
    QStringList paths = QApplication::arguments().mid(1);
    QString view;
    bool view_given = false;
    for (int i = 0; i < paths.size();) {
        const QString a = paths[i];
        if (a == QLatin1String("--show") || a.startsWith(QLatin1String("--show="))) {
            // --show VIEW or --show=VIEW; without a view it was "unknown option --show".
            const bool attached = a != QLatin1String("--show");
            if (!attached && i + 1 >= paths.size()) {
                std::fprintf(stderr,
                             "pipescope: --show needs a view: explore, compare, sweep or run\n");
                return 2;
            }
            view = attached ? a.mid(7) : paths[i + 1];
            view_given = true;
            paths.remove(i, attached ? 1 : 2);
        } else if (a.startsWith(QLatin1Char('-'))) {
            std::fprintf(stderr, "pipescope: unknown option \"%s\"\n%s", qPrintable(a),
                         pipescope::app::headlessUsage().toLocal8Bit().constData());
            return 2;
        } else {
            ++i;
        }
    }
    if (view_given && !pipescope::app::MainWindow::isView(view)) {
        std::fprintf(stderr,
                     "pipescope: --show: unknown view \"%s\"; use explore, compare, sweep or run\n",
                     qPrintable(view));
        return 2;
    }
    pipescope::app::MainWindow window;
    if (const auto g = geometryArgument(args)) {
        if (g->size) {
            window.resize(*g->size);
        }
        if (g->position) {
            window.move(*g->position);
        }
    }
    window.show();
    // The files first: --show sweep CONFIG.json swept the config the file replaced.
    window.openPathsAndShow(paths, view);
    return QApplication::exec();
}
