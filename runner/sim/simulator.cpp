#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/model_math.h>
#include <pipescope/schedule/validate.h>
#include <pipescope/sim/cost_table.h>
#include <pipescope/sim/simulator.h>
#include <pipescope/trace/number_text.h>

namespace pipescope::sim {

using schedule::OpKind;

namespace {

using Intervals = std::vector<std::pair<double, double>>;

// Sorts and merges intervals into disjoint ones (a rank's compute ops usually come in order).
void mergeIntervals(Intervals& v) {
    if (!std::is_sorted(v.begin(), v.end())) {
        std::sort(v.begin(), v.end());
    }
    std::size_t out = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        if (out > 0 && v[i].first <= v[out - 1].second) {
            v[out - 1].second = std::max(v[out - 1].second, v[i].second);
        } else {
            v[out++] = v[i];
        }
    }
    v.resize(out);
}

double totalLength(const Intervals& merged) {
    double total = 0;
    for (const auto& [a, b] : merged) {
        total += b - a;
    }
    return total;
}

// Length of `a` not covered by `b`, both merged.
double uncovered(const Intervals& a, const Intervals& b) {
    double total = 0;
    std::size_t j = 0;
    for (const auto& [s, e] : a) {
        double covered = 0;
        while (j < b.size() && b[j].second <= s) {
            ++j;
        }
        for (std::size_t k = j; k < b.size() && b[k].first < e; ++k) {
            covered += std::min(e, b[k].second) - std::max(s, b[k].first);
        }
        total += (e - s) - covered;
    }
    return total;
}

bool isBlockingWait(OpKind k) {
    return k == OpKind::RecvF || k == OpKind::RecvB || k == OpKind::Bcast || k == OpKind::AllReduce;
}

// Times the schedule again and again with op times drawn from the recorded ones. The number of
// timings shrinks for large schedules (each costs a pass over every op), from 64 to at least 8.
IterationSpread timeWithRecordedSpread(const SimResult& res, const OpTimeSamples& samples) {
    constexpr double kOpBudget = 4e6;
    const int nodes = std::max(1, res.graph.nodeCount());
    const int timings = std::clamp(static_cast<int>(kOpBudget / nodes), 8, 64);
    TableCostModel model(res.config, res.schedule.placement);
    model.drawFrom(&samples, res.config.run.seed);
    std::vector<double> iterations;
    for (int k = 0; k < timings; ++k) {
        const auto timing = schedule::timeGraph(res.schedule, res.graph, model);
        if (!timing.complete) {
            continue;  // cannot happen: the same graph timed without a deadlock before
        }
        double end = 0;
        for (const auto& t : timing.times) {
            end = std::max(end, t.end);
        }
        iterations.push_back(end);
    }
    IterationSpread spread;
    if (iterations.empty()) {
        return spread;
    }
    std::sort(iterations.begin(), iterations.end());
    const auto at = [&](double q) {
        return iterations[static_cast<std::size_t>(q * static_cast<double>(iterations.size() - 1) +
                                                   0.5)];
    };
    spread.timings = static_cast<int>(iterations.size());
    spread.mean_s = std::accumulate(iterations.begin(), iterations.end(), 0.0) /
                    static_cast<double>(iterations.size());
    spread.p10_s = at(0.1);
    spread.p90_s = at(0.9);
    return spread;
}

// Traces count nanoseconds in 64 bits: why `iterations` iterations of `iteration` seconds
// overflow them, naming what to change, else empty. An iteration that fits times a run.iterations
// that does not is run.iterations' fault (before, the message blamed the model's sizes and said
// "one iteration takes 0 days").
std::string beyondTheClock(double iteration, int iterations, const std::string& key) {
    const double n = std::max(1, iterations);
    if (iteration * 1e9 * n < kMaxSimulatedNs) {
        return {};
    }
    const std::string years =
        std::to_string(std::llround(kMaxSimulatedNs / 1e9 / 86400.0 / 365.0)) + " years";
    if (iteration * 1e9 < kMaxSimulatedNs) {
        const std::string shown = trace::significantText(iteration, 3) + " s each come to " +
                                  trace::significantText(iteration * n / 86400.0 / 365.0, 3) +
                                  " years";
        return key + ": " + std::to_string(iterations) + " iterations of " + shown +
               " of simulated time, beyond what a trace's nanosecond clock holds (about " + years +
               "); lower " + key;
    }
    // In double: llround of 1e30 days gave -9223372036854775808.
    const double days = iteration / 86400.0;
    const std::string shown =
        days < 1e15 ? trace::fixedText(days, 0) : trace::significantText(days, 3);
    return "model: one iteration takes " + (std::isfinite(days) ? shown : "endless") +
           " days of simulated time, beyond what a trace's nanosecond clock holds (about " + years +
           " over all iterations); check model.seq_len, model.hidden, model.layers, model.vocab, "
           "hardware.peak_tflops, hardware.gemm_efficiency, hardware.memory_gbps, "
           "hardware.p2p_gbps, hardware.allreduce_gbps, hardware.latency_us and the costs times";
}

}  // namespace

