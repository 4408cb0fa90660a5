#include <algorithm>
#include <cmath>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::app {

namespace {

std::int64_t toNs(double seconds) {
    return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

}  // namespace

analysis::RunStats statsFromSim(const sim::SimResult& r, const std::string& name) {
    analysis::RunStats s;
    s.run.name = name;
    s.run.backend = "sim";
    s.run.status = trace::RunStatus::Complete;
    s.run.ranks = r.schedule.ranks;
    s.run.iterations = 1;
    s.rank_count = r.schedule.ranks;
    s.single_iteration = true;

    const auto iteration_ns = toNs(r.iteration_time_s);
    analysis::IterationStats it;
    it.iteration = 0;
    it.start_ns = 0;
    it.end_ns = iteration_ns;
    it.device_start_ns = 0;
    it.device_end_ns = iteration_ns;
    it.measured = true;
    for (const auto& rank : r.ranks) {
        analysis::RankIterationStats ri;
        ri.busy_ns = toNs(rank.busy_s);
        ri.bubble_ns = toNs(rank.bubble_s);
        ri.comm_wait_ns = toNs(rank.comm_wait_s);
        ri.bubble_ratio = rank.bubble_ratio;
        it.ranks.push_back(ri);

        analysis::RankStats rs;
        rs.rank = rank.rank;
        rs.stages = sim::rankStages(r.schedule, rank.rank);
        rs.busy_ns = rank.busy_s * 1e9;
        rs.bubble_ns = rank.bubble_s * 1e9;
        rs.comm_wait_ns = rank.comm_wait_s * 1e9;
        rs.bubble_ratio = rank.bubble_ratio;
        const auto& mem = r.memory[static_cast<std::size_t>(rank.rank)];
        rs.peak_memory.present = true;
        rs.peak_memory.bytes = mem.peak_bytes;
        rs.peak_memory.t_ns = toNs(mem.peak_t);
        rs.peak_memory.by_category = mem.at_peak;
        s.ranks.push_back(rs);
    }
    s.iterations.push_back(std::move(it));
    s.measured = {0};
    s.iteration_time_ns = static_cast<double>(iteration_ns);
    s.mean_bubble_ratio = r.bubble_ratio;
    s.imbalance.busy = r.busy_imbalance;
    s.imbalance.peak_memory = r.memory_imbalance;
    s.inputs.model_flops_per_iteration = r.model_flops;
    s.inputs.peak_flops_per_rank = r.config.hardware.peak_tflops * 1e12;
    s.inputs.tokens_per_iteration = static_cast<double>(schedule::tokensPerIteration(r.config));
    s.inputs.memory_capacity_bytes = static_cast<double>(r.memory_capacity_bytes);
    s.mfu = r.mfu;
    s.tokens_per_s = r.tokens_per_s;
    return s;
}

trace::TraceStatus saveSimTrace(const SimRunData& run, const std::string& path, int iterations,
                                bool overwrite) {
    trace::TraceWriter w;
    const auto& r = run.result();
    if (auto st = w.create(path, sim::simRunInfo(r, iterations, "pipescope (app)"),
                           sim::simWriterOptions(overwrite));
        !st.ok()) {
        return st;
    }
    sim::writeTrace(r, iterations, w);
    return w.finish(trace::RunStatus::Complete, {},
                    std::llround(r.iteration_time_s * 1e9) * iterations);
}

SimRunData::SimRunData(sim::SimResult result, std::string name)
    : result_(std::move(result)), name_(std::move(name)) {
    stats_ = statsFromSim(result_, name_);
    config_ = result_.config;
    const int ranks = result_.schedule.ranks;
    ops_.reserve(static_cast<std::size_t>(result_.graph.nodeCount()));
    lanes_.assign(static_cast<std::size_t>(ranks * trace::kLaneCount), {});
    std::int64_t first = 0;
    std::int64_t last = 0;
    for (int r = 0; r < ranks; ++r) {
        const int count =
            static_cast<int>(result_.schedule.ops[static_cast<std::size_t>(r)].size());
        for (int i = 0; i < count; ++i) {
            trace::OpRecord op = sim::traceOp(result_, r, i, 0);
            op.id = static_cast<std::int64_t>(ops_.size());
            first = ops_.empty() ? op.start_ns : std::min(first, op.start_ns);
            last = std::max(last, op.end_ns);
            lanes_[static_cast<std::size_t>(r * trace::kLaneCount + static_cast<int>(op.lane))]
                .nodes.push_back(static_cast<int>(op.id));
            ops_.push_back(op);
        }
    }
    for (auto& lane : lanes_) {
        std::stable_sort(lane.nodes.begin(), lane.nodes.end(), [&](int a, int b) {
            return ops_[static_cast<std::size_t>(a)].start_ns <
                   ops_[static_cast<std::size_t>(b)].start_ns;
        });
        std::int64_t running = 0;
        lane.max_end.reserve(lane.nodes.size());
        for (int n : lane.nodes) {
            running = std::max(running, ops_[static_cast<std::size_t>(n)].end_ns);
            lane.max_end.push_back(running);
        }
    }
    range_ = {first, last};
    analysis::OpKindTally tally;
    for (const auto& op : ops_) {
        tally.add(op);
    }
    stats_.op_kinds = tally.totals();

    memory_.resize(static_cast<std::size_t>(ranks));
    for (int r = 0; r < ranks; ++r) {
        auto& samples = memory_[static_cast<std::size_t>(r)];
        for (const auto& level : result_.memory[static_cast<std::size_t>(r)].levels) {
            samples.push_back({r, toNs(level.t), level.bytes, level.category});
        }
        std::stable_sort(samples.begin(), samples.end(),
                         [](const auto& a, const auto& b) { return a.t_ns < b.t_ns; });
    }
}

std::string SimRunData::rankStages(int rank) const {
    return sim::rankStages(result_.schedule, rank);
}

std::pair<std::size_t, std::size_t> SimRunData::window(const LaneOps& lane, std::int64_t t0,
                                                       std::int64_t t1) const {
    // First op whose end (running maximum) passes t0; last op starting before t1.
    const auto begin = static_cast<std::size_t>(
        std::upper_bound(lane.max_end.begin(), lane.max_end.end(), t0) - lane.max_end.begin());
    auto end = begin;
    while (end < lane.nodes.size() &&
           ops_[static_cast<std::size_t>(lane.nodes[end])].start_ns < t1) {
        ++end;
    }
    return {begin, end};
}

trace::OpLodResult SimRunData::opsLod(std::int64_t t0, std::int64_t t1, int pixels) const {
    trace::OpLodResult out;
    pixels = std::max(1, pixels);
    t1 = std::max(t1, t0 + 1);
    out.ns_per_pixel = static_cast<double>(t1 - t0) / pixels;
    const double threshold = trace::LodOptions{}.fold_pixels * out.ns_per_pixel;
    for (int r = 0; r < rankCount(); ++r) {
        for (int l = 0; l < trace::kLaneCount; ++l) {
            const LaneOps& lane = lanes_[static_cast<std::size_t>(r * trace::kLaneCount + l)];
            const auto [begin, end] = window(lane, t0, t1);
            std::vector<trace::LodEntry> entries;
            entries.reserve(end - begin);
            for (auto i = begin; i < end; ++i) {
                const auto& op = ops_[static_cast<std::size_t>(lane.nodes[i])];
                if (op.end_ns > t0) {
                    entries.push_back(trace::lodEntryFromOp(op));
                }
            }
            out.rows_read += static_cast<std::int64_t>(entries.size());
            out.lanes.push_back({r, static_cast<trace::Lane>(l),
                                 trace::foldLodEntries(std::move(entries), threshold)});
        }
    }
    return out;
}

trace::MemoryLodResult SimRunData::memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                             int pixels) const {
    trace::MemoryLodResult out;
    if (rank < 0 || rank >= rankCount()) {
        return out;
    }
    pixels = std::max(1, pixels);
    t1 = std::max(t1, t0 + 1);
    out.ns_per_pixel = static_cast<double>(t1 - t0) / pixels;
    const auto& samples = memory_[static_cast<std::size_t>(rank)];
    out.rows_read = static_cast<std::int64_t>(samples.size());
    out.pixels = trace::memoryPixels(samples, t0, t1, pixels);
    return out;
}

