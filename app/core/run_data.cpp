#include <algorithm>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

RunData::~RunData() = default;

trace::TimeRange RunData::iterationWindow(int iteration) const {
    for (const auto& it : stats_.iterations) {
        if (it.iteration == iteration) {
            return {it.start_ns, it.end_ns};
        }
    }
    return timeRange();
}

std::optional<analysis::CriticalPath> RunData::criticalPath(int iteration) const {
    // In memory: the iteration's ops, walked here.
    const trace::TimeRange window = iterationWindow(iteration);
    std::vector<trace::OpRecord> ops;
    for (int r = 0; r < rankCount(); ++r) {
        auto rank = this->ops(r, window.start_ns, window.end_ns + 1);
        ops.insert(ops.end(), rank.begin(), rank.end());
    }
    return analysis::criticalPath(std::move(ops), iteration, rankCount());
}

std::optional<RunData::OpGpuWork> RunData::opKernels(const trace::OpRecord& /*op*/) const {
    return std::nullopt;
}

std::optional<std::vector<trace::OpRecord>> RunData::microbatchOps(int iteration,
                                                                   int microbatch) const {
    std::vector<trace::OpRecord> out;
    if (microbatch < 0) {
        return out;
    }
    // In memory: every op of the iteration, tested here (a simulation reads them in
    // microseconds).
    const trace::TimeRange window = iterationWindow(iteration);
    for (int r = 0; r < rankCount(); ++r) {
        for (auto& o : ops(r, window.start_ns, window.end_ns + 1)) {
            if (o.microbatch == microbatch && o.iteration == iteration) {
                out.push_back(std::move(o));
            }
        }
    }
    return out;
}

namespace {

// The index in `its` of the first measured iteration (0 when none is).
std::ptrdiff_t firstMeasuredIndex(const std::vector<analysis::IterationStats>& its) {
    const auto it = std::find_if(its.begin(), its.end(), [](const auto& i) { return i.measured; });
    return it == its.end() ? 0 : it - its.begin();
}

}  // namespace

std::optional<int> RunData::matchingIteration(const RunData& other, int iteration) const {
    const auto& theirs = other.stats().iterations;
    const auto& mine = stats_.iterations;
    if (theirs.empty() || mine.empty()) {
        return iteration;
    }
    const auto at = std::find_if(theirs.begin(), theirs.end(),
                                 [&](const auto& i) { return i.iteration == iteration; });
    if (at == theirs.end()) {
        return std::nullopt;
    }
    const std::ptrdiff_t index =
        firstMeasuredIndex(mine) + (at - theirs.begin()) - firstMeasuredIndex(theirs);
    if (index < 0 || index >= static_cast<std::ptrdiff_t>(mine.size())) {
        return std::nullopt;
    }
    return mine[static_cast<std::size_t>(index)].iteration;
}

ShiftedRunData::ShiftedRunData(RunDataPtr inner, std::int64_t shift_ns)
    : inner_(std::move(inner)), shift_(shift_ns) {
    stats_ = inner_->stats();
    for (auto& it : stats_.iterations) {
        it.start_ns -= shift_;
        it.end_ns -= shift_;
        it.device_start_ns -= shift_;
        it.device_end_ns -= shift_;
    }
    for (auto& r : stats_.ranks) {
        r.peak_memory.t_ns -= shift_;
    }
    config_ = inner_->config();
}

trace::TimeRange ShiftedRunData::timeRange() const {
    trace::TimeRange r = inner_->timeRange();
    r.start_ns -= shift_;
    r.end_ns -= shift_;
    return r;
}

trace::OpLodResult ShiftedRunData::opsLod(std::int64_t t0, std::int64_t t1, int pixels) const {
    trace::OpLodResult r = inner_->opsLod(t0 + shift_, t1 + shift_, pixels);
    for (auto& lane : r.lanes) {
        for (auto& e : lane.entries) {
            e.start_ns -= shift_;
            e.end_ns -= shift_;
        }
    }
    return r;
}

trace::MemoryLodResult ShiftedRunData::memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                                 int pixels) const {
    trace::MemoryLodResult r = inner_->memoryLod(rank, t0 + shift_, t1 + shift_, pixels);
    for (auto& p : r.pixels) {
        p.t_ns -= shift_;
    }
    return r;
}

std::vector<trace::OpRecord> ShiftedRunData::ops(int rank, std::int64_t t0, std::int64_t t1) const {
    auto out = inner_->ops(rank, t0 + shift_, t1 + shift_);
    for (auto& o : out) {
        o.start_ns -= shift_;
        o.end_ns -= shift_;
    }
    return out;
}

std::vector<trace::OpRecord> ShiftedRunData::dependencies(const trace::OpRecord& op) const {
    trace::OpRecord original = op;
    original.start_ns += shift_;
    original.end_ns += shift_;
    auto out = inner_->dependencies(original);
    for (auto& o : out) {
        o.start_ns -= shift_;
        o.end_ns -= shift_;
    }
    return out;
}

std::optional<std::vector<trace::OpRecord>> ShiftedRunData::microbatchOps(int iteration,
                                                                          int microbatch) const {
    auto out = inner_->microbatchOps(iteration, microbatch);
    if (out) {
        for (auto& o : *out) {
            o.start_ns -= shift_;
            o.end_ns -= shift_;
        }
    }
    return out;
}

std::optional<analysis::CriticalPath> ShiftedRunData::criticalPath(int iteration) const {
    auto out = inner_->criticalPath(iteration);
    if (out) {
        out->start_ns -= shift_;
        out->end_ns -= shift_;
        for (auto& s : out->steps) {
            s.start_ns -= shift_;
            s.end_ns -= shift_;
            s.op.start_ns -= shift_;
            s.op.end_ns -= shift_;
        }
    }
    return out;
}

std::int64_t firstMeasuredStartNs(const RunData& run) {
    for (const auto& it : run.stats().iterations) {
        if (it.measured) {
            return it.start_ns;
        }
    }
    return 0;
}

RunDataPtr alignedAtFirstMeasured(const RunDataPtr& run) {
    const std::int64_t shift = firstMeasuredStartNs(*run);
    return shift == 0 ? run : std::make_shared<ShiftedRunData>(run, shift);
}

}  // namespace pipescope::app