double estimatedOps(const schedule::Config& config) {
    // Per micro-batch and stage at most: F, B, W; the vocabulary passes IF, IB, S, T, L; two
    // sends and two receives; five collectives; one spare.
    constexpr double kOpsPerMicrobatchStage = 16;
    return static_cast<double>(config.parallel.pipeline) *
           static_cast<double>(std::max(1, config.parallel.virtual_stages)) *
           static_cast<double>(config.parallel.microbatches) * kOpsPerMicrobatchStage;
}

std::int64_t SimResult::maxPeakMemory() const {
    std::int64_t peak = 0;
    for (const auto& r : ranks) {
        peak = std::max(peak, r.peak_memory_bytes);
    }
    return peak;
}

SimOutcome simulate(const schedule::Config& input, const SimOptions& options) {
    SimOutcome outcome;
    // Refused before anything is built: a schedule this size would not fit in memory.
    const double estimate = estimatedOps(input);
    if (estimate > static_cast<double>(kMaxSimulatedOps)) {
        // interleaved-1f1b's chunks per rank multiply the ops too: 8 micro-batches with a
        // billion virtual stages were blamed on parallel.microbatches alone.
        const bool chunks = input.parallel.schedule == schedule::ScheduleKind::Interleaved1F1B;
        const std::string limit = " million ops; the simulator takes at most " +
                                  std::to_string(kMaxSimulatedOps / 1'000'000) +
                                  " million per iteration (lower ";
        const std::string stages = std::to_string(input.parallel.pipeline) + " stages";
        const std::string microbatches =
            std::to_string(input.parallel.microbatches) + " micro-batches";
        const std::string millions = std::to_string(std::llround(estimate / 1e6));
        outcome.error =
            chunks ? "parallel.virtual_stages: " + std::to_string(input.parallel.virtual_stages) +
                         " model chunks per rank on " + stages + " with " + microbatches +
                         " make about " + millions + limit +
                         "parallel.virtual_stages, parallel.microbatches or parallel.pipeline)"
                   : "parallel.microbatches: " + microbatches + " on " + stages + " make about " +
                         millions + limit + "parallel.microbatches or parallel.pipeline)";
        return outcome;
    }
    schedule::Config config = input;
    std::optional<schedule::Schedule> recorded;
    OpTimeSamples samples;
    if (config.costs.source == schedule::CostSource::Calibrated) {
        if (auto err =
                calibrateFromTrace(config.costs.calibrated_path, &config, &recorded, &samples);
            !err.empty()) {
            outcome.error = err;
            return outcome;
        }
    }
    if (options.schedule) {
        return simulateSchedule(config, *options.schedule, true, options.cancel,
                                options.iterations);
    }
    if (recorded) {
        auto out = simulateSchedule(config, std::move(*recorded), options.validate_generated,
                                    options.cancel, options.iterations);
        if (out.result && !samples.empty()) {
            out.result->spread = timeWithRecordedSpread(*out.result, samples);
        }
        return out;
    }
    const schedule::Placement placement = schedule::computePlacement(config);
    const auto costs = makeCostModel(config, placement);
    schedule::GenerateOptions gen;
    gen.costs = costs.get();
    gen.cancel = options.cancel;
    auto g = schedule::generateSchedule(config, gen);
    if (g.cancelled || (options.cancel && options.cancel->load(std::memory_order_relaxed))) {
        outcome.cancelled = true;
        outcome.error = "cancelled";
        return outcome;
    }
    if (!g.schedule) {
        outcome.error = g.error;
        return outcome;
    }
    auto out = simulateSchedule(config, std::move(*g.schedule), options.validate_generated,
                                options.cancel, options.iterations);
    if (!out.result && out.error.rfind("schedule:", 0) == 0) {
        out.error = "internal error, the generated schedule is invalid: " + out.error;
    }
    return out;
}

