#include <pipescope/app/prediction.h>
#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/trace_run_data.h>
#include <pipescope/sim/simulator.h>

namespace pipescope::app {

namespace {

double relative(double predicted, double measured) {
    return measured != 0 ? (predicted - measured) / measured : 0.0;
}

PredictionError errorOf(const std::string& model, const analysis::RunStats& predicted,
                        const analysis::RunStats& measured) {
    PredictionError e;
    e.model = model;
    e.iteration =
        relative(predicted.iteration_time_ns.value_or(0), measured.iteration_time_ns.value_or(0));
    for (std::size_t r = 0; r < measured.ranks.size() && r < predicted.ranks.size(); ++r) {
        e.rank_busy.push_back(relative(predicted.ranks[r].busy_ns, measured.ranks[r].busy_ns));
    }
    return e;
}

}  // namespace

std::vector<RunDataPtr> Prediction::runs() const {
    std::vector<RunDataPtr> out{measured};
    if (calibrated) {
        out.push_back(calibrated);
    }
    if (analytic) {
        out.push_back(analytic);
    }
    return out;
}

std::optional<Prediction> predictRun(const std::string& path, std::string* error,
                                     const std::function<bool(double)>& progress) {
    auto measured = TraceRunData::open(path, error, progress);
    if (!measured) {
        return std::nullopt;
    }
    if (!measured->config()) {
        *error = path +
                 ": the trace carries no config (run.config_json), so there is nothing to "
                 "simulate";
        return std::nullopt;
    }
    if (!measured->stats().iteration_time_ns) {
        *error = path + ": the run recorded no complete iteration to compare with";
        return std::nullopt;
    }
    Prediction p;
    p.measured = measured;
    const schedule::Config base = *measured->config();
    // The trace keeps the config, not a schedule file the run was given: the predictions run
    // the config's generated schedule, and their differences then include the schedule's.
    if (const std::string& cmd = measured->reader().run().command_line;
        cmd.find(" --schedule ") != std::string::npos ||
        cmd.find(" --schedule=") != std::string::npos) {
        p.notes.push_back(
            "the run was given a schedule file (--schedule), which its trace does not keep: "
            "both predictions run the config's generated schedule instead, so their errors "
            "include the difference between the two schedules");
    }

    std::optional<double> spread_ns;
    int spread_samples = 0;
    schedule::Config calibrated = base;
    calibrated.costs.source = schedule::CostSource::Calibrated;
    calibrated.costs.calibrated_path = path;
    if (auto sim = sim::simulate(calibrated); sim.result) {
        // The spread over repeated draws is the figure that predicts the run (cost-model.md);
        // the timeline shows one typical timing.
        if (sim.result->spread) {
            spread_ns = sim.result->spread->mean_s * 1e9;
            spread_samples = sim.result->spread->timings;
        }
        p.calibrated = std::make_shared<SimRunData>(std::move(*sim.result), "calibrated");
    } else {
        p.notes.push_back("calibrated: " + sim.error);
    }
    schedule::Config analytic = base;
    analytic.costs.source = schedule::CostSource::Analytic;
    if (auto sim = sim::simulate(analytic); sim.result) {
        p.analytic = std::make_shared<SimRunData>(std::move(*sim.result), "analytic");
    } else {
        p.notes.push_back("analytic: " + sim.error);
    }
    if (p.calibrated) {
        p.errors.push_back(errorOf("calibrated", p.calibrated->stats(), measured->stats()));
        if (spread_ns) {
            p.errors.back().iteration_spread =
                relative(*spread_ns, measured->stats().iteration_time_ns.value_or(0));
            p.errors.back().spread_samples = spread_samples;
        }
    }
    if (p.analytic) {
        p.errors.push_back(errorOf("analytic", p.analytic->stats(), measured->stats()));
    }
    return p;
}

}  // namespace pipescope::app
