#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fcntl.h>
#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include <pipescope/trace/output_path.h>
#include <pipescope/trace/units.h>
#include <pipescope/trace/writer.h>

#include "lod_build.h"
#include "schema.h"
#include "sqlite_util.h"
#include "writer_impl.h"

namespace pipescope::trace {

namespace {

// Why SQLite could not create `file`, in words where the folder tells: SQLite's own "unable to
// open database file" does not say that the folder is missing or read-only.
std::string createProblem(const std::string& file, const std::string& sqlite_message) {
    namespace fs = std::filesystem;
    std::error_code ec;
    fs::path folder = fs::path(file).parent_path();
    if (folder.empty()) {
        folder = ".";
    }
    if (!fs::exists(folder, ec)) {
        return "its folder " + folder.string() + " does not exist";
    }
    if (!fs::is_directory(folder, ec)) {
        return folder.string() + " is not a folder";
    }
    return sqlite_message;
}

// The byte WritingLock locks: SQLite's lock bytes start at 1 GiB and take 510 bytes.
constexpr off_t kWritingLockByte = 0x40000000 + 4096;

struct flock writingLockRange(short type) {
    struct flock range {};
    range.l_type = type;
    range.l_whence = SEEK_SET;
    range.l_start = kWritingLockByte;
    range.l_len = 1;
    return range;
}

}  // namespace

void WritingLock::take(const std::string& file) {
    release();
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    struct flock range = writingLockRange(F_WRLCK);
    if (fd_ >= 0 && ::fcntl(fd_, F_OFD_SETLK, &range) != 0) {
        release();
    }
}

void WritingLock::release() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

bool traceBeingWritten(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    struct flock range = writingLockRange(F_WRLCK);
    const bool held = ::fcntl(fd, F_OFD_GETLK, &range) == 0 && range.l_type != F_UNLCK;
    ::close(fd);
    return held;
}

TraceStatus refuseToReplaceTraceBeingWritten(const std::string& path) {
    return TraceStatus::error(TraceStatus::Code::BadInput,
                              path +
                                  ": another process is writing this trace now (a run in "
                                  "progress); refusing to replace it: wait for it to end, or "
                                  "write to another file");
}

std::int64_t wallClockNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::string TraceWriter::Impl::commit(const Batch& b, int delay_ms) {
    if (db.exec("BEGIN") != SQLITE_OK) {
        return "cannot begin a batch: " + db.errorMessage();
    }
    const bool ok = writeBatch(b);
    if (ok && delay_ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    if (!ok || db.exec("COMMIT") != SQLITE_OK) {
        const std::string why = db.errorMessage();
        db.exec("ROLLBACK");
        return "writing a batch failed: " + why;
    }
    return {};
}

void TraceWriter::Impl::commitLoop() {
    std::unique_lock lock(mutex);
    const auto max_age = options.max_batch_age;
    for (;;) {
        const auto ready = [this] { return !queue.empty() || stopping; };
        if (max_age.count() <= 0) {
            work.wait(lock, ready);
        } else {
            // Also wake when the rows being buffered have waited max_age, and commit them.
            while (!ready()) {
                if (cur.size() == 0) {
                    work.wait(lock);
                } else if (work.wait_until(lock, cur_since + max_age) == std::cv_status::timeout &&
                           cur.size() > 0 && queue.empty() &&
                           std::chrono::steady_clock::now() >= cur_since + max_age) {
                    queue.push_back(std::move(cur));
                    cur = Batch{};
                }
            }
        }
        if (queue.empty()) {
            return;  // stopping, and everything is written
        }
        Batch b = std::move(queue.front());
        queue.pop_front();
        const bool skip = !error.ok();  // after a failure, later batches are dropped
        const int delay = batch_delay_ms;
        writing = true;
        lock.unlock();
        const std::string why = skip ? std::string() : commit(b, delay);
        lock.lock();
        writing = false;
        if (!skip) {
            counted(b, why);
        }
        idle.notify_all();
    }
}

void TraceWriter::Impl::counted(const Batch& b, const std::string& why) {
    if (!why.empty()) {
        fail(TraceStatus::Code::IoError, why);
        return;
    }
    stats.ops += static_cast<std::int64_t>(b.ops.size());
    stats.memory_samples += static_cast<std::int64_t>(b.memory.size());
    stats.gpu_records += static_cast<std::int64_t>(
        b.kernels.size() + b.memcpys.size() + b.memsets.size() + b.runtimes.size() +
        b.syncs.size() + b.nvtx.size() + b.gpu_memory.size());
    stats.batches += 1;
}

void TraceWriter::Impl::startCommitter() {
    stopping = false;
    committer_running = true;
    committer = std::thread([this] { commitLoop(); });
}

void TraceWriter::Impl::stopCommitter(std::unique_lock<std::mutex>& lock) {
    if (!committer.joinable()) {
        return;
    }
    stopping = true;
    work.notify_one();
    lock.unlock();
    committer.join();
    lock.lock();
    committer_running = false;
    // An adder that waited for room can queue its batch after the committer's last look: it is
    // written here, by the thread the database belongs to from now on.
    while (!queue.empty()) {
        const Batch b = std::move(queue.front());
        queue.pop_front();
        if (error.ok()) {
            counted(b, commit(b, 0));
        }
    }
    idle.notify_all();  // adders waiting for room see that nobody will make it
}

TraceStatus TraceWriter::Impl::flushLocked(std::unique_lock<std::mutex>& lock) {
    if (!error.ok()) {
        return error;
    }
    if (!open) {
        return TraceStatus::error(TraceStatus::Code::IoError, "trace writer is not open");
    }
    queueCurrentLocked(lock);
    idle.wait(lock, [this] { return (queue.empty() && !writing) || !committer_running; });
    return error;
}

TraceWriter::TraceWriter() : impl_(std::make_unique<Impl>()) {}

TraceWriter::~TraceWriter() {
    std::unique_lock lock(impl_->mutex);
    if (impl_->open) {
        impl_->flushLocked(lock);
    }
    impl_->stopCommitter(lock);
}

TraceStatus TraceWriter::create(const std::string& path, const RunInfo& run,
                                const WriterOptions& options) {
    std::lock_guard lock(impl_->mutex);
    Impl& d = *impl_;
    d.path = path;
    d.options = options;
    d.options.batch_rows = std::max<std::size_t>(1, options.batch_rows);
    d.run = run;
    d.error = {};
    namespace fs = std::filesystem;
    std::error_code ec;
    if (const std::string problem = traceStreamProblem(path); !problem.empty()) {
        return d.error = TraceStatus::error(TraceStatus::Code::BadInput, problem);
    }
    // Through a link, the file it names is replaced and the link kept.
    const std::string file = followLinks(path);
    if (fs::is_directory(file, ec)) {
        return d.error =
                   TraceStatus::error(TraceStatus::Code::IoError, path + ": it is a directory");
    }
    if (fs::exists(file, ec)) {
        if (!options.overwrite) {
            return d.error = TraceStatus::error(TraceStatus::Code::Exists,
                                                path + ": file exists (refusing to overwrite it)");
        }
        if (traceBeingWritten(file)) {
            return d.error = refuseToReplaceTraceBeingWritten(path);
        }
        for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
            fs::remove(file + suffix, ec);
        }
        if (fs::exists(file)) {
            return d.error = TraceStatus::error(TraceStatus::Code::IoError,
                                                path + ": cannot replace the existing file");
        }
    }
    d.write_lock.take(file);  // before SQLite creates it: never a moment unlocked
    // A file that cannot be made a trace (a full disk, a file size limit) is removed as create()
    // returns: left, it would read as "a SQLite database, but not a PipeScope trace".
    struct RemoveUnlessOpen {
        Impl& d;
        const std::string& file;
        ~RemoveUnlessOpen() {
            if (!d.open) {
                d.db.close();
                d.write_lock.release();
                std::error_code ec;
                for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
                    std::filesystem::remove(file + suffix, ec);
                }
            }
        }
    } remove_unless_open{d, file};
    if (d.db.open(file, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) != SQLITE_OK) {
        d.fail(TraceStatus::Code::IoError,
               "cannot create: " + createProblem(file, d.db.errorMessage()));
        return d.error;
    }
    std::string why;
    if (d.db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
                  "PRAGMA temp_store = MEMORY") != SQLITE_OK ||
        detail::createSchema(d.db, &why) != SQLITE_OK) {
        d.fail(TraceStatus::Code::IoError,
               "cannot write the schema: " + (why.empty() ? d.db.errorMessage() : why));
        return d.error;
    }
    Stmt ins(d.db,
             "INSERT INTO run (id, name, config_json, backend, status, message, start_ns, end_ns, "
             "host, versions, command_line, ranks, iterations, warmup) "
             "VALUES (1, ?, ?, ?, 'running', NULL, ?, NULL, ?, ?, ?, ?, ?, ?)");
    ins.bind(1, run.name).bind(2, run.config_json).bind(3, run.backend).bind(4, run.start_ns);
    ins.bind(5, run.host).bind(6, run.versions).bind(7, run.command_line).bind(8, run.ranks);
    ins.bind(9, run.iterations).bind(10, run.warmup);
    Stmt session(d.db,
                 "INSERT INTO TARGET_INFO_SESSION_START_TIME (utcEpochNs, utcTime, localTime) "
                 "VALUES (?, strftime('%Y-%m-%dT%H:%M:%fZ', ? / 1e9, 'unixepoch'), "
                 "strftime('%Y-%m-%dT%H:%M:%f', ? / 1e9, 'unixepoch', 'localtime'))");
    session.bind(1, run.start_ns).bind(2, run.start_ns).bind(3, run.start_ns);
    const auto meta = [&](const char* key, const std::string& value) {
        if (value.empty()) {
            return true;
        }
        Stmt s(d.db, "INSERT INTO pipescope_meta (key, value) VALUES (?, ?)");
        s.bind(1, std::string_view(key)).bind(2, value);
        return s.step() == SQLITE_DONE;
    };
    if (ins.step() != SQLITE_DONE || session.step() != SQLITE_DONE ||
        !meta(detail::kMetaRunId, run.run_id) || !meta(detail::kMetaBootId, run.boot_id)) {
        d.fail(TraceStatus::Code::IoError, "cannot write the run row: " + d.db.errorMessage());
        return d.error;
    }
    if (!d.prepareStatements()) {
        return d.error;
    }
    d.open = true;
    d.finishing = false;
    d.startCommitter();
    return d.error;
}

