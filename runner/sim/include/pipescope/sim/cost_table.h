// Cost models of the simulator (docs/cost-model.md): the analytic model of runner/schedule, a
// table of per-stage measured times (architecture.md "costs"), and a table calibrated from a
// real run's trace.
#pragma once

#include <memory>
#include <string>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::sim {

// Per-stage microseconds from config.costs, anything missing from the analytic model.
//  - F, B, W, S, T, IF, IB are per rank and per micro-batch. A stage's F and B are its whole
//    forward and backward, including a vocabulary layer it holds under naive or redistributed
//    handling; S, T, IF and IB are the sharded passes.
//  - A rank with several chunks splits its F, B and W over them in proportion to their layers.
//  - Schedules that split the backward (zb-h1, v-half) given B but no W split it in the ratio of
//    the input-gradient and weight-gradient FLOPs.
//  - costs.p2p_us replaces every send's time, costs.collective_us every collective's.
class TableCostModel final : public schedule::CostModel {
  public:
    TableCostModel(const schedule::Config& config, const schedule::Placement& placement);
    double compute(int rank, const schedule::Op& op) const override;
    double send(int rank, const schedule::Op& op) const override;
    double collective(const schedule::Op& op) const override;

  private:
    double tableSeconds(schedule::CostKey key, int rank) const;  // < 0: not in the table
    double chunkShare(int rank, int chunk) const;

    schedule::Config config_;
    schedule::Placement placement_;
    schedule::AnalyticCostModel analytic_;
};

// Fills config.costs.per_stage_us, p2p_us and collective_us from the ops of a recorded run
// (mean duration per rank and kind over the measured iterations). Returns an error naming the
// file when it cannot be read or does not match the config.
std::string calibrateFromTrace(const std::string& path, schedule::Config* config);

// The model config.costs.source asks for. For "calibrated:RUN.db" the config must already have
// been through calibrateFromTrace (makeCostModel does not read files).
std::unique_ptr<schedule::CostModel> makeCostModel(const schedule::Config& config,
                                                   const schedule::Placement& placement);

}  // namespace pipescope::sim
