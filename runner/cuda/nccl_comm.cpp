#include <atomic>
#include <cstring>
#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <thread>
#include <tuple>

#include <pipescope/cuda/nccl_comm.h>
#include <pipescope/schedule/message_order.h>

#if PIPESCOPE_HAVE_NCCL
#include <nccl.h>
#endif

namespace pipescope::cuda {

namespace {

using exec::CommStatus;
using Code = CommStatus::Code;
using Clock = std::chrono::steady_clock;

#if PIPESCOPE_HAVE_NCCL
// The interpreter's tags (pipeline_ops.cpp): ((iteration · 64 + what) · 2^20 + mb) · 2^12 +
// where; what 0 is an activation, 1 a gradient.
bool isGradient(std::uint64_t tag) {
    return (tag >> 32) % 64 == 1;
}

// Every communicator is non-blocking: NCCL never waits on the host inside a call (joining a
// communicator, connecting a channel on its first message: both wait for the peer); the call
// returns ncclInProgress and the communicator's state says when it is done, so that every such
// wait is bounded by the timeout (Impl::settle).
ncclConfig_t nonBlocking() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return config;
}

bool accepted(ncclResult_t r) {
    return r == ncclSuccess || r == ncclInProgress;
}

// Makes a non-blocking stream on `device`; on failure says so in `*why` (the first failure).
void newStream(int device, cudaStream_t* stream, std::string* why) {
    if (cudaSetDevice(device) != cudaSuccess ||
        cudaStreamCreateWithFlags(stream, cudaStreamNonBlocking) != cudaSuccess) {
        *stream = nullptr;
        if (why->empty()) {
            *why = "creating a stream for NCCL on device " + std::to_string(device) + ": " +
                   cudaGetErrorString(cudaGetLastError());
        }
    }
}

// A send stages its buffer with cudaMallocAsync on its lane's stream and frees it on the
// channel's stream once NCCL has the send. By default the device's pool may hand a block freed
// there, whose send has not finished, to the next allocation on the lane's stream by making the
// lane's stream wait for that send: every send would then wait for the one before it to be
// received, which can deadlock a schedule. Without it the pool takes other memory instead.
void keepStagingApart(int device) {
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
        int allow = 0;
        (void)cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &allow);
    }
    (void)cudaGetLastError();
}
#endif

}  // namespace

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

struct NcclWorld::Impl {
    struct Channel {
        ncclComm_t comm[2] = {nullptr, nullptr};  // sender, receiver
        cudaStream_t stream[2] = {nullptr, nullptr};
    };
    std::vector<int> device;
    std::chrono::milliseconds timeout{0};
    // (sender, receiver, gradient) -> its channel.
    std::map<std::tuple<int, int, bool>, Channel> channels;
    // Per stream that runs collectives (0 compute, 1 collective), per rank.
    std::vector<ncclComm_t> coll_comm[2];
    std::vector<cudaStream_t> coll_stream[2];

    // Aborting: every NCCL call takes `abort_m` shared and checks `aborted` first; abortAll()
    // takes it exclusively, aborts every communicator and forgets it, so that no thread uses a
    // communicator NCCL has freed, and the destructor does not free it twice.
    mutable std::shared_mutex abort_m;
    std::atomic<bool> aborted{false};
    // Why the first abortAll() aborted (taken after abort_m, never before it).
    mutable std::mutex reason_m;
    std::string abort_reason;

    // NCCL: "it is not safe to issue NCCL operations in parallel to independent communicators
    // located on the same device with multiple threads". A rank's three lanes each use their
    // own communicators, so each enqueue takes its device's lock (not the wait that follows).
    // Made before the ranks start, read-only after.
    std::map<int, std::mutex> enqueue_m;
    std::mutex& enqueueLock(int dev) { return enqueue_m[dev]; }

    // Every communicator this process holds (not aborted).
    std::vector<ncclComm_t*> held() {
        std::vector<ncclComm_t*> mine;
        for (auto& [key, ch] : channels) {
            for (ncclComm_t& c : ch.comm) {
                if (c != nullptr) {
                    mine.push_back(&c);
                }
            }
        }
        for (auto& comms : coll_comm) {
            for (ncclComm_t& c : comms) {
                if (c != nullptr) {
                    mine.push_back(&c);
                }
            }
        }
        return mine;
    }

