// The model's ops on the device: transformer layers, the final LayerNorm, the vocabulary layers'
// shards and AdamW, each issued on the calling lane's stream (cuda_rank_backend_impl.h).
#include <pipescope/exec/vocab_layers.h>

#include "cuda_rank_backend_impl.h"

namespace pipescope::cuda::detail {

CudaRankBackend::Layer::Record& CudaRankBackend::record(Layer& layer, int microbatch) {
    std::lock_guard<std::mutex> lock(records_m_);
    const auto it = layer.records.find(microbatch);
    if (it == layer.records.end()) {
        throw std::logic_error("rank " + std::to_string(rank_) +
                               ": no activations kept for micro-batch " +
                               std::to_string(microbatch));
    }
    return it->second;
}

void CudaRankBackend::layerForward(int chunk, int layer_index, int microbatch, const float* x,
                                   float* y) {
    Layer& L = chunks_[idx(chunk)].layers[idx(layer_index)];
    const kg::Exec& ex = exec();
    const std::int64_t rows = shape_.rows(), h = shape_.hidden, f = shape_.ffn;
    const std::int64_t s = shape_.seq_len, heads = shape_.heads, b = shape_.micro_batch;
    const auto act = MemoryCategory::Activations;
    Layer::Record r;
    r.x = allocate(rows * h, act);
    r.ln1 = allocate(rows * h, act);
    r.mean1 = allocate(rows, act);
    r.rstd1 = allocate(rows, act);
    r.qkv = allocate(rows * 3 * h, act);
    r.probs = allocate(b * heads * s * s, act);
    r.attn = allocate(rows * h, act);
    r.h = allocate(rows * h, act);
    r.ln2 = allocate(rows * h, act);
    r.mean2 = allocate(rows, act);
    r.rstd2 = allocate(rows, act);
    r.fc1 = allocate(rows * f, act);
    r.act = allocate(rows * f, act);
    Buffer scores = allocate(kg::attentionWorkspace(heads, s), MemoryCategory::Workspace);
    const float eps = static_cast<float>(exec::kLayerNormEps);
    auto& p = L.p;
    copy(r.x.ptr(), x, rows * h);
    kg::layerNormForward<float>(ex, r.x.ptr(), p[0].value.ptr(), p[1].value.ptr(), r.ln1.ptr(),
                                r.mean1.ptr(), r.rstd1.ptr(), rows, h, eps);
    kg::linearForward<float>(ex, r.ln1.ptr(), p[2].value.ptr(), p[3].value.ptr(), r.qkv.ptr(), rows,
                             h, 3 * h);
    kg::attentionForward<float>(ex, r.qkv.ptr(), r.attn.ptr(), r.probs.ptr(), scores.ptr(), b, s,
                                heads, shape_.headDim());
    kg::linearForward<float>(ex, r.attn.ptr(), p[4].value.ptr(), p[5].value.ptr(), r.h.ptr(), rows,
                             h, h);
    kg::add<float>(ex, r.h.ptr(), r.x.ptr(), r.h.ptr(), rows * h);
    kg::layerNormForward<float>(ex, r.h.ptr(), p[6].value.ptr(), p[7].value.ptr(), r.ln2.ptr(),
                                r.mean2.ptr(), r.rstd2.ptr(), rows, h, eps);
    kg::linearForward<float>(ex, r.ln2.ptr(), p[8].value.ptr(), p[9].value.ptr(), r.fc1.ptr(), rows,
                             h, f);
    kg::geluForward<float>(ex, r.fc1.ptr(), r.act.ptr(), rows * f);
    kg::linearForward<float>(ex, r.act.ptr(), p[10].value.ptr(), p[11].value.ptr(), y, rows, f, h);
    kg::add<float>(ex, y, r.h.ptr(), y, rows * h);
    std::lock_guard<std::mutex> lock(records_m_);
    if (!L.records.emplace(microbatch, std::move(r)).second) {
        throw std::logic_error("rank " + std::to_string(rank_) + ": micro-batch " +
                               std::to_string(microbatch) + " is already in flight");
    }
}

void CudaRankBackend::layerBackward(int chunk, int layer_index, int microbatch, const float* dy,
                                    float* dx, bool whole) {
    Layer& L = chunks_[idx(chunk)].layers[idx(layer_index)];
    Layer::Record& r = record(L, microbatch);
    const kg::Exec& ex = exec();
    const std::int64_t rows = shape_.rows(), h = shape_.hidden, f = shape_.ffn;
    const std::int64_t s = shape_.seq_len, heads = shape_.heads, b = shape_.micro_batch;
    const auto act = MemoryCategory::Activations;
    auto& p = L.p;
    r.d_fc2 = allocate(rows * h, act);
    copy(r.d_fc2.ptr(), dy, rows * h);
    // MLP branch: d act = dy · W2, d fc1 = gelu'(fc1) · d act.
    r.d_fc1 = allocate(rows * f, act);
    kg::linearBackwardInput<float>(ex, dy, p[10].value.ptr(), r.d_fc1.ptr(), rows, f, h);
    kg::geluBackward<float>(ex, r.d_fc1.ptr(), r.fc1.ptr(), r.d_fc1.ptr(), rows * f);
    Buffer d_ln = allocate(rows * h, MemoryCategory::Workspace);
    kg::linearBackwardInput<float>(ex, r.d_fc1.ptr(), p[8].value.ptr(), d_ln.ptr(), rows, h, f);
    // dh = dy + LN2'(d_ln); LN parameter gradients are held for W.
    r.d_gamma2 = allocate(h, act);
    r.d_beta2 = allocate(h, act);
    r.d_proj = allocate(rows * h, act);
    kg::layerNormBackward<float>(ex, d_ln.ptr(), r.h.ptr(), p[6].value.ptr(), r.mean2.ptr(),
                                 r.rstd2.ptr(), r.d_proj.ptr(), r.d_gamma2.ptr(), r.d_beta2.ptr(),
                                 rows, h);
    kg::add<float>(ex, r.d_proj.ptr(), dy, r.d_proj.ptr(), rows * h);
    // Attention branch.
    Buffer d_attn = allocate(rows * h, MemoryCategory::Workspace);
    kg::linearBackwardInput<float>(ex, r.d_proj.ptr(), p[4].value.ptr(), d_attn.ptr(), rows, h, h);
    r.d_qkv = allocate(rows * 3 * h, act);
    Buffer dprobs = allocate(kg::attentionWorkspace(heads, s), MemoryCategory::Workspace);
    kg::attentionBackward<float>(ex, d_attn.ptr(), r.qkv.ptr(), r.probs.ptr(), r.d_qkv.ptr(),
                                 dprobs.ptr(), dprobs.ptr(), b, s, heads, shape_.headDim());
    kg::linearBackwardInput<float>(ex, r.d_qkv.ptr(), p[2].value.ptr(), d_ln.ptr(), rows, h, 3 * h);
    r.d_gamma1 = allocate(h, act);
    r.d_beta1 = allocate(h, act);
    kg::layerNormBackward<float>(ex, d_ln.ptr(), r.x.ptr(), p[0].value.ptr(), r.mean1.ptr(),
                                 r.rstd1.ptr(), dx, r.d_gamma1.ptr(), r.d_beta1.ptr(), rows, h);
    kg::add<float>(ex, dx, r.d_proj.ptr(), dx, rows * h);
    r.has_input_grad = true;
    // W reads only the linears' inputs (ln1, attn, ln2, act) besides the gradients above: the
    // rest of the record goes now, as on the CPU. The memory returns to the lane in stream order
    // (reused by this op's next allocation of its size, or released when the op ends).
    for (Buffer* done :
         {&r.x, &r.mean1, &r.rstd1, &r.qkv, &r.probs, &r.h, &r.mean2, &r.rstd2, &r.fc1}) {
        *done = Buffer();
    }
    if (whole) {
        layerBackwardWeight(chunk, layer_index, microbatch);
    }
}

void CudaRankBackend::layerBackwardWeight(int chunk, int layer_index, int microbatch) {
    Layer& L = chunks_[idx(chunk)].layers[idx(layer_index)];
    Layer::Record& r = record(L, microbatch);
    if (!r.has_input_grad) {
        throw std::logic_error("W before B for micro-batch " + std::to_string(microbatch));
    }
    const kg::Exec& ex = exec();
    const std::int64_t rows = shape_.rows(), h = shape_.hidden, f = shape_.ffn;
    auto& p = L.p;
    kg::linearBackwardWeight<float>(ex, r.d_fc2.ptr(), r.act.ptr(), p[10].grad.ptr(),
                                    p[11].grad.ptr(), rows, f, h);
    kg::linearBackwardWeight<float>(ex, r.d_fc1.ptr(), r.ln2.ptr(), p[8].grad.ptr(),
                                    p[9].grad.ptr(), rows, h, f);
    kg::linearBackwardWeight<float>(ex, r.d_proj.ptr(), r.attn.ptr(), p[4].grad.ptr(),
                                    p[5].grad.ptr(), rows, h, h);
    kg::linearBackwardWeight<float>(ex, r.d_qkv.ptr(), r.ln1.ptr(), p[2].grad.ptr(),
                                    p[3].grad.ptr(), rows, h, 3 * h);
    kg::add<float>(ex, p[0].grad.ptr(), r.d_gamma1.ptr(), p[0].grad.ptr(), h);
    kg::add<float>(ex, p[1].grad.ptr(), r.d_beta1.ptr(), p[1].grad.ptr(), h);
    kg::add<float>(ex, p[6].grad.ptr(), r.d_gamma2.ptr(), p[6].grad.ptr(), h);
    kg::add<float>(ex, p[7].grad.ptr(), r.d_beta2.ptr(), p[7].grad.ptr(), h);
    std::lock_guard<std::mutex> lock(records_m_);
    L.records.erase(microbatch);
}

void CudaRankBackend::finalNormForward(int chunk, int microbatch, const float* x, float* y) {
    FinalNormPiece& n = *chunks_[idx(chunk)].final_norm;
    const std::int64_t rows = shape_.rows(), h = shape_.hidden;
    FinalNormPiece::Record r;
    r.x = allocate(rows * h, MemoryCategory::Activations);
    r.mean = allocate(rows, MemoryCategory::Activations);
    r.rstd = allocate(rows, MemoryCategory::Activations);
    copy(r.x.ptr(), x, rows * h);
    kg::layerNormForward<float>(exec(), r.x.ptr(), n.gamma.value.ptr(), n.beta.value.ptr(), y,
                                r.mean.ptr(), r.rstd.ptr(), rows, h,
                                static_cast<float>(exec::kLayerNormEps));
    std::lock_guard<std::mutex> lock(records_m_);
    n.records.insert_or_assign(microbatch, std::move(r));
}

void CudaRankBackend::finalNormBackward(int chunk, int microbatch, const float* dy, float* dx) {
    FinalNormPiece& n = *chunks_[idx(chunk)].final_norm;
    FinalNormPiece::Record r;
    {
        std::lock_guard<std::mutex> lock(records_m_);
        const auto it = n.records.find(microbatch);
        if (it == n.records.end()) {
            throw std::logic_error("final LayerNorm: no record of micro-batch " +
                                   std::to_string(microbatch));
        }
        r = std::move(it->second);
        n.records.erase(it);
    }
    kg::layerNormBackward<float>(exec(), dy, r.x.ptr(), n.gamma.value.ptr(), r.mean.ptr(),
                                 r.rstd.ptr(), dx, n.gamma.grad.ptr(), n.beta.grad.ptr(),
                                 shape_.rows(), shape_.hidden);
}

void CudaRankBackend::inputForward(const TokenRows& tokens, float* out) {
    Buffer ids = tokensOnDevice(tokens.inputs);
    const auto* t = reinterpret_cast<const std::int32_t*>(ids.ptr());
    kg::embeddingForward<float>(exec(), t, token_.value.ptr(), out, shape_.rows(), shape_.hidden,
                                input_shard_);
    if (owns_position_) {
        kg::positionEmbeddingForward<float>(exec(), out, position_.value.ptr(), shape_.micro_batch,
                                            shape_.seq_len, shape_.hidden);
    }
}

void CudaRankBackend::inputBackward(const TokenRows& tokens, const float* dout) {
    Buffer ids = tokensOnDevice(tokens.inputs);
    const auto* t = reinterpret_cast<const std::int32_t*>(ids.ptr());
    kg::embeddingBackward<float>(exec(), t, dout, token_.grad.ptr(), shape_.rows(), shape_.hidden,
                                 input_shard_);
    if (owns_position_) {
        kg::positionEmbeddingBackward<float>(exec(), dout, position_.grad.ptr(), shape_.micro_batch,
                                             shape_.seq_len, shape_.hidden);
    }
}

void CudaRankBackend::outputForwardStats(int microbatch, const float* x, const TokenRows& tokens,
                                         float* row_max, float* row_sum, float* target_logit) {
    const std::int64_t rows = shape_.rows(), h = shape_.hidden, n = output_shard_.size();
    OutputRecord r;
    r.x = allocate(rows * h, MemoryCategory::Vocab);
    copy(r.x.ptr(), x, rows * h);
    r.targets = tokensOnDevice(tokens.targets, MemoryCategory::Vocab);
    r.logits = allocate(rows * n, MemoryCategory::Vocab);
    kg::linearForward<float>(exec(), x, output_w_.value.ptr(), nullptr, r.logits.ptr(), rows, h, n);
    kg::vocabShardStats<float>(exec(), r.logits.ptr(),
                               reinterpret_cast<const std::int32_t*>(r.targets.ptr()), row_max,
                               row_sum, target_logit, rows, output_shard_);
    std::lock_guard<std::mutex> lock(records_m_);
    output_records_.insert_or_assign(microbatch, std::move(r));
}

void CudaRankBackend::outputGradientBasis(int microbatch, const float* row_max,
                                          const float* row_sum, float* a, float* g) {
    const std::int64_t rows = shape_.rows(), h = shape_.hidden, n = output_shard_.size();
    OutputRecord* r = nullptr;
    {
        std::lock_guard<std::mutex> lock(records_m_);
        r = &output_records_.at(microbatch);
    }
    // A_d = P_d · W_d with the shard-local softmax P_d; G_d = W_d[target] (zero elsewhere).
    Buffer p = allocate(rows * n, MemoryCategory::Workspace);
    kg::softmaxFromStats<float>(exec(), r->logits.ptr(), row_max, row_sum, p.ptr(), rows, n);
    kg::linearBackwardInput<float>(exec(), p.ptr(), output_w_.value.ptr(), a, rows, h, n);
    kg::embeddingForward<float>(exec(), reinterpret_cast<const std::int32_t*>(r->targets.ptr()),
                                output_w_.value.ptr(), g, rows, h, output_shard_);
}

void CudaRankBackend::outputBackward(int microbatch, const float* global_max,
                                     const float* global_sum, const float* dloss, float* dx_part) {
    const std::int64_t rows = shape_.rows(), h = shape_.hidden, n = output_shard_.size();
    OutputRecord r;
    {
        std::lock_guard<std::mutex> lock(records_m_);
        const auto it = output_records_.find(microbatch);
        if (it == output_records_.end()) {
            throw std::logic_error("output layer: no record of micro-batch " +
                                   std::to_string(microbatch));
        }
        r = std::move(it->second);
        output_records_.erase(it);
    }
    const kg::Exec& ex = exec();
    // dlogits overwrite the logits (T does not need them afterwards).
    kg::vocabShardCrossEntropyBackward<float>(
        ex, r.logits.ptr(), reinterpret_cast<const std::int32_t*>(r.targets.ptr()), global_max,
        global_sum, dloss, r.logits.ptr(), rows, output_shard_);
    if (dx_part != nullptr) {
        // With an empty shard the GEMM's inner size is 0 and it writes zeros.
        kg::linearBackwardInput<float>(ex, r.logits.ptr(), output_w_.value.ptr(), dx_part, rows, h,
                                       n);
    }
    kg::linearBackwardWeight<float>(ex, r.logits.ptr(), r.x.ptr(), output_w_.grad.ptr(), nullptr,
                                    rows, h, n);
}

std::vector<DParam*> CudaRankBackend::params() {
    std::vector<DParam*> out;
    for (Chunk& c : chunks_) {
        for (Layer& l : c.layers) {
            for (DParam& p : l.p) {
                out.push_back(&p);
            }
        }
        if (c.final_norm) {
            out.push_back(&c.final_norm->gamma);
            out.push_back(&c.final_norm->beta);
        }
    }
    if (has_input_) {
        out.push_back(&token_);
        if (owns_position_) {
            out.push_back(&position_);
        }
    }
    if (has_output_) {
        out.push_back(&output_w_);
    }
    return out;
}

void CudaRankBackend::zeroGrads() {
    for (DParam* p : params()) {
        if (p->size > 0) {
            check(cudaMemsetAsync(p->grad.ptr(), 0,
                                  static_cast<std::size_t>(p->size) * sizeof(float), stream()),
                  "cudaMemsetAsync (gradients)");
        }
    }
}

void CudaRankBackend::optimizerStep(const kernels::cpu::AdamWConfig& config, std::int64_t step) {
    kg::AdamWConfig c{config.lr, config.beta1, config.beta2, config.eps, config.weight_decay};
    kg::AdamWConfig no_decay = c;
    no_decay.weight_decay = 0.0;
    for (DParam* p : params()) {
        kg::adamwStep(exec(), p->value.ptr(), p->grad.ptr(), p->m.ptr(), p->v.ptr(), p->size,
                      p->decay ? c : no_decay, step);
    }
    if (events_) {
        // The step waited for the last op of every lane: when it is done, so is the rank's
        // iteration, and the iteration's end in the trace is its end on the device.
        check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize (end of the iteration)");
    }
}

}  // namespace pipescope::cuda::detail
