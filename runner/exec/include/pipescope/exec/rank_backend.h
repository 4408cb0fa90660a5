// What the interpreter (pipeline_executor.h) needs from a backend, per rank: memory for the
// buffers that pass between ops, the model pieces the rank holds, a few element-wise steps of
// the vocabulary methods, and device-aware communication. The interpreter itself (which op
// reads and writes what, tags, the order of collectives, threads and dependencies, tracing) is
// the same for every backend; the CPU backend (cpu_rank_backend.h) runs the reference kernels on
// host memory, the CUDA backend (runner/cuda) runs kernels/cuda on device memory.
//
// Pointers handed to and returned by a backend are in its memory space (device pointers for
// CUDA). Work is issued on the calling lane: the interpreter calls beginOp(lane, ...) before an
// op and endOp(lane, ...) after it, from that lane's thread. For most backends the op's work is
// complete when endOp returns, so a buffer the op used may be freed or read by any other lane.
// A backend with asynchronous lanes (asyncLanes()) only issues the work: the interpreter then
// names, for each op, the ops of other lanes it needs (waitFor), and the backend orders the
// lanes' work itself and keeps freed memory until no lane's earlier work can still touch it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <pipescope/exec/comm.h>
#include <pipescope/exec/memory_tracker.h>
#include <pipescope/kernels/cpu/adamw.h>
#include <pipescope/trace/types.h>

namespace pipescope::exec {

struct TokenRows;

// The id of one executed op (rank, iteration, index in the rank's op list), > 0: what a device
// profiler attaches to the op's work (CUPTI's external correlation id) to find the op again.
struct OpKey {
    int rank = 0;
    int iteration = 0;
    int op_index = 0;
    friend bool operator==(const OpKey&, const OpKey&) = default;
};
inline constexpr int kOpKeyMaxRanks = 1 << 16;
inline constexpr int kOpKeyMaxOps = 1 << 24;
inline constexpr int kOpKeyMaxIterations = 1 << 23;
// Ranks, ops and iterations must be below the maxima above (std::invalid_argument otherwise).
std::uint64_t opKeyId(const OpKey& key);
// Inverse of opKeyId; nullopt for 0 and for ids no OpKey gives.
std::optional<OpKey> opKeyFromId(std::uint64_t id);

// A zero-filled buffer of floats in the backend's memory, tracked by category while it lives.
struct Buffer {
    std::unique_ptr<float, std::function<void(float*)>> memory;
    std::int64_t floats = 0;
    TrackedBytes bytes;
    float* ptr() const { return memory.get(); }
};

class RankBackend {
  public:
    virtual ~RankBackend() = default;

    // The calling thread's lane for the ops that follow (schedule::Stream), the op's id
    // (opKeyId) and its label (for profilers' ranges), and the end of its op: the backend's work
    // for it is complete when endOp returns, or, with asynchronous lanes, issued. `awaited`: how
    // many ops of other lanes will name this op in waitFor (0 unless asyncLanes()). Both come
    // from the same thread.
    virtual void beginOp(int lane, std::uint64_t op_id, const std::string& label) = 0;
    virtual void endOp(int lane, int awaited) = 0;
    // The op begun on `lane` threw before endOp was called: undo what beginOp set up on the
    // calling thread (profiler ranges, the current lane) so that it does not outlive the op. The
    // run is failing; the op's work need not complete. endOp undoes it itself, even when it
    // throws, so every beginOp is followed by exactly one of the two.
    virtual void abandonOp(int /*lane*/) noexcept {}

    // Asynchronous lanes: endOp only issues an op's work, and the op begun on `lane` must not
    // start on the device before op `op_id` of another lane (which has ended) has finished there.
    // The interpreter calls waitFor right after beginOp, once per such dependency, and only when
    // asyncLanes() is true.
    virtual bool asyncLanes() const { return false; }
    virtual void waitFor(int /*lane*/, std::uint64_t /*op_id*/) {}