    ~Impl() {
        // One thread holds several ranks' communicators: NCCL asks that their finalize calls
        // be grouped (else it may hang), and that a communicator be destroyed once finalized.
        // One that does not finish within the timeout is aborted instead.
        const std::vector<ncclComm_t*> mine = held();
        if (!mine.empty()) {
            ncclGroupStart();
            for (ncclComm_t* c : mine) {
                (void)ncclCommFinalize(*c);
            }
            (void)ncclGroupEnd();
            const auto deadline = Clock::now() + timeout;
            for (ncclComm_t* c : mine) {
                ncclResult_t st = ncclInProgress;
                while (ncclCommGetAsyncError(*c, &st) == ncclSuccess && st == ncclInProgress &&
                       Clock::now() < deadline) {
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
                }
                if (st == ncclSuccess) {
                    ncclCommDestroy(*c);
                } else {
                    ncclCommAbort(*c);
                }
            }
        }
        for (auto& [key, ch] : channels) {
            for (cudaStream_t s : ch.stream) {
                if (s != nullptr) {
                    cudaStreamDestroy(s);
                }
            }
        }
        for (int k = 0; k < 2; ++k) {
            for (cudaStream_t s : coll_stream[k]) {
                if (s != nullptr) {
                    cudaStreamDestroy(s);
                }
            }
        }
    }

    // What a call on an aborted communicator says: why it was aborted.
    CommStatus abortedStatus(const std::string& doing) const {
        std::lock_guard<std::mutex> lock(reason_m);
        return CommStatus::error(Code::Aborted,
                                 doing + ": NCCL was aborted (" +
                                     (abort_reason.empty() ? std::string("another rank failed, or "
                                                                         "the run was cancelled")
                                                           : abort_reason) +
                                     ")");
    }

    // A failure of this process's own NCCL or CUDA call: aborts every communicator (so that
    // the other lanes and ranks stop waiting) and is reported as this run's failure.
    CommStatus failure(const std::string& message) {
        abortAll(message);
        return CommStatus::error(Code::Failed, message);
    }

    // Aborts every communicator of this process (idempotent): NCCL's kernels waiting for a peer
    // end, so no lane, and no device synchronize at teardown, waits for a rank that has failed.
    // Never call it while holding `abort_m`.
    void abortAll(const std::string& why = {}) {
        std::unique_lock<std::shared_mutex> lock(abort_m);
        if (aborted.exchange(true)) {
            return;
        }
        {
            std::lock_guard<std::mutex> reason_lock(reason_m);
            abort_reason = why;
        }
        for (auto& [key, ch] : channels) {
            for (ncclComm_t& c : ch.comm) {
                if (c != nullptr) {
                    ncclCommAbort(c);
                    c = nullptr;
                }
            }
        }
        for (auto& comms : coll_comm) {
            for (ncclComm_t& c : comms) {
                if (c != nullptr) {
                    ncclCommAbort(c);
                    c = nullptr;
                }
            }
        }
    }

    // The state of `*comm` (under the abort lock): ncclSuccess, ncclInProgress (a call still
    // joining or connecting), or an error; nullopt once aborted.
    std::optional<ncclResult_t> state(ncclComm_t* comm) const {
        std::shared_lock<std::shared_mutex> lock(abort_m);
        if (aborted.load() || *comm == nullptr) {
            return std::nullopt;
        }
        ncclResult_t async = ncclSuccess;
        if (const ncclResult_t r = ncclCommGetAsyncError(*comm, &async); r != ncclSuccess) {
            return r;
        }
        return async;
    }

    CommStatus timedOut(const std::string& what) {
        const std::string message = what + " did not finish within " +
                                    std::to_string(timeout.count() / 1000) +
                                    " s (NCCL communicators aborted)";
        abortAll(message);
        return CommStatus::error(Code::Timeout, message);
    }

