// Predicted versus measured: a real run next to two simulations of its own config, one with
// costs calibrated from the run's recorded op times (costs.source "calibrated:RUN.db") and one
// with the analytic model, and how far each prediction is from what was measured.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/app/run_data.h>

namespace pipescope::app {

struct PredictionError {
    std::string model;  // "calibrated", "analytic"
    // (predicted − measured) / measured of the iteration time of the simulated timeline (what
    // the delta table shows), and of each rank's busy time.
    double iteration = 0;
    std::vector<double> rank_busy;
    // The same for the mean iteration time over repeated timings drawn from the run's recorded
    // op times (calibrated on the run's own schedule, cost-model.md): the prediction of the
    // run's iteration time. Empty when there was no such spread.
    std::optional<double> iteration_spread;
    int spread_samples = 0;
};

struct Prediction {
    RunDataPtr measured;    // the trace
    RunDataPtr calibrated;  // null when the run cannot be calibrated (see notes)
    RunDataPtr analytic;
    std::vector<PredictionError> errors;
    std::vector<std::string> notes;  // what could not be predicted, and why

    // measured, then the predictions that exist.
    std::vector<RunDataPtr> runs() const;
};

// Opens the trace at `path` and simulates its config both ways (on the calling thread; a few
// hundred ms for the presets). nullopt and `error` when the trace cannot be opened or carries no
// config. `progress` as TraceRunData::open's.
std::optional<Prediction> predictRun(const std::string& path, std::string* error,
                                     const std::function<bool(double)>& progress = {});

}  // namespace pipescope::app