SimOutcome simulateSchedule(const schedule::Config& config, schedule::Schedule schedule,
                            bool validate, const std::atomic<bool>* cancel, int iterations) {
    SimOutcome outcome;
    const auto stopped = [&] {
        if (cancel && cancel->load(std::memory_order_relaxed)) {
            outcome.cancelled = true;
            outcome.error = "cancelled";
            return true;
        }
        return false;
    };
    SimResult res;
    res.config = config;
    res.schedule = std::move(schedule);
    const auto costs = makeCostModel(config, res.schedule.placement);
    if (validate) {
        if (auto e = schedule::validateStructure(res.schedule, &res.graph)) {
            outcome.error = "schedule: " + e->message;
            return outcome;
        }
    } else {
        auto build = schedule::buildGraph(res.schedule);
        if (build.error) {
            outcome.error = "schedule: " + build.error->message;
            return outcome;
        }
        res.graph = std::move(build.graph);
    }
    if (stopped()) {
        return outcome;
    }
    res.timing = schedule::timeGraph(res.schedule, res.graph, *costs);
    if (!res.timing.complete) {
        outcome.error = "schedule: " + res.timing.deadlock;
        return outcome;
    }
    if (stopped()) {
        return outcome;
    }
    res.memory = modelMemory(config, res.schedule, res.graph, res.timing);
    if (stopped()) {
        return outcome;
    }

    // Metrics of architecture.md over the one simulated iteration.
    const int p = res.schedule.ranks;
    double iteration = 0;
    for (const auto& t : res.timing.times) {
        iteration = std::max(iteration, t.end);
    }
    res.iteration_time_s = iteration;
    if (std::string why = iterations > 0
                              ? beyondTheClock(iteration, iterations, "--iterations")
                              : beyondTheClock(iteration, config.run.iterations, "run.iterations");
        !why.empty()) {
        outcome.error = std::move(why);
        return outcome;
    }
    // With every op free, MFU, throughput and the bubble are 0/0: refuse rather than report
    // zeros as results.
    if (!(iteration > 0)) {
        if (config.costs.source == schedule::CostSource::Analytic) {
            // No table: the times come from the hardware rates alone, so name those, not the
            // cost tables the config never gave.
            const auto& h = config.hardware;
            using trace::significantText;
            const std::string rates = "peak_tflops " + significantText(h.peak_tflops, 6) +
                                      ", memory_gbps " + significantText(h.memory_gbps, 6) +
                                      ", p2p_gbps " + significantText(h.p2p_gbps, 6) +
                                      ", allreduce_gbps " + significantText(h.allreduce_gbps, 6);
            outcome.error = std::string("hardware: every op takes zero time at these rates (") +
                            rates +
                            ") with latency_us 0, so the iteration does too and MFU, throughput "
                            "and the bubble are undefined; lower the rates or give "
                            "hardware.latency_us a non-zero value";
            return outcome;
        }
        outcome.error =
            "costs.per_stage_us: every op takes zero time, so the iteration does too and MFU, "
            "throughput and the bubble are undefined; give non-zero times in "
            "costs.per_stage_us, costs.p2p_us, costs.collective_us or hardware.latency_us";
        return outcome;
    }
    double busy_sum = 0, busy_max = 0, mem_sum = 0, ratio_sum = 0;
    Intervals compute, waits;
    for (int r = 0; r < p; ++r) {
        compute.clear();
        waits.clear();
        const auto& ops = res.schedule.ops[static_cast<std::size_t>(r)];
        for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
            const auto& t = res.timing.times[static_cast<std::size_t>(res.graph.node(r, i))];
            if (schedule::isCompute(ops[static_cast<std::size_t>(i)].kind)) {
                compute.emplace_back(t.start, t.end);
            } else if (isBlockingWait(ops[static_cast<std::size_t>(i)].kind)) {
                waits.emplace_back(t.start, t.end);
            }
        }
        RankSummary rs;
        rs.rank = r;
        mergeIntervals(compute);
        mergeIntervals(waits);
        rs.busy_s = totalLength(compute);
        rs.bubble_s = iteration - rs.busy_s;
        rs.bubble_ratio = iteration > 0 ? rs.bubble_s / iteration : 0.0;
        rs.comm_wait_s = uncovered(waits, compute);
        rs.peak_memory_bytes = res.memory[static_cast<std::size_t>(r)].peak_bytes;
        rs.peak_activation_microbatches =
            res.memory[static_cast<std::size_t>(r)].peak_activation_microbatches;
        busy_sum += rs.busy_s;
        busy_max = std::max(busy_max, rs.busy_s);
        mem_sum += static_cast<double>(rs.peak_memory_bytes);
        ratio_sum += rs.bubble_ratio;
        res.ranks.push_back(rs);
    }
    res.bubble_ratio = ratio_sum / p;
    res.busy_imbalance = busy_sum > 0 ? busy_max / (busy_sum / p) : 0.0;
    res.memory_imbalance =
        mem_sum > 0 ? static_cast<double>(res.maxPeakMemory()) / (mem_sum / p) : 0.0;
    res.model_flops = schedule::modelFlopsPerIteration(config);
    res.mfu = schedule::mfu(config, iteration);
    res.tokens_per_s = iteration > 0 ? schedule::tokensPerIteration(config) / iteration : 0.0;
    res.memory_capacity_bytes =
        static_cast<std::int64_t>(config.hardware.memory_gib * 1024.0 * 1024.0 * 1024.0);
    outcome.result = std::move(res);
    return outcome;
}

