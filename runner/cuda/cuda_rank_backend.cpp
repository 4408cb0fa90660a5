#include <cuda_runtime.h>

#include <pipescope/cuda/cuda_rank_backend.h>
#if PIPESCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif
#if PIPESCOPE_HAVE_CUPTI
#include <pipescope/cupti/tracer.h>
#endif

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <pipescope/cuda/arena.h>
#include <pipescope/cuda/lane_events.h>
#include <pipescope/cuda/nccl_comm.h>
#include <pipescope/exec/rank_model.h>
#include <pipescope/exec/vocab_layers.h>
#include <pipescope/kernels/cuda/ops.h>

#include "staged_comm.h"

namespace pipescope::cuda {

namespace kg = kernels::cuda;
using exec::Buffer;
using exec::TokenRows;
using trace::MemoryCategory;

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorName(e) + ": " +
                                 cudaGetErrorString(e));
    }
}

std::string gib(std::int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
    return text;
}

kg::VocabShard shardOf(kernels::cpu::VocabShard s) {
    return kg::VocabShard{s.begin, s.end};
}

class CudaRankBackend;

// The lane (and backend) the calling thread is running an op for: frees made during an op wait
// for its stream.
thread_local CudaRankBackend* t_backend = nullptr;
thread_local int t_lane = -1;
// The op id this thread pushed as CUPTI's external correlation id (popped at endOp).
thread_local bool t_op_pushed = false;
// The op the calling thread is issuing (beginOp to endOp).
thread_local std::uint64_t t_op_id = 0;

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
    cudaStream_t stream() const {
        return t_backend == this && t_lane >= 0 ? lanes_[idx(t_lane)].stream : nullptr;
    }
    const kg::Exec& exec() const {
        if (t_backend != this || t_lane < 0) {
            throw std::logic_error("CUDA backend: a kernel was issued outside an op");
        }
        return lanes_[idx(t_lane)].exec;
    }
    DParam makeParam(const exec::Param<float>& host, std::optional<MemoryCategory> category);
    Buffer upload(const void* host, std::int64_t floats, MemoryCategory category);
    Buffer tokensOnDevice(const std::vector<std::int32_t>& ids);
    void release(float* p);
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
        std::mutex deferred_m;
        std::vector<float*> deferred;  // freed during the current op, released at endOp
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

