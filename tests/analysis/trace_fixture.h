// A small hand-made trace shared by the analysis, interop and CLI tests: 3 ranks, a warm-up
// iteration and a measured one, sends and receives, an all-reduce, two overlapping ops on one
// lane, memory samples (some at the same instant) and a GPU kernel. Every figure the tests
// expect is worked out by hand in tst_analysis.cpp from the tables below.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <QString>

#include <pipescope/trace/types.h>
#include <pipescope/trace/writer.h>

namespace pipescope::test {

using trace::Lane;
using trace::OpKind;

// One op with times in microseconds of the fixture clock.
struct FixtureOp {
    int rank = 0;
    int iteration = 0;
    OpKind kind = OpKind::F;
    int microbatch = 0;  // -1: none
    Lane lane = Lane::Compute;
    std::int64_t start_us = 0;
    std::int64_t end_us = 0;
    int peer = -1;
};

inline constexpr std::int64_t kMiB = 1024 * 1024;

// One memory sample with its time in microseconds.
struct FixtureMemory {
    int rank = 0;
    std::int64_t t_us = 0;
    trace::MemoryCategory category = trace::MemoryCategory::Weights;
    std::int64_t bytes = 0;
};

inline std::vector<FixtureOp> fixtureOps() {
    constexpr Lane C = Lane::Compute;
    constexpr Lane M = Lane::Comm;
    return {
        // Iteration 0 (warm-up): window [0, 80) us.
        {0, 0, OpKind::F, 0, C, 0, 10},
        {0, 0, OpKind::SendF, 0, M, 10, 12, 1},
        {0, 0, OpKind::RecvB, 0, M, 12, 44, 1},
        {0, 0, OpKind::B, 0, C, 44, 64},
        {0, 0, OpKind::AllReduce, -1, M, 64, 70},
        {0, 0, OpKind::Opt, -1, C, 70, 75},
        {1, 0, OpKind::RecvF, 0, M, 0, 12, 0},
        {1, 0, OpKind::F, 0, C, 12, 22},
        {1, 0, OpKind::SendF, 0, M, 22, 24, 2},
        {1, 0, OpKind::RecvB, 0, M, 24, 32, 2},
        {1, 0, OpKind::B, 0, C, 32, 42},
        {1, 0, OpKind::SendB, 0, M, 42, 44, 0},
        {1, 0, OpKind::AllReduce, -1, M, 64, 70},
        {1, 0, OpKind::Opt, -1, C, 70, 75},
        {2, 0, OpKind::RecvF, 0, M, 0, 24, 1},
        {2, 0, OpKind::F, 0, C, 24, 28},
        {2, 0, OpKind::B, 0, C, 28, 30},
        {2, 0, OpKind::SendB, 0, M, 30, 32, 1},
        {2, 0, OpKind::AllReduce, -1, M, 60, 70},
        {2, 0, OpKind::Opt, -1, C, 70, 80},
        // Iteration 1 (measured): window [100, 172) us, two micro-batches.
        {0, 1, OpKind::F, 0, C, 100, 110},
        {0, 1, OpKind::SendF, 0, M, 110, 111, 1},
        {0, 1, OpKind::F, 1, C, 110, 120},
        {0, 1, OpKind::SendF, 1, M, 120, 121, 1},
        {0, 1, OpKind::RecvB, 0, M, 121, 140, 1},
        {0, 1, OpKind::B, 0, C, 140, 150},
        {0, 1, OpKind::RecvB, 1, M, 150, 152, 1},
        {0, 1, OpKind::B, 1, C, 152, 162},
        {0, 1, OpKind::AllReduce, -1, M, 162, 166},
        {0, 1, OpKind::Opt, -1, C, 166, 170},
        {1, 1, OpKind::RecvF, 0, M, 100, 111, 0},
        {1, 1, OpKind::F, 0, C, 111, 119},
        {1, 1, OpKind::SendF, 0, M, 119, 120, 2},
        {1, 1, OpKind::RecvF, 1, M, 120, 121, 0},
        {1, 1, OpKind::F, 1, C, 121, 129},
        {1, 1, OpKind::SendF, 1, M, 129, 130, 2},
        {1, 1, OpKind::RecvB, 0, M, 130, 131, 2},
        {1, 1, OpKind::B, 0, C, 131, 139},
        {1, 1, OpKind::SendB, 0, M, 139, 140, 0},
        {1, 1, OpKind::RecvB, 1, M, 140, 141, 2},
        {1, 1, OpKind::B, 1, C, 141, 149},
        {1, 1, OpKind::SendB, 1, M, 149, 150, 0},
        {1, 1, OpKind::AllReduce, -1, M, 160, 166},
        {1, 1, OpKind::Opt, -1, C, 166, 170},
        {2, 1, OpKind::RecvF, 0, M, 100, 120, 1},
        {2, 1, OpKind::F, 0, C, 120, 125},
        {2, 1, OpKind::B, 0, C, 125, 129},
        {2, 1, OpKind::SendB, 0, M, 129, 130, 1},
        {2, 1, OpKind::RecvF, 1, M, 130, 131, 1},
        {2, 1, OpKind::F, 1, C, 131, 136},
        {2, 1, OpKind::W, 0, C, 133, 138},  // overlaps F1 on the compute lane
        {2, 1, OpKind::B, 1, C, 138, 139},
        {2, 1, OpKind::SendB, 1, M, 139, 140, 1},
        {2, 1, OpKind::AllReduce, -1, M, 137, 166},  // starts while W0 and B1 still compute
        {2, 1, OpKind::Opt, -1, C, 166, 172},
    };
}

inline std::vector<FixtureMemory> fixtureMemory(std::int64_t rank2_activations = 1024 * kMiB) {
    using trace::MemoryCategory;
    return {
        {0, 0, MemoryCategory::Weights, 2048 * kMiB},
        {0, 0, MemoryCategory::Optimizer, 1024 * kMiB},
        {0, 10, MemoryCategory::Activations, 512 * kMiB},
        {0, 110, MemoryCategory::Activations, 1024 * kMiB},
        // Two rows at one instant: applied one by one they would spike to 4352 MiB.
        {0, 140, MemoryCategory::Grads, 256 * kMiB},
        {0, 140, MemoryCategory::Activations, 512 * kMiB},
        {0, 166, MemoryCategory::Activations, 0},
        {1, 0, MemoryCategory::Weights, 1024 * kMiB},
        {1, 12, MemoryCategory::Activations, 256 * kMiB},
        {1, 111, MemoryCategory::Activations, 512 * kMiB},
        {1, 121, MemoryCategory::Activations, 768 * kMiB},
        {2, 0, MemoryCategory::Weights, 1024 * kMiB},
        {2, 0, MemoryCategory::Vocab, 512 * kMiB},
        {2, 120, MemoryCategory::Activations, rank2_activations},
    };
}

struct FixtureOptions {
    bool finish = true;             // false: the run looks as if it crashed (status running)
    bool metrics = true;            // write the MFU / tokens metric rows
    std::int64_t ns_per_us = 1000;  // 800: a run 20% faster in every op
    std::int64_t rank2_activations = 1024 * kMiB;
    int warmup = 1;
    std::string name = "fixture \"A\" \\ d\xc3\xa9mo\t\xe2\x9c\x93";
    std::vector<trace::KernelRecord> kernels;  // more kernel rows (times in ns of the trace)
    std::vector<trace::OpCorrelation> op_correlations;  // the ops of kernels (op_correlation)
    std::vector<FixtureOp> more_ops;                    // more op rows (device spans, say)
    int last_iteration_ops = -1;  // >= 0: only so many ops of iteration 1 (a run stopped in it)
};

// The fixture with `count` more zero-length forwards on rank 0: a trace long enough for a job's
// progress reports (one per 16,384 rows read) or to be caught while it runs.
inline FixtureOptions manyOps(int count) {
    FixtureOptions o;
    for (int i = 0; i < count; ++i) {
        o.more_ops.push_back({0, 1, trace::OpKind::F, 0, trace::Lane::Compute, 200 + i, 200 + i});
    }
    return o;
}

// The fixture with its kernel (correlation id 42, at 5123 ns) tied to F0 of rank 0 by
// op_correlation: the trace of the Chrome export's golden file.
inline FixtureOptions kernelOfF0() {
    FixtureOptions o;
    o.op_correlations.push_back({0, 42, 5123, 0, 0, 0});
    return o;
}

inline trace::RunInfo fixtureRun(const FixtureOptions& o) {
    trace::RunInfo run;
    run.name = o.name;
    run.config_json = R"({"name": "fixture", "run": {"iterations": 2, "warmup": 1}})";
    run.backend = "sim";
    run.start_ns = 1700000000000000000;
    run.host = "testhost";
    run.versions = "pipescope test";
    run.command_line = "tst";
    run.ranks = 3;
    run.iterations = 2;
    run.warmup = o.warmup;
    return run;
}

// Writes the fixture trace; returns an empty string or the writer's error.
inline QString writeFixtureTrace(const QString& path, const FixtureOptions& o = {}) {
    trace::TraceWriter w;
    trace::WriterOptions wo;
    wo.overwrite = true;
    if (const trace::TraceStatus st = w.create(path.toStdString(), fixtureRun(o), wo); !st.ok()) {
        return QString::fromStdString(st.message);
    }
    for (int r = 0; r < 3; ++r) {
        w.addRank({r, std::to_string(r), "sim", "testhost", 0, 0});
    }
    int op_index[3] = {0, 0, 0};
    std::vector<FixtureOp> ops = fixtureOps();
    if (o.last_iteration_ops >= 0) {
        int kept = 0;
        std::erase_if(ops, [&](const FixtureOp& f) {
            return f.iteration == 1 && kept++ >= o.last_iteration_ops;
        });
    }
    ops.insert(ops.end(), o.more_ops.begin(), o.more_ops.end());
    for (const FixtureOp& f : ops) {
        trace::OpRecord op;
        op.rank = f.rank;
        op.iteration = f.iteration;
        op.kind = f.kind;
        op.microbatch = f.microbatch;
        op.lane = f.lane;
        op.start_ns = f.start_us * o.ns_per_us;
        op.end_ns = f.end_us * o.ns_per_us;
        op.source = trace::Source::Sim;
        op.op_index = op_index[f.rank]++;
        op.peer = f.peer;
        if (f.kind == OpKind::SendF || f.kind == OpKind::RecvF || f.kind == OpKind::SendB ||
            f.kind == OpKind::RecvB) {
            op.bytes = 4096;
        }
        if (f.kind == OpKind::AllReduce) {
            op.collective = 5;  // output_grad: the all-reduce after T
        }
        if (f.kind == OpKind::Opt) {
            op.cpu_ns = 1234;  // shows that cpu_us keeps nanosecond precision
        }
        w.addOp(op);
    }
    for (const FixtureMemory& m : fixtureMemory(o.rank2_activations)) {
        w.addMemory({m.rank, m.t_us * o.ns_per_us, m.bytes, m.category});
    }
    if (o.metrics) {
        // MFU = 1.08e8 / (3 ranks * 72 us * 1e12 FLOP/s) = 0.5; tokens/s = 7200 / 72 us = 1e8.
        w.addMetric({"model_flops_per_iteration", 1.08e8, std::nullopt, std::nullopt});
        w.addMetric({"peak_flops_per_rank", 1e12, std::nullopt, std::nullopt});
        w.addMetric({"tokens_per_iteration", 7200, std::nullopt, std::nullopt});
        w.addMetric({"memory_capacity_bytes", 8.0 * 1024 * kMiB, std::nullopt, std::nullopt});
    }
    // Per-iteration and per-rank rows with the same keys must not be taken for run-level ones.
    w.addMetric({"tokens_per_iteration", 1, 0, std::nullopt});
    w.addMetric({"loss", 2.5, std::nullopt, 0});
    w.addMetric({"loss, smoothed \"ema\"", 2.4, std::nullopt, 1});
    trace::KernelRecord k;
    k.start = 5123;
    k.end = 9877;
    k.device_id = 0;
    k.stream_id = 7;
    k.correlation_id = 42;
    k.demangled_name = "void gemm<float, \"tn\\x\">(float const*)";
    k.short_name = "gemm";
    k.grid_x = 64;
    k.block_x = 256;
    k.registers_per_thread = 96;
    w.addKernel(k);
    for (const trace::KernelRecord& more : o.kernels) {
        w.addKernel(more);
    }
    for (const trace::OpCorrelation& c : o.op_correlations) {
        w.addOpCorrelation(c);
    }
    if (!o.finish) {
        const trace::TraceStatus st = w.flush();
        return st.ok() ? QString() : QString::fromStdString(st.message);
    }
    const trace::TraceStatus st =
        w.finish(trace::RunStatus::Complete, {}, fixtureRun(o).start_ns + 1000000000);
    return st.ok() ? QString() : QString::fromStdString(st.message);
}

}  // namespace pipescope::test
