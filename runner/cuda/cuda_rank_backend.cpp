// The CUDA rank backend (cuda_rank_backend.h): a rank's device, arena and lanes, bracketing its
// ops for NVTX, CUPTI and the asynchronous lanes, its memory and its communication, and the
// factory that sizes the arenas and sets up NCCL. The model's ops are in
// cuda_rank_backend_model.cpp.
#include "cuda_rank_backend_impl.h"

#if PIPESCOPE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>

#include <pipescope/trace/nvtx_op.h>
#endif
#if PIPESCOPE_HAVE_CUPTI
#include <pipescope/cupti/tracer.h>
#endif

#include "staged_comm.h"

namespace pipescope::cuda {

namespace detail {

namespace {

kg::VocabShard shardOf(kernels::cpu::VocabShard s) {
    return kg::VocabShard{s.begin, s.end};
}

// The lane (and backend) the calling thread is running an op for: frees made during an op wait
// for its stream.
thread_local CudaRankBackend* t_backend = nullptr;
thread_local int t_lane = -1;
// The op id this thread pushed as CUPTI's external correlation id (popped at endOp).
thread_local bool t_op_pushed = false;
// The op the calling thread is issuing (beginOp to endOp).
thread_local std::uint64_t t_op_id = 0;

// Slots of each lane's token staging ring (pinned_staging.h): a copy waits for the one issued
// this many uploads earlier.
constexpr int kTokenSlots = 8;

}  // namespace

cudaStream_t CudaRankBackend::stream() const {
    return t_backend == this && t_lane >= 0 ? lanes_[idx(t_lane)].stream : nullptr;
}

const kg::Exec& CudaRankBackend::exec() const {
    if (t_backend != this || t_lane < 0) {
        throw std::logic_error("CUDA backend: a kernel was issued outside an op");
    }
    return lanes_[idx(t_lane)].exec;
}

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
            lane.staging = std::make_unique<PinnedStaging>(
                static_cast<std::size_t>(shape_.rows()) * sizeof(std::int32_t), kTokenSlots);
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
        for (void* p : lane.frees.takeAll()) {
            release(static_cast<float*>(p));
        }
        lane.staging.reset();
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
    check(cudaSetDevice(device_), "cudaSetDevice");
#if PIPESCOPE_HAVE_NVTX
    // The range names the op for Nsight Systems and, for `pipescope-trace import-nsys`, which op
    // of the run it is (trace/nvtx_op.h).
    const auto key = exec::opKeyFromId(op_id);
    const std::string text =
        key ? trace::nvtxOpText(label, key->rank, key->iteration, key->op_index) : label;
#else
    (void)label;
#endif
    // Nothing below throws: what is pushed here is popped by endOp or abandonOp.
#if PIPESCOPE_HAVE_CUPTI
    // Every CUDA call of the op from here on carries its id (gpu_trace.h).
    auto& tracer = cupti::ActivityTracer::instance();
    t_op_pushed = tracer.active();
    if (t_op_pushed) {
        tracer.pushOp(op_id);
    }
#endif
    t_backend = this;
    t_lane = lane;
    t_op_id = op_id;
#if PIPESCOPE_HAVE_NVTX
    nvtxRangePushA(text.c_str());
#endif
}

void CudaRankBackend::leaveOp() noexcept {
#if PIPESCOPE_HAVE_NVTX
    nvtxRangePop();
#endif
    t_backend = nullptr;
    t_lane = -1;
    t_op_id = 0;
#if PIPESCOPE_HAVE_CUPTI
    if (t_op_pushed) {
        cupti::ActivityTracer::instance().popOp();
        t_op_pushed = false;
    }
#endif
}

void CudaRankBackend::abandonOp(int lane) noexcept {
    // What the op freed stays on its lane's list until teardown releases it: its kernels may
    // still be running.
    lanes_[idx(lane)].frees.abandonOp();
    if (t_backend == this) {
        leaveOp();
    }
}

void CudaRankBackend::endOp(int lane, int awaited) {
    Lane& l = lanes_[idx(lane)];
    // Synchronous lanes: the op's work is done here. Asynchronous ones: it is issued; the lanes
    // that need it wait for its event, and what it freed waits for a fence on every lane.
    cudaError_t e = cudaSuccess;
    if (!events_) {
        e = cudaStreamSynchronize(l.stream);
    }
    std::string failure;
    try {
        std::vector<void*> freed = l.frees.endOp();
        if (events_) {
            events_->ended(lane, t_op_id, awaited, std::move(freed));
            events_->collect();
        } else {
            for (void* p : freed) {
                release(static_cast<float*>(p));
            }
        }
    } catch (const std::exception& x) {
        failure = x.what();
    }
    leaveOp();  // whatever happened above
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
    Lane* op_lane = t_backend == this && t_lane >= 0 ? &lanes_[idx(t_lane)] : nullptr;
    // Inside an op: memory of the same size that this op allocated and freed again.
    if (op_lane != nullptr && bytes > 0) {
        if (void* reused = op_lane->frees.reuse(bytes)) {
            return wrap(static_cast<float*>(reused), floats, bytes, category);
        }
    }
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
    if (op_lane != nullptr && bytes > 0) {
        try {
            op_lane->frees.allocated(p, bytes);
        } catch (...) {
            release(p);
            throw;
        }
    }
    return wrap(p, floats, bytes, category);
}

Buffer CudaRankBackend::wrap(float* p, std::int64_t floats, std::int64_t bytes,
                             MemoryCategory category) {
    Buffer b;
    b.memory = {p, [this](float* q) {
                    bool held = false;
                    if (t_backend == this && t_lane >= 0) {
                        try {
                            lanes_[idx(t_lane)].frees.freed(q);
                            held = true;
                        } catch (...) {
                            // Out of host memory for the list (a deleter must not throw):
                            // release it the slow way below.
                        }
                    }
                    if (!held) {
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

Buffer CudaRankBackend::tokensOnDevice(const std::vector<std::int32_t>& ids,
                                       MemoryCategory category) {
    static_assert(sizeof(std::int32_t) == sizeof(float));
    Buffer b = allocate(static_cast<std::int64_t>(ids.size()), category);
    const std::size_t bytes = ids.size() * sizeof(std::int32_t);
    Lane* lane = t_backend == this && t_lane >= 0 ? &lanes_[idx(t_lane)] : nullptr;
    if (bytes > 0 && (lane == nullptr || lane->staging == nullptr ||
                      !lane->staging->copy(b.ptr(), ids.data(), bytes, lane->stream))) {
        check(cudaMemcpyAsync(b.ptr(), ids.data(), bytes, cudaMemcpyHostToDevice, stream()),
              "cudaMemcpyAsync (token ids)");
    }
    return b;
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

}  // namespace detail

using detail::check;
using detail::CudaRankBackend;

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
