// One pre-LN GPT-2 transformer layer on the CPU reference kernels:
//   h = x + proj(attention(qkv(LN1(x)))),   y = h + fc2(gelu(fc1(LN2(h)))).
// Forward keeps an activation record per micro-batch, so several micro-batches can be in flight
// (1F1B); the backward is split like zero-bubble schedules split it: backwardInput (B) gives the
// input gradient, keeps the linears' output gradients and frees the part of the record W does
// not read (all but the linears' inputs), backwardWeight (W) turns those into parameter
// gradients (accumulated) and frees the rest.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include <pipescope/exec/model_params.h>

namespace pipescope::exec {

template <typename T>
class TransformerLayer {
  public:
    // Parameters are registered in `tracker` (when not null) as weights, grads and optimizer
    // state, activation records as activations while they live.
    TransformerLayer(const ModelShape& shape, MemoryTracker* tracker = nullptr);

    // Linear weights and the attention projections ~ N(0, stddev), biases 0, LN scales 1 and
    // shifts 0; `layer` picks this layer's random streams (its index in the whole model).
    void init(std::uint64_t seed, int layer, double stddev = 0.02);

    // x, y: rows × hidden (rows = micro_batch · seq_len). Keeps a record for `microbatch`, which
    // must not have one already.
    void forward(int microbatch, const T* x, T* y);
    // B: dx (rows × hidden, overwritten) from dy; the record stays until backwardWeight.
    void backwardInput(int microbatch, const T* dy, T* dx);
    // W: accumulates the parameter gradients of `microbatch` and frees its record.
    void backwardWeight(int microbatch);
    // B then W.
    void backward(int microbatch, const T* dy, T* dx);
    // Drops every record (a forward-only evaluation).
    void clearRecords() { records_.clear(); }
    std::size_t recordsInFlight() const { return records_.size(); }

    // ln1.gamma, ln1.beta, attn.qkv.weight, attn.qkv.bias, attn.proj.weight, attn.proj.bias,
    // ln2.gamma, ln2.beta, mlp.fc1.weight, mlp.fc1.bias, mlp.fc2.weight, mlp.fc2.bias.
    std::vector<Param<T>*> params();
    void zeroGrad();

  private:
    struct Record {
        // Each written in full by the kernel that fills it, so not zero-filled first.
        OverwrittenBuffer<T> x, ln1, mean1, rstd1, qkv, probs, attn, h, ln2, mean2, rstd2, fc1, act;
        // Filled by backwardInput: the gradients of the linears' outputs and of the LN params
        // (these accumulate, so they start at zero).
        OverwrittenBuffer<T> d_qkv, d_proj, d_fc1, d_fc2;
        std::vector<T> d_gamma1, d_beta1, d_gamma2, d_beta2;
        bool has_input_grad = false;
        TrackedBytes bytes;       // the forward's record (after B: the linears' inputs)
        TrackedBytes grad_bytes;  // the d_* above, held from backwardInput to backwardWeight
    };

    ModelShape shape_;
    MemoryTracker* tracker_;
    Param<T> ln1_gamma_, ln1_beta_, qkv_w_, qkv_b_, proj_w_, proj_b_;
    Param<T> ln2_gamma_, ln2_beta_, fc1_w_, fc1_b_, fc2_w_, fc2_b_;
    std::map<int, Record> records_;
};

}  // namespace pipescope::exec
