// The memory model of vocabulary-parallelism.md section 4, applied to a timed schedule: static
// parameters, gradients and optimizer state, activations from F to B (or W), vocabulary-layer
// buffers, communication buffers (docs/cost-model.md, "Memory").
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/exec_graph.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/trace/types.h>

namespace pipescope::sim {

inline constexpr int kCategories = trace::kMemoryCategoryCount;

// The level of one category on one rank from `t` (seconds) on.
struct MemoryLevel {
    double t = 0;
    trace::MemoryCategory category = trace::MemoryCategory::Weights;
    std::int64_t bytes = 0;
};

struct RankMemory {
    std::vector<MemoryLevel> levels;  // in time order; levels of one instant apply together
    std::int64_t peak_bytes = 0;
    double peak_t = 0;
    std::array<std::int64_t, kCategories> at_peak{};
    // Activations at their own peak / one micro-batch's. Between B and W a split backward holds
    // W's inputs and gradients instead (about 0.94 of a micro-batch's activations for d = 2).
    double peak_activation_microbatches = 0;
};

// One iteration's memory on every rank, from the schedule and its timing.
std::vector<RankMemory> modelMemory(const schedule::Config& config,
                                    const schedule::Schedule& schedule,
                                    const schedule::ExecGraph& graph,
                                    const schedule::GraphTiming& timing);

}  // namespace pipescope::sim
