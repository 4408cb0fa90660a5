#include <map>
#include <numeric>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/sim/cost_table.h>
#include <pipescope/trace/reader.h>

namespace pipescope::sim {

using schedule::CostKey;
using schedule::Op;
using schedule::OpKind;

TableCostModel::TableCostModel(const schedule::Config& config, const schedule::Placement& placement)
    : config_(config), placement_(placement), analytic_(config, placement) {}

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
    double t = -1.0;
    switch (op.kind) {
        case OpKind::F:
            t = scaled(CostKey::F);
            break;
        case OpKind::B:
            t = scaled(CostKey::B);
            if (t >= 0 && split && tableSeconds(CostKey::W, rank) < 0) {
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
        default:
            break;
    }
    return t >= 0 ? t : analytic_.compute(rank, op);
}

double TableCostModel::send(int rank, const Op& op) const {
    return config_.costs.p2p_us ? *config_.costs.p2p_us * 1e-6 : analytic_.send(rank, op);
}

double TableCostModel::collective(const Op& op) const {
    if (config_.parallel.pipeline <= 1) {
        return 0.0;
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

std::string calibrateFromTrace(const std::string& path, schedule::Config* config) {
    trace::TraceReader reader;
    if (auto st = reader.open(path); !st.ok()) {
        return "costs.source: " + st.message;
    }
    // Per-stage times only transfer between runs of the same model and layout: a naive run's
    // last-stage F includes the whole output layer, a vocab-2 run's does not.
    const auto recorded = schedule::parseConfig(reader.run().config_json, path);
    if (!recorded.ok()) {
        return "costs.source: " + path + " does not hold a readable config (" +
               (recorded.issues.empty() ? std::string("?") : recorded.issues.front().text()) + ")";
    }
    const auto& rc = *recorded.config;
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
    // Sum of durations and count per (rank, kind); F/B/W summed over chunks, divided by the
    // micro-batch count, give the per-stage figure the table wants.
    std::map<std::pair<int, int>, std::pair<double, double>> sums;
    std::vector<double> sends;
    std::map<std::tuple<int, int, int>, double> shortest;  // (iteration, kind, mb) -> span
    auto st = reader.forEachOp([&](const trace::OpRecord& o) {
        if (o.iteration < first) {
            return true;
        }
        const double us = static_cast<double>(o.duration()) * 1e-3;
        if (o.kind == trace::OpKind::SendF || o.kind == trace::OpKind::SendB) {
            sends.push_back(us);
        } else if (o.kind == trace::OpKind::Bcast || o.kind == trace::OpKind::AllReduce) {
            // The member that joined last waited least: its span is the collective's cost.
            const auto key = std::make_tuple(o.iteration, o.collective, o.microbatch);
            auto [it, inserted] = shortest.try_emplace(key, us);
            if (!inserted) {
                it->second = std::min(it->second, us);
            }
        } else if (!trace::isCommKind(o.kind)) {
            auto& s = sums[{o.rank, static_cast<int>(o.kind)}];
            s.first += us;
            s.second += 1;
        }
        return true;
    });
    if (!st.ok()) {
        return "costs.source: " + st.message;
    }
    const int measured = std::max(1, iterations - first);
    // Per micro-batch of the recorded run (its own micro-batch count).
    const int m = rc.parallel.microbatches;
    const struct {
        trace::OpKind kind;
        CostKey key;
        bool per_chunk;
    } kinds[] = {{trace::OpKind::F, CostKey::F, true},   {trace::OpKind::B, CostKey::B, true},
                 {trace::OpKind::W, CostKey::W, true},   {trace::OpKind::S, CostKey::S, false},
                 {trace::OpKind::T, CostKey::T, false},  {trace::OpKind::IF, CostKey::IF, false},
                 {trace::OpKind::IB, CostKey::IB, false}};
    for (const auto& k : kinds) {
        std::vector<double> row(static_cast<std::size_t>(ranks), 0.0);
        bool any = false;
        for (int r = 0; r < ranks; ++r) {
            auto it = sums.find({r, static_cast<int>(k.kind)});
            if (it == sums.end()) {
                continue;
            }
            any = true;
            // Per micro-batch: all of a rank's chunks together (the table's unit).
            row[static_cast<std::size_t>(r)] =
                it->second.first / (static_cast<double>(measured) * m);
        }
        config->costs.per_stage_us[static_cast<std::size_t>(k.key)] =
            any ? row : std::vector<double>{};
    }
    if (!sends.empty()) {
        config->costs.p2p_us =
            std::accumulate(sends.begin(), sends.end(), 0.0) / static_cast<double>(sends.size());
    }
    if (!shortest.empty()) {
        double total = 0;
        for (const auto& [key, us] : shortest) {
            total += us;
        }
        config->costs.collective_us = total / static_cast<double>(shortest.size());
    }
    config->costs.source = schedule::CostSource::Table;
    return {};
}

}  // namespace pipescope::sim