CudaRankBackend::CudaRankBackend(const schedule::Config& config, const schedule::Schedule& schedule,
                                 int rank, exec::MemoryTracker* tracker,
                                 const CudaBackendOptions& options, int device,
                                 std::int64_t arena_bytes, std::shared_ptr<NcclWorld> nccl)
    : rank_(rank),
      device_(device),
      tracker_(tracker),
      shape_(exec::modelShapeFromConfig(config)),
      nccl_(std::move(nccl)) {
    check(cudaSetDevice(device_), "cudaSetDevice");
    if (options.transport == nullptr) {
        for (int r = 0; r < schedule.ranks; ++r) {
            same_gpu_.push_back(r != rank && deviceOfRank(options, r) == device_);
        }
    }
    // Messages between ranks of this GPU and NCCL's staging come from the device's stream-ordered
    // pool: keep what it has mapped, rather than unmapping it at every synchronize and mapping
    // it again for the next message (its default release threshold is 0).
    if (cudaMemPool_t pool = nullptr; cudaDeviceGetDefaultMemPool(&pool, device_) == cudaSuccess) {
        std::uint64_t keep = UINT64_MAX;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    (void)cudaGetLastError();
    if (cudaMalloc(&base_, static_cast<std::size_t>(arena_bytes)) != cudaSuccess) {
        (void)cudaGetLastError();
        std::size_t free_bytes = 0, total = 0;
        cudaMemGetInfo(&free_bytes, &total);
        throw std::runtime_error("rank " + std::to_string(rank) + ": cannot reserve a " +
                                 gib(arena_bytes) + " arena on device " + std::to_string(device) +
                                 " (" + gib(static_cast<std::int64_t>(free_bytes)) + " free of " +
                                 gib(static_cast<std::int64_t>(total)) + ")");
    }
    // A failure from here on frees what was made (the destructor does not run).
    try {
        arena_ = std::make_unique<Arena>(arena_bytes);
        for (Lane& lane : lanes_) {
            check(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking),
                  "cudaStreamCreateWithFlags");
            lane.blas = std::make_unique<kg::BlasHandle>();
            lane.exec.stream = lane.stream;
            lane.exec.blas = lane.blas->get();
            lane.exec.tf32 = options.tf32;
        }
        if (options.lane_sync == LaneSync::Event) {
            std::vector<cudaStream_t> streams;
            for (const Lane& lane : lanes_) {
                streams.push_back(lane.stream);
            }
            stream_events_ = std::make_unique<StreamEvents>(std::move(streams));
            events_ =
                std::make_unique<LaneEvents>(*stream_events_, schedule::kStreamCount,
                                             [this](void* p) { release(static_cast<float*>(p)); });
        }

        // The host model gives the structure and the initial values (the CPU backend's exactly);
        // it is not tracked, and goes away once its values are on the device.
        exec::RankModel host(config, schedule, rank, options.seed, nullptr, options.init_stddev);
        for (int c = 0; c < host.chunkCount(); ++c) {
            auto& hc = host.chunk(c);
            Chunk chunk;
            chunk.position = hc.position;
            for (auto& hl : hc.layers) {
                Layer layer;
                const auto hp = hl.params();
                for (std::size_t i = 0; i < layer.p.size(); ++i) {
                    layer.p[i] = makeParam(*hp[i], std::nullopt);
                }
                chunk.layers.push_back(std::move(layer));
            }
            if (hc.final_norm) {
                chunk.final_norm = std::make_unique<FinalNormPiece>();
                const auto hp = hc.final_norm->params();
                chunk.final_norm->gamma = makeParam(*hp[0], std::nullopt);
                chunk.final_norm->beta = makeParam(*hp[1], std::nullopt);
            }
            chunks_.push_back(std::move(chunk));
        }
        if (auto* in = host.input()) {
            has_input_ = true;
            input_shard_ = shardOf(in->shard());
            owns_position_ = in->ownsPosition();
            const auto hp = in->params();
            token_ = makeParam(*hp[0], MemoryCategory::Vocab);
            if (owns_position_) {
                position_ = makeParam(*hp[1], MemoryCategory::Vocab);
            }
        }
        if (auto* out = host.output()) {
            has_output_ = true;
            output_shard_ = shardOf(out->shard());
            output_w_ = makeParam(*out->params()[0], MemoryCategory::Vocab);
        }
        check(cudaDeviceSynchronize(), "uploading the parameters");
    } catch (...) {
        teardown();
        throw;
    }
}

CudaRankBackend::~CudaRankBackend() {
    teardown();
}

void CudaRankBackend::teardown() noexcept {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    // Everything that points into the arena goes before it.
    output_records_.clear();
    chunks_.clear();
    token_ = {};
    position_ = {};
    output_w_ = {};
    events_.reset();  // gives back the memory it holds; the device is idle
    for (Lane& lane : lanes_) {
        for (float* p : lane.deferred) {
            release(p);
        }
        lane.deferred.clear();
        lane.blas.reset();
        if (lane.stream != nullptr) {
            cudaStreamDestroy(lane.stream);
            lane.stream = nullptr;
        }
    }
    if (base_ != nullptr) {
        cudaFree(base_);
        base_ = nullptr;
    }
}

void CudaRankBackend::beginOp(int lane, std::uint64_t op_id, const std::string& label) {
#if PIPESCOPE_HAVE_CUPTI
    // Every CUDA call of the op from here on carries its id (gpu_trace.h).
    auto& tracer = cupti::ActivityTracer::instance();
    t_op_pushed = tracer.active();
    if (t_op_pushed) {
        tracer.pushOp(op_id);
    }
#else
    (void)op_id;
#endif
    check(cudaSetDevice(device_), "cudaSetDevice");
    t_backend = this;
    t_lane = lane;
    t_op_id = op_id;
#if PIPESCOPE_HAVE_NVTX
    nvtxRangePushA(label.c_str());
#else
    (void)label;
#endif
}

