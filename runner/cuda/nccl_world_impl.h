// The state every NCCL endpoint of a process shares (nccl_comm.h): the communicators, their
// streams, the abort that stops them all, and the bounded waits on them. Internal to the CUDA
// backend; built only with NCCL. Creation is in nccl_create.cpp, the endpoints in
// nccl_comm.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cuda_runtime.h>
#include <map>
#include <mutex>
#include <nccl.h>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <pipescope/cuda/nccl_comm.h>

namespace pipescope::cuda {

namespace nccl_detail {

using exec::CommStatus;
using Code = CommStatus::Code;
using Clock = std::chrono::steady_clock;

// NCCL calls on non-blocking communicators return ncclInProgress for work still under way.
inline bool accepted(ncclResult_t r) {
    return r == ncclSuccess || r == ncclInProgress;
}

}  // namespace nccl_detail

struct NcclWorld::Impl {
    using CommStatus = nccl_detail::CommStatus;
    using Code = nccl_detail::Code;
    using Clock = nccl_detail::Clock;

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

}  // namespace pipescope::cuda
