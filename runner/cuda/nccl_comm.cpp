// The NCCL endpoints of a run's lanes (nccl_comm.h), and whether NCCL can carry a run. The
// state they share is nccl_world_impl.h; creating it, nccl_create.cpp.
#include <cuda_runtime.h>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <pipescope/cuda/nccl_comm.h>
#include <pipescope/schedule/message_order.h>

#if PIPESCOPE_HAVE_NCCL
#include "nccl_world_impl.h"
#endif

namespace pipescope::cuda {

std::string NcclWorld::problem(const schedule::Schedule& schedule,
                               const std::vector<int>& device_of_rank) {
#if !PIPESCOPE_HAVE_NCCL
    (void)schedule;
    (void)device_of_rank;
    return "this build has no NCCL";
#else
    if (schedule.ranks < 2) {
        return "one rank: nothing to communicate";
    }
    std::set<int> devices(device_of_rank.begin(), device_of_rank.end());
    if (static_cast<int>(devices.size()) < schedule.ranks) {
        return "ranks share a GPU (NCCL takes one rank per GPU)";
    }
    return orderProblem(schedule);
#endif
}

std::string NcclWorld::orderProblem(const schedule::Schedule& schedule) {
#if !PIPESCOPE_HAVE_NCCL
    (void)schedule;
    return "this build has no NCCL";
#else
    const auto built = schedule::buildGraph(schedule);
    if (built.error) {
        return built.error->message;
    }
    const auto order = schedule::messageOrder(schedule, built.graph);
    if (!order.collectives_in_order || !order.p2p_in_order_per_kind) {
        return "the schedule's messages are not in an order NCCL can match: " +
               order.first_difference;
    }
    return {};
#endif
}

#if PIPESCOPE_HAVE_NCCL

namespace {

using namespace nccl_detail;

// The interpreter's tags (pipeline_ops.cpp): ((iteration · 64 + what) · 2^20 + mb) · 2^12 +
// where; what 0 is an activation, 1 a gradient.
bool isGradient(std::uint64_t tag) {
    return (tag >> 32) % 64 == 1;
}

class NcclComm final : public exec::Comm {
  public:
    NcclComm(NcclWorld::Impl& w, int rank, int lane, cudaStream_t lane_stream)
        : w_(w),
          rank_(rank),
          lane_(lane),
          lane_stream_(lane_stream),
          enqueue_lock_(&w.enqueue_m.at(w.device[static_cast<std::size_t>(rank)])) {
        cudaSetDevice(w_.device[static_cast<std::size_t>(rank)]);
        cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming);
    }
    ~NcclComm() override { cudaEventDestroy(ready_); }

    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(w_.device.size()); }
    void setActivity(std::string what) override { activity_ = std::move(what); }

    CommStatus send(int peer, std::uint64_t tag, const float* data, std::size_t count) override {
        const auto it = w_.channels.find({rank_, peer, isGradient(tag)});
        if (it == w_.channels.end()) {
            return CommStatus::error(Code::BadCall, "no NCCL channel from rank " +
                                                        std::to_string(rank_) + " to rank " +
                                                        std::to_string(peer));
        }
        cudaStream_t s = it->second.stream[0];
        const std::size_t bytes = count * sizeof(float);
        void* stage = nullptr;
        // The copy runs on the lane's stream, after the work that wrote the data; the channel's
        // stream takes the copy from there. The lane never waits for the send, nor for an
        // earlier send still waiting for its receive.
        if (!ok(cudaSetDevice(device())) || !ok(cudaMallocAsync(&stage, bytes, lane_stream_)) ||
            !ok(cudaMemcpyAsync(stage, data, bytes, cudaMemcpyDeviceToDevice, lane_stream_)) ||
            !ok(cudaEventRecord(ready_, lane_stream_)) || !ok(cudaStreamWaitEvent(s, ready_, 0))) {
            const std::string message = cudaFailure("staging " + what());
            if (stage != nullptr) {
                (void)cudaFreeAsync(stage, lane_stream_);
            }
            return w_.failure(message);
        }
        const auto r = enqueue(&it->second.comm[0], [&](ncclComm_t c) {
            return ncclSend(stage, count, ncclFloat, 1, c, s);
        });
        if (!r || !accepted(*r)) {
            (void)cudaFreeAsync(stage, s);
            return r ? ncclFailure(*r, "ncclSend of " + what())
                     : w_.abortedStatus("ncclSend of " + what());
        }
        // The free must come after the send in the channel's stream: wait (bounded) until NCCL
        // has enqueued it, which on a channel's first message includes connecting to the peer.
        CommStatus st =
            w_.settle(&it->second.comm[0], Clock::now() + w_.timeout, "ncclSend of " + what());
        (void)cudaFreeAsync(stage, s);
        return st;
    }

    CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        const auto it = w_.channels.find({peer, rank_, isGradient(tag)});
        if (it == w_.channels.end()) {
            return CommStatus::error(Code::BadCall, "no NCCL channel from rank " +
                                                        std::to_string(peer) + " to rank " +
                                                        std::to_string(rank_));
        }
        return run(it->second.stream[1], &it->second.comm[1], "ncclRecv of " + what(),
                   [&](cudaStream_t s, ncclComm_t c) {
                       return ncclRecv(data, count, ncclFloat, 0, c, s);
                   });
    }

    CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t, float* data,
                         std::size_t count) override {
        if (auto st = wholeWorld(group); !st.ok()) {
            return st;
        }
        const int k = collectiveIndex();
        return run(w_.coll_stream[k][static_cast<std::size_t>(rank_)],
                   &w_.coll_comm[k][static_cast<std::size_t>(rank_)], "ncclBroadcast of " + what(),
                   [&](cudaStream_t s, ncclComm_t c) {
                       return ncclBroadcast(data, data, count, ncclFloat, root, c, s);
                   });
    }

    CommStatus allReduce(const std::vector<int>& group, std::uint64_t, float* data,
                         std::size_t count, exec::ReduceOp op) override {
        if (auto st = wholeWorld(group); !st.ok()) {
            return st;
        }
        const int k = collectiveIndex();
        return run(w_.coll_stream[k][static_cast<std::size_t>(rank_)],
                   &w_.coll_comm[k][static_cast<std::size_t>(rank_)], "ncclAllReduce of " + what(),
                   [&](cudaStream_t s, ncclComm_t c) {
                       return ncclAllReduce(data, data, count, ncclFloat,
                                            op == exec::ReduceOp::Sum ? ncclSum : ncclMax, c, s);
                   });
    }

  private:
    int device() const { return w_.device[static_cast<std::size_t>(rank_)]; }
    std::string what() const {
        return (activity_.empty() ? std::string("a message") : activity_) + " (rank " +
               std::to_string(rank_) + ")";
    }
    static bool ok(cudaError_t e) { return e == cudaSuccess; }
    // The message of a CUDA call that failed while `doing`.
    static std::string cudaFailure(const std::string& doing) {
        return doing + ": " + cudaGetErrorString(cudaGetLastError());
    }
    CommStatus ncclFailure(ncclResult_t r, const std::string& doing) {
        return w_.failure(doing + ": NCCL: " + ncclGetErrorString(r));
    }
    // Issues one NCCL call on `*c` under the abort lock (shared) and this device's enqueue
    // lock; nullopt when the communicators were aborted.
    template <typename Call>
    std::optional<ncclResult_t> enqueue(ncclComm_t* c, Call call) {
        std::shared_lock<std::shared_mutex> lock(w_.abort_m);
        if (w_.aborted.load() || *c == nullptr) {
            return std::nullopt;
        }
        std::lock_guard<std::mutex> device_lock(*enqueue_lock_);
        return call(*c);
    }
    int collectiveIndex() const {
        return lane_ == static_cast<int>(schedule::Stream::Collective) ? 1 : 0;
    }
    CommStatus wholeWorld(const std::vector<int>& group) const {
        if (static_cast<int>(group.size()) != size()) {
            return CommStatus::error(
                Code::BadCall, "NCCL collectives here span every rank; " + what() + " asks for " +
                                   std::to_string(group.size()) + " of " + std::to_string(size()));
        }
        return CommStatus::success();
    }
    // Runs one NCCL operation on `s` after the lane's work so far, and waits for it (bounded).
    template <typename Op>
    CommStatus run(cudaStream_t s, ncclComm_t* c, const std::string& doing, Op op) {
        if (!ok(cudaSetDevice(device())) || !ok(cudaEventRecord(ready_, lane_stream_)) ||
            !ok(cudaStreamWaitEvent(s, ready_, 0))) {
            return w_.failure(cudaFailure(doing));
        }
        const auto r = enqueue(c, [&](ncclComm_t comm) { return op(s, comm); });
        if (!r) {
            return w_.abortedStatus(doing);
        }
        if (!accepted(*r)) {
            return ncclFailure(*r, doing);
        }
        return w_.wait(s, c, doing);
    }

    NcclWorld::Impl& w_;
    int rank_;
    int lane_;
    cudaStream_t lane_stream_;
    std::mutex* enqueue_lock_;
    cudaEvent_t ready_ = nullptr;
    std::string activity_;
};

}  // namespace

NcclWorld::~NcclWorld() = default;

std::unique_ptr<exec::Comm> NcclWorld::comm(int rank, int lane, cudaStream_t lane_stream) {
    return std::make_unique<NcclComm>(*impl_, rank, lane, lane_stream);
}

void NcclWorld::abort() {
    impl_->abortAll();
}

#else

struct NcclWorld::Impl {};

NcclWorld::~NcclWorld() = default;

std::unique_ptr<exec::Comm> NcclWorld::comm(int, int, cudaStream_t) {
    return nullptr;
}

void NcclWorld::abort() {}

#endif

}  // namespace pipescope::cuda
