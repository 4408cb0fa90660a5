#include <algorithm>
#include <array>
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

    // Byte counts that do not depend on the op.
    const std::int64_t full_logits = toBytes(schedule::logitsBytes(m, m.vocab));
    const std::int64_t shard_logits = toBytes(schedule::logitsBytes(m, shard_rows));
    const std::int64_t hidden_fp32 = toBytes(schedule::hiddenBytesFp32(m));
    const bool vocab2 = config.parallel.vocab == schedule::VocabMethod::Vocab2;
    const auto act_cat = static_cast<int>(MemoryCategory::Activations);
    const auto vocab_cat = static_cast<int>(MemoryCategory::Vocab);
    const auto comm_cat = static_cast<int>(MemoryCategory::CommBuffers);
    const auto work_cat = static_cast<int>(MemoryCategory::Workspace);
    // What a split backward keeps from B to W: W's inputs and the gradients it turns into the
    // parameters' (model-math.md).
    const auto layer_held = schedule::layerWeightInputBytes(m) + schedule::layerHeldGradBytes(m);
    std::vector<std::int64_t> act_bytes(pl.layers.size());
    std::vector<std::int64_t> held_bytes(pl.layers.size());
    for (std::size_t pos = 0; pos < pl.layers.size(); ++pos) {
        act_bytes[pos] = toBytes(pl.layers[pos] * layer_act);
        held_bytes[pos] = toBytes(pl.layers[pos] * layer_held);
    }

    std::vector<RankMemory> out(static_cast<std::size_t>(s.ranks));
    // A stream runs one op at a time, so the changes of one stream come out in time order; the
    // three streams' lists are merged instead of sorting everything.
    std::array<std::vector<Change>, schedule::kStreamCount> lanes;
    std::vector<Change> both;
    std::vector<Change> ch;
    for (int r = 0; r < s.ranks; ++r) {
        const auto& ops = s.ops[static_cast<std::size_t>(r)];
        const auto& p = params[static_cast<std::size_t>(r)];
        for (auto& lane : lanes) {
            lane.clear();
        }
        std::vector<Change>& statics = lanes[0];
        // Static state from the start: transformer layers by kind, the vocabulary layers' own
        // parameters, gradients and optimizer state under "vocab".
        const auto tp = static_cast<double>(p.transformer);
        statics.push_back(
            {0, static_cast<int>(MemoryCategory::Weights), toBytes(tp * bpp.weights)});
        statics.push_back({0, static_cast<int>(MemoryCategory::Grads), toBytes(tp * bpp.grads)});
        statics.push_back(
            {0, static_cast<int>(MemoryCategory::Optimizer), toBytes(tp * bpp.optimizer)});
        statics.push_back({0, vocab_cat, toBytes(static_cast<double>(p.vocab) * bpp.total())});

        double per_microbatch = 0;  // activations of one micro-batch through all chunks
        for (int c = 0; c < pl.chunks; ++c) {
            per_microbatch += pl.layers[static_cast<std::size_t>(pl.position(r, c))] * layer_act;
        }
        for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
            const auto& o = ops[static_cast<std::size_t>(i)];
            const auto& t = timing.times[static_cast<std::size_t>(graph.node(r, i))];
            const int pos = o.kind == OpKind::Opt ? 0 : pl.position(r, o.chunk);
            const bool on_layers = pos >= 0 && pos <= last;
            const std::int64_t act = on_layers ? act_bytes[static_cast<std::size_t>(pos)] : 0;
            const std::int64_t held = on_layers ? held_bytes[static_cast<std::size_t>(pos)] : 0;
            std::vector<Change>& lane = lanes[static_cast<std::size_t>(o.stream())];
            switch (o.kind) {
                case OpKind::F:
                    lane.push_back({t.start, act_cat, act});
                    if (!sharded && pos == last) {
                        // fp32 logits and softmax kept for the backward
                        lane.push_back({t.start, vocab_cat, full_logits});
                    }
                    break;
                case OpKind::B:
                    lane.push_back({t.end, act_cat, s.split_backward ? held - act : -act});
                    if (!sharded && pos == last) {
                        lane.push_back({t.end, vocab_cat, -full_logits});
                    }
                    break;
                case OpKind::W:
                    lane.push_back({t.end, act_cat, -held});
                    break;
                case OpKind::S:
                    // The shard's fp32 logits/softmax until T; vocab-2 also keeps A_d (s*b*h fp32)
                    // until barrier C has combined it (freed at that all-reduce's end).
                    lane.push_back({t.start, vocab_cat, shard_logits});
                    if (vocab2) {
                        lane.push_back({t.start, vocab_cat, hidden_fp32});
                        // A_d = P_d · W_d needs the shard's softmax P_d, as large as its logits,
                        // while S runs (the runners' workspace).
                        lane.push_back({t.start, work_cat, shard_logits});
                        lane.push_back({t.end, work_cat, -shard_logits});
                    }
                    break;
                case OpKind::T:
                    // The shard's logits and the broadcast X(i) are released when T is done.
                    lane.push_back({t.end, vocab_cat, -shard_logits});
                    lane.push_back({t.end, vocab_cat, -hidden_fp32});
                    break;
                case OpKind::SendF:
                case OpKind::SendB:
                case OpKind::RecvF:
                case OpKind::RecvB:
                case OpKind::AllReduce:
                    lane.push_back({t.start, comm_cat, o.bytes});
                    lane.push_back({t.end, comm_cat, -o.bytes});
                    if (o.collective == Collective::OutputAllReduce && vocab2) {
                        lane.push_back({t.end, vocab_cat, -hidden_fp32});
                    }
                    break;
                case OpKind::Bcast:
                    lane.push_back({t.start, comm_cat, o.bytes});
                    lane.push_back({t.end, comm_cat, -o.bytes});
                    if (o.collective == Collective::OutputBcast && o.microbatch < s.microbatches) {
                        // Every rank keeps X(i) (fp32) from the broadcast until T(i) is done.
                        lane.push_back({t.end, vocab_cat, hidden_fp32});
                    }
                    break;
                default:
                    break;
            }
        }
        // Changes of one instant apply together, so their order among themselves is free. The
        // sorts are a safety net (ops on one lane never overlap) and cost a linear check.
        const auto by_time = [](const Change& a, const Change& b) { return a.t < b.t; };
        for (auto& lane : lanes) {
            if (!std::is_sorted(lane.begin(), lane.end(), by_time)) {
                std::sort(lane.begin(), lane.end(), by_time);
            }
        }
        both.resize(lanes[0].size() + lanes[1].size());
        std::merge(lanes[0].begin(), lanes[0].end(), lanes[1].begin(), lanes[1].end(), both.begin(),
                   by_time);
        ch.resize(both.size() + lanes[2].size());
        std::merge(both.begin(), both.end(), lanes[2].begin(), lanes[2].end(), ch.begin(), by_time);

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
