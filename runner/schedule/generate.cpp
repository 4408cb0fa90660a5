#include <array>
#include <memory>
#include <vector>

#include <pipescope/schedule/exec_graph.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/validate.h>

#include "generator.h"
#include "interlaced_order.h"

namespace pipescope::schedule {

namespace {

// The timing of a schedule that was not made by the list scheduler, from the simulator's own
// rules, per rank in list order.
void recordTiming(const Schedule& s, const CostModel& costs, GenerateResult* out) {
    const GraphBuild build = buildGraph(s);
    if (build.error) {
        return;
    }
    const GraphTiming timing = timeGraph(s, build.graph, costs);
    out->start.assign(static_cast<std::size_t>(s.ranks), {});
    out->end.assign(static_cast<std::size_t>(s.ranks), {});
    for (int r = 0; r < s.ranks; ++r) {
        for (std::size_t i = 0; i < s.ops[static_cast<std::size_t>(r)].size(); ++i) {
            const NodeTime& t =
                timing.times[static_cast<std::size_t>(build.graph.node(r, static_cast<int>(i)))];
            out->start[static_cast<std::size_t>(r)].push_back(t.start);
            out->end[static_cast<std::size_t>(r)].push_back(t.end);
        }
    }
}

}  // namespace

int vocabExtraWarmup(const Config& config) {
    const int ranks = config.parallel.pipeline;
    switch (config.parallel.vocab) {
        case VocabMethod::Vocab1:
            if (config.parallel.schedule == ScheduleKind::Interleaved1F1B) {
                // B(i) of the last position waits for F(i + 1) there (its loss gradient comes
                // with the broadcast of X(i + 1)); Megatron's order runs the last chunk's
                // forwards in groups of p, (v - 1) * p forwards of the other chunks apart, so a
                // rank must run that much further ahead, and one more.
                return (config.parallel.virtual_stages - 1) * ranks + 1;
            }
            return 2;  // barriers C1 and C2 between the last stage's F(i) and B(i)
        case VocabMethod::Vocab2:
            return 1;  // the single barrier C
        case VocabMethod::Interlaced:
            return (ranks + 1) / 2;
        default:
            return 0;
    }
}

GenerateResult generateSchedule(const Config& config, const GenerateOptions& options) {
    GenerateResult out;
    const Placement placement = computePlacement(config, options.redistribution);
    std::unique_ptr<CostModel> own;
    const CostModel* costs = options.costs;
    if (!costs) {
        own = std::make_unique<AnalyticCostModel>(config, placement);
        costs = own.get();
    }
    // Interlaced with 1F1B: the order of the authors' runtime, which needs at least as many
    // micro-batches as its warm-up (1.5p); with fewer, synchronous blocks by list scheduling.
    if (config.parallel.schedule == ScheduleKind::OneF1B &&
        config.parallel.vocab == VocabMethod::Interlaced && options.extra_warmup == 0 &&
        config.parallel.microbatches >= 3 * config.parallel.pipeline / 2) {
        if (auto s = detail::interlacedOneF1B(config, placement); s && !validateSchedule(*s)) {
            if (options.record_timing) {
                recordTiming(*s, *costs, &out);
            }
            out.schedule = std::move(s);
            return out;
        }
    }
    const int extra = vocabExtraWarmup(config) + options.extra_warmup;
    std::string error;
    if (config.parallel.schedule != ScheduleKind::VHalf) {
        detail::Generator gen(config, placement, *costs, extra, options.record_timing);
        gen.setCancel(options.cancel);
        if (!gen.run(&error)) {
            out.cancelled = gen.cancelled();
            out.error = error;
            return out;
        }
        Schedule s;
        gen.result(&s, options.record_timing ? &out.start : nullptr,
                   options.record_timing ? &out.end : nullptr);
        out.schedule = std::move(s);
        return out;
    }
    // V-Half: the timetable's order with a few look-ahead windows; the shortest iteration wins
    // (on a tie, the smaller window). All of them hold the same activation limit. If none
    // completes within it (tiny m or very uneven costs), allow one more unit at a time.
    constexpr std::array<int, 6> kWindows = {1, 2, 4, 6, 8, 12};
    // The raises tried: 0 to 2p, then, as a last resort, one at which the limit cannot bind (a
    // rank holds at most 2m chunk activations). Costs that make the timetable put many more
    // forwards than that ahead of the first backward (a tiny model whose ops all cost about the
    // same) stalled every raise up to 2p, and a valid config could not be scheduled.
    std::vector<int> raises;
    for (int k = 0; k <= 2 * config.parallel.pipeline; ++k) {
        raises.push_back(k);
    }
    if (2 * config.parallel.microbatches > raises.back()) {
        raises.push_back(2 * config.parallel.microbatches);
    }
    for (int k : raises) {
        std::unique_ptr<detail::Generator> best;
        for (int window : kWindows) {
            if (options.cancel && options.cancel->load(std::memory_order_relaxed)) {
                out.cancelled = true;
                out.error = "cancelled";
                return out;
            }
            auto gen = std::make_unique<detail::Generator>(config, placement, *costs, extra + k,
                                                           options.record_timing, window);
            gen->setCancel(options.cancel);
            const bool done = gen->run(&error);
            if (gen->cancelled()) {
                out.cancelled = true;
                out.error = error;
                return out;
            }
            if (done && (!best || gen->makespan() < best->makespan())) {
                best = std::move(gen);
            }
        }
        if (best) {
            Schedule s;
            best->result(&s, options.record_timing ? &out.start : nullptr,
                         options.record_timing ? &out.end : nullptr);
            out.schedule = std::move(s);
            return out;
        }
    }
    out.error = error;
    return out;
}

}  // namespace pipescope::schedule
