#include <algorithm>
#include <cassert>
#include <span>

#include <pipescope/exec/transformer_layer.h>
#include <pipescope/kernels/cpu/ops.h>

#include "scratch.h"

namespace pipescope::exec {

namespace k = kernels::cpu;

template <typename T>
TransformerLayer<T>::TransformerLayer(const ModelShape& shape, MemoryTracker* tracker)
    : shape_(shape),
      tracker_(tracker),
      ln1_gamma_("ln1.gamma", shape.hidden, false, tracker),
      ln1_beta_("ln1.beta", shape.hidden, false, tracker),
      qkv_w_("attn.qkv.weight", std::int64_t{3} * shape.hidden * shape.hidden, true, tracker),
      qkv_b_("attn.qkv.bias", std::int64_t{3} * shape.hidden, false, tracker),
      proj_w_("attn.proj.weight", std::int64_t{shape.hidden} * shape.hidden, true, tracker),
      proj_b_("attn.proj.bias", shape.hidden, false, tracker),
      ln2_gamma_("ln2.gamma", shape.hidden, false, tracker),
      ln2_beta_("ln2.beta", shape.hidden, false, tracker),
      fc1_w_("mlp.fc1.weight", std::int64_t{shape.ffn} * shape.hidden, true, tracker),
      fc1_b_("mlp.fc1.bias", shape.ffn, false, tracker),
      fc2_w_("mlp.fc2.weight", std::int64_t{shape.hidden} * shape.ffn, true, tracker),
      fc2_b_("mlp.fc2.bias", shape.hidden, false, tracker) {
    std::fill(ln1_gamma_.value.begin(), ln1_gamma_.value.end(), T(1));
    std::fill(ln2_gamma_.value.begin(), ln2_gamma_.value.end(), T(1));
}

template <typename T>
void TransformerLayer<T>::init(std::uint64_t seed, int layer, double stddev) {
    int tensor = 0;
    for (Param<T>* p : params()) {
        const bool is_gamma = p == &ln1_gamma_ || p == &ln2_gamma_;
        if (p->decay) {
            fillNormal(std::span<T>(p->value), seed, init_stream::layerTensor(layer, tensor), 0,
                       stddev);
        } else {
            std::fill(p->value.begin(), p->value.end(), is_gamma ? T(1) : T(0));
        }
        std::fill(p->m.begin(), p->m.end(), T(0));
        std::fill(p->v.begin(), p->v.end(), T(0));
        p->zeroGrad();
        ++tensor;
    }
}

template <typename T>
void TransformerLayer<T>::forward(int microbatch, const T* x, T* y) {
    assert(records_.find(microbatch) == records_.end());
    const std::int64_t rows = shape_.rows();
    const std::int64_t h = shape_.hidden;
    const std::int64_t f = shape_.ffn;
    const std::int64_t s = shape_.seq_len;
    const std::int64_t heads = shape_.heads;

    Record r;
    r.x.assign(x, x + rows * h);
    r.ln1.resize(static_cast<std::size_t>(rows * h));
    r.mean1.resize(static_cast<std::size_t>(rows));
    r.rstd1.resize(static_cast<std::size_t>(rows));
    r.qkv.resize(static_cast<std::size_t>(rows * 3 * h));
    r.probs.resize(static_cast<std::size_t>(shape_.micro_batch * heads * s * s));
    r.attn.resize(static_cast<std::size_t>(rows * h));
    r.h.resize(static_cast<std::size_t>(rows * h));
    r.ln2.resize(static_cast<std::size_t>(rows * h));
    r.mean2.resize(static_cast<std::size_t>(rows));
    r.rstd2.resize(static_cast<std::size_t>(rows));
    r.fc1.resize(static_cast<std::size_t>(rows * f));
    r.act.resize(static_cast<std::size_t>(rows * f));

    k::layerNormForward(r.x.data(), ln1_gamma_.value.data(), ln1_beta_.value.data(), r.ln1.data(),
                        r.mean1.data(), r.rstd1.data(), rows, h, static_cast<T>(kLayerNormEps));
    k::linearForward(r.ln1.data(), qkv_w_.value.data(), qkv_b_.value.data(), r.qkv.data(), rows, h,
                     3 * h);
    k::attentionForward(r.qkv.data(), r.attn.data(), r.probs.data(),
                        std::int64_t{shape_.micro_batch}, s, heads, std::int64_t{shape_.headDim()});
    // h = x + proj(attn)
    k::linearForward(r.attn.data(), proj_w_.value.data(), proj_b_.value.data(), r.h.data(), rows, h,
                     h);
    for (std::int64_t i = 0; i < rows * h; ++i) {
        r.h[static_cast<std::size_t>(i)] += r.x[static_cast<std::size_t>(i)];
    }
    k::layerNormForward(r.h.data(), ln2_gamma_.value.data(), ln2_beta_.value.data(), r.ln2.data(),
                        r.mean2.data(), r.rstd2.data(), rows, h, static_cast<T>(kLayerNormEps));
    k::linearForward(r.ln2.data(), fc1_w_.value.data(), fc1_b_.value.data(), r.fc1.data(), rows, h,
                     f);
    k::geluForward(r.fc1.data(), r.act.data(), rows * f);
    // y = h + fc2(act)
    k::linearForward(r.act.data(), fc2_w_.value.data(), fc2_b_.value.data(), y, rows, f, h);
    for (std::int64_t i = 0; i < rows * h; ++i) {
        y[i] += r.h[static_cast<std::size_t>(i)];
    }

    const std::size_t elements = r.x.size() + r.ln1.size() + r.mean1.size() + r.rstd1.size() +
                                 r.qkv.size() + r.probs.size() + r.attn.size() + r.h.size() +
                                 r.ln2.size() + r.mean2.size() + r.rstd2.size() + r.fc1.size() +
                                 r.act.size();
    r.bytes = TrackedBytes(tracker_, trace::MemoryCategory::Activations,
                           static_cast<std::int64_t>(elements * sizeof(T)));
    records_.emplace(microbatch, std::move(r));
}

template <typename T>
void TransformerLayer<T>::backwardInput(int microbatch, const T* dy, T* dx) {
    const auto it = records_.find(microbatch);
    assert(it != records_.end() && !it->second.has_input_grad);
    Record& r = it->second;
    const std::int64_t rows = shape_.rows();
    const std::int64_t h = shape_.hidden;
    const std::int64_t f = shape_.ffn;
    const std::int64_t s = shape_.seq_len;

    r.d_fc2.assign(dy, dy + rows * h);
    // MLP branch: d act = dy · W2, d fc1 = gelu'(fc1) · d act.
    r.d_fc1.resize(static_cast<std::size_t>(rows * f));
    k::linearBackwardInput(dy, fc2_w_.value.data(), r.d_fc1.data(), rows, f, h);
    k::geluBackward(r.d_fc1.data(), r.fc1.data(), r.d_fc1.data(), rows * f);
    // Scratch of this call (d_ln, d_attn, the attention backward's workspace), counted as the
    // CUDA backend counts its own: workspace, for as long as the call runs.
    const auto scratch_elements = 2 * rows * h + k::attentionBackwardWorkspace(s);
    const TrackedBytes scratch(tracker_, trace::MemoryCategory::Workspace,
                               static_cast<std::int64_t>(scratch_elements * sizeof(T)));
    // The memory is this thread's, reused from call to call (scratch.h); every part is
    // written before it is read.
    T* const d_ln = detail::threadScratch<T>(scratch_elements);
    T* const d_attn = d_ln + rows * h;
    T* const workspace = d_attn + rows * h;
    k::linearBackwardInput(r.d_fc1.data(), fc1_w_.value.data(), d_ln, rows, h, f);
    // dh = dy + LN2'(d_ln); LN parameter gradients are held for W.
    r.d_gamma2 = zeros<T>(h);
    r.d_beta2 = zeros<T>(h);
    r.d_proj.resize(static_cast<std::size_t>(rows * h));
    k::layerNormBackward(d_ln, r.h.data(), ln2_gamma_.value.data(), r.mean2.data(), r.rstd2.data(),
                         r.d_proj.data(), r.d_gamma2.data(), r.d_beta2.data(), rows, h);
    for (std::int64_t i = 0; i < rows * h; ++i) {
        r.d_proj[static_cast<std::size_t>(i)] += dy[i];
    }
    // Attention branch: dh is also the gradient of proj's output.
    k::linearBackwardInput(r.d_proj.data(), proj_w_.value.data(), d_attn, rows, h, h);
    r.d_qkv.resize(static_cast<std::size_t>(rows * 3 * h));
    k::attentionBackward(d_attn, r.qkv.data(), r.probs.data(), r.d_qkv.data(), workspace,
                         std::int64_t{shape_.micro_batch}, s, std::int64_t{shape_.heads},
                         std::int64_t{shape_.headDim()});
    k::linearBackwardInput(r.d_qkv.data(), qkv_w_.value.data(), d_ln, rows, h, 3 * h);
    r.d_gamma1 = zeros<T>(h);
    r.d_beta1 = zeros<T>(h);
    k::layerNormBackward(d_ln, r.x.data(), ln1_gamma_.value.data(), r.mean1.data(), r.rstd1.data(),
                         dx, r.d_gamma1.data(), r.d_beta1.data(), rows, h);
    for (std::int64_t i = 0; i < rows * h; ++i) {
        dx[i] += r.d_proj[static_cast<std::size_t>(i)];
    }
    // Held until backwardWeight (a split backward keeps them across other ops): activation
    // memory, as the CUDA backend counts it.
    const std::size_t grads = r.d_qkv.size() + r.d_proj.size() + r.d_fc1.size() + r.d_fc2.size() +
                              r.d_gamma1.size() + r.d_beta1.size() + r.d_gamma2.size() +
                              r.d_beta2.size();
    // W reads only the linears' inputs (ln1, attn, ln2, act) besides these gradients: the rest of
    // the record goes now, which is what lets a zero-bubble schedule defer W within 1F1B's memory.
    for (OverwrittenBuffer<T>* v :
         {&r.x, &r.mean1, &r.rstd1, &r.qkv, &r.probs, &r.h, &r.mean2, &r.rstd2, &r.fc1}) {
        OverwrittenBuffer<T>().swap(*v);
    }
    r.bytes.shrinkTo(static_cast<std::int64_t>(
        (r.ln1.size() + r.attn.size() + r.ln2.size() + r.act.size()) * sizeof(T)));
    r.grad_bytes = TrackedBytes(tracker_, trace::MemoryCategory::Activations,
                                static_cast<std::int64_t>(grads * sizeof(T)));
    r.has_input_grad = true;
}

template <typename T>
void TransformerLayer<T>::backwardWeight(int microbatch) {
    const auto it = records_.find(microbatch);
    assert(it != records_.end() && it->second.has_input_grad);
    const Record& r = it->second;
    const std::int64_t rows = shape_.rows();
    const std::int64_t h = shape_.hidden;
    const std::int64_t f = shape_.ffn;

    k::linearBackwardWeight(r.d_fc2.data(), r.act.data(), fc2_w_.grad.data(), fc2_b_.grad.data(),
                            rows, f, h);
    k::linearBackwardWeight(r.d_fc1.data(), r.ln2.data(), fc1_w_.grad.data(), fc1_b_.grad.data(),
                            rows, h, f);
    k::linearBackwardWeight(r.d_proj.data(), r.attn.data(), proj_w_.grad.data(),
                            proj_b_.grad.data(), rows, h, h);
    k::linearBackwardWeight(r.d_qkv.data(), r.ln1.data(), qkv_w_.grad.data(), qkv_b_.grad.data(),
                            rows, h, 3 * h);
    for (std::size_t i = 0; i < static_cast<std::size_t>(h); ++i) {
        ln1_gamma_.grad[i] += r.d_gamma1[i];
        ln1_beta_.grad[i] += r.d_beta1[i];
        ln2_gamma_.grad[i] += r.d_gamma2[i];
        ln2_beta_.grad[i] += r.d_beta2[i];
    }
    records_.erase(it);
}

template <typename T>
void TransformerLayer<T>::backward(int microbatch, const T* dy, T* dx) {
    backwardInput(microbatch, dy, dx);
    backwardWeight(microbatch);
}

template <typename T>
std::vector<Param<T>*> TransformerLayer<T>::params() {
    return {&ln1_gamma_, &ln1_beta_, &qkv_w_, &qkv_b_, &proj_w_, &proj_b_,
            &ln2_gamma_, &ln2_beta_, &fc1_w_, &fc1_b_, &fc2_w_,  &fc2_b_};
}

template <typename T>
void TransformerLayer<T>::zeroGrad() {
    for (Param<T>* p : params()) {
        p->zeroGrad();
    }
}

template class TransformerLayer<float>;
template class TransformerLayer<double>;

}  // namespace pipescope::exec
