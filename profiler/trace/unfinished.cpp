// Traces their runner did not finish: whether it is gone, and finishing them (repair).
#include <cerrno>
#include <fstream>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <pipescope/trace/liveness.h>
#include <pipescope/trace/writer.h>

#include "lod_build.h"
#include "schema.h"
#include "sqlite_util.h"

namespace pipescope::trace {

using detail::Db;
using detail::Stmt;

std::string thisHost() {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) {
        return {};
    }
    return buf;
}

std::string thisBootId() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string id;
    std::getline(in, id);
    return id;
}

bool runnerGone(const TraceReader& reader) {
    if (reader.run().status != RunStatus::Running) {
        return false;
    }
    const std::string here = thisHost();
    bool any_here = false;
    for (const RankInfo& r : reader.ranks()) {
        if (r.pid <= 0 || (!r.host.empty() && r.host != here)) {
            continue;
        }
        any_here = true;
        if (::kill(static_cast<pid_t>(r.pid), 0) == 0 || errno == EPERM) {
            return false;  // still there (or another user's process with that id)
        }
    }
    return any_here;
}

std::int64_t runnerAliveHere(const TraceReader& reader) {
    if (reader.run().status != RunStatus::Running) {
        return 0;
    }
    const std::string here = thisHost();
    for (const RankInfo& r : reader.ranks()) {
        if (r.pid > 0 && (r.host.empty() || r.host == here) &&
            (::kill(static_cast<pid_t>(r.pid), 0) == 0 || errno == EPERM)) {
            return r.pid;
        }
    }
    return 0;
}

namespace {

// finalizeTrace and markRunningTraceFailed. The write lock is taken before the status is read
// (BEGIN IMMEDIATE), so that of several processes racing to mark one file, one builds and marks
// it and the others, once it has committed, find it no longer running.
TraceStatus finalizeUnderLock(const std::string& path, const std::string& message,
                              bool only_running, bool* marked) {
    if (marked != nullptr) {
        *marked = false;
    }
    // A repair: also where the rank rows cannot tell (a simulated run's ranks have no process
    // id). Not for a rank whose process was seen gone: a killed process's other threads may
    // still hold its files for a moment after it shows as a zombie.
    if (!only_running && traceBeingWritten(path)) {
        return TraceStatus::error(TraceStatus::Code::BadInput,
                                  path +
                                      ": another process is writing this trace now (a run in "
                                      "progress); repair is for a run whose writer stopped");
    }
    Db db;
    if (db.open(path, SQLITE_OPEN_READWRITE) != SQLITE_OK) {
        return TraceStatus::error(TraceStatus::Code::IoError,
                                  path + ": cannot open for writing: " + db.errorMessage());
    }
    if (!db.tableExists("pipescope_meta") || !db.tableExists("op") || !db.tableExists("run")) {
        return TraceStatus::error(TraceStatus::Code::NotPipeScope,
                                  path + ": not a PipeScope trace");
    }
    // Before anything is written: a newer PipeScope's file may hold tables and rows this build
    // knows nothing of, and indexes or summary levels built the old way would damage it.
    if (TraceStatus st = detail::checkSchemaVersion(db, path); !st.ok()) {
        return st;
    }
    if (db.exec("BEGIN IMMEDIATE") != SQLITE_OK) {
        return TraceStatus::error(TraceStatus::Code::IoError,
                                  path + ": cannot lock for writing: " + db.errorMessage());
    }
    bool running = false;
    {
        Stmt q(db, "SELECT status = 'running' FROM run WHERE id = 1");
        running = q.step() == SQLITE_ROW && q.int32(0) != 0;
    }
    if (only_running && !running) {
        db.exec("ROLLBACK");
        return TraceStatus::success();
    }
    std::string why;
    if (!detail::buildIndexesAndLod(db, &why)) {
        const bool read_only = (db.extendedErrorCode() & 0xff) == SQLITE_READONLY ||
                               why.find("readonly database") != std::string::npos;
        db.exec("ROLLBACK");
        return TraceStatus::error(
            TraceStatus::Code::IoError,
            path + ": cannot build indexes: " + (why.empty() ? db.errorMessage() : why) +
                (read_only ? " (the file or its folder is read-only, and a repair writes the "
                             "trace: copy it with its -wal to a folder you can write)"
                           : ""));
    }
    Stmt upd(db,
             "UPDATE run SET status = 'failed', message = ? WHERE id = 1 AND status = 'running'");
    upd.bind(1, message);
    if (upd.step() != SQLITE_DONE || db.exec("COMMIT") != SQLITE_OK) {
        db.exec("ROLLBACK");
        return TraceStatus::error(TraceStatus::Code::IoError, path + ": " + db.errorMessage());
    }
    db.exec("PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
    if (marked != nullptr) {
        *marked = running;
    }
    return TraceStatus::success();
}

}  // namespace

TraceStatus finalizeTrace(const std::string& path, const std::string& message) {
    return finalizeUnderLock(path, message, false, nullptr);
}

TraceStatus markRunningTraceFailed(const std::string& path, const std::string& message,
                                   bool* marked) {
    return finalizeUnderLock(path, message, true, marked);
}

}  // namespace pipescope::trace
