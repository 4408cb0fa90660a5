#include <algorithm>
#include <atomic>
#include <climits>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mpi.h>
#include <mutex>
#include <thread>
#include <unistd.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <pipescope/exec/mpi_transport.h>
#include <pipescope/exec/process.h>

#include "message_hub.h"

namespace pipescope::exec {

namespace {

using detail::Message;
using Clock = std::chrono::steady_clock;

// Every message of a run travels under this MPI tag (below the 32767 that MPI guarantees).
constexpr int kMpiTag = 0x5053;

// Before each payload: the hub's message kind and the interpreter's tag.
struct WireHeader {
    std::uint32_t type = 0;
    std::uint32_t reserved = 0;
    std::uint64_t tag = 0;
};
static_assert(sizeof(WireHeader) == 16);

// What every process tells the others when the world forms.
struct PeerInfo {
    std::int64_t pid = 0;
    std::uint64_t run_key = 0;
    char host[64] = {};
};

std::string mpiError(int code) {
    char text[MPI_MAX_ERROR_STRING] = {};
    int length = 0;
    MPI_Error_string(code, text, &length);
    return std::string(text, static_cast<std::size_t>(std::max(0, length)));
}

}  // namespace

struct MpiTransport::State {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0;
    int world = 1;
    std::vector<PeerInfo> peers;
    std::unique_ptr<detail::MessageHub> hub;

    struct Outgoing {
        int dst = 0;
        std::vector<char> bytes;
    };
    std::mutex q_m;
    std::condition_variable q_cv;
    std::deque<Outgoing> queue;
    bool stop = false;
    std::thread progress;
    std::atomic<bool> check_now{false};

    // Posts one message (the hub's Post): queued for the progress thread.
    std::string post(int dst, Message type, std::uint64_t tag, const void* data,
                     std::size_t bytes) {
        if (bytes > static_cast<std::size_t>(INT_MAX) - sizeof(WireHeader)) {
            return "a message of " + std::to_string(bytes) + " bytes is over MPI's 2 GiB limit";
        }
        std::vector<char> frame(sizeof(WireHeader) + bytes);
        WireHeader h;
        h.type = static_cast<std::uint32_t>(type);
        h.tag = tag;
        std::memcpy(frame.data(), &h, sizeof h);
        if (bytes > 0) {
            std::memcpy(frame.data() + sizeof h, data, bytes);
        }
        std::lock_guard<std::mutex> lock(q_m);
        if (stop) {
            return "the transport has closed";
        }
        if (dst >= 0) {
            if (hub->isGone(dst)) {
                return "rank " + std::to_string(dst) + " is gone";
            }
            queue.push_back({dst, std::move(frame)});
        } else {
            for (int r = 0; r < world; ++r) {
                if (r != rank && !hub->isGone(r)) {
                    queue.push_back({r, frame});
                }
            }
        }
        q_cv.notify_all();
        return {};
    }

    // The other processes of this machine that ended before they finished.
    void checkPeers() {
        for (int r = 0; r < world; ++r) {
            const PeerInfo& p = peers[static_cast<std::size_t>(r)];
            if (r == rank || std::strncmp(p.host, peers[static_cast<std::size_t>(rank)].host,
                                          sizeof p.host) != 0) {
                continue;
            }
            if (!hub->isGone(r) && !processRuns(p.pid) && hub->markGone(r)) {
                (void)post(-1, Message::Gone, static_cast<std::uint64_t>(r), nullptr, 0);
            }
        }
    }

    // A receive under way; its frame stays put until it completes.
    struct Incoming {
        MPI_Request request = MPI_REQUEST_NULL;
        std::vector<char> frame;
    };