void TraceWriter::addRank(const RankInfo& v) {
    impl_->add(&Batch::ranks, v);
}
void TraceWriter::addOp(const OpRecord& v) {
    impl_->add(&Batch::ops, v);
}
void TraceWriter::addMemory(const MemorySample& v) {
    impl_->add(&Batch::memory, v);
}
void TraceWriter::addMetric(const MetricRecord& v) {
    impl_->add(&Batch::metrics, v);
}
void TraceWriter::addMemcpy(const MemcpyRecord& v) {
    impl_->add(&Batch::memcpys, v);
}
void TraceWriter::addMemset(const MemsetRecord& v) {
    impl_->add(&Batch::memsets, v);
}
void TraceWriter::addSync(const SyncRecord& v) {
    impl_->add(&Batch::syncs, v);
}
void TraceWriter::addNvtx(const NvtxRecord& v) {
    impl_->add(&Batch::nvtx, v);
}
void TraceWriter::addGpuMemoryEvent(const GpuMemoryEvent& v) {
    impl_->add(&Batch::gpu_memory, v);
}
void TraceWriter::addGpuInfo(const GpuInfo& v) {
    impl_->add(&Batch::gpus, v);
}
void TraceWriter::addOpCorrelation(const OpCorrelation& v) {
    impl_->add(&Batch::op_correlations, v);
}
void TraceWriter::addThreadName(const ThreadName& v) {
    impl_->add(&Batch::thread_names, v,
               [&v](Impl& d) { d.cur.thread_name_ids.push_back(d.internLocked(v.name)); });
}
void TraceWriter::addKernel(const KernelRecord& v) {
    impl_->add(&Batch::kernels, v, [&v](Impl& d) {
        d.cur.kernel_names.emplace_back(d.internLocked(v.demangled_name),
                                        d.internLocked(v.short_name));
    });
}
void TraceWriter::addRuntime(const RuntimeRecord& v) {
    impl_->add(&Batch::runtimes, v,
               [&v](Impl& d) { d.cur.runtime_names.push_back(d.internLocked(v.name)); });
}