    // --- memory and element-wise steps ---------------------------------------------------------
    virtual Buffer allocate(std::int64_t floats, trace::MemoryCategory category) = 0;
    virtual void copy(float* dst, const float* src, std::int64_t floats) = 0;
    virtual void fill(float* dst, std::int64_t floats, float value) = 0;
    // x[r, :] *= g[r] (x: rows×cols, g: rows).
    virtual void scaleRows(float* x, const float* g, std::int64_t rows, std::int64_t cols) = 0;
    // sum[r] *= exp(local_max[r] − global_max[r]) (0 for an empty shard).
    virtual void rescaleShardSum(float* sum, const float* local_max, const float* global_max,
                                 std::int64_t rows) = 0;
    // Vocab-2: out[r] = α_r a[r] − g[r], α_r = row_sum[r] e^(row_max[r] − M[r]) / E[r].
    virtual void basisCombine(const float* a, const float* g, const float* row_max,
                              const float* row_sum, const float* global_max,
                              const float* global_sum, float* out, std::int64_t rows,
                              std::int64_t cols) = 0;
    // The mean over rows of M + log E − target (the micro-batch's loss), on the host.
    virtual double meanLoss(const float* global_max, const float* global_sum,
                            const float* target_logit, std::int64_t rows) = 0;

    // --- the model pieces this rank holds ------------------------------------------------------
    virtual int chunkCount() const = 0;
    virtual int chunkPosition(int chunk) const = 0;
    virtual int layerCount(int chunk) const = 0;
    virtual bool hasInput() const = 0;
    virtual bool hasOutput() const = 0;
    // x, y, dx, dy: rows × hidden.
    virtual void layerForward(int chunk, int layer, int microbatch, const float* x, float* y) = 0;
    // whole: B and W together; otherwise B only, W comes with layerBackwardWeight.
    virtual void layerBackward(int chunk, int layer, int microbatch, const float* dy, float* dx,
                               bool whole) = 0;
    virtual void layerBackwardWeight(int chunk, int layer, int microbatch) = 0;
    virtual void finalNormForward(int chunk, int microbatch, const float* x, float* y) = 0;
    virtual void finalNormBackward(int chunk, int microbatch, const float* dy, float* dx) = 0;
    // Token ids are host arrays (TokenRows); the backend moves them where its kernels need them.
    virtual void inputForward(const TokenRows& tokens, float* out) = 0;
    virtual void inputBackward(const TokenRows& tokens, const float* dout) = 0;
    // OutputLayer::forwardStats / gradientBasis / backward (vocab_layers.h).
    virtual void outputForwardStats(int microbatch, const float* x, const TokenRows& tokens,
                                    float* row_max, float* row_sum, float* target_logit) = 0;
    virtual void outputGradientBasis(int microbatch, const float* row_max, const float* row_sum,
                                     float* a, float* g) = 0;
    virtual void outputBackward(int microbatch, const float* global_max, const float* global_sum,
                                const float* dloss, float* dx_part) = 0;
    virtual void zeroGrads() = 0;
    // AdamW over every parameter (no decay for biases and LayerNorm parameters); step ≥ 1.
    virtual void optimizerStep(const kernels::cpu::AdamWConfig& config, std::int64_t step) = 0;

    // The communication of lane `lane`, given the in-process fabric's endpoint (which moves host
    // memory): a host backend uses it as it is, a device backend stages its buffers through it
    // or replaces it (NCCL).
    virtual std::unique_ptr<Comm> comm(std::unique_ptr<Comm> host, int lane) = 0;

    // The run is failing or was cancelled: stop communication of the backend's own that could
    // otherwise wait for a peer that will never come (the CUDA backend aborts its NCCL
    // communicators). Called from any thread, possibly more than once, while ops still run.
    virtual void abort() {}
};

// The likely cause of a loss, gradient or weight gone NaN or infinite after optimizer steps, for
// the error that stops the run: "the training diverged; the learning rate (run.learning_rate =
// 1) is probably too large".
std::string divergenceCause(double learning_rate);

}  // namespace pipescope::exec
