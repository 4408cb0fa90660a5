// Schedule generation: a config becomes per-rank op lists (the IR), communication included.
//
// The transformer ops follow the base schedule's order (GPipe, 1F1B and interleaved 1F1B by
// their textbook formulas; ZB-H1 moves weight-gradient ops W into bubbles; V-Half is scheduled
// greedily under a memory limit). The vocabulary passes are then placed by list scheduling
// against a cost model: every rank runs a pass at its first op boundary after the pass's inputs
// exist, so the S(i) of all ranks line up near the last stage's (vocabulary-parallelism.md 3.3).
// One exception: interlaced 1F1B with m >= 1.5p gets a static per-rank order in which every rank
// reaches each synchronous block at the same point of its op list (interlaced_order.h).
// docs/schedules.md explains each rule.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::schedule {

struct GenerateOptions {
    // Durations used to place ops; nullptr means the config's AnalyticCostModel.
    const CostModel* costs = nullptr;
    // Forces the first/last position layer counts under "redistributed".
    std::optional<RedistributionChoice> redistribution;
    // Extra warm-up forwards (1F1B family) or activation units (V-Half) beyond what the
    // vocabulary method needs; 0 is the method's own rule.
    int extra_warmup = 0;
    // Fill GenerateResult::start/end (for tests and tools that compare timings).
    bool record_timing = false;
    // Set by another thread to stop a long generation early (checked every few thousand steps
    // of the list scheduler): the result then has no schedule and `cancelled` set.
    const std::atomic<bool>* cancel = nullptr;
};

struct GenerateResult {
    std::optional<Schedule> schedule;
    std::string error;  // why the combination cannot be generated
    bool cancelled = false;
    // With record_timing: the generator's own timing of every op (seconds, per rank, in list
    // order); the simulator reproduces it exactly when given the same cost model.
    std::vector<std::vector<double>> start;
    std::vector<std::vector<double>> end;
};

GenerateResult generateSchedule(const Config& config, const GenerateOptions& options = {});

// Warm-up forwards a vocabulary method adds to the base schedule: vocab-1 has two barriers
// between the last stage's F(i) and B(i) (and, interleaved, needs F(i + 1) of the last chunk
// before B(i): (v - 1) * p + 1), vocab-2 one, interlaced its synchronous block (ceil(p / 2)).
int vocabExtraWarmup(const Config& config);

}  // namespace pipescope::schedule
