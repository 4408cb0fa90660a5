#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <random>
#include <tuple>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/exec_graph.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/sim/cost_table.h>
#include <pipescope/trace/reader.h>

namespace pipescope::sim {

using schedule::CostKey;
using schedule::Op;
using schedule::OpKind;

TableCostModel::TableCostModel(const schedule::Config& config, const schedule::Placement& placement)
    : config_(config), placement_(placement), analytic_(config, placement) {}

void TableCostModel::drawFrom(const OpTimeSamples* samples, std::uint64_t seed) {
    samples_ = samples;
    rng_.seed(seed);
}

double TableCostModel::draw(const std::vector<double>* v, double fallback) const {
    if (v == nullptr || v->empty()) {
        return fallback;
    }
    std::uniform_int_distribution<std::size_t> pick(0, v->size() - 1);
    return (*v)[pick(rng_)] * 1e-6;
}

double TableCostModel::tableSeconds(CostKey key, int rank) const {
    const auto& v = config_.costs.table(key);
    if (v.empty() || rank < 0 || rank >= static_cast<int>(v.size())) {
        return -1.0;
    }
    return v[static_cast<std::size_t>(rank)] * 1e-6;
}

double TableCostModel::chunkShare(int rank, int chunk) const {
    const int total = placement_.layersOnRank(rank);
    if (total <= 0) {
        return 1.0 / placement_.chunks;
    }
    const int pos = placement_.position(rank, chunk);
    return static_cast<double>(placement_.layers[static_cast<std::size_t>(pos)]) / total;
}

double TableCostModel::compute(int rank, const Op& op) const {
    const bool split = config_.parallel.schedule == schedule::ScheduleKind::ZBH1 ||
                       config_.parallel.schedule == schedule::ScheduleKind::VHalf;
    const auto& m = config_.model;
    auto scaled = [&](CostKey key) {
        const double t = tableSeconds(key, rank);
        return t < 0 ? -1.0 : t * chunkShare(rank, op.chunk);
    };
    // When drawing, a time the table gives is drawn from the recorded ones of `kind`.
    auto drawn = [&](double t, OpKind kind) {
        if (t >= 0 && samples_ != nullptr) {
            const auto it = samples_->compute.find({rank, static_cast<int>(kind), op.chunk});
            t = draw(it == samples_->compute.end() ? nullptr : &it->second, t);
        }
        return t;
    };
    // What B means depends on whether the table gives W, not on the schedule: with W[r], B[r] is
    // the input gradient and W[r] the weight gradient, and an unsplit backward takes both;
    // without it, B[r] is the whole backward, which split schedules split by FLOPs.
    const bool has_w = tableSeconds(CostKey::W, rank) >= 0;
    double t = -1.0;
    switch (op.kind) {
        case OpKind::F:
            t = scaled(CostKey::F);
            break;
        case OpKind::B:
            t = scaled(CostKey::B);
            if (!split && has_w) {
                Op w = op;
                w.kind = OpKind::W;
                // Without B[r], the analytic input gradient: its whole backward less its W.
                const double input = t >= 0
                                         ? drawn(t, OpKind::B)
                                         : analytic_.compute(rank, op) - analytic_.compute(rank, w);
                return input + drawn(scaled(CostKey::W), OpKind::W);
            }
            if (t >= 0 && split && !has_w) {
                t *= schedule::layerBackwardInputFlops(m) / schedule::layerBackwardFlops(m);
            }
            break;
        case OpKind::W:
            t = scaled(CostKey::W);
            if (t < 0 && split && tableSeconds(CostKey::B, rank) >= 0) {
                t = scaled(CostKey::B) * schedule::layerBackwardWeightFlops(m) /
                    schedule::layerBackwardFlops(m);
            }
            break;
        case OpKind::S:
            t = tableSeconds(CostKey::S, rank);
            break;
        case OpKind::T:
            t = tableSeconds(CostKey::T, rank);
            break;
        case OpKind::IF:
            t = tableSeconds(CostKey::IF, rank);
            break;
        case OpKind::IB:
            t = tableSeconds(CostKey::IB, rank);
            break;
        case OpKind::L:
            t = tableSeconds(CostKey::L, rank);
            break;
        case OpKind::Opt:
            t = tableSeconds(CostKey::OPT, rank);
            break;
        default:
            break;
    }
    t = drawn(t, op.kind);
    return t >= 0 ? t : analytic_.compute(rank, op);
}

double TableCostModel::send(int rank, const Op& op) const {
    if (!config_.costs.p2p_us) {
        return analytic_.send(rank, op);
    }
    return draw(samples_ != nullptr ? &samples_->sends : nullptr, *config_.costs.p2p_us * 1e-6);
}

double TableCostModel::collective(const Op& op) const {
    if (config_.parallel.pipeline <= 1) {
        return 0.0;
    }
    const auto kind = static_cast<std::size_t>(op.collective);
    if (kind < config_.costs.collectives_us.size() && config_.costs.collectives_us[kind]) {
        return draw(samples_ != nullptr ? &samples_->collectives[kind] : nullptr,
                    *config_.costs.collectives_us[kind] * 1e-6);
    }
    return config_.costs.collective_us ? *config_.costs.collective_us * 1e-6
                                       : analytic_.collective(op);
}

std::unique_ptr<schedule::CostModel> makeCostModel(const schedule::Config& config,
                                                   const schedule::Placement& placement) {
    if (config.costs.source == schedule::CostSource::Analytic) {
        return std::make_unique<schedule::AnalyticCostModel>(config, placement);
    }
    return std::make_unique<TableCostModel>(config, placement);
}

namespace {

// One quantity over the measured iterations: its mean within each iteration, and the median of
// those means. The mean keeps what an iteration really spends on the quantity (slow wake-ups
// included, which a median per op would drop); the median over iterations drops an iteration
// that something outside the run disturbed.
class IterationSamples {
  public:
    void add(int iteration, double us) {
        auto& s = by_iteration_[iteration];
        s.first += us;
        s.second += 1;
        all_.push_back(us);
    }
    const std::vector<double>& all() const { return all_; }
    bool empty() const { return by_iteration_.empty(); }
    double value() const {
        std::vector<double> means;
        means.reserve(by_iteration_.size());
        for (const auto& [iteration, s] : by_iteration_) {
            means.push_back(s.first / s.second);
        }
        const auto mid = means.begin() + static_cast<std::ptrdiff_t>(means.size() / 2);
        std::nth_element(means.begin(), mid, means.end());
        if (means.size() % 2 == 1) {
            return *mid;
        }
        return (*mid + *std::max_element(means.begin(), mid)) / 2;
    }