void CudaRankBackend::endOp(int lane, int awaited) {
    Lane& l = lanes_[idx(lane)];
    // Synchronous lanes: the op's work is done here. Asynchronous ones: it is issued; the lanes
    // that need it wait for its event, and what it freed waits for a fence on every lane.
    cudaError_t e = cudaSuccess;
    if (!events_) {
        e = cudaStreamSynchronize(l.stream);
    }
#if PIPESCOPE_HAVE_NVTX
    nvtxRangePop();
#endif
    std::vector<float*> freed;
    {
        std::lock_guard<std::mutex> lock(l.deferred_m);
        freed.swap(l.deferred);
    }
    std::string failure;
    if (events_) {
        try {
            events_->ended(lane, t_op_id, awaited, std::vector<void*>(freed.begin(), freed.end()));
            events_->collect();
        } catch (const std::exception& x) {
            failure = x.what();
        }
    } else {
        for (float* p : freed) {
            release(p);
        }
    }
    t_backend = nullptr;
    t_lane = -1;
    t_op_id = 0;
#if PIPESCOPE_HAVE_CUPTI
    if (t_op_pushed) {
        cupti::ActivityTracer::instance().popOp();
        t_op_pushed = false;
    }
#endif
    check(e, "the op's kernels");
    if (!failure.empty()) {
        throw std::runtime_error(failure);
    }
}

void CudaRankBackend::release(float* p) {
    std::lock_guard<std::mutex> lock(arena_m_);
    arena_->release(reinterpret_cast<char*>(p) - static_cast<char*>(base_));
}

Buffer CudaRankBackend::allocate(std::int64_t floats, MemoryCategory category) {
    const std::int64_t bytes = floats * static_cast<std::int64_t>(sizeof(float));
    const auto place = [&] {
        std::lock_guard<std::mutex> lock(arena_m_);
        return arena_->allocate(bytes);
    };
    std::optional<std::int64_t> offset = place();
    if (!offset && events_) {
        // Memory freed while asynchronous work may still use it is held back: take what has
        // finished since, then wait for the rest.
        if (events_->collect() > 0) {
            offset = place();
        }
        if (!offset && events_->drain() > 0) {
            offset = place();
        }
    }
    if (!offset) {
        std::lock_guard<std::mutex> lock(arena_m_);
        throw std::runtime_error("out of device memory on rank " + std::to_string(rank_) + ": " +
                                 gib(bytes) + " for " + std::string(trace::toString(category)) +
                                 " do not fit (" + arena_->describe() + ")");
    }
    float* p = reinterpret_cast<float*>(static_cast<char*>(base_) + *offset);
    Buffer b;
    b.memory = {p, [this](float* q) {
                    if (t_backend == this && t_lane >= 0) {
                        Lane& l = lanes_[idx(t_lane)];
                        std::lock_guard<std::mutex> lock(l.deferred_m);
                        l.deferred.push_back(q);
                    } else {
                        // Outside an op: nothing of ours may still be running on it.
                        cudaSetDevice(device_);
                        cudaDeviceSynchronize();
                        release(q);
                    }
                }};
    b.floats = floats;
    b.bytes = exec::TrackedBytes(tracker_, category, bytes);
    if (bytes > 0) {
        check(cudaMemsetAsync(p, 0, static_cast<std::size_t>(bytes), stream()), "cudaMemsetAsync");
    }
    return b;
}

Buffer CudaRankBackend::upload(const void* host, std::int64_t floats, MemoryCategory category) {
    Buffer b = allocate(floats, category);
    if (floats > 0) {
        check(cudaMemcpyAsync(b.ptr(), host, static_cast<std::size_t>(floats) * sizeof(float),
                              cudaMemcpyHostToDevice, stream()),
              "cudaMemcpyAsync (host to device)");
    }
    return b;
}

