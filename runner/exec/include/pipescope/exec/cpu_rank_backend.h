// The CPU backend of the interpreter: the rank's RankModel on the CPU reference kernels, buffers
// in host memory, the in-process fabric as it is.
#pragma once

#include <memory>

#include <pipescope/exec/rank_backend.h>
#include <pipescope/exec/rank_model.h>

namespace pipescope::exec {

class CpuRankBackend final : public RankBackend {
  public:
    CpuRankBackend(const schedule::Config& config, const schedule::Schedule& schedule, int rank,
                   std::uint64_t seed, MemoryTracker* tracker, double init_stddev);

    RankModel& model() { return *model_; }

    void beginOp(int, std::uint64_t, const std::string&) override {}
    void endOp(int, int) override {}

    Buffer allocate(std::int64_t floats, trace::MemoryCategory category) override;
    void copy(float* dst, const float* src, std::int64_t floats) override;
    void fill(float* dst, std::int64_t floats, float value) override;
    void scaleRows(float* x, const float* g, std::int64_t rows, std::int64_t cols) override;
    void rescaleShardSum(float* sum, const float* local_max, const float* global_max,
                         std::int64_t rows) override;
    void basisCombine(const float* a, const float* g, const float* row_max, const float* row_sum,
                      const float* global_max, const float* global_sum, float* out,
                      std::int64_t rows, std::int64_t cols) override;
    double meanLoss(const float* global_max, const float* global_sum, const float* target_logit,
                    std::int64_t rows) override;

    int chunkCount() const override { return model_->chunkCount(); }
    int chunkPosition(int chunk) const override;
    int layerCount(int chunk) const override;
    bool hasInput() const override { return model_->input() != nullptr; }
    bool hasOutput() const override { return model_->output() != nullptr; }
    void layerForward(int chunk, int layer, int microbatch, const float* x, float* y) override;
    void layerBackward(int chunk, int layer, int microbatch, const float* dy, float* dx,
                       bool whole) override;
    void layerBackwardWeight(int chunk, int layer, int microbatch) override;
    void finalNormForward(int chunk, int microbatch, const float* x, float* y) override;
    void finalNormBackward(int chunk, int microbatch, const float* dy, float* dx) override;
    void inputForward(const TokenRows& tokens, float* out) override;
    void inputBackward(const TokenRows& tokens, const float* dout) override;
    void outputForwardStats(int microbatch, const float* x, const TokenRows& tokens, float* row_max,
                            float* row_sum, float* target_logit) override;
    void outputGradientBasis(int microbatch, const float* row_max, const float* row_sum, float* a,
                             float* g) override;
    void outputBackward(int microbatch, const float* global_max, const float* global_sum,
                        const float* dloss, float* dx_part) override;
    void zeroGrads() override;
    void optimizerStep(const kernels::cpu::AdamWConfig& config, std::int64_t step) override;

    std::unique_ptr<Comm> comm(std::unique_ptr<Comm> host, int) override { return host; }

  private:
    MemoryTracker* tracker_;
    std::unique_ptr<RankModel> model_;
};

}  // namespace pipescope::exec