trace::RunInfo simRunInfo(const SimResult& result, int iterations,
                          const std::string& command_line) {
    trace::RunInfo run;
    run.name = result.config.name;
    run.config_json = schedule::toJson(result.config);
    run.backend = "sim";
    run.start_ns = 0;
    run.command_line = command_line;
    run.versions = "pipescope " PIPESCOPE_VERSION;
    run.ranks = result.schedule.ranks;
    run.iterations = iterations;
    run.warmup = std::min(result.config.run.warmup, std::max(0, iterations - 1));
    return run;
}

trace::WriterOptions simWriterOptions(bool overwrite) {
    trace::WriterOptions options;
    options.overwrite = overwrite;
    options.max_batch_age = std::chrono::milliseconds(0);
    return options;
}

namespace {

std::int64_t toNs(double seconds) {
    return static_cast<std::int64_t>(std::llround(seconds * 1e9));
}

}  // namespace

trace::OpRecord traceOp(const SimResult& res, int r, int i, std::int64_t base) {
    const auto& o = res.schedule.ops[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)];
    const auto& t = res.timing.times[static_cast<std::size_t>(res.graph.node(r, i))];
    trace::OpRecord rec;
    rec.rank = r;
    rec.kind = static_cast<trace::OpKind>(o.kind);
    rec.microbatch = o.microbatch;
    rec.chunk = o.chunk;
    rec.lane = schedule::isComm(o.kind) ? trace::Lane::Comm : trace::Lane::Compute;
    rec.start_ns = base + toNs(t.start);
    rec.end_ns = base + toNs(t.end);
    rec.source = trace::Source::Sim;
    rec.op_index = i;
    rec.peer = o.kind == OpKind::Bcast ? o.root : o.peer;
    rec.collective = static_cast<int>(o.collective);
    rec.bytes = schedule::isComm(o.kind) ? o.bytes : -1;
    return rec;
}

std::string rankStages(const schedule::Schedule& s, int r) {
    std::string stages;
    for (int q = 0; q < s.placement.positions(); ++q) {
        if (s.placement.position_rank[static_cast<std::size_t>(q)] == r) {
            stages += (stages.empty() ? "" : ",") + std::to_string(q);
        }
    }
    return stages;
}

int writeTrace(const SimResult& res, int iterations, trace::TraceWriter& w,
               const std::function<bool()>& stop) {
    const auto& s = res.schedule;
    const auto ns = toNs;
    const std::int64_t period = ns(res.iteration_time_s);
    for (int r = 0; r < s.ranks; ++r) {
        w.addRank({r, rankStages(s, r), "sim", "", 0, 0});
    }
    int written = 0;
    for (int it = 0; it < iterations; ++it, ++written) {
        if (stop && stop()) {
            break;
        }
        const std::int64_t base = period * it;
        for (int r = 0; r < s.ranks; ++r) {
            const int count = static_cast<int>(s.ops[static_cast<std::size_t>(r)].size());
            for (int i = 0; i < count; ++i) {
                trace::OpRecord rec = traceOp(res, r, i, base);
                rec.iteration = it;
                w.addOp(rec);
            }
            const auto& levels = res.memory[static_cast<std::size_t>(r)].levels;
            for (const auto& l : levels) {
                // Parameters and optimizer state are written once; the rest each iteration.
                const bool is_static = l.t == 0 && it > 0 &&
                                       (l.category == trace::MemoryCategory::Weights ||
                                        l.category == trace::MemoryCategory::Grads ||
                                        l.category == trace::MemoryCategory::Optimizer);
                if (!is_static) {
                    w.addMemory({r, base + ns(l.t), l.bytes, l.category});
                }
            }
        }
        w.addMetric({"iteration_time_ns", static_cast<double>(period), std::nullopt, it});
    }
    w.addMetric({"model_flops_per_iteration", res.model_flops, std::nullopt, std::nullopt});
    w.addMetric({"peak_flops_per_rank", res.config.hardware.peak_tflops * 1e12, std::nullopt,
                 std::nullopt});
    w.addMetric({"tokens_per_iteration", schedule::tokensPerIteration(res.config), std::nullopt,
                 std::nullopt});
    w.addMetric({"memory_capacity_bytes", static_cast<double>(res.memory_capacity_bytes),
                 std::nullopt, std::nullopt});
    return written;
}

}  // namespace pipescope::sim