Buffer CudaRankBackend::tokensOnDevice(const std::vector<std::int32_t>& ids) {
    static_assert(sizeof(std::int32_t) == sizeof(float));
    return upload(ids.data(), static_cast<std::int64_t>(ids.size()), MemoryCategory::Workspace);
}

DParam CudaRankBackend::makeParam(const exec::Param<float>& host,
                                  std::optional<MemoryCategory> category) {
    DParam d;
    d.size = host.size();
    d.decay = host.decay;
    d.value = upload(host.value.data(), d.size, category.value_or(MemoryCategory::Weights));
    d.grad = allocate(d.size, category.value_or(MemoryCategory::Grads));
    d.m = allocate(d.size, category.value_or(MemoryCategory::Optimizer));
    d.v = allocate(d.size, category.value_or(MemoryCategory::Optimizer));
    return d;
}

void CudaRankBackend::fill(float* dst, std::int64_t floats, float value) {
    kg::fill(exec(), dst, floats, value);
}

void CudaRankBackend::scaleRows(float* x, const float* g, std::int64_t rows, std::int64_t cols) {
    kg::scaleRows<float>(exec(), x, g, rows, cols);
}

double CudaRankBackend::meanLoss(const float* global_max, const float* global_sum,
                                 const float* target_logit, std::int64_t rows) {
    Buffer loss = allocate(rows, MemoryCategory::Workspace);
    kg::crossEntropyLossFromStats(exec(), global_max, global_sum, target_logit, loss.ptr(), rows);
    std::vector<float> host(static_cast<std::size_t>(rows));
    toHost(host.data(), loss.ptr(), host.size());
    double total = 0;
    for (float l : host) {
        total += l;
    }
    return total / static_cast<double>(rows);
}

