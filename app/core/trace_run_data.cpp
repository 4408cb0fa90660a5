#include <algorithm>
#include <chrono>
#include <filesystem>

#include <pipescope/app/trace_run_data.h>
#include <pipescope/schedule/config_parse.h>

namespace pipescope::app {

std::shared_ptr<TraceRunData> TraceRunData::open(const std::string& path, std::string* error,
                                                 const std::function<bool(double)>& progress) {
    std::shared_ptr<TraceRunData> data(new TraceRunData());
    trace::TraceStatus st = data->reader_.open(path);
    if (st.ok()) {
        st = data->lod_reader_.open(path);
    }
    if (!st.ok()) {
        *error = st.message;
        return nullptr;
    }
    analysis::AnalysisOptions options;
    options.progress = progress;
    const trace::TraceStatus an = analysis::analyzeRun(data->reader_, options, &data->stats_);
    if (!an.ok()) {
        *error = an.message;
        return nullptr;
    }
    data->ties_kernels_ = data->reader_.opCorrelationCount() > 0;
    // The config the run was made from, when it is a config this build reads.
    if (const auto& json = data->reader_.run().config_json; !json.empty()) {
        auto parsed = schedule::parseConfig(json, path + " (run.config_json)");
        if (parsed.ok()) {
            data->config_ = std::move(parsed.config);
        }
    }
    return data;
}

std::string TraceRunData::name() const {
    const auto& run = reader_.run();
    const std::string file = std::filesystem::path(reader_.path()).filename().string();
    return run.name.empty() ? file : file + " \u2014 " + run.name;
}

std::string TraceRunData::rankStages(int rank) const {
    for (const auto& r : reader_.ranks()) {
        if (r.rank == rank) {
            return r.stages;
        }
    }
    return {};
}

trace::OpLodResult TraceRunData::opsLod(std::int64_t t0, std::int64_t t1, int pixels) const {
    const std::lock_guard<std::mutex> lock(lod_mutex_);
    return lod_reader_.opsLod(t0, t1, pixels);
}

trace::MemoryLodResult TraceRunData::memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                               int pixels) const {
    const std::lock_guard<std::mutex> lock(lod_mutex_);
    return lod_reader_.memoryLod(rank, t0, t1, pixels);
}

std::vector<trace::OpRecord> TraceRunData::ops(int rank, std::int64_t t0, std::int64_t t1) const {
    return reader_.ops(rank, t0, t1);
}

std::optional<std::vector<trace::OpRecord>> TraceRunData::microbatchOps(int iteration,
                                                                        int microbatch) const {
    return microbatchOps(iteration, microbatch, kSelectionBudget);
}

std::optional<std::vector<trace::OpRecord>> TraceRunData::microbatchOps(
    int iteration, int microbatch, std::chrono::milliseconds budget) const {
    if (microbatch < 0) {
        return std::vector<trace::OpRecord>{};
    }
    const trace::TimeRange window = iterationWindow(iteration);
    return reader_.microbatchOps(iteration, microbatch, window.start_ns, window.end_ns + 1, budget);
}

std::optional<analysis::CriticalPath> TraceRunData::criticalPath(int iteration) const {
    for (const auto& it : stats_.iterations) {
        if (it.iteration == iteration) {
            return analysis::criticalPath(reader_, it,
                                          std::chrono::steady_clock::now() + kSelectionBudget);
        }
    }
    return std::nullopt;
}

std::optional<RunData::OpGpuWork> TraceRunData::opKernels(const trace::OpRecord& op) const {
    if (!ties_kernels_) {
        return std::nullopt;
    }
    const auto found = reader_.opKernels(op.rank, op.iteration, op.op_index,
                                         std::chrono::steady_clock::now() + kSelectionBudget);
    OpGpuWork work;
    work.found = found.has_value();
    if (found) {
        work.kernels = analysis::summarizeOpKernels(*found);
    }
    return work;
}

std::vector<trace::OpRecord> TraceRunData::dependencies(const trace::OpRecord& op) const {
    return dependencies(op, kSelectionBudget);
}

std::vector<trace::OpRecord> TraceRunData::dependencies(const trace::OpRecord& op,
                                                        std::chrono::milliseconds budget) const {
    // A trace records no graph, so the dependencies are recovered from what the ops say: the
    // previous op of the same rank and lane, the send a receive pairs with, the other members of
    // a collective, and for a compute op the receive of its micro-batch and chunk. Each is
    // a search SQLite filters, looking back at most an iteration, and all of them together are
    // held to the selection budget: on a pathological trace a search cut short leaves its
    // dependency out rather than freezing the click.
    using trace::OpKind;
    const auto deadline = std::chrono::steady_clock::now() + budget;
    std::vector<trace::OpRecord> out;
    const auto add = [&](const trace::OpQuery& q) {
        if (auto found = reader_.findOps(q, deadline)) {
            out.insert(out.end(), found->begin(), found->end());
        }
    };
    const std::int64_t horizon =
        stats_.iteration_time_ns ? static_cast<std::int64_t>(*stats_.iteration_time_ns) : 0;
    trace::OpQuery previous;
    previous.rank = op.rank;
    previous.lane = op.lane;
    previous.start_from = op.start_ns - std::max<std::int64_t>(horizon, op.duration());
    previous.start_before = op.start_ns + 1;
    previous.end_by = op.start_ns;
    previous.exclude_id = op.id;
    previous.latest_first = true;
    previous.limit = 1;
    add(previous);

    // The other searches look at the same window, on the comm lane, for this micro-batch.
    trace::OpQuery same = previous;
    same.lane = trace::Lane::Comm;
    same.end_by.reset();
    same.exclude_id.reset();
    same.latest_first = false;
    same.limit = 0;
    same.iteration = op.iteration;
    same.microbatch = op.microbatch;
    if ((op.kind == OpKind::RecvF || op.kind == OpKind::RecvB) && op.peer >= 0) {
        trace::OpQuery send = same;
        send.rank = op.peer;
        send.kind = op.kind == OpKind::RecvF ? OpKind::SendF : OpKind::SendB;
        send.peer = op.rank;
        send.start_before = op.end_ns + 1;
        // The sender's chunk is not the receiver's (interleaved schedules wrap around), so the
        // send is the latest of this micro-batch to this rank that started before the receive
        // ended.
        send.latest_first = true;
        send.limit = 1;
        add(send);
    }
    if (op.kind == OpKind::Bcast || op.kind == OpKind::AllReduce) {
        trace::OpQuery member = same;
        member.kind = op.kind;
        member.chunk = op.chunk;
        member.collective = op.collective;
        member.start_before = op.end_ns + 1;
        for (int r = 0; r < rankCount(); ++r) {
            if (r != op.rank) {
                member.rank = r;
                add(member);
            }
        }
    }
    if (op.kind == OpKind::F || op.kind == OpKind::B) {
        trace::OpQuery recv = same;
        recv.kind = op.kind == OpKind::F ? OpKind::RecvF : OpKind::RecvB;
        recv.chunk = op.chunk;  // a receive is tagged with the chunk that consumes it
        recv.latest_first = true;
        recv.limit = 1;
        add(recv);
    }
    return out;
}

}  // namespace pipescope::app
