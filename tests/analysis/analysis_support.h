// What the analysis suites share: traces of a few hand-placed ops, and the fixture traces
// (trace_fixture.h) in the variants the tests compare.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <QString>
#include <QTemporaryDir>
#include <QtGlobal>

#include <pipescope/analysis/run_stats.h>
#include <pipescope/trace/writer.h>

#include "trace_fixture.h"

namespace pipescope::test {

inline constexpr std::int64_t kUs = 1000;

// Creates `path` (over an old one) for a run of `ranks` ranks on `backend`, `iterations` of
// them `warmup` warm-up, with a rank row for each rank.
inline trace::TraceStatus createRun(trace::TraceWriter& w, const QString& path, int ranks,
                                    int iterations, int warmup = 0,
                                    const std::string& backend = "sim") {
    trace::RunInfo run;
    run.name = "rule";
    run.backend = backend;
    run.ranks = ranks;
    run.iterations = iterations;
    run.warmup = warmup;
    trace::WriterOptions wo;
    wo.overwrite = true;
    if (auto st = w.create(path.toStdString(), run, wo); !st.ok()) {
        return st;
    }
    for (int r = 0; r < ranks; ++r) {
        w.addRank({r, std::to_string(r), backend, "", 0, 0});
    }
    return {};
}

// A trace of just these ops (times in us), one rank row per rank used.
inline QString writeOpsTrace(const QString& path, const std::vector<FixtureOp>& ops, int ranks,
                             int warmup, const std::vector<trace::MetricRecord>& metrics = {}) {
    trace::TraceWriter w;
    if (const auto st = createRun(w, path, ranks, 2, warmup); !st.ok()) {
        return QString::fromStdString(st.message);
    }
    int index = 0;
    for (const FixtureOp& f : ops) {
        trace::OpRecord op;
        op.rank = f.rank;
        op.iteration = f.iteration;
        op.kind = f.kind;
        op.microbatch = f.microbatch;
        op.lane = f.lane;
        op.start_ns = f.start_us * kUs;
        op.end_ns = f.end_us * kUs;
        op.op_index = index++;
        op.peer = f.peer;
        w.addOp(op);
    }
    for (const trace::MetricRecord& m : metrics) {
        w.addMetric(m);
    }
    const auto st = w.finish(trace::RunStatus::Complete, {}, 1);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

inline analysis::RunStats analyze(const QString& path, analysis::AnalysisOptions options = {}) {
    analysis::RunStats s;
    const trace::TraceStatus st = analysis::analyzeFile(path.toStdString(), options, &s);
    if (!st.ok()) {
        qWarning("%s", st.message.c_str());
    }
    return s;
}

// The fixture trace (a), the same run with every op 20% shorter and more activations on rank 2
// (b), one without metrics (bare), one with a warm-up longer than the run (long_warmup) and
// one that never finished (running).
struct FixtureFiles {
    QString a, b, bare, long_warmup, running;

    // Writes them all into dir; the first failure's message, or an empty string.
    QString write(const QTemporaryDir& dir) {
        a = dir.filePath("a.db");
        b = dir.filePath("b.db");
        bare = dir.filePath("bare.db");
        long_warmup = dir.filePath("warmup.db");
        running = dir.filePath("running.db");
        FixtureOptions faster;
        faster.ns_per_us = 800;
        faster.rank2_activations = 2048 * kMiB;
        FixtureOptions bare_options;
        bare_options.metrics = false;
        FixtureOptions warm;
        warm.warmup = 5;
        FixtureOptions crashed;
        crashed.finish = false;
        for (const auto& [path, options] :
             {std::pair{a, FixtureOptions{}}, std::pair{b, faster}, std::pair{bare, bare_options},
              std::pair{long_warmup, warm}, std::pair{running, crashed}}) {
            if (QString error = writeFixtureTrace(path, options); !error.isEmpty()) {
                return error;
            }
        }
        return {};
    }
};

}  // namespace pipescope::test
