// A synthetic, pipeline-like op stream for the benchmarks: what a long run of many ranks writes,
// without the cost of simulating it.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <pipescope/trace/writer.h>

namespace pipescope::bench {

using trace::Lane;
using trace::OpKind;
using trace::OpRecord;
using trace::RunInfo;

inline RunInfo benchRun(int ranks) {
    RunInfo run;
    run.name = "trace_bench";
    run.config_json = "{}";
    run.backend = "sim";
    run.ranks = ranks;
    run.iterations = 1;
    return run;
}

// A pipeline-like op stream: per rank, compute ops of 0.2-2 ms back to back with small gaps on
// the compute lane and 10-100 us transfers on the comm lane.
class OpStream {
  public:
    OpStream(int ranks, std::int64_t total) : ranks_(ranks), total_(total), now_(ranks, 0) {}
    bool next(OpRecord& o) {
        if (produced_ >= total_) {
            return false;
        }
        const int rank = static_cast<int>(produced_ % ranks_);
        const bool comm = (produced_ / ranks_) % 2 == 1;
        o = OpRecord{};
        o.rank = rank;
        o.iteration = 0;
        o.op_index = static_cast<int>(produced_ / ranks_);
        o.microbatch = o.op_index / 2 % 1024;
        auto& now = now_[static_cast<std::size_t>(rank)];
        if (comm) {
            o.kind = OpKind::SendF;
            o.lane = Lane::Comm;
            o.peer = (rank + 1) % ranks_;
            o.bytes = 1 << 24;
            o.start_ns = now - 50'000;
            o.end_ns = o.start_ns + 10'000 + static_cast<std::int64_t>(rng_() % 90'000);
        } else {
            o.kind = (o.op_index / 2) % 3 == 2 ? OpKind::B : OpKind::F;
            o.start_ns = now + static_cast<std::int64_t>(rng_() % 20'000);
            o.end_ns = o.start_ns + 200'000 + static_cast<std::int64_t>(rng_() % 1'800'000);
            now = o.end_ns;
        }
        ++produced_;
        return true;
    }

  private:
    int ranks_;
    std::int64_t total_;
    std::int64_t produced_ = 0;
    std::vector<std::int64_t> now_;
    std::mt19937_64 rng_{42};
};

// Writes `ops` synthetic ops on `ranks` ranks to a new trace at `path` (replacing it) and
// finishes it; the seconds spent writing and finishing come back in the pointers. With
// `memory`, every compute op also leaves an activation-memory sample at its end (a forward
// keeps its activations, a backward frees them), as the runner records.
inline trace::TraceStatus writeSyntheticTrace(const std::string& path, std::int64_t ops, int ranks,
                                              double* write_s = nullptr, double* finish_s = nullptr,
                                              bool memory = false) {
    using Clock = std::chrono::steady_clock;
    std::filesystem::remove(path);
    trace::TraceWriter w;
    if (auto st = w.create(path, benchRun(ranks)); !st.ok()) {
        return st;
    }
    for (int r = 0; r < ranks; ++r) {
        w.addRank({r, std::to_string(r), "sim", "", 0, 0});
    }
    OpStream stream(ranks, ops);
    OpRecord o;
    std::vector<std::int64_t> live(static_cast<std::size_t>(ranks), 0);
    constexpr std::int64_t kActivation = 256LL << 20;
    auto t = Clock::now();
    while (stream.next(o)) {
        w.addOp(o);
        if (memory && o.lane == Lane::Compute) {
            auto& bytes = live[static_cast<std::size_t>(o.rank)];
            bytes = o.kind == OpKind::F ? bytes + kActivation
                                        : std::max<std::int64_t>(0, bytes - 2 * kActivation);
            w.addMemory({o.rank, o.end_ns, bytes, trace::MemoryCategory::Activations});
        }
    }
    w.flush();
    if (write_s) {
        *write_s = std::chrono::duration<double>(Clock::now() - t).count();
    }
    t = Clock::now();
    const auto st = w.finish(trace::RunStatus::Complete);
    if (finish_s) {
        *finish_s = std::chrono::duration<double>(Clock::now() - t).count();
    }
    return st;
}

}  // namespace pipescope::bench