    // Waits, at most until `deadline`, until `*comm` has no call in progress (its last call has
    // joined, connected and enqueued its work) and then, unless null, until `stream` (where that
    // work runs) has finished. On timeout or an NCCL or CUDA error every communicator is aborted.
    CommStatus waitUntil(ncclComm_t* comm, cudaStream_t stream, Clock::time_point deadline,
                         const std::string& what) {
        for (;;) {
            const auto st = state(comm);
            if (!st) {
                return abortedStatus(what);
            }
            if (*st != ncclSuccess && *st != ncclInProgress) {
                return failure(what + ": NCCL: " + ncclGetErrorString(*st));
            }
            if (*st == ncclSuccess) {
                if (stream == nullptr) {
                    return CommStatus::success();
                }
                const cudaError_t q = cudaStreamQuery(stream);
                if (q == cudaSuccess) {
                    return CommStatus::success();
                }
                if (q != cudaErrorNotReady) {
                    return failure(what + ": " + cudaGetErrorString(q));
                }
                (void)cudaGetLastError();  // "not ready" is no error for the next launch check
            }
            if (Clock::now() > deadline) {
                return timedOut(what);
            }
            std::this_thread::sleep_for(std::chrono::microseconds(50));
        }
    }
    CommStatus settle(ncclComm_t* comm, Clock::time_point deadline, const std::string& what) {
        return waitUntil(comm, nullptr, deadline, what);
    }
    // An NCCL operation on `*comm`, issued on `stream`, within the timeout.
    CommStatus wait(cudaStream_t stream, ncclComm_t* comm, const std::string& what) {
        return waitUntil(comm, stream, Clock::now() + timeout, what);
    }

    // Waits for every communicator this process joined to finish joining (bounded by the
    // timeout; aborts them all otherwise). "" when they have.
    std::string settleAll(const std::string& what) {
        const auto deadline = Clock::now() + timeout;
        for (ncclComm_t* c : held()) {
            if (auto st = settle(c, deadline, what); !st.ok()) {
                return st.message;
            }
        }
        return {};
    }
};