std::vector<trace::OpRecord> SimRunData::ops(int rank, std::int64_t t0, std::int64_t t1) const {
    std::vector<trace::OpRecord> out;
    if (rank < 0 || rank >= rankCount()) {
        return out;
    }
    for (int l = 0; l < trace::kLaneCount; ++l) {
        const LaneOps& lane = lanes_[static_cast<std::size_t>(rank * trace::kLaneCount + l)];
        const auto [begin, end] = window(lane, t0, t1);
        for (auto i = begin; i < end; ++i) {
            const auto& op = ops_[static_cast<std::size_t>(lane.nodes[i])];
            if (op.end_ns > t0 || (op.start_ns == op.end_ns && op.start_ns >= t0)) {
                out.push_back(op);
            }
        }
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    return out;
}

std::vector<trace::OpRecord> SimRunData::dependencies(const trace::OpRecord& op) const {
    std::vector<trace::OpRecord> out;
    const auto& g = result_.graph;
    if (op.id < 0 || op.id >= g.nodeCount() ||
        ops_[static_cast<std::size_t>(op.id)].op_index != op.op_index ||
        ops_[static_cast<std::size_t>(op.id)].rank != op.rank) {
        return out;
    }
    const int n = static_cast<int>(op.id);
    std::vector<int> nodes;
    for (int k = g.start_dep_begin[static_cast<std::size_t>(n)];
         k < g.start_dep_begin[static_cast<std::size_t>(n) + 1]; ++k) {
        nodes.push_back(g.start_deps[static_cast<std::size_t>(k)]);
    }
    if (g.end_dep[static_cast<std::size_t>(n)] >= 0) {
        nodes.push_back(g.end_dep[static_cast<std::size_t>(n)]);
    }
    if (const int group = g.group[static_cast<std::size_t>(n)]; group >= 0) {
        for (int member : g.group_members[static_cast<std::size_t>(group)]) {
            if (member != n) {
                nodes.push_back(member);
            }
        }
    }
    // The previous op of the same stream on this rank.
    const auto& list = result_.schedule.ops[static_cast<std::size_t>(op.rank)];
    const auto stream = list[static_cast<std::size_t>(op.op_index)].stream();
    for (int i = op.op_index - 1; i >= 0; --i) {
        if (list[static_cast<std::size_t>(i)].stream() == stream) {
            nodes.push_back(g.node(op.rank, i));
            break;
        }
    }
    std::sort(nodes.begin(), nodes.end());
    nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
    for (int d : nodes) {
        out.push_back(ops_[static_cast<std::size_t>(d)]);
    }
    return out;
}

}  // namespace pipescope::app
