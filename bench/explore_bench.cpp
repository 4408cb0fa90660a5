// Explorer latency: how long after a setting changes the window shows the new run (timeline,
// memory, summary and table), with the app's own debounce, background simulation and repaint.
// The target is 100 ms for the authors' 8-stage configs.
//
//   explore_bench [PRESET.json ...] [--changes N]
//
// Defaults to the paper's 8-stage presets for each vocabulary method. Each change alternates the
// micro-batch count (m, m - 8) so every change is a new simulation. Runs on the offscreen
// platform.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <QApplication>
#include <QElapsedTimer>

#include "config_panel.h"
#include "main_window.h"
#include "trace_chart.h"

namespace {

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

// Runs the event loop until the window shows a run other than `before`, then until nothing is
// left to do (the repaints it queued); false after 10 s.
bool waitForNewRun(pipescope::app::MainWindow& window, const pipescope::app::RunDataPtr& before) {
    QElapsedTimer t;
    t.start();
    while (window.currentRun() == before) {
        if (t.elapsed() > 10000) {
            return false;
        }
        QCoreApplication::processEvents(QEventLoop::AllEvents | QEventLoop::WaitForMoreEvents, 5);
    }
    QCoreApplication::processEvents();
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("PipeScopeBench"));
    std::vector<QString> presets;
    int changes = 20;
    const QStringList args = QApplication::arguments();
    for (int i = 1; i < args.size(); ++i) {
        if (args[i] == QLatin1String("--changes") && i + 1 < args.size()) {
            changes = args[++i].toInt();
        } else if (args[i].startsWith(QLatin1Char('-'))) {
            std::fprintf(stderr, "usage: explore_bench [PRESET.json ...] [--changes N]\n");
            return 2;
        } else {
            presets.push_back(args[i]);
        }
    }
    if (presets.empty()) {
        for (const char* m : {"naive", "redistributed", "interlaced", "vocab-1", "vocab-2"}) {
            presets.push_back(QStringLiteral("paper-s2048-v256k-%1.json").arg(m));
        }
    }
    if (changes < 2) {
        changes = 2;
    }

    pipescope::app::MainWindow window(false);
    window.resize(1280, 800);
    window.show();
    std::printf("explorer update after a setting change, window 1280x800, %d changes each\n",
                changes);
    std::printf("%-40s %8s %8s %8s %8s %12s\n", "preset", "ops", "median", "p95", "max",
                "simulation");
    std::vector<double> all;
    for (const QString& preset : presets) {
        const auto before = window.currentRun();
        const bool loaded = preset.contains(QLatin1Char('/'))
                                ? window.configPanel()->loadFile(preset)
                                : window.configPanel()->loadPreset(preset);
        if (!loaded) {
            std::fprintf(stderr, "%s: %s\n", qPrintable(preset),
                         qPrintable(window.configPanel()->issuesText()));
            return 1;
        }
        if (!waitForNewRun(window, before)) {
            std::fprintf(stderr, "%s: no run after 10 s\n", qPrintable(preset));
            return 1;
        }
        const int m = window.currentRun()->config()->parallel.microbatches;
        std::vector<double> ms;
        std::vector<double> sim_ms;
        const auto connection = QObject::connect(
            window.simulator(), &pipescope::app::SimulationController::finished, &window,
            [&](quint64, std::shared_ptr<const pipescope::app::SimOutput> out) {
                sim_ms.push_back(out->elapsed_ms);
            });
        std::size_t ops = 0;
        for (int k = 0; k < changes; ++k) {
            const auto shown = window.currentRun();
            QElapsedTimer t;
            t.start();
            window.configPanel()->setField(QStringLiteral("parallel.microbatches"),
                                           k % 2 == 0 ? m - 8 : m);
            if (!waitForNewRun(window, shown)) {
                std::fprintf(stderr, "%s: no new run after 10 s\n", qPrintable(preset));
                return 1;
            }
            ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
            const auto& runs = window.currentRun();
            ops = 0;
            for (int r = 0; r < runs->rankCount(); ++r) {
                ops +=
                    runs->ops(r, runs->timeRange().start_ns, runs->timeRange().end_ns + 1).size();
            }
        }
        QObject::disconnect(connection);
        all.insert(all.end(), ms.begin(), ms.end());
        std::printf("%-40s %8zu %6.1fms %6.1fms %6.1fms %6.1fms\n", qPrintable(preset), ops,
                    percentile(ms, 0.5), percentile(ms, 0.95),
                    *std::max_element(ms.begin(), ms.end()),
                    sim_ms.empty() ? 0.0 : percentile(sim_ms, 0.5));
    }
    std::printf(
        "all %zu changes: median %.1f ms, p95 %.1f ms, max %.1f ms (target < 100 ms; "
        "includes the %d ms debounce)\n",
        all.size(), percentile(all, 0.5), percentile(all, 0.95),
        *std::max_element(all.begin(), all.end()),
        pipescope::app::SimulationController::kDefaultDebounceMs);
    return 0;
}
