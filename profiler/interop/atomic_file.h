// An output file that appears only when it is complete: bytes go to a temporary file beside the
// target, which commit() renames into place. A failed or abandoned export therefore never
// leaves a half-written file behind and never destroys the file it would have replaced.
#pragma once

#include <string>
#include <string_view>

#include <pipescope/trace/types.h>

namespace pipescope::interop::detail {

class AtomicFile {
  public:
    AtomicFile() = default;
    ~AtomicFile();  // removes the temporary file unless commit() succeeded
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    // Creates the temporary file. Errors name the target and the reason (Code::IoError). A
    // target that is not a regular file (a pipe, /dev/null) is written directly instead: it
    // cannot be replaced by a rename, and what it receives is not kept as a file anyway. So is a
    // descriptor the target names ("-", /dev/stdout: trace::namedDescriptor), as it is open. A
    // symbolic link is kept: the file it names is replaced.
    trace::TraceStatus open(const std::string& target);
    // Buffered; the first failure is kept and reported by commit().
    void write(std::string_view bytes);
    // Flushes, syncs and renames the temporary file onto the target.
    trace::TraceStatus commit();
    // Abandons the output (also what the destructor does).
    void discard();

  private:
    void flushBuffer();
    void fail(const std::string& what, int err);

    std::string target_;  // as named, for messages
    std::string file_;    // what is replaced: the target, or the file its links name
    std::string temp_;
    int fd_ = -1;
    bool direct_ = false;  // writing to the target itself (not a regular file)
    std::string buffer_;
    trace::TraceStatus error_;
};

// Refuses (Code::BadInput) an export's output that is the trace it reads, through a link or a
// hard link too, or one of that trace's SQLite files beside it (-wal, -shm, -journal): replacing
// it would destroy the run. The app's save dialog, unlike the command line, let it through.
trace::TraceStatus notTheTrace(const std::string& trace, const std::string& out);

// The same for a trace that a TraceWriter builds (a merge, an import): it is written under a
// hidden name beside its target and renamed onto it once finished, so that a job that fails,
// is cancelled or is killed never leaves a half-built trace at the target, nor destroys the
// file that --force was to replace.
class PartialTrace {
  public:
    PartialTrace() = default;
    ~PartialTrace();  // removes the partial trace unless commit() succeeded
    PartialTrace(const PartialTrace&) = delete;
    PartialTrace& operator=(const PartialTrace&) = delete;

    // Chooses the hidden name. Refuses a target that is a directory (Code::IoError), or that
    // exists unless `overwrite` (Code::Exists, as TraceWriter::create words it).
    trace::TraceStatus prepare(const std::string& target, bool overwrite);
    // Where the writer writes (create it with overwrite on: the name is reserved empty).
    const std::string& path() const { return temp_; }
    // Renames the finished trace onto the target.
    trace::TraceStatus commit();
    // `status` with the hidden name in its message replaced by the target's: what failed while
    // writing the partial trace is reported against the file the user asked for.
    trace::TraceStatus named(trace::TraceStatus status) const;

  private:
    void discard();
    std::string target_;  // as named, for messages
    std::string file_;    // what is replaced: the target, or the file its links name
    std::string temp_;
};

}  // namespace pipescope::interop::detail
