// The CUDA rank backend's class (private to runner/cuda): cuda_rank_backend.cpp holds its device
// resources, op bracketing, memory and communication; cuda_rank_backend_model.cpp the model's
// forward, backward and optimizer ops on kernels/cuda.
#pragma once

#include <array>
#include <cstdio>
#include <cuda_runtime.h>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pipescope/cuda/arena.h>
#include <pipescope/cuda/cuda_rank_backend.h>
#include <pipescope/cuda/lane_events.h>
#include <pipescope/cuda/lane_frees.h>
#include <pipescope/cuda/nccl_comm.h>
#include <pipescope/exec/rank_model.h>
#include <pipescope/kernels/cuda/ops.h>

#include "pinned_staging.h"

namespace pipescope::cuda::detail {

namespace kg = kernels::cuda;
using exec::Buffer;
using exec::TokenRows;
using trace::MemoryCategory;

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(e) + ": " +
                                 cudaGetErrorString(e));
    }
}

inline std::string gib(std::int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
    return text;
}

// LaneEvents' device side: CUDA events (without timing) on the lanes' streams.
class StreamEvents final : public LaneEvents::Api {
  public:
    explicit StreamEvents(std::vector<cudaStream_t> streams) : streams_(std::move(streams)) {}
    Event create() override {
        cudaEvent_t e = nullptr;
        check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        return e;
    }
    void destroy(Event e) override { (void)cudaEventDestroy(event(e)); }
    void record(Event e, int lane) override {
        check(cudaEventRecord(event(e), stream(lane)), "cudaEventRecord");
    }
    void wait(int lane, Event e) override {
        check(cudaStreamWaitEvent(stream(lane), event(e), 0), "cudaStreamWaitEvent");
    }
    bool done(Event e) override {
        const cudaError_t r = cudaEventQuery(event(e));
        if (r == cudaErrorNotReady) {
            // Not an error, but some runtimes leave it as the thread's last error, where the
            // next kernel launch check would find it.
            (void)cudaGetLastError();
            return false;
        }
        check(r, "cudaEventQuery");
        return true;
    }
    void sync(Event e) override { check(cudaEventSynchronize(event(e)), "cudaEventSynchronize"); }

  private:
    static cudaEvent_t event(Event e) { return static_cast<cudaEvent_t>(e); }
    cudaStream_t stream(int lane) const { return streams_.at(static_cast<std::size_t>(lane)); }
    std::vector<cudaStream_t> streams_;
};

// A parameter on the device: value, gradient and AdamW moments, fp32.
struct DParam {
    Buffer value, grad, m, v;
    std::int64_t size = 0;
    bool decay = true;
};

class CudaRankBackend final : public exec::RankBackend {
  public:
    CudaRankBackend(const schedule::Config& config, const schedule::Schedule& schedule, int rank,
                    exec::MemoryTracker* tracker, const CudaBackendOptions& options, int device,
                    std::int64_t arena_bytes, std::shared_ptr<NcclWorld> nccl);
    ~CudaRankBackend() override;

    void beginOp(int lane, std::uint64_t op_id, const std::string& label) override;
    void endOp(int lane, int awaited) override;
    void abandonOp(int lane) noexcept override;
    bool asyncLanes() const override { return events_ != nullptr; }
    void waitFor(int lane, std::uint64_t op_id) override { events_->waitFor(lane, op_id); }

    Buffer allocate(std::int64_t floats, MemoryCategory category) override;
    void copy(float* dst, const float* src, std::int64_t floats) override {
        if (floats > 0) {
            check(cudaMemcpyAsync(dst, src, static_cast<std::size_t>(floats) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream()),
                  "cudaMemcpyAsync (device to device)");
        }
    }
    void fill(float* dst, std::int64_t floats, float value) override;
    void scaleRows(float* x, const float* g, std::int64_t rows, std::int64_t cols) override;
    void rescaleShardSum(float* sum, const float* local_max, const float* global_max,
                         std::int64_t rows) override {
        kg::rescaleShardSum(exec(), sum, local_max, global_max, rows);
    }
    void basisCombine(const float* a, const float* g, const float* row_max, const float* row_sum,
                      const float* global_max, const float* global_sum, float* out,
                      std::int64_t rows, std::int64_t cols) override {
        kg::vocabBasisCombine<float>(exec(), a, g, row_max, row_sum, global_max, global_sum, out,
                                     rows, cols);
    }
    double meanLoss(const float* global_max, const float* global_sum, const float* target_logit,
                    std::int64_t rows) override;

