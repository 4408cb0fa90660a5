// Creating the NCCL communicators of a run: every rank's in one process (create), or one
// rank's per process with the ids shared over the run's transport (createAcrossProcesses).
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include <pipescope/cuda/nccl_comm.h>

#if PIPESCOPE_HAVE_NCCL
#include "nccl_world_impl.h"
#endif

namespace pipescope::cuda {

#if PIPESCOPE_HAVE_NCCL

namespace {

using namespace nccl_detail;

// Every communicator is non-blocking: NCCL never waits on the host inside a call (joining a
// communicator, connecting a channel on its first message: both wait for the peer); the call
// returns ncclInProgress and the communicator's state says when it is done, so that every such
// wait is bounded by the timeout (Impl::settle).
ncclConfig_t nonBlocking() {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    return config;
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

// Connects every channel end this process holds with a one-float message, all in one group.
// NCCL connects a channel on its first message, and that send's enqueue waits for the receiver
// to post: left to the schedule, a rank's first send on a channel would hold its
// communication lane (and the sends queued behind it) on the host until the peer reached the
// matching receive. Done here, every channel is ready before the first op. Bounded by the
// timeout; "" when every channel has connected and its streams have finished.
std::string connectChannels(NcclWorld::Impl& w) {
    struct End {
        ncclComm_t* comm;
        cudaStream_t stream;
        int device;
        int side;  // 0 sends, 1 receives
        std::string what;
    };
    std::vector<End> ends;
    for (auto& [key, ch] : w.channels) {
        const auto [a, b, gradient] = key;
        for (int side = 0; side < 2; ++side) {
            if (ch.comm[side] != nullptr) {
                ends.push_back({&ch.comm[side], ch.stream[side],
                                w.device[static_cast<std::size_t>(side == 0 ? a : b)], side,
                                "connecting the channel from rank " + std::to_string(a) +
                                    " to rank " + std::to_string(b)});
            }
        }
    }
    if (ends.empty()) {
        return {};
    }
    // Two floats per device: one sent, one received into.
    std::map<int, float*> scratch;
    std::string why;
    for (const End& e : ends) {
        if (scratch.count(e.device) == 0) {
            float* p = nullptr;
            if (cudaSetDevice(e.device) != cudaSuccess ||
                cudaMalloc(reinterpret_cast<void**>(&p), 2 * sizeof(float)) != cudaSuccess ||
                cudaMemset(p, 0, 2 * sizeof(float)) != cudaSuccess) {
                why = "allocating a buffer to connect the NCCL channels on device " +
                      std::to_string(e.device) + ": " + cudaGetErrorString(cudaGetLastError());
                p = nullptr;
            }
            scratch[e.device] = p;
        }
    }
    if (why.empty()) {
        ncclGroupStart();
        for (const End& e : ends) {
            cudaSetDevice(e.device);
            float* buffer = scratch[e.device];
            const ncclResult_t r = e.side == 0
                                       ? ncclSend(buffer, 1, ncclFloat, 1, *e.comm, e.stream)
                                       : ncclRecv(buffer + 1, 1, ncclFloat, 0, *e.comm, e.stream);
            if (!nccl_detail::accepted(r) && why.empty()) {
                why = e.what + ": NCCL: " + ncclGetErrorString(r);
            }
        }
        if (const ncclResult_t r = ncclGroupEnd(); !nccl_detail::accepted(r) && why.empty()) {
            why = std::string("connecting the NCCL channels: ") + ncclGetErrorString(r);
        }
    }
    if (why.empty()) {
        const auto deadline = NcclWorld::Impl::Clock::now() + w.timeout;
        for (const End& e : ends) {
            cudaSetDevice(e.device);
            if (auto st = w.waitUntil(e.comm, e.stream, deadline, e.what); !st.ok()) {
                why = st.message;
                break;
            }
        }
    }
    for (const auto& [device, p] : scratch) {
        if (p != nullptr) {
            cudaSetDevice(device);
            // After a failure the communicators are aborted by the caller first; a buffer a
            // kernel might still touch is left to the process's end rather than freed here.
            if (why.empty()) {
                (void)cudaFree(p);
            }
        }
    }
    (void)cudaGetLastError();
    return why;
}

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
    if (why->empty()) {
        *why = connectChannels(w);
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
    if (why->empty()) {
        *why = connectChannels(w);  // every process does this at the same point
    }
    if (!why->empty()) {
        w.abortAll(*why);
        transport.abort(*why);
        return nullptr;
    }
    return world;
}

#else

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

#endif

}  // namespace pipescope::cuda