    // The only thread that calls MPI between start() and the destructor.
    void progressLoop() {
        std::vector<std::deque<Incoming>> incoming(static_cast<std::size_t>(world));
        std::vector<MPI_Request> requests;
        std::vector<std::vector<char>> buffers;  // requests[i]'s data, alive until it completes
        std::vector<int> done_index;
        auto last_check = Clock::now();
        auto idle_wait = std::chrono::microseconds(20);
#if defined(__linux__)
        // Sleeps of 20 us, not the default slack's 70 (this thread only).
        prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
        bool stopping = false;
        Clock::time_point stop_deadline;
        for (;;) {
            std::deque<Outgoing> batch;
            {
                std::lock_guard<std::mutex> lock(q_m);
                batch.swap(queue);
                if (stop && !stopping) {
                    stopping = true;
                    // Sends to a process that never receives them (gone) cannot complete.
                    stop_deadline = Clock::now() + std::chrono::seconds(5);
                }
            }
            bool active = !batch.empty();
            for (auto& o : batch) {
                MPI_Request request = MPI_REQUEST_NULL;
                const int rc = MPI_Isend(o.bytes.data(), static_cast<int>(o.bytes.size()), MPI_BYTE,
                                         o.dst, kMpiTag, comm, &request);
                if (rc != MPI_SUCCESS) {
                    hub->abort("MPI_Isend to rank " + std::to_string(o.dst) +
                               " failed: " + mpiError(rc));
                    continue;
                }
                requests.push_back(request);
                buffers.push_back(std::move(o.bytes));
            }
            // Everything that has arrived: a receive per message, posted in the order each
            // sender sent them (this thread is the only one that receives, so a probe finds the
            // message the next receive from its sender takes). Never a blocking receive: a
            // sender that dies in the middle of a transfer must not stop this thread, which is
            // the one that notices it died.
            for (;;) {
                int flag = 0;
                MPI_Status status;
                if (MPI_Iprobe(MPI_ANY_SOURCE, kMpiTag, comm, &flag, &status) != MPI_SUCCESS ||
                    flag == 0) {
                    break;
                }
                int count = 0;
                MPI_Get_count(&status, MPI_BYTE, &count);
                Incoming in;
                in.frame.resize(static_cast<std::size_t>(std::max(0, count)));
                MPI_Irecv(in.frame.data(), count, MPI_BYTE, status.MPI_SOURCE, kMpiTag, comm,
                          &in.request);
                incoming[static_cast<std::size_t>(status.MPI_SOURCE)].push_back(std::move(in));
                active = true;
            }
            // Delivered in each sender's order.
            for (int src = 0; src < world; ++src) {
                auto& pending = incoming[static_cast<std::size_t>(src)];
                while (!pending.empty()) {
                    int done = 0;
                    if (const int rc = MPI_Test(&pending.front().request, &done, MPI_STATUS_IGNORE);
                        rc != MPI_SUCCESS) {
                        hub->abort("receiving from rank " + std::to_string(src) +
                                   " failed: " + mpiError(rc));
                        pending.pop_front();
                        continue;
                    }
                    if (done == 0) {
                        break;
                    }
                    std::vector<char> frame = std::move(pending.front().frame);
                    pending.pop_front();
                    active = true;
                    if (frame.size() < sizeof(WireHeader)) {
                        continue;
                    }
                    WireHeader h;
                    std::memcpy(&h, frame.data(), sizeof h);
                    hub->deliver(static_cast<Message>(h.type), src, h.tag,
                                 std::vector<char>(frame.begin() + sizeof h, frame.end()));
                }
            }
            if (!requests.empty()) {
                int completed = 0;
                done_index.resize(requests.size());
                MPI_Testsome(static_cast<int>(requests.size()), requests.data(), &completed,
                             done_index.data(), MPI_STATUSES_IGNORE);
                if (completed > 0 && completed != MPI_UNDEFINED) {
                    active = true;
                    std::size_t kept = 0;
                    for (std::size_t i = 0; i < requests.size(); ++i) {
                        if (requests[i] == MPI_REQUEST_NULL) {
                            continue;
                        }
                        if (kept != i) {  // (a self-move would free the data of a live send)
                            requests[kept] = requests[i];
                            buffers[kept] = std::move(buffers[i]);
                        }
                        ++kept;
                    }
                    requests.resize(kept);
                    buffers.resize(kept);
                }
            }
            const auto now = Clock::now();
            if (now - last_check > std::chrono::milliseconds(100) || check_now.exchange(false)) {
                checkPeers();
                last_check = now;
            }
            if (stopping && (requests.empty() || now > stop_deadline)) {
                break;
            }
            if (active) {
                idle_wait = std::chrono::microseconds(20);
                continue;
            }
            // Nothing happened: look again soon while a lane waits for a message or a transfer
            // is under way (that lag is the transport's latency), and back off to 1 ms when the
            // process is quiet; a lane's send wakes this thread at once. Never a busy spin: where
            // the ranks' processes share the cores, spinning takes their compute time (two
            // processes on two cores, small-2stage-vocab-2: 45 ms per iteration with a spinning
            // thread, 36 ms with this, 26 ms over TCP, whose threads sleep in the kernel).
            bool busy = hub->waiting() > 0 || !requests.empty();
            for (const auto& pending : incoming) {
                busy = busy || !pending.empty();
            }
            idle_wait = busy ? std::chrono::microseconds(20)
                             : std::min(idle_wait * 2, std::chrono::microseconds(1000));
            std::unique_lock<std::mutex> lock(q_m);
            q_cv.wait_for(lock, idle_wait, [&] { return !queue.empty() || stop; });
        }
    }
};

MpiTransport::MpiTransport(std::unique_ptr<State> state) : s_(std::move(state)) {}

MpiTransport::~MpiTransport() {
    if (!s_) {
        return;
    }
    {
        std::lock_guard<std::mutex> lock(s_->q_m);
        s_->stop = true;
        s_->q_cv.notify_all();
    }
    if (s_->progress.joinable()) {
        s_->progress.join();
    }
    s_->hub->setClosing();
    // MPI_Finalize waits for every process: not for one that is gone, nor, after a failure,
    // for one that has been silent for the timeout (stopped); mpirun then ends the job.
    if (s_->hub->goneRanks().empty() && s_->hub->silentRanks().empty()) {
        MPI_Comm_free(&s_->comm);
        MPI_Finalize();
    }
}

std::unique_ptr<MpiTransport> MpiTransport::start(std::uint64_t run_key,
                                                  std::chrono::milliseconds timeout,
                                                  std::string* error) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized != 0) {
        *error = "MPI was already initialized in this process";
        return nullptr;
    }
    int provided = 0;
    if (const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
        rc != MPI_SUCCESS) {
        *error = "MPI_Init_thread failed: " + mpiError(rc);
        return nullptr;
    }
    auto s = std::make_unique<State>();
    const auto fail = [&](const std::string& why) -> std::unique_ptr<MpiTransport> {
        *error = why;
        if (s->comm != MPI_COMM_NULL) {
            MPI_Comm_free(&s->comm);
        }
        MPI_Finalize();
        return nullptr;
    };
    // The progress thread makes every call after this one, never two threads at once.
    if (provided < MPI_THREAD_SERIALIZED) {
        return fail("the MPI library gives thread support level " + std::to_string(provided) +
                    ", below MPI_THREAD_SERIALIZED, which the runner's progress thread needs");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &s->comm);
    MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(s->comm, &s->rank);
    MPI_Comm_size(s->comm, &s->world);

    PeerInfo me;
    me.pid = static_cast<std::int64_t>(getpid());
    me.run_key = run_key;
    gethostname(me.host, sizeof me.host - 1);
    s->peers.resize(static_cast<std::size_t>(s->world));
    if (const int rc =
            MPI_Allgather(&me, sizeof me, MPI_BYTE, s->peers.data(), sizeof me, MPI_BYTE, s->comm);
        rc != MPI_SUCCESS) {
        return fail("the processes could not exchange their identities: " + mpiError(rc));
    }
    std::string strangers;
    for (int r = 1; r < s->world; ++r) {
        if (s->peers[static_cast<std::size_t>(r)].run_key != s->peers[0].run_key) {
            strangers += (strangers.empty() ? "" : ", ") + std::to_string(r);
        }
    }
    if (!strangers.empty()) {
        return fail("rank " + strangers +
                    " of this MPI job run another config (or iteration count, backend or PipeScope "
                    "version) than rank 0: every process of the job must run the same config");
    }

    State* raw = s.get();
    s->hub = std::make_unique<detail::MessageHub>(
        s->rank, s->world, timeout,
        [raw](int dst, Message type, std::uint64_t tag, const void* data, std::size_t bytes) {
            return raw->post(dst, type, tag, data, bytes);
        });
    s->progress = std::thread([raw] { raw->progressLoop(); });
    return std::unique_ptr<MpiTransport>(new MpiTransport(std::move(s)));
}