    int chunkCount() const override { return static_cast<int>(chunks_.size()); }
    int chunkPosition(int chunk) const override { return chunks_[idx(chunk)].position; }
    int layerCount(int chunk) const override {
        return static_cast<int>(chunks_[idx(chunk)].layers.size());
    }
    bool hasInput() const override { return has_input_; }
    bool hasOutput() const override { return has_output_; }
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
    std::unique_ptr<exec::Comm> comm(std::unique_ptr<exec::Comm> host, int lane) override;
    void abort() override {
        if (nccl_) {
            nccl_->abort();
        }
    }

    // Device ↔ host copies on the calling lane's stream, complete on return (the staged comm).
    void toHost(float* host, const float* device, std::size_t floats);
    void toDevice(float* device, const float* host, std::size_t floats);

  private:
    struct Layer {
        // ln1.gamma, ln1.beta, qkv.w, qkv.b, proj.w, proj.b, ln2.gamma, ln2.beta, fc1.w, fc1.b,
        // fc2.w, fc2.b: the CPU TransformerLayer's order.
        std::array<DParam, 12> p;
        struct Record {
            Buffer x, ln1, mean1, rstd1, qkv, probs, attn, h, ln2, mean2, rstd2, fc1, act;
            Buffer d_qkv, d_proj, d_fc1, d_fc2, d_gamma1, d_beta1, d_gamma2, d_beta2;
            bool has_input_grad = false;
        };
        std::map<int, Record> records;
    };
    struct FinalNormPiece {
        DParam gamma, beta;
        struct Record {
            Buffer x, mean, rstd;
        };
        std::map<int, Record> records;
    };
    struct Chunk {
        int position = 0;
        std::vector<Layer> layers;
        std::unique_ptr<FinalNormPiece> final_norm;
    };
    struct OutputRecord {
        Buffer x, logits, targets;
    };

    static std::size_t idx(int i) { return static_cast<std::size_t>(i); }
    // The stream and kernel context of the lane whose op the calling thread is issuing.
    cudaStream_t stream() const;
    const kg::Exec& exec() const;
    DParam makeParam(const exec::Param<float>& host, std::optional<MemoryCategory> category);
    Buffer upload(const void* host, std::int64_t floats, MemoryCategory category);
    // Token ids on the device, counted as `category` (Workspace while an op uses them, Vocab
    // for the targets an output-layer record keeps, as the CPU backend counts them).
    Buffer tokensOnDevice(const std::vector<std::int32_t>& ids,
                          MemoryCategory category = MemoryCategory::Workspace);
    void release(float* p);
    // A Buffer over `p` (taken from the arena), tracked as `category`, zeroed on the op's
    // stream; its deleter hands it to the freeing lane's LaneFrees.
    Buffer wrap(float* p, std::int64_t floats, std::int64_t bytes, MemoryCategory category);
    // Pops the op's NVTX range and CUPTI id and clears the calling thread's op (endOp, abandonOp).
    void leaveOp() noexcept;
    // Frees what the constructor made, in order; the destructor, and a constructor that fails.
    void teardown() noexcept;
    std::vector<DParam*> params();
    Layer::Record& record(Layer& layer, int microbatch);

    int rank_;
    int device_;
    // Ranks of this process on this GPU, reached by device copies (staged_comm.h); empty in a
    // multi-process run.
    std::vector<bool> same_gpu_;
    exec::MemoryTracker* tracker_;
    exec::ModelShape shape_;
    std::shared_ptr<NcclWorld> nccl_;  // null: communication staged through host memory
    kg::VocabShard input_shard_{}, output_shard_{};
    bool has_input_ = false, has_output_ = false, owns_position_ = false;

    std::mutex arena_m_;
    void* base_ = nullptr;
    std::unique_ptr<Arena> arena_;

    struct Lane {
        cudaStream_t stream = nullptr;
        std::unique_ptr<kg::BlasHandle> blas;
        kg::Exec exec;
        LaneFrees frees;  // what the lane's ops free, until it may be used again
        std::unique_ptr<PinnedStaging> staging;  // token ids on their way to the device
    };
    std::array<Lane, schedule::kStreamCount> lanes_;
    // Asynchronous lanes (LaneSync::Event): the events between them and the memory freed while
    // their work may still run; null when every op synchronizes its stream.
    std::unique_ptr<StreamEvents> stream_events_;
    std::unique_ptr<LaneEvents> events_;

    std::vector<Chunk> chunks_;
    DParam token_, position_, output_w_;
    std::map<int, OutputRecord> output_records_;
    std::mutex records_m_;
};

}  // namespace pipescope::cuda::detail
