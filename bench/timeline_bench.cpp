// Timeline repaint benchmark: opens a large trace the way the app does, puts it in the app's
// chart at a window's size, and times full repaints at zoom levels from the whole run down to a
// few ops, panning at each level. The target is a repaint under 16 ms on a 10-million-op trace.
//
// Every pan is timed twice: the repaint right after the view moved (it draws the detail it has
// and, if that does not cover the new view, asks a worker for it) and, once the worker's result
// is in, the repaint with it. The worker's query time is reported as the detail latency.
//
//   timeline_bench [--trace FILE.db | --ops N [--no-memory]] [--width W] [--height H] [--pans K]
//                  [--keep] [--memory-rank R]
//
// Without --trace it writes a synthetic trace of N ops (default 10 million) on 8 ranks first,
// with an activation-memory sample after every compute op unless --no-memory. The memory chart
// shows every rank's total, or with --memory-rank one rank stacked by category.
// It runs on the offscreen platform, so it needs no display.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <QApplication>
#include <QElapsedTimer>

#include <pipescope/app/trace_run_data.h>

#include "synthetic_ops.h"
#include "timeline_plot.h"
#include "trace_chart.h"

using pipescope::app::TraceChart;
using pipescope::app::TraceRunData;

namespace {

struct Sample {
    double replot_ms = 0;
    double draw_ms = 0;
    long long entries = 0;
};

Sample replot(TraceChart* chart) {
    QElapsedTimer t;
    t.start();
    chart->replot(QCustomPlot::rpImmediateRefresh);
    Sample s;
    s.replot_ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
    for (const auto* tl : chart->timelines()) {
        s.draw_ms += tl->lastDrawMs();
        s.entries += tl->lastEntriesDrawn();
    }
    return s;
}

// Lets the background query land (its result schedules a queued replot, which this runs).
void settle(TraceChart* chart) {
    const auto* tl = chart->timelines().front();
    while (tl->queryRunning()) {
        QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    }
    QCoreApplication::processEvents();
}

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

int usage() {
    std::fprintf(stderr,
                 "usage: timeline_bench [--trace FILE.db | --ops N] [--width W] "
                 "[--height H] [--pans K] [--keep] [--no-memory] [--memory-rank R]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    qputenv("QT_QPA_PLATFORM", "offscreen");
    std::string trace_path;
    long long ops = 10'000'000;
    int width = 1280, height = 800, pans = 20;
    bool keep = false;
    bool memory = true;
    int memory_rank = -1;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
        const char* v = nullptr;
        if (a == "--trace" && (v = value())) {
            trace_path = v;
        } else if (a == "--ops" && (v = value())) {
            ops = std::atoll(v);
        } else if (a == "--width" && (v = value())) {
            width = std::atoi(v);
        } else if (a == "--height" && (v = value())) {
            height = std::atoi(v);
        } else if (a == "--pans" && (v = value())) {
            pans = std::atoi(v);
        } else if (a == "--keep") {
            keep = true;
        } else if (a == "--memory-rank" && (v = value())) {
            memory_rank = std::atoi(v);
        } else if (a == "--no-memory") {
            memory = false;
        } else {
            return usage();
        }
    }
    if (ops <= 0 || width < 200 || height < 200 || pans < 1) {
        return usage();
    }
    QApplication app(argc, argv);

    bool made = false;
    if (trace_path.empty()) {
        trace_path = (std::filesystem::temp_directory_path() / "timeline_bench.db").string();
        std::printf("writing %lld synthetic ops on 8 ranks%s to %s\n", ops,
                    memory ? " with memory samples" : "", trace_path.c_str());
        double write_s = 0, finish_s = 0;
        const auto st =
            pipescope::bench::writeSyntheticTrace(trace_path, ops, 8, &write_s, &finish_s, memory);
        if (!st.ok()) {
            std::fprintf(stderr, "%s\n", st.message.c_str());
            return 1;
        }
        std::printf("  write %.1f s, finish %.1f s\n", write_s, finish_s);
        made = true;
    }

    QElapsedTimer t;
    t.start();
    std::string error;
    auto run = TraceRunData::open(trace_path, &error);
    if (!run) {
        std::fprintf(stderr, "%s\n", error.c_str());
        return 1;
    }
    std::printf(
        "open + analysis (as the app loads it, off the GUI thread): %.2f s, %lld ops, "
        "%lld memory samples\n",
        static_cast<double>(t.nsecsElapsed()) / 1e9,
        static_cast<long long>(run->reader().opCount()),
        static_cast<long long>(run->reader().memorySampleCount()));

    TraceChart chart;
    chart.resize(width, height);
    chart.setRuns({run}, true);
    chart.setMemoryRank(memory_rank);
    chart.show();
    QApplication::processEvents();
    replot(&chart);  // first paint: fonts, caches

    const QCPRange full = chart.timeRangeMs();
    const auto* timeline = chart.timelines().front();
    std::printf(
        "\nrepaints at %dx%d, %d pans per zoom level (a zoom by 10x, then pans of 1/10 of the "
        "view)\n",
        width, height, pans);
    std::printf("%-15s | %-26s | %-26s | %s\n", "", "repaint as the view moves",
                "repaint with fresh detail", "detail latency");
    std::printf("%-15s | %8s %8s %8s | %8s %8s %8s | %8s %6s %9s\n", "view", "median", "p95", "max",
                "median", "p95", "max", "median", "max", "queries");
    std::vector<double> moved_all, fresh_all, latency_all;
    for (double fraction = 1.0; fraction >= 1e-6; fraction /= 10) {
        const double span = full.size() * fraction;
        const double start = full.lower + (full.size() - span) * 0.37;  // off-centre
        std::vector<double> moved, fresh, latency;
        long long entries = 0;
        const int queries_before = timeline->backgroundQueries();
        // Move 0 zooms from the previous level to this one; the others pan right by 1/10.
        for (int k = 0; k <= pans; ++k) {
            const int before = timeline->backgroundQueries();
            // A frame: the view moves (the memory curves follow) and the chart repaints.
            QElapsedTimer frame;
            frame.start();
            if (k == 0) {
                chart.setTimeRangeMs(QCPRange(start, start + span));
            } else {
                chart.panBy(0.1);
            }
            const Sample s = replot(&chart);
            moved.push_back(static_cast<double>(frame.nsecsElapsed()) / 1e6);
            entries = std::max(entries, s.entries);
            settle(&chart);  // as the event loop would, between two frames
            if (timeline->backgroundQueries() != before) {
                latency.push_back(timeline->lastBackgroundQueryMs());
                const Sample f = replot(&chart);
                fresh.push_back(f.replot_ms);
                entries = std::max(entries, f.entries);
            }
        }
        moved_all.insert(moved_all.end(), moved.begin(), moved.end());
        fresh_all.insert(fresh_all.end(), fresh.begin(), fresh.end());
        latency_all.insert(latency_all.end(), latency.begin(), latency.end());
        char label[32];
        std::snprintf(label, sizeof label, "1/%g of run", 1 / fraction);
        const auto stats = [](const std::vector<double>& v) {
            char buf[64];
            if (v.empty()) {
                std::snprintf(buf, sizeof buf, "%8s %8s %8s", "-", "-", "-");
            } else {
                std::snprintf(buf, sizeof buf, "%8.2f %8.2f %8.2f", percentile(v, 0.5),
                              percentile(v, 0.95), *std::max_element(v.begin(), v.end()));
            }
            return std::string(buf);
        };
        std::printf("%-15s | %s | %s | %8.2f %6.2f %9d   (%lld entries)\n", label,
                    stats(moved).c_str(), stats(fresh).c_str(),
                    latency.empty() ? 0.0 : percentile(latency, 0.5),
                    latency.empty() ? 0.0 : *std::max_element(latency.begin(), latency.end()),
                    timeline->backgroundQueries() - queries_before, entries);
    }
    std::vector<double> all = moved_all;
    all.insert(all.end(), fresh_all.begin(), fresh_all.end());
    std::printf("\nall %zu repaints: median %.2f ms, p95 %.2f ms, max %.2f ms (target < 16 ms)\n",
                all.size(), percentile(all, 0.5), percentile(all, 0.95),
                *std::max_element(all.begin(), all.end()));
    if (!latency_all.empty()) {
        std::printf("detail latency (worker query): median %.2f ms, max %.2f ms over %zu queries\n",
                    percentile(latency_all, 0.5),
                    *std::max_element(latency_all.begin(), latency_all.end()), latency_all.size());
    }

    // A click on an op, as at this zoom: the selection reads what the op waits for and its
    // micro-batch's path (every op of that micro-batch in that iteration, on every rank).
    const auto band = pipescope::app::laneBand(0, pipescope::trace::Lane::Compute);
    const QCPRange view = chart.timeRangeMs();
    std::optional<pipescope::trace::OpRecord> picked;
    for (double x = 0.5; x < 1.0 && !picked; x += 0.01) {
        picked = timeline->opAt(
            QPointF(timeline->keyAxis()->coordToPixel(view.lower + view.size() * x),
                    timeline->valueAxis()->coordToPixel((band.top + band.bottom) / 2)));
    }
    if (picked) {
        QElapsedTimer click;
        click.start();
        const auto deps = run->dependencies(*picked);
        const double deps_ms = static_cast<double>(click.nsecsElapsed()) / 1e6;
        click.restart();
        const auto path = run->microbatchOps(picked->iteration, picked->microbatch);
        const double path_ms = static_cast<double>(click.nsecsElapsed()) / 1e6;
        const std::string found = path ? std::to_string(path->size()) + " ops"
                                       : std::string("gave up at the selection budget");
        std::printf(
            "selecting an op (rank 0, micro-batch %d): dependencies %.1f ms (%zu ops), "
            "micro-batch path %.1f ms (%s)\n",
            picked->microbatch, deps_ms, deps.size(), path_ms, found.c_str());
    }
    if (made && !keep) {
        std::filesystem::remove(trace_path);
    } else if (made) {
        std::printf("kept %s\n", trace_path.c_str());
    }
    return 0;
}