  private:
    std::map<int, std::pair<double, double>> by_iteration_;
    std::vector<double> all_;
};

struct Samples {
    std::map<std::tuple<int, int, int>, IterationSamples> compute;  // (rank, op kind, chunk)
    IterationSamples sends;
    IterationSamples collectives;  // every kind
    std::array<IterationSamples, schedule::kCollectiveKinds> by_collective;

    void addCollective(int iteration, int kind, double us) {
        collectives.add(iteration, us);
        if (kind > 0 && kind < static_cast<int>(by_collective.size())) {
            by_collective[static_cast<std::size_t>(kind)].add(iteration, us);
        }
    }
};

// The effective durations of the ops (see calibrateFromTrace): compute ops from the end of their
// last input, a send until its waiting receiver got the data, a collective instance from its last
// ready member to its last member's end.
template <typename Span>
Samples effectiveDurations(const schedule::ExecGraph& g,
                           const std::vector<std::vector<Span>>& spans) {
    Samples out;
    const auto us = [](std::int64_t ns) { return static_cast<double>(ns) * 1e-3; };
    for (std::size_t it = 0; it < spans.size(); ++it) {
        const auto& sp = spans[it];
        const int iteration = static_cast<int>(it);
        // When each op could have started: the end of its last input, its start if earlier.
        const auto readyAt = [&](int n) {
            const Span& s = sp[static_cast<std::size_t>(n)];
            std::int64_t ready = -1;
            for (int k = g.start_dep_begin[static_cast<std::size_t>(n)];
                 k < g.start_dep_begin[static_cast<std::size_t>(n) + 1]; ++k) {
                ready = std::max(
                    ready,
                    sp[static_cast<std::size_t>(g.start_deps[static_cast<std::size_t>(k)])].end);
            }
            return ready < 0 ? s.start : std::min(ready, s.start);
        };
        for (int n = 0; n < g.nodeCount(); ++n) {
            const Span& s = sp[static_cast<std::size_t>(n)];
            if (s.start < 0) {
                continue;
            }
            const auto kind = static_cast<trace::OpKind>(s.kind);
            const int rank = g.node_ref[static_cast<std::size_t>(n)].rank;
            if (kind == trace::OpKind::RecvF || kind == trace::OpKind::RecvB) {
                const int send = g.end_dep[static_cast<std::size_t>(n)];
                if (send < 0 || sp[static_cast<std::size_t>(send)].start < 0) {
                    continue;
                }
                const Span& snd = sp[static_cast<std::size_t>(send)];
                // A receiver that waited got the data at its own end; otherwise at the send's.
                const std::int64_t arrived = s.start < snd.end ? s.end : snd.end;
                out.sends.add(iteration, us(arrived - readyAt(send)));
            } else if (kind == trace::OpKind::Bcast || kind == trace::OpKind::AllReduce) {
                const int group = g.group[static_cast<std::size_t>(n)];
                const auto& members = g.group_members[static_cast<std::size_t>(group)];
                if (members.front() != n) {
                    continue;  // once per instance
                }
                std::int64_t last_ready = -1;
                std::int64_t last_end = -1;
                bool complete = true;
                for (int member : members) {
                    const Span& ms = sp[static_cast<std::size_t>(member)];
                    complete = complete && ms.start >= 0;
                    last_ready = std::max(last_ready, readyAt(member));
                    last_end = std::max(last_end, ms.end);
                }
                if (complete) {
                    out.addCollective(iteration, s.collective, us(last_end - last_ready));
                }
            } else if (!trace::isCommKind(kind)) {
                out.compute[{rank, s.kind, s.chunk}].add(iteration, us(s.end - readyAt(n)));
            }
        }
    }
    return out;
}

}  // namespace

std::string calibrateFromTrace(const std::string& path, schedule::Config* config,
                               std::optional<schedule::Schedule>* recorded,
                               OpTimeSamples* all_samples) {
    trace::TraceReader reader;
    if (auto st = reader.open(path); !st.ok()) {
        return "costs.source: " + st.message;
    }
    // Per-stage times only transfer between runs of the same model and layout: a naive run's
    // last-stage F includes the whole output layer, a vocab-2 run's does not.
    const auto parsed = schedule::parseConfig(reader.run().config_json, path);
    if (!parsed.ok()) {
        return "costs.source: " + path + " does not hold a readable config (" +
               (parsed.issues.empty() ? std::string("?") : parsed.issues.front().text()) + ")";
    }
    const auto& rc = *parsed.config;
    const auto& model = config->model;
    const auto mismatch = [&](const std::string& key, const std::string& theirs,
                              const std::string& ours) {
        return "costs.source: " + path + " was recorded with " + key + " " + theirs +
               " but this config has " + ours +
               "; calibrate from a run of the same model and layout";
    };
    const std::pair<const char*, bool> model_keys[] = {
        {"model.layers", rc.model.layers != model.layers},
        {"model.hidden", rc.model.hidden != model.hidden},
        {"model.ffn_hidden", rc.model.ffn_hidden != model.ffn_hidden},
        {"model.heads", rc.model.heads != model.heads},
        {"model.seq_len", rc.model.seq_len != model.seq_len},
        {"model.vocab", rc.model.vocab != model.vocab},
        {"model.micro_batch", rc.model.micro_batch != model.micro_batch},
        {"model.dtype", rc.model.dtype != model.dtype},
        {"model.flash_attention", rc.model.flash_attention != model.flash_attention},
    };
    for (const auto& [key, differs] : model_keys) {
        if (differs) {
            return "costs.source: " + path + " was recorded with another " + key +
                   "; calibrate from a run of the same model and layout";
        }
    }
    if (rc.parallel.vocab != config->parallel.vocab) {
        return mismatch("parallel.vocab",
                        "\"" + std::string(schedule::toString(rc.parallel.vocab)) + "\"",
                        "\"" + std::string(schedule::toString(config->parallel.vocab)) + "\"");
    }
    if (schedule::computePlacement(rc).layers != schedule::computePlacement(*config).layers) {
        return "costs.source: " + path +
               " was recorded with another layer split (parallel.schedule, parallel.pipeline or "
               "the first/last stage layers); calibrate from a run of the same model and layout";
    }
    const int ranks = reader.rankCount();
    if (ranks != config->parallel.pipeline) {
        return "costs.source: " + path + " has " + std::to_string(ranks) +
               " ranks but parallel.pipeline is " + std::to_string(config->parallel.pipeline);
    }
    const int warmup = reader.run().warmup;
    const int iterations = reader.iterationCount();
    const int first = iterations > warmup ? warmup : 0;
    const int measured = std::max(1, iterations - first);

    // Each op's effective duration: from the moment its inputs were ready (the recorded run's
    // schedule says which ops those are) to its end. On a real backend an op starts a little
    // after that, when its thread or stream wakes; that delay is part of what the op costs.
    // A simulated trace has none, so there the figures are the ops' own durations.
    // The runner executed the schedule the simulator generated from the recorded config with
    // that config's own cost model; regenerate it the same way. (A run whose config was itself
    // calibrated from another file cannot be regenerated: its ops' own spans are used.)
    schedule::GenerateResult recorded_schedule;
    std::optional<schedule::ExecGraph> graph;
    if (rc.costs.source != schedule::CostSource::Calibrated) {
        const auto recorded_costs = makeCostModel(rc, schedule::computePlacement(rc));
        schedule::GenerateOptions gen;
        gen.costs = recorded_costs.get();
        recorded_schedule = schedule::generateSchedule(rc, gen);
    }
    if (recorded_schedule.schedule) {
        auto built = schedule::buildGraph(*recorded_schedule.schedule);
        if (!built.error) {
            graph = std::move(built.graph);
        }
    }
    struct Span {
        std::int64_t start = -1;
        std::int64_t end = -1;
        int kind = -1;
        int chunk = 0;
        int collective = 0;
    };
    // spans[iteration - first][node]
    std::vector<std::vector<Span>> spans;
    bool matches = graph.has_value();
    if (graph) {
        spans.assign(static_cast<std::size_t>(measured),
                     std::vector<Span>(static_cast<std::size_t>(graph->nodeCount())));
    }
    Samples samples;
    std::map<std::tuple<int, int, int>, std::pair<int, double>> shortest;  // (it, kind, mb)
    auto st = reader.forEachOp([&](const trace::OpRecord& o) {
        if (o.iteration < first) {
            return true;
        }
        if (matches) {
            const auto& ops = recorded_schedule.schedule->ops;
            const bool known =
                o.rank >= 0 && o.rank < static_cast<int>(ops.size()) && o.op_index >= 0 &&
                o.op_index < static_cast<int>(ops[static_cast<std::size_t>(o.rank)].size()) &&
                o.iteration - first < measured;
            const Op* op =
                known ? &ops[static_cast<std::size_t>(o.rank)][static_cast<std::size_t>(o.op_index)]
                      : nullptr;
            if (op == nullptr || static_cast<int>(op->kind) != static_cast<int>(o.kind) ||
                op->microbatch != o.microbatch || op->chunk != o.chunk) {
                matches = false;  // another schedule ran: fall back to the ops' own spans
            } else {
                spans[static_cast<std::size_t>(o.iteration - first)]
                     [static_cast<std::size_t>(graph->node(o.rank, o.op_index))] = {
                         o.start_ns, o.end_ns, static_cast<int>(o.kind), o.chunk, o.collective};
            }
        }
        const double us = static_cast<double>(o.duration()) * 1e-3;
        if (o.kind == trace::OpKind::SendF || o.kind == trace::OpKind::SendB) {
            samples.sends.add(o.iteration, us);
        } else if (o.kind == trace::OpKind::Bcast || o.kind == trace::OpKind::AllReduce) {
            // The member that joined last waited least: its span is the collective's cost.
            const auto key = std::make_tuple(o.iteration, o.collective, o.microbatch);
            auto [it, inserted] = shortest.try_emplace(key, o.collective, us);
            if (!inserted) {
                it->second.second = std::min(it->second.second, us);
            }
        } else if (!trace::isCommKind(o.kind)) {
            samples.compute[{o.rank, static_cast<int>(o.kind), o.chunk}].add(o.iteration, us);
        }
        return true;
    });
    if (!st.ok()) {
        return "costs.source: " + st.message;
    }
    for (const auto& [key, value] : shortest) {
        samples.addCollective(std::get<0>(key), value.first, value.second);
    }
    if (matches) {
        samples = effectiveDurations(*graph, spans);
        if (all_samples != nullptr) {
            *all_samples = {};
            for (const auto& [key, times] : samples.compute) {
                all_samples->compute[key] = times.all();
            }
            all_samples->sends = samples.sends.all();
            for (std::size_t kind = 1; kind < samples.by_collective.size(); ++kind) {
                all_samples->collectives[kind] = samples.by_collective[kind].all();
            }
        }
        // The run is predicted on the schedule it executed, unless the config asks for another
        // pipeline layout (then the schedule is generated anew with the calibrated costs).
        const auto& a = rc.parallel;
        const auto& b = config->parallel;
        if (recorded != nullptr && a.pipeline == b.pipeline && a.microbatches == b.microbatches &&
            a.schedule == b.schedule && a.virtual_stages == b.virtual_stages &&
            a.vocab == b.vocab) {
            *recorded = std::move(*recorded_schedule.schedule);
        }
    }
    const struct {
        trace::OpKind kind;
        CostKey key;
    } kinds[] = {{trace::OpKind::F, CostKey::F},    {trace::OpKind::B, CostKey::B},
                 {trace::OpKind::W, CostKey::W},    {trace::OpKind::S, CostKey::S},
                 {trace::OpKind::T, CostKey::T},    {trace::OpKind::IF, CostKey::IF},
                 {trace::OpKind::IB, CostKey::IB},  {trace::OpKind::L, CostKey::L},
                 {trace::OpKind::Opt, CostKey::OPT}};
    for (const auto& k : kinds) {
        std::vector<double> row(static_cast<std::size_t>(ranks), 0.0);
        bool any = false;
        // Each chunk's figure per op, the chunks summed: the table's unit is one micro-batch
        // through all of a rank's chunks. OPT runs once per iteration: its figure is per
        // iteration.
        for (const auto& [key, times] : samples.compute) {
            const auto [r, kind, chunk] = key;
            if (kind != static_cast<int>(k.kind) || r < 0 || r >= ranks) {
                continue;
            }
            any = true;
            row[static_cast<std::size_t>(r)] += times.value();
        }
        config->costs.per_stage_us[static_cast<std::size_t>(k.key)] =
            any ? row : std::vector<double>{};
    }
    if (!samples.sends.empty()) {
        config->costs.p2p_us = samples.sends.value();
    }
    if (!samples.collectives.empty()) {
        config->costs.collective_us = samples.collectives.value();
    }
    for (std::size_t kind = 1; kind < samples.by_collective.size(); ++kind) {
        if (!samples.by_collective[kind].empty()) {
            config->costs.collectives_us[kind] = samples.by_collective[kind].value();
        }
    }
    config->costs.source = schedule::CostSource::Table;
    return {};
}

}  // namespace pipescope::sim
