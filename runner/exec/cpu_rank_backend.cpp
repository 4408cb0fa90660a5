#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <pipescope/exec/cpu_rank_backend.h>
#include <pipescope/exec/vocab_layers.h>
#include <pipescope/kernels/cpu/cross_entropy.h>

namespace pipescope::exec {

namespace k = kernels::cpu;

CpuRankBackend::CpuRankBackend(const schedule::Config& config, const schedule::Schedule& schedule,
                               int rank, std::uint64_t seed, MemoryTracker* tracker,
                               double init_stddev)
    : tracker_(tracker),
      model_(std::make_unique<RankModel>(config, schedule, rank, seed, tracker, init_stddev)) {}

Buffer CpuRankBackend::allocate(std::int64_t floats, trace::MemoryCategory category) {
    Buffer b;
    b.memory = {new float[static_cast<std::size_t>(floats)](), [](float* p) { delete[] p; }};
    b.floats = floats;
    b.bytes = TrackedBytes(tracker_, category, floats * static_cast<std::int64_t>(sizeof(float)));
    return b;
}

void CpuRankBackend::copy(float* dst, const float* src, std::int64_t floats) {
    std::copy(src, src + floats, dst);
}

void CpuRankBackend::fill(float* dst, std::int64_t floats, float value) {
    std::fill(dst, dst + floats, value);
}

void CpuRankBackend::scaleRows(float* x, const float* g, std::int64_t rows, std::int64_t cols) {
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < cols; ++j) {
            x[r * cols + j] *= g[r];
        }
    }
}

void CpuRankBackend::rescaleShardSum(float* sum, const float* local_max, const float* global_max,
                                     std::int64_t rows) {
    for (std::int64_t r = 0; r < rows; ++r) {
        sum[r] = sum[r] > 0 ? sum[r] * std::exp(local_max[r] - global_max[r]) : 0.0f;
    }
}

void CpuRankBackend::basisCombine(const float* a, const float* g, const float* row_max,
                                  const float* row_sum, const float* global_max,
                                  const float* global_sum, float* out, std::int64_t rows,
                                  std::int64_t cols) {
    for (std::int64_t r = 0; r < rows; ++r) {
        const float scaled =
            row_sum[r] > 0 ? row_sum[r] * std::exp(row_max[r] - global_max[r]) : 0.0f;
        const float alpha = global_sum[r] > 0 ? scaled / global_sum[r] : 0.0f;
        for (std::int64_t j = 0; j < cols; ++j) {
            const std::int64_t i = r * cols + j;
            out[i] = alpha * a[i] - g[i];
        }
    }
}

double CpuRankBackend::meanLoss(const float* global_max, const float* global_sum,
                                const float* target_logit, std::int64_t rows) {
    const TrackedBytes scratch(tracker_, trace::MemoryCategory::Workspace,
                               rows * static_cast<std::int64_t>(sizeof(float)));
    std::vector<float> loss(static_cast<std::size_t>(rows));
    k::crossEntropyLossFromStats(global_max, global_sum, target_logit, loss.data(), rows);
    double total = 0;
    for (float l : loss) {
        total += l;
    }
    return total / static_cast<double>(rows);
}

int CpuRankBackend::chunkPosition(int chunk) const {
    return model_->chunk(chunk).position;
}

int CpuRankBackend::layerCount(int chunk) const {
    return static_cast<int>(model_->chunk(chunk).layers.size());
}

void CpuRankBackend::layerForward(int chunk, int layer, int microbatch, const float* x, float* y) {
    model_->chunk(chunk).layers[static_cast<std::size_t>(layer)].forward(microbatch, x, y);
}

void CpuRankBackend::layerBackward(int chunk, int layer, int microbatch, const float* dy, float* dx,
                                   bool whole) {
    auto& l = model_->chunk(chunk).layers[static_cast<std::size_t>(layer)];
    if (whole) {
        l.backward(microbatch, dy, dx);
    } else {
        l.backwardInput(microbatch, dy, dx);
    }
}

void CpuRankBackend::layerBackwardWeight(int chunk, int layer, int microbatch) {
    model_->chunk(chunk).layers[static_cast<std::size_t>(layer)].backwardWeight(microbatch);
}

void CpuRankBackend::finalNormForward(int chunk, int microbatch, const float* x, float* y) {
    model_->chunk(chunk).final_norm->forward(microbatch, x, y);
}

void CpuRankBackend::finalNormBackward(int chunk, int microbatch, const float* dy, float* dx) {
    model_->chunk(chunk).final_norm->backward(microbatch, dy, dx);
}

void CpuRankBackend::inputForward(const TokenRows& tokens, float* out) {
    model_->input()->forward(tokens.inputs.data(), out);
}

void CpuRankBackend::inputBackward(const TokenRows& tokens, const float* dout) {
    model_->input()->backward(tokens.inputs.data(), dout);
}

void CpuRankBackend::outputForwardStats(int microbatch, const float* x, const TokenRows& tokens,
                                        float* row_max, float* row_sum, float* target_logit) {
    model_->output()->forwardStats(microbatch, x, tokens.targets.data(), row_max, row_sum,
                                   target_logit);
}

void CpuRankBackend::outputGradientBasis(int microbatch, const float* row_max, const float* row_sum,
                                         float* a, float* g) {
    model_->output()->gradientBasis(microbatch, row_max, row_sum, a, g);
}

void CpuRankBackend::outputBackward(int microbatch, const float* global_max,
                                    const float* global_sum, const float* dloss, float* dx_part) {
    model_->output()->backward(microbatch, global_max, global_sum, dloss, dx_part);
}

void CpuRankBackend::zeroGrads() {
    exec::zeroGrads<float>(model_->params());
}

namespace {

// The first element of `x` that is NaN or infinite, described ("NaN"), or empty when all are
// finite.
std::string nonFinite(const std::vector<float>& x) {
    const auto bad = std::find_if(x.begin(), x.end(), [](float f) { return !std::isfinite(f); });
    if (bad == x.end()) {
        return {};
    }
    return std::isnan(*bad) ? "NaN" : "infinite";
}

}  // namespace

void CpuRankBackend::optimizerStep(const kernels::cpu::AdamWConfig& config, std::int64_t step) {
    const std::vector<Param<float>*> params = model_->params();
    adamw<float>(params, config, step);
    // A weight that is not finite makes every later loss NaN: stop at the step that did it,
    // the last iteration's included, with what went wrong and the likely cause.
    for (const auto& [name, p] : model_->namedParams()) {
        if (const std::string what = nonFinite(p->grad); !what.empty()) {
            throw std::runtime_error(
                "the gradient of " + name + " is " + what +
                (step > 1 ? ": " + divergenceCause(config.lr)
                          : " before any optimizer step: the initial model's values overflow "
                            "fp32"));
        }
        if (const std::string what = nonFinite(p->value); !what.empty()) {
            throw std::runtime_error("the optimizer step made the weights of " + name + " " + what +
                                     ": " + divergenceCause(config.lr));
        }
    }
}

}  // namespace pipescope::exec