std::int64_t TraceWriter::stringId(std::string_view text) {
    std::lock_guard lock(impl_->mutex);
    return impl_->internLocked(text);
}

TraceStatus TraceWriter::flush() {
    std::unique_lock lock(impl_->mutex);
    return impl_->flushLocked(lock);
}

// After the last commit: leave one self-contained file behind, with no -wal or -shm beside it.
// Another program may be reading the trace as the run finishes (the app watches a running
// trace), and a reader holds back both steps for a moment: the checkpoint while its read lasts,
// the change out of WAL mode while it has the file open at all. Both are tried again for a
// while. A trace whose log is copied in is whole in its .db even if it stays in WAL mode (an
// empty -wal and the -shm remain while that program has it open): nothing to report. A log
// that could not be copied in is: a copy of the .db alone would be damaged.
void TraceWriter::Impl::settleIntoOneFile() {
    Impl& d = *this;
    using Clock = std::chrono::steady_clock;
    constexpr auto kRetry = std::chrono::milliseconds(20);
    constexpr auto kReadersWait = std::chrono::seconds(10);  // for a read to end
    constexpr auto kOpenWait = std::chrono::seconds(2);      // for a reader to close the file
    const auto logSize = [&] {
        std::error_code ec;
        const auto log = std::filesystem::file_size(d.path + "-wal", ec);
        return ec ? std::string("part of it") : memoryText(static_cast<double>(log));
    };
    const Clock::time_point start = Clock::now();
    for (;;) {
        Stmt checkpoint(d.db, "PRAGMA wal_checkpoint(TRUNCATE)");
        if (checkpoint.step() != SQLITE_ROW) {
            d.fail(TraceStatus::Code::IoError,
                   "the trace is complete, but " + logSize() + " of it could not be moved out of " +
                       d.path + "-wal (SQLite: " + d.db.errorMessage() +
                       "); keep that file beside the trace, which SQLite reads with it, and "
                       "free some disk space");
            return;
        }
        if (checkpoint.int64(0) == 0) {  // not held back by a reader: all of the log is copied
            break;
        }
        if (Clock::now() - start > kReadersWait) {
            d.fail(TraceStatus::Code::IoError,
                   "the trace is complete, but another program kept reading it for " +
                       std::to_string(kReadersWait.count()) + " s as the run finished, so " +
                       logSize() + " of it is still in " + d.path +
                       "-wal; keep that file beside the trace: SQLite reads it with the trace, "
                       "and moves it into the trace once that program is done");
            return;
        }
        checkpoint = Stmt();
        std::this_thread::sleep_for(kRetry);
    }
    const Clock::time_point copied = Clock::now();
    for (;;) {
        Stmt mode(d.db, "PRAGMA journal_mode = DELETE");
        if ((mode.step() == SQLITE_ROW && mode.text(0) == "delete") ||
            Clock::now() - copied > kOpenWait) {
            return;
        }
        mode = Stmt();
        std::this_thread::sleep_for(kRetry);
    }
}

