// Private state of TraceWriter, shared by writer.cpp (batching, the committer thread, finish)
// and writer_rows.cpp (the statements that put a batch's rows into the tables).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <pipescope/trace/writer.h>

#include "sqlite_util.h"

namespace pipescope::trace {

using detail::Db;
using detail::Stmt;

// The rows of one transaction. String ids are resolved when a row is added, so the committer
// never reads the intern table that adders write.
struct Batch {
    std::vector<RankInfo> ranks;
    std::vector<OpRecord> ops;
    std::vector<MemorySample> memory;
    std::vector<MetricRecord> metrics;
    std::vector<KernelRecord> kernels;
    std::vector<std::pair<std::int64_t, std::int64_t>> kernel_names;  // demangled, short
    std::vector<MemcpyRecord> memcpys;
    std::vector<MemsetRecord> memsets;
    std::vector<RuntimeRecord> runtimes;
    std::vector<std::int64_t> runtime_names;
    std::vector<SyncRecord> syncs;
    std::vector<NvtxRecord> nvtx;
    std::vector<GpuMemoryEvent> gpu_memory;
    std::vector<GpuInfo> gpus;
    std::vector<OpCorrelation> op_correlations;
    std::vector<ThreadName> thread_names;
    std::vector<std::int64_t> thread_name_ids;
    std::vector<std::pair<std::int64_t, std::string>> new_strings;

    std::size_t size() const {
        return ranks.size() + ops.size() + memory.size() + metrics.size() + kernels.size() +
               memcpys.size() + memsets.size() + runtimes.size() + syncs.size() + nvtx.size() +
               gpu_memory.size() + gpus.size() + op_correlations.size() + thread_names.size() +
               new_strings.size();
    }
};

// What traceBeingWritten() looks for: a lock a TraceWriter holds on its file while it writes. An
// open file description's lock on one byte past SQLite's own lock bytes, so that it never meets
// SQLite's locks and stays while this process opens and closes other descriptors of the file.
class WritingLock {
  public:
    WritingLock() = default;
    ~WritingLock() { release(); }
    WritingLock(const WritingLock&) = delete;
    WritingLock& operator=(const WritingLock&) = delete;

    // Creates `file` if it is not there. Best effort: a file system without locks goes unlocked.
    void take(const std::string& file);
    // Only once SQLite has closed the file: closing a descriptor drops this process's POSIX
    // locks on the file, SQLite's among them.
    void release();

  private:
    int fd_ = -1;
};

// Adders fill `cur` under `mutex`; a full batch goes to the queue and the committer thread
// writes it, so a thread that adds a row (a rank, CUPTI's drain) never waits for SQLite unless
// the committer falls kMaxQueued batches behind. Only the committer touches the database while
// it runs; create() and finish() use it while the committer is not running.
struct TraceWriter::Impl {
    static constexpr std::size_t kMaxQueued = 4;

    WritingLock write_lock;  // declared before `db`: released after the database is closed
    Db db;
    std::string path;
    WriterOptions options;
    RunInfo run;
    mutable std::mutex mutex;
    std::condition_variable work;  // the committer: a batch is queued, or stop
    std::condition_variable idle;  // waiters: a batch was written
    TraceStatus error;
    bool open = false;
    WriterStats stats;
    int batch_delay_ms = 0;

    Batch cur;
    std::chrono::steady_clock::time_point cur_since;  // when `cur` got its first row
    std::deque<Batch> queue;
    bool writing = false;
    bool stopping = false;
    // Whether the committer thread runs, read by adders under `mutex` (the std::thread itself
    // is only touched by the thread that starts and joins it).
    bool committer_running = false;
    // finish() has begun: rows added from now on are not written.
    bool finishing = false;
    std::thread committer;
    std::unordered_map<std::string, std::int64_t> string_ids;

    Stmt ins_rank, ins_op, ins_memory, ins_metric, ins_string, ins_kernel, ins_memcpy, ins_memset,
        ins_runtime, ins_sync, ins_nvtx, ins_gpu_memory, ins_gpu, ins_op_correlation,
        ins_thread_name;

    void fail(TraceStatus::Code code, const std::string& what) {
        if (error.ok()) {
            error = TraceStatus::error(code, path + ": " + what);
        }
    }

    bool prepareStatements();
    bool writeBatch(const Batch& b);
    // One transaction for `b`, on the committer thread (mutex not held). "" or why it failed.
    std::string commit(const Batch& b, int delay_ms);
    void commitLoop();
    void startCommitter();
    // Counts a written batch in the stats, or records why it could not be written.
    void counted(const Batch& b, const std::string& why);
    // Waits for the queue to be written, then ends the committer; `lock` holds mutex.
    void stopCommitter(std::unique_lock<std::mutex>& lock);
    // Queues the current batch and waits until everything queued is written.
    TraceStatus flushLocked(std::unique_lock<std::mutex>& lock);
    // After the last commit: the log copied into the file and WAL mode left (finish()).
    void settleIntoOneFile();
    void queueCurrentLocked(std::unique_lock<std::mutex>& lock) {
        if (cur.size() == 0) {
            return;
        }
        idle.wait(lock, [this] { return queue.size() < kMaxQueued || !committer_running; });
        queue.push_back(std::move(cur));
        cur = Batch{};
        work.notify_one();
    }
    std::int64_t internLocked(std::string_view text);

    // Buffers a record and queues the batch when it is full.
    template <class T, class Extra = std::nullptr_t>
    void add(std::vector<T> Batch::*buffer, const T& value, Extra extra = nullptr) {
        std::unique_lock lock(mutex);
        if (!open || finishing || !error.ok()) {
            return;
        }
        if constexpr (!std::is_same_v<Extra, std::nullptr_t>) {
            extra(*this);
        }
        if (cur.size() == 0 && options.max_batch_age.count() > 0) {
            cur_since = std::chrono::steady_clock::now();
            work.notify_one();  // the committer now has a deadline to wait for
        }
        (cur.*buffer).push_back(value);
        if (cur.size() >= options.batch_rows) {
            queueCurrentLocked(lock);
        }
    }
};

}  // namespace pipescope::trace