namespace {

// The point-to-point channels a schedule uses, in one order on every rank.
std::set<std::tuple<int, int, bool>> channelsOf(const schedule::Schedule& schedule) {
    std::set<std::tuple<int, int, bool>> used;
    for (int r = 0; r < schedule.ranks; ++r) {
        for (const auto& op : schedule.ops[static_cast<std::size_t>(r)]) {
            if (op.kind == schedule::OpKind::SendF || op.kind == schedule::OpKind::SendB) {
                used.insert({r, op.peer, op.kind == schedule::OpKind::SendB});
            }
        }
    }
    return used;
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

std::shared_ptr<NcclWorld> NcclWorld::create(const schedule::Schedule& schedule,
                                             const std::vector<int>& device_of_rank,
                                             std::chrono::milliseconds timeout, std::string* why) {
    if (std::string p = problem(schedule, device_of_rank); !p.empty()) {
        *why = p;
        return nullptr;
    }
    std::shared_ptr<NcclWorld> world(new NcclWorld);
    world->impl_ = std::make_unique<Impl>();
    Impl& w = *world->impl_;
    w.device = device_of_rank;
    w.timeout = timeout;
    // Every rank of every communicator joins in one group (one thread joins for all of them);
    // the joins then finish in the background, waited for with a bound.
    ncclConfig_t config = nonBlocking();
    const auto join = [&](ncclComm_t* comm, int n, const ncclUniqueId& id, int member, int device,
                          const std::string& what) {
        cudaSetDevice(device);
        if (const ncclResult_t r = ncclCommInitRankConfig(comm, n, id, member, &config);
            !accepted(r)) {
            *why = "creating " + what + ": NCCL: " + ncclGetErrorString(r);
        }
    };
    const auto newId = [&](ncclUniqueId* id) {
        if (const ncclResult_t r = ncclGetUniqueId(id); r != ncclSuccess) {
            *why = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
            return false;
        }
        return true;
    };
    std::vector<std::pair<std::tuple<int, int, bool>, ncclUniqueId>> channel_ids;
    for (const auto& key : channelsOf(schedule)) {
        ncclUniqueId id;
        if (!newId(&id)) {
            return nullptr;
        }
        channel_ids.emplace_back(key, id);
        w.channels[key] = {};
    }
    ncclUniqueId coll_id[2];
    for (ncclUniqueId& id : coll_id) {
        if (!newId(&id)) {
            return nullptr;
        }
    }
    ncclGroupStart();
    for (const auto& [key, id] : channel_ids) {
        const auto [a, b, gradient] = key;
        Impl::Channel& ch = w.channels[key];
        const std::string what =
            "the channel from rank " + std::to_string(a) + " to rank " + std::to_string(b);
        join(&ch.comm[0], 2, id, 0, w.device[static_cast<std::size_t>(a)], what);
        join(&ch.comm[1], 2, id, 1, w.device[static_cast<std::size_t>(b)], what);
    }
    for (int k = 0; k < 2; ++k) {
        w.coll_comm[k].assign(static_cast<std::size_t>(schedule.ranks), nullptr);
        w.coll_stream[k].assign(static_cast<std::size_t>(schedule.ranks), nullptr);
        for (int r = 0; r < schedule.ranks; ++r) {
            join(&w.coll_comm[k][static_cast<std::size_t>(r)], schedule.ranks, coll_id[k], r,
                 w.device[static_cast<std::size_t>(r)], "the collective communicator");
        }
    }
    if (const ncclResult_t r = ncclGroupEnd(); !accepted(r) && why->empty()) {
        *why = std::string("creating the NCCL communicators: ") + ncclGetErrorString(r);
    }
    if (why->empty()) {
        *why = w.settleAll("creating the NCCL communicators");
    }
    if (!why->empty()) {
        w.abortAll(*why);  // what did join is not destroyed: a peer may never have come
        return nullptr;
    }
    for (auto& [key, ch] : w.channels) {
        const auto [a, b, gradient] = key;
        const int devs[2] = {w.device[static_cast<std::size_t>(a)],
                             w.device[static_cast<std::size_t>(b)]};
        for (int i = 0; i < 2; ++i) {
            newStream(devs[i], &ch.stream[i], why);
        }
    }
    for (int k = 0; k < 2; ++k) {
        for (int r = 0; r < schedule.ranks; ++r) {
            newStream(w.device[static_cast<std::size_t>(r)],
                      &w.coll_stream[k][static_cast<std::size_t>(r)], why);
        }
    }
    for (int d : w.device) {
        w.enqueueLock(d);
        keepStagingApart(d);
    }
    if (!why->empty()) {
        w.abortAll(*why);
        return nullptr;
    }
    return world;
}

std::shared_ptr<NcclWorld> NcclWorld::createAcrossProcesses(const schedule::Schedule& schedule,
                                                            int rank, int device,
                                                            exec::Transport& transport,
                                                            std::chrono::milliseconds timeout,
                                                            std::string* why) {
    if (std::string p = orderProblem(schedule); !p.empty()) {
        *why = p;
        return nullptr;
    }
    const auto channels = channelsOf(schedule);
    // The ids: one per channel, then one per collective communicator.
    const std::size_t ids = channels.size() + 2;
    std::vector<char> bytes(ids * sizeof(ncclUniqueId));
    if (rank == 0) {
        for (std::size_t i = 0; i < ids; ++i) {
            ncclUniqueId id;
            if (const ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
                *why = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
                transport.abort(*why);
                return nullptr;
            }
            std::memcpy(bytes.data() + i * sizeof(ncclUniqueId), &id, sizeof id);
        }
    }
    if (auto st = transport.shareFromRank0(&bytes); !st.ok()) {
        *why = "sharing NCCL's ids over " + transport.describe() + ": " + st.message;
        return nullptr;
    }
    if (bytes.size() != ids * sizeof(ncclUniqueId)) {
        *why = "rank 0 sent " + std::to_string(bytes.size()) + " bytes of NCCL ids, expected " +
               std::to_string(ids * sizeof(ncclUniqueId)) + " (another schedule?)";
        transport.abort(*why);  // the others would wait in NCCL's bootstrap for this rank
        return nullptr;
    }
    const auto idAt = [&](std::size_t i) {
        ncclUniqueId id;
        std::memcpy(&id, bytes.data() + i * sizeof(ncclUniqueId), sizeof id);
        return id;
    };
    std::shared_ptr<NcclWorld> world(new NcclWorld);
    world->impl_ = std::make_unique<Impl>();
    Impl& w = *world->impl_;
    w.device.assign(static_cast<std::size_t>(schedule.ranks), -1);
    w.device[static_cast<std::size_t>(rank)] = device;
    w.timeout = timeout;
    if (cudaSetDevice(device) != cudaSuccess) {
        *why = "cudaSetDevice(" + std::to_string(device) + ") failed";
        transport.abort(*why);
        return nullptr;
    }
    // Every communicator of this rank in one group: no order to agree on between processes. The
    // joins finish in the background (non-blocking communicators) and are waited for with a
    // bound, so that a process that never joins stops the others.
    ncclConfig_t config = nonBlocking();
    ncclResult_t first_error = ncclSuccess;
    const auto join = [&](ncclComm_t* comm, int n, const ncclUniqueId& id, int member) {
        if (const ncclResult_t r = ncclCommInitRankConfig(comm, n, id, member, &config);
            !accepted(r) && first_error == ncclSuccess) {
            first_error = r;
        }
    };
    ncclGroupStart();
    std::size_t i = 0;
    for (const auto& key : channels) {
        const auto [a, b, gradient] = key;
        if (a == rank || b == rank) {
            const int side = a == rank ? 0 : 1;
            Impl::Channel& ch = w.channels[key];
            join(&ch.comm[side], 2, idAt(i), side);
            newStream(device, &ch.stream[side], why);
        }
        ++i;
    }
    for (int k = 0; k < 2; ++k) {
        w.coll_comm[k].assign(static_cast<std::size_t>(schedule.ranks), nullptr);
        w.coll_stream[k].assign(static_cast<std::size_t>(schedule.ranks), nullptr);
        join(&w.coll_comm[k][static_cast<std::size_t>(rank)], schedule.ranks,
             idAt(channels.size() + static_cast<std::size_t>(k)), rank);
        newStream(device, &w.coll_stream[k][static_cast<std::size_t>(rank)], why);
    }
    if (const ncclResult_t r = ncclGroupEnd(); !accepted(r) && first_error == ncclSuccess) {
        first_error = r;
    }
    w.enqueueLock(device);
    keepStagingApart(device);
    if (!why->empty()) {
        // a stream could not be made: the communicators are aborted below
    } else if (first_error != ncclSuccess) {
        *why = std::string("joining the NCCL communicators: ") + ncclGetErrorString(first_error);
    } else {
        *why = w.settleAll("joining the NCCL communicators (rank " + std::to_string(rank) + ")");
    }
    if (!why->empty()) {
        w.abortAll(*why);
        transport.abort(*why);
        return nullptr;
    }
    return world;
}

NcclWorld::~NcclWorld() = default;

std::unique_ptr<exec::Comm> NcclWorld::comm(int rank, int lane, cudaStream_t lane_stream) {
    return std::make_unique<NcclComm>(*impl_, rank, lane, lane_stream);
}

void NcclWorld::abort() {
    impl_->abortAll();
}

#else

struct NcclWorld::Impl {};

std::shared_ptr<NcclWorld> NcclWorld::create(const schedule::Schedule& schedule,
                                             const std::vector<int>& device_of_rank,
                                             std::chrono::milliseconds, std::string* why) {
    *why = problem(schedule, device_of_rank);
    return nullptr;
}

std::shared_ptr<NcclWorld> NcclWorld::createAcrossProcesses(const schedule::Schedule& schedule, int,
                                                            int, exec::Transport&,
                                                            std::chrono::milliseconds,
                                                            std::string* why) {
    *why = orderProblem(schedule);
    return nullptr;
}

NcclWorld::~NcclWorld() = default;

std::unique_ptr<exec::Comm> NcclWorld::comm(int, int, cudaStream_t) {
    return nullptr;
}

void NcclWorld::abort() {}

#endif

}  // namespace pipescope::cuda
