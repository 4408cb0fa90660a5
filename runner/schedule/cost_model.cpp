#include <algorithm>

#include <pipescope/schedule/cost_model.h>

namespace pipescope::schedule {

namespace {

// Bytes of the softmax and cross-entropy over `rows` vocabulary rows per token, fp32: write the
// logits, read them for max/sum-exp, write the probabilities (forward); read probabilities and
// write the logit gradient (backward).
double softmaxForwardBytes(const ModelConfig& m, std::int64_t rows) {
    return 3.0 * logitsBytes(m, rows);
}
double softmaxBackwardBytes(const ModelConfig& m, std::int64_t rows) {
    return 2.0 * logitsBytes(m, rows);
}

}  // namespace

AnalyticCostModel::AnalyticCostModel(const Config& config, const Placement& placement)
    : config_(config), placement_(placement) {
    for (const auto& rp : paramsPerRank(config_, placement_)) {
        rank_params_.push_back(rp.total());
    }
}

double AnalyticCostModel::gemmSeconds(double flops) const {
    const auto& hw = config_.hardware;
    return flops / (hw.peak_tflops * 1e12 * hw.gemm_efficiency);
}

double AnalyticCostModel::memorySeconds(double bytes) const {
    return bytes / (config_.hardware.memory_gbps * 1e9);
}

double AnalyticCostModel::compute(int rank, const Op& op) const {
    const ModelConfig& m = config_.model;
    const bool sharded = isShardedVocab(config_.parallel.vocab);
    const int pos = op.kind == OpKind::Opt ? 0 : placement_.position(rank, op.chunk);
    const double layers = pos >= 0 && pos < placement_.positions()
                              ? placement_.layers[static_cast<std::size_t>(pos)]
                              : 0.0;
    const bool first = pos == 0;
    const bool last = pos == placement_.positions() - 1;
    const bool split = config_.parallel.schedule == ScheduleKind::ZBH1 ||
                       config_.parallel.schedule == ScheduleKind::VHalf;
    const std::int64_t vocab = paddedVocab(config_);
    const std::int64_t shard = vocab / config_.parallel.pipeline;
    switch (op.kind) {
        case OpKind::F: {
            double t = gemmSeconds(layers * layerForwardFlops(m));
            if (!sharded && first) {
                t += memorySeconds(inputLayerForwardBytes(m));
            }
            if (!sharded && last) {
                t += gemmSeconds(outputLayerForwardFlops(m)) +
                     memorySeconds(softmaxForwardBytes(m, m.vocab));
            }
            return t;
        }
        case OpKind::B: {
            const double per_layer = split ? layerBackwardInputFlops(m) : layerBackwardFlops(m);
            double t = gemmSeconds(layers * per_layer);
            if (!sharded && last) {
                t += gemmSeconds(outputLayerBackwardFlops(m)) +
                     memorySeconds(softmaxBackwardBytes(m, m.vocab));
            }
            if (!sharded && first) {
                t += memorySeconds(inputLayerBackwardBytes(m));
            }
            return t;
        }
        case OpKind::W:
            return gemmSeconds(layers * layerBackwardWeightFlops(m));
        case OpKind::S:
            return gemmSeconds(vocabSFlops(config_)) + memorySeconds(softmaxForwardBytes(m, shard));
        case OpKind::T:
            return gemmSeconds(vocabTFlops(config_)) +
                   memorySeconds(softmaxBackwardBytes(m, shard));
        case OpKind::IF:
            return memorySeconds(inputLayerForwardBytes(m));
        case OpKind::IB:
            return memorySeconds(inputLayerBackwardBytes(m));
        case OpKind::L:
            // The loss and its gradient scale one s*b*h tensor (vocab-2) or a few s*b vectors.
            return memorySeconds(2.0 * hiddenBytesFp32(m));
        case OpKind::Opt: {
            // AdamW reads and writes weights, gradients and both moments.
            const auto params = static_cast<double>(rank_params_.at(
                static_cast<std::size_t>(std::clamp(rank, 0, placement_.ranks - 1))));
            return memorySeconds(2.0 * params * bytesPerParam(m.dtype).total());
        }
        default:
            return 0.0;
    }
}

double AnalyticCostModel::send(int, const Op& op) const {
    const auto& hw = config_.hardware;
    return hw.latency_us * 1e-6 + static_cast<double>(commBytes(config_, op)) / (hw.p2p_gbps * 1e9);
}

double AnalyticCostModel::collective(const Op& op) const {
    const auto& hw = config_.hardware;
    const int p = config_.parallel.pipeline;
    if (p <= 1) {
        return 0.0;
    }
    const auto bytes = static_cast<double>(commBytes(config_, op));
    const double bw = hw.allreduce_gbps * 1e9;
    if (op.kind == OpKind::AllReduce) {
        return hw.latency_us * 1e-6 + 2.0 * (p - 1) / p * bytes / bw;
    }
    return hw.latency_us * 1e-6 + bytes / bw;
}

std::int64_t commBytes(const Config& config, const Op& op) {
    const ModelConfig& m = config.model;
    const std::int64_t tokens = static_cast<std::int64_t>(m.seq_len) * m.micro_batch;
    const std::int64_t hidden = tokens * m.hidden;
    const std::int64_t d = dtypeBytes(m.dtype);
    switch (op.kind) {
        case OpKind::SendF:
        case OpKind::SendB:
        case OpKind::RecvF:
        case OpKind::RecvB:
            return hidden * d;
        case OpKind::Bcast:
            if (op.collective == Collective::OutputBcast) {
                // [X(i) | g(i-1)] in fp32, as the runner packs it: instance 0 has no g, instance
                // m no X, and interlaced sends X alone.
                const bool has_x = op.microbatch < config.parallel.microbatches;
                const bool has_g =
                    op.microbatch > 0 && config.parallel.vocab != VocabMethod::Interlaced;
                return 4 * ((has_x ? hidden : 0) + (has_g ? tokens : 0));
            }
            return hidden * d;  // the embedding-output gradient
        case OpKind::AllReduce:
            switch (op.collective) {
                case Collective::InputAllReduce:
                    return hidden * d;
                case Collective::OutputAllReduce:
                    // max, sum of exponentials and target logit per token; vocab-2 adds the
                    // s*b*h partial input gradient
                    return 4 * 3 * tokens +
                           (config.parallel.vocab == VocabMethod::Vocab2 ? 4 * hidden : 0);
                case Collective::OutputGradAllReduce:
                    return 4 * hidden;
                default:
                    return 0;
            }
        default:
            return 0;
    }
}

}  // namespace pipescope::schedule