TraceStatus TraceWriter::finish(RunStatus status, const std::string& message,
                                std::optional<std::int64_t> end_ns,
                                const std::function<void(double)>& progress) {
    std::unique_lock lock(impl_->mutex);
    Impl& d = *impl_;
    if (!d.open) {
        return d.error.ok()
                   ? TraceStatus::error(TraceStatus::Code::IoError, "trace writer is not open")
                   : d.error;
    }
    // Committing what is still queued, then the indexes and summary levels: shares of the time
    // measured with bench/import_bench.
    constexpr double kCommitShare = 0.15;
    const auto report = [&](double fraction) {
        if (progress) {
            progress(fraction);
        }
    };
    d.finishing = true;
    d.flushLocked(lock);
    d.stopCommitter(lock);  // the database is this thread's from here on
    report(kCommitShare);
    if (!d.error.ok()) {
        // Still record why the run ended, so the file says it is incomplete.
        Stmt upd(d.db, "UPDATE run SET status = 'failed', message = ? WHERE id = 1");
        upd.bind(1, d.error.message);
        upd.step();
        d.open = false;
        d.db.close();
        d.write_lock.release();
        return d.error;
    }
    std::string why;
    const bool built =
        d.db.exec("BEGIN") == SQLITE_OK && detail::buildIndexesAndLod(d.db, &why, [&](double f) {
            report(kCommitShare + (1 - kCommitShare) * f);
        });
    Stmt upd(d.db, "UPDATE run SET status = ?, message = ?, end_ns = ? WHERE id = 1");
    upd.bind(1, toString(status));
    if (message.empty()) {
        upd.bindNull(2);
    } else {
        upd.bind(2, message);
    }
    upd.bind(3, end_ns ? *end_ns : wallClockNs());
    if (!built || upd.step() != SQLITE_DONE || d.db.exec("COMMIT") != SQLITE_OK) {
        if (why.empty()) {
            why = d.db.errorMessage();
        }
        d.db.exec("ROLLBACK");
        d.fail(TraceStatus::Code::IoError, "cannot finalize: " + why);
    } else {
        d.settleIntoOneFile();
    }
    d.open = false;
    d.db.close();
    d.write_lock.release();
    return d.error;
}

const std::string& TraceWriter::path() const {
    return impl_->path;
}

WriterStats TraceWriter::stats() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->stats;
}

void TraceWriter::setBatchDelayForTesting(int milliseconds) {
    std::lock_guard lock(impl_->mutex);
    impl_->batch_delay_ms = milliseconds;
}

}  // namespace pipescope::trace
