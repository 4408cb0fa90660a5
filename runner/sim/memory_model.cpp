#include <algorithm>
#include <cmath>

#include <pipescope/schedule/model_math.h>
#include <pipescope/sim/memory_model.h>

namespace pipescope::sim {

using schedule::Collective;
using schedule::OpKind;
using trace::MemoryCategory;

namespace {

struct Change {
    double t;
    int category;
    std::int64_t delta;
};

std::int64_t toBytes(double b) {
    return static_cast<std::int64_t>(std::llround(b));
}

}  // namespace

std::vector<RankMemory> modelMemory(const schedule::Config& config, const schedule::Schedule& s,
                                    const schedule::ExecGraph& graph,
                                    const schedule::GraphTiming& timing) {
    const auto& m = config.model;
    const auto& pl = s.placement;
    const auto bpp = schedule::bytesPerParam(m.dtype);
    const auto params = schedule::paramsPerRank(config, pl);
    const std::int64_t vocab_rows = schedule::paddedVocab(config);
    const std::int64_t shard_rows = vocab_rows / config.parallel.pipeline;
    const bool sharded = schedule::isShardedVocab(config.parallel.vocab);
    const int last = pl.positions() - 1;
    const auto layer_act = schedule::layerActivationBytes(m);

    std::vector<RankMemory> out(static_cast<std::size_t>(s.ranks));
    for (int r = 0; r < s.ranks; ++r) {
        const auto& ops = s.ops[static_cast<std::size_t>(r)];
        const auto& p = params[static_cast<std::size_t>(r)];
        std::vector<Change> ch;
        // Static state from the start: transformer layers by kind, the vocabulary layers' own
        // parameters, gradients and optimizer state under "vocab".
        const auto tp = static_cast<double>(p.transformer);
        ch.push_back({0, static_cast<int>(MemoryCategory::Weights), toBytes(tp * bpp.weights)});
        ch.push_back({0, static_cast<int>(MemoryCategory::Grads), toBytes(tp * bpp.grads)});
        ch.push_back({0, static_cast<int>(MemoryCategory::Optimizer), toBytes(tp * bpp.optimizer)});
        ch.push_back({0, static_cast<int>(MemoryCategory::Vocab),
                      toBytes(static_cast<double>(p.vocab) * bpp.total())});

        double per_microbatch = 0;  // activations of one micro-batch through all chunks
        for (int c = 0; c < pl.chunks; ++c) {
            per_microbatch += pl.layers[static_cast<std::size_t>(pl.position(r, c))] * layer_act;
        }
        for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
            const auto& o = ops[static_cast<std::size_t>(i)];
            const auto& t = timing.times[static_cast<std::size_t>(graph.node(r, i))];
            const int pos = o.kind == OpKind::Opt ? 0 : pl.position(r, o.chunk);
            const double act = pos >= 0 && pos <= last
                                   ? pl.layers[static_cast<std::size_t>(pos)] * layer_act
                                   : 0.0;
            const auto act_cat = static_cast<int>(MemoryCategory::Activations);
            const auto vocab_cat = static_cast<int>(MemoryCategory::Vocab);
            const auto comm_cat = static_cast<int>(MemoryCategory::CommBuffers);
            switch (o.kind) {
                case OpKind::F:
                    ch.push_back({t.start, act_cat, toBytes(act)});
                    if (!sharded && pos == last) {
                        // fp32 logits and softmax kept for the backward
                        ch.push_back(
                            {t.start, vocab_cat, toBytes(schedule::logitsBytes(m, m.vocab))});
                    }
                    break;
                case OpKind::B:
                    if (!s.split_backward) {
                        ch.push_back({t.end, act_cat, -toBytes(act)});
                    }
                    if (!sharded && pos == last) {
                        ch.push_back(
                            {t.end, vocab_cat, -toBytes(schedule::logitsBytes(m, m.vocab))});
                    }
                    break;
                case OpKind::W:
                    ch.push_back({t.end, act_cat, -toBytes(act)});
                    break;
                case OpKind::S:
                    // The shard's fp32 logits/softmax until T; vocab-2 also keeps A_d (s*b*h fp32)
                    // until barrier C has combined it (freed at that all-reduce's end).
                    ch.push_back(
                        {t.start, vocab_cat, toBytes(schedule::logitsBytes(m, shard_rows))});
                    if (config.parallel.vocab == schedule::VocabMethod::Vocab2) {
                        ch.push_back({t.start, vocab_cat, toBytes(schedule::hiddenBytesFp32(m))});
                    }
                    break;
                case OpKind::T:
                    ch.push_back(
                        {t.end, vocab_cat, -toBytes(schedule::logitsBytes(m, shard_rows))});
                    break;
                case OpKind::SendF:
                case OpKind::SendB:
                case OpKind::RecvF:
                case OpKind::RecvB:
                case OpKind::AllReduce:
                    ch.push_back({t.start, comm_cat, o.bytes});
                    ch.push_back({t.end, comm_cat, -o.bytes});
                    if (o.collective == Collective::OutputAllReduce &&
                        config.parallel.vocab == schedule::VocabMethod::Vocab2) {
                        ch.push_back({t.end, vocab_cat, -toBytes(schedule::hiddenBytesFp32(m))});
                    }
                    break;
                case OpKind::Bcast:
                    ch.push_back({t.start, comm_cat, o.bytes});
                    ch.push_back({t.end, comm_cat, -o.bytes});
                    if (o.collective == Collective::OutputBcast && o.microbatch < s.microbatches) {
                        // Every rank keeps X(i) (fp32) from the broadcast until T(i) is done.
                        ch.push_back({t.end, vocab_cat, toBytes(schedule::hiddenBytesFp32(m))});
                    }
                    break;
                default:
                    break;
            }
            if (o.kind == OpKind::T) {
                ch.push_back({t.end, static_cast<int>(MemoryCategory::Vocab),
                              -toBytes(schedule::hiddenBytesFp32(m))});
            }
        }
        // Changes of one instant apply together, so their order among themselves is free.
        const auto by_time = [](const Change& a, const Change& b) { return a.t < b.t; };
        if (!std::is_sorted(ch.begin(), ch.end(), by_time)) {
            std::sort(ch.begin(), ch.end(), by_time);
        }

        RankMemory& rm = out[static_cast<std::size_t>(r)];
        std::array<std::int64_t, kCategories> level{};
        std::int64_t act_peak = 0;
        for (std::size_t k = 0; k < ch.size();) {
            const double t = ch[k].t;
            std::array<bool, kCategories> touched{};
            for (; k < ch.size() && ch[k].t == t; ++k) {
                level[static_cast<std::size_t>(ch[k].category)] += ch[k].delta;
                touched[static_cast<std::size_t>(ch[k].category)] = true;
            }
            std::int64_t total = 0;
            for (int c = 0; c < kCategories; ++c) {
                total += level[static_cast<std::size_t>(c)];
                if (touched[static_cast<std::size_t>(c)]) {
                    rm.levels.push_back(
                        {t, static_cast<MemoryCategory>(c), level[static_cast<std::size_t>(c)]});
                }
            }
            if (total > rm.peak_bytes) {
                rm.peak_bytes = total;
                rm.peak_t = t;
                rm.at_peak = level;
            }
            act_peak =
                std::max(act_peak, level[static_cast<std::size_t>(MemoryCategory::Activations)]);
        }
        rm.peak_activation_microbatches =
            per_microbatch > 0 ? static_cast<double>(act_peak) / per_microbatch : 0.0;
    }
    return out;
}

}  // namespace pipescope::sim
