#include <array>
#include <memory>

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

int vocabExtraWarmup(VocabMethod method, int ranks) {
    switch (method) {
        case VocabMethod::Vocab1:
            return 2;  // barriers C1 and C2 between the last stage's F(i) and B(i)
        case VocabMethod::Vocab2:
            return 1;  // the single barrier C
        case VocabMethod::Interlaced:
            return (ranks + 1) / 2;
        default:
            return 0;
    }
}

std::optional<std::string> unsupportedCombination(ScheduleKind schedule, VocabMethod vocab) {
    if (vocab == VocabMethod::Vocab1 && schedule == ScheduleKind::Interleaved1F1B) {
        // vocab-1's loss gradient g(i) travels with the broadcast of X(i + 1) and the last
        // stage's B(i) waits for it; interleaving runs F(i + 1) on the last chunk only a chunk
        // round after B(i) is due, so B(i) would wait on work queued behind itself.
        return "vocab-1 cannot be combined with interleaved-1f1b: its B(i) waits for the next "
               "micro-batch's forward, which interleaving schedules after it; use \"vocab-2\" or "
               "\"interlaced\" with interleaved-1f1b, or vocab-1 with gpipe, 1f1b, zb-h1 or v-half";
    }
    return std::nullopt;
}

GenerateResult generateSchedule(const Config& config, const GenerateOptions& options) {
    GenerateResult out;
    if (auto why = unsupportedCombination(config.parallel.schedule, config.parallel.vocab)) {
        out.error = "parallel.vocab: " + *why;
        return out;
    }
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
    const int extra =
        vocabExtraWarmup(config.parallel.vocab, config.parallel.pipeline) + options.extra_warmup;
    std::string error;
    if (config.parallel.schedule != ScheduleKind::VHalf) {
        detail::Generator gen(config, placement, *costs, extra, options.record_timing);
        if (!gen.run(&error)) {
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
    for (int k = 0; k <= 2 * config.parallel.pipeline; ++k) {
        std::unique_ptr<detail::Generator> best;
        for (int window : kWindows) {
            auto gen = std::make_unique<detail::Generator>(config, placement, *costs, extra + k,
                                                           options.record_timing, window);
            if (gen->run(&error) && (!best || gen->makespan() < best->makespan())) {
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