int MpiTransport::rank() const {
    return s_->rank;
}

int MpiTransport::world() const {
    return s_->world;
}

std::string MpiTransport::describe() const {
    return "MPI (" + mpiLibraryVersion() + ")";
}

std::unique_ptr<Comm> MpiTransport::comm(int rank, int lane) {
    if (rank != s_->rank) {
        return nullptr;  // one rank per process
    }
    return s_->hub->comm(lane);
}

void MpiTransport::abort(const std::string& why) {
    s_->hub->abort(why);
}

std::string MpiTransport::problem() const {
    return s_->hub->problem();
}

bool MpiTransport::stoppedByCancel() const {
    return s_->hub->stoppedByCancel();
}

std::vector<int> MpiTransport::goneRanks() {
    // The progress thread looks at the processes at its next round (within microseconds).
    s_->check_now = true;
    s_->q_cv.notify_all();
    const auto deadline = Clock::now() + std::chrono::milliseconds(200);
    while (s_->check_now && Clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return s_->hub->goneRanks();
}

ClockOffset MpiTransport::measureClockOffset(int samples) {
    return s_->hub->measureClockOffset(samples);
}

CommStatus MpiTransport::shareFromRank0(std::vector<char>* bytes) {
    return s_->hub->shareFromRank0(bytes);
}

void MpiTransport::finish() {
    s_->hub->finish();
}

std::string mpiLibraryVersion() {
    char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
    int length = 0;
    MPI_Get_library_version(text, &length);
    std::string version(text, static_cast<std::size_t>(std::max(0, length)));
    const auto end = version.find_first_of(",\n");
    return version.substr(0, end);
}

}  // namespace pipescope::exec
