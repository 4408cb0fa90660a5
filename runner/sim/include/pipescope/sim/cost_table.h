// Cost models of the simulator (docs/cost-model.md): the analytic model of runner/schedule, a
// table of per-stage measured times (architecture.md "costs"), and a table calibrated from a
// real run's trace.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::sim {

// Per-stage microseconds from config.costs, anything missing from the analytic model.
//  - F, B, W, S, T, IF, IB are per rank and per micro-batch. A stage's F is its whole forward
//    and its backward B (+ W, below) its whole backward, including a vocabulary layer it holds
//    under naive or redistributed handling; S, T, IF and IB are the sharded passes.
//  - A rank with several chunks splits its F, B and W over them in proportion to their layers.
//  - With W, B is the input gradient and W the weight gradient on every schedule: a schedule
//    that does not split the backward takes B + W for it. Without W, B is the whole backward,
//    which schedules that split it (zb-h1, v-half) split in the ratio of the input-gradient and
//    weight-gradient FLOPs.
//  - costs.p2p_us replaces every send's time, costs.collective_us every collective's.
// Every effective op duration of a recorded run, in microseconds (see calibrateFromTrace).
struct OpTimeSamples {
    std::map<std::tuple<int, int, int>, std::vector<double>> compute;  // (rank, OpKind, chunk)
    std::vector<double> sends;
    std::array<std::vector<double>, schedule::kCollectiveKinds> collectives;  // by Collective

    bool empty() const { return compute.empty() && sends.empty(); }
};

class TableCostModel final : public schedule::CostModel {
  public:
    TableCostModel(const schedule::Config& config, const schedule::Placement& placement);
    // From now on each op's time is drawn at random (seeded) from the recorded times of its
    // rank, kind and chunk where `samples` has them, and taken from the table elsewhere. Each
    // call of compute/send/collective draws anew: one timing of the graph is one possible
    // iteration. `samples` must outlive the model; nullptr turns drawing off.
    void drawFrom(const OpTimeSamples* samples, std::uint64_t seed);
    double compute(int rank, const schedule::Op& op) const override;
    double send(int rank, const schedule::Op& op) const override;
    double collective(const schedule::Op& op) const override;

  private:
    double tableSeconds(schedule::CostKey key, int rank) const;  // < 0: not in the table
    double chunkShare(int rank, int chunk) const;

    double draw(const std::vector<double>* v, double fallback) const;

    schedule::Config config_;
    schedule::Placement placement_;
    schedule::AnalyticCostModel analytic_;
    const OpTimeSamples* samples_ = nullptr;
    mutable std::mt19937_64 rng_;
};

// Fills config.costs.per_stage_us, p2p_us, collective_us and collectives_us from the ops of a
// recorded run (median effective duration per rank, kind and chunk over the measured
// iterations; docs/cost-model.md). When `recorded` is given and the config keeps the recorded
// run's pipeline layout (stages, micro-batches, schedule, virtual stages, vocabulary method),
// it receives the schedule that run executed, so that the simulator predicts that very run.
// Returns an error naming the file when it cannot be read or does not match the config.
// With `samples`, it also receives every effective duration (when the recorded schedule could be
// regenerated), for TableCostModel::drawFrom.
std::string calibrateFromTrace(const std::string& path, schedule::Config* config,
                               std::optional<schedule::Schedule>* recorded = nullptr,
                               OpTimeSamples* samples = nullptr);

// The model config.costs.source asks for. For "calibrated:RUN.db" the config must already have
// been through calibrateFromTrace (makeCostModel does not read files).
std::unique_ptr<schedule::CostModel> makeCostModel(const schedule::Config& config,
                                                   const schedule::Placement& placement);

}  // namespace pipescope::sim
