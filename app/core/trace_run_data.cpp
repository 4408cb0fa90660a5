#include <algorithm>
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
    if (microbatch < 0) {
        return std::vector<trace::OpRecord>{};
    }
    const trace::TimeRange window = iterationWindow(iteration);
    return reader_.microbatchOps(iteration, microbatch, window.start_ns, window.end_ns + 1,
                                 kSelectionBudget);
}

std::vector<trace::OpRecord> TraceRunData::dependencies(const trace::OpRecord& op) const {
    // A trace records no graph, so the dependencies are recovered from what the ops say: the
    // previous op of the same rank and lane, the send a receive pairs with, the other members of
    // a collective, and for a compute op the receive of its micro-batch just before it.
    using trace::OpKind;
    std::vector<trace::OpRecord> out;
    const std::int64_t horizon =
        stats_.iteration_time_ns ? static_cast<std::int64_t>(*stats_.iteration_time_ns) : 0;
    const std::int64_t from = op.start_ns - std::max<std::int64_t>(horizon, op.duration());
    const auto same_rank = reader_.ops(op.rank, from, op.start_ns + 1, op.lane);
    for (auto it = same_rank.rbegin(); it != same_rank.rend(); ++it) {
        if (it->id != op.id && it->end_ns <= op.start_ns) {
            out.push_back(*it);
            break;
        }
    }
    const auto matches = [&](const trace::OpRecord& o, OpKind kind) {
        return o.kind == kind && o.microbatch == op.microbatch && o.iteration == op.iteration &&
               o.chunk == op.chunk;
    };
    if ((op.kind == OpKind::RecvF || op.kind == OpKind::RecvB) && op.peer >= 0) {
        const OpKind send = op.kind == OpKind::RecvF ? OpKind::SendF : OpKind::SendB;
        for (const auto& o : reader_.ops(op.peer, from, op.end_ns + 1, trace::Lane::Comm)) {
            if (o.kind == send && o.microbatch == op.microbatch && o.iteration == op.iteration &&
                o.peer == op.rank) {
                out.push_back(o);
            }
        }
    }
    if (op.kind == OpKind::Bcast || op.kind == OpKind::AllReduce) {
        for (int r = 0; r < rankCount(); ++r) {
            if (r == op.rank) {
                continue;
            }
            for (const auto& o : reader_.ops(r, from, op.end_ns + 1, trace::Lane::Comm)) {
                if (matches(o, op.kind) && o.collective == op.collective) {
                    out.push_back(o);
                }
            }
        }
    }
    if (op.kind == OpKind::F || op.kind == OpKind::B) {
        const OpKind recv = op.kind == OpKind::F ? OpKind::RecvF : OpKind::RecvB;
        for (const auto& o : reader_.ops(op.rank, from, op.start_ns + 1, trace::Lane::Comm)) {
            if (o.kind == recv && o.microbatch == op.microbatch && o.iteration == op.iteration) {
                out.push_back(o);
            }
        }
    }
    return out;
}

}  // namespace pipescope::app