void CudaRankBackend::toHost(float* host, const float* device, std::size_t floats) {
    if (floats == 0) {
        return;
    }
    check(cudaMemcpyAsync(host, device, floats * sizeof(float), cudaMemcpyDeviceToHost, stream()),
          "cudaMemcpyAsync (device to host)");
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

void CudaRankBackend::toDevice(float* device, const float* host, std::size_t floats) {
    if (floats == 0) {
        return;
    }
    check(cudaMemcpyAsync(device, host, floats * sizeof(float), cudaMemcpyHostToDevice, stream()),
          "cudaMemcpyAsync (host to device)");
    check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

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
    r.targets = tokensOnDevice(tokens.targets);
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

std::unique_ptr<exec::Comm> CudaRankBackend::comm(std::unique_ptr<exec::Comm> host, int lane) {
    if (nccl_) {
        return nccl_->comm(rank_, lane, lanes_[idx(lane)].stream);
    }
    const cudaStream_t s = lanes_[idx(lane)].stream;
    DirectCopy direct;
    direct.reaches = [this](int peer) {
        return peer >= 0 && idx(peer) < same_gpu_.size() && same_gpu_[idx(peer)];
    };
    // The staged buffer comes from the device's stream-ordered pool (cudaMallocAsync), not the
    // arena: it is in flight between two ranks, and the receiver frees it on its own stream.
    direct.stage = [s](const float* data, std::size_t n) {
        void* p = nullptr;
        check(cudaMallocAsync(&p, n * sizeof(float), s), "cudaMallocAsync (message to a rank)");
        check(cudaMemcpyAsync(p, data, n * sizeof(float), cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync (message to a rank)");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
        return static_cast<float*>(p);
    };
    direct.take = [s](float* dst, float* staged, std::size_t n) {
        check(cudaMemcpyAsync(dst, staged, n * sizeof(float), cudaMemcpyDeviceToDevice, s),
              "cudaMemcpyAsync (message from a rank)");
        check(cudaFreeAsync(staged, s), "cudaFreeAsync");
        check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    };
    direct.discard = [s](float* staged) { (void)cudaFreeAsync(staged, s); };
    return std::make_unique<StagedComm>(
        std::move(host), [this](float* h, const float* d, std::size_t n) { toHost(h, d, n); },
        [this](float* d, const float* h, std::size_t n) { toDevice(d, h, n); }, std::move(direct));
}

}  // namespace

int deviceOfRank(const CudaBackendOptions& options, int rank) {
    if (!options.devices.empty()) {
        return options.devices[static_cast<std::size_t>(rank) % options.devices.size()];
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        return 0;
    }
    return rank % count;
}

std::function<std::unique_ptr<exec::RankBackend>(const schedule::Config&, const schedule::Schedule&,
                                                 int, exec::MemoryTracker*)>
cudaBackendFactory(const CudaBackendOptions& options) {
    // Arena sizes are fixed on the first call, from each device's free memory then, shared
    // equally by the ranks placed on it.
    auto capacities = std::make_shared<std::map<int, std::int64_t>>();
    // NCCL between the ranks, made once (on the first call) when the ranks sit on distinct GPUs.
    auto nccl = std::make_shared<std::shared_ptr<NcclWorld>>();
    return [options, capacities, nccl](const schedule::Config& config, const schedule::Schedule& s,
                                       int rank, exec::MemoryTracker* tracker) {
        const int device = deviceOfRank(options, rank);
        if (capacities->empty() && options.nccl && options.transport != nullptr) {
            std::string why;
            *nccl = NcclWorld::createAcrossProcesses(s, rank, device, *options.transport,
                                                     options.timeout, &why);
            if (!*nccl) {
                throw std::runtime_error("NCCL: " + why);
            }
        } else if (capacities->empty() && options.nccl) {
            std::vector<int> devices;
            for (int r = 0; r < s.ranks; ++r) {
                devices.push_back(deviceOfRank(options, r));
            }
            if (NcclWorld::problem(s, devices).empty()) {
                std::string why;
                *nccl = NcclWorld::create(s, devices, options.timeout, &why);
                if (!*nccl) {
                    throw std::runtime_error("NCCL: " + why);
                }
            }
        }
        if (capacities->empty()) {
            // The ranks this process places on each device: all of them in one process, its own
            // in a multi-process run (processes sharing a GPU get a smaller memory_fraction).
            std::map<int, int> ranks_on;
            for (int r = 0; r < s.ranks; ++r) {
                if (options.transport == nullptr || r == rank) {
                    ++ranks_on[deviceOfRank(options, r)];
                }
            }
            for (const auto& [d, n] : ranks_on) {
                check(cudaSetDevice(d), "cudaSetDevice");
                std::size_t free_bytes = 0, total = 0;
                check(cudaMemGetInfo(&free_bytes, &total), "cudaMemGetInfo");
                const auto share = static_cast<std::int64_t>(static_cast<double>(free_bytes) *
                                                             options.memory_fraction / n);
                (*capacities)[d] = share / 256 * 256;
            }
        }
        return std::make_unique<CudaRankBackend>(config, s, rank, tracker, options, device,
                                                 capacities->at(device), *nccl);
    };
}

std::string describeCommunication(const CudaBackendOptions& options,
                                  const schedule::Schedule& schedule) {
    std::vector<int> devices;
    for (int r = 0; r < schedule.ranks; ++r) {
        devices.push_back(deviceOfRank(options, r));
    }
    const std::string why =
        options.nccl ? NcclWorld::problem(schedule, devices) : std::string("NCCL turned off");
    if (why.empty()) {
        return "NCCL between the GPUs";
    }
    bool shared = false;
    for (int r = 0; r < schedule.ranks && !shared; ++r) {
        for (int q = 0; q < r && !shared; ++q) {
            shared = devices[static_cast<std::size_t>(q)] == devices[static_cast<std::size_t>(r)];
        }
    }
    if (shared && options.transport == nullptr) {
        return "device-to-device copies between ranks on one GPU, the rest staged through host "
               "memory (" +
               why + ")";
    }
    return "staged through host memory (" + why + ")";
}

}  // namespace pipescope::cuda
