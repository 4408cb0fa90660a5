#include <memory>

#include <pipescope/schedule/generate.h>

#include "generator.h"

namespace pipescope::schedule {

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
    const int extra =
        vocabExtraWarmup(config.parallel.vocab, config.parallel.pipeline) + options.extra_warmup;
    // V-Half is scheduled greedily under an activation limit; if a V needs more room than the
    // rule gives (tiny m or uneven costs), allow one more unit at a time.
    const int attempts =
        config.parallel.schedule == ScheduleKind::VHalf ? 2 * config.parallel.pipeline + 1 : 1;
    std::string error;
    for (int k = 0; k < attempts; ++k) {
        detail::Generator gen(config, placement, *costs, extra + k, options.record_timing);
        if (gen.run(&error)) {
            Schedule s;
            gen.result(&s, options.record_timing ? &out.start : nullptr,
                       options.record_timing ? &out.end : nullptr);
            out.schedule = std::move(s);
            return out;
        }
    }
    out.error = error;
    return out;
}

}  // namespace pipescope::schedule
