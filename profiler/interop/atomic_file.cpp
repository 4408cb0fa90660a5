#include "atomic_file.h"

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

#include <pipescope/trace/output_path.h>
#include <pipescope/trace/writer.h>

namespace pipescope::interop::detail {

namespace {

constexpr std::size_t kBufferBytes = 1 << 20;
constexpr int kMaxNameAttempts = 100;

using Code = trace::TraceStatus::Code;

// Removes what writers to `target` that were killed (kill -9, a crash, a power cut) left beside it:
// ".NAME.PID-N<suffix>" (with an SQLite trace's -wal, -shm, -journal) of a process that is gone.
// A process still there, on this machine, keeps its file.
void removeStaleBeside(const std::string& target, const char* suffix) {
    namespace fs = std::filesystem;
    const fs::path path(target);
    const std::string prefix = "." + path.filename().string() + ".";
    const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
    std::error_code ec;
    for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.rfind(prefix, 0) != 0) {
            continue;
        }
        // PID-N<suffix>, then one of the SQLite files' endings or none.
        const std::string rest = name.substr(prefix.size());
        const std::size_t dash = rest.find('-');
        const std::size_t at = rest.find(suffix);
        if (dash == 0 || dash == std::string::npos || at == std::string::npos ||
            rest.find_first_not_of("0123456789") != dash ||
            rest.find_first_not_of("0123456789", dash + 1) != at) {
            continue;
        }
        const std::string ending = rest.substr(at + std::strlen(suffix));
        if (!ending.empty() && ending != "-wal" && ending != "-shm" && ending != "-journal") {
            continue;
        }
        const long pid = std::strtol(rest.c_str(), nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
            std::error_code ignored;
            fs::remove(it->path(), ignored);
        }
    }
}

// Creates a new, empty hidden file beside `target` (same file system, so that a rename onto the
// target is atomic): ".NAME.PID-N<suffix>". Its descriptor, open for writing, and its path in
// `temp`; -1 with errno set when none can be made.
int createBeside(const std::string& target, const char* suffix, std::string* temp) {
    removeStaleBeside(target, suffix);
    const std::filesystem::path path(target);
    const std::string name = path.filename().string();
    for (int attempt = 0; attempt < kMaxNameAttempts; ++attempt) {
        *temp = (path.parent_path() / ("." + name + "." + std::to_string(::getpid()) + "-" +
                                       std::to_string(attempt) + suffix))
                    .string();
        const int fd = ::open(temp->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST) {
            return fd;
        }
    }
    errno = EEXIST;
    return -1;
}

}  // namespace

trace::TraceStatus notTheTrace(const std::string& trace, const std::string& out) {
    namespace fs = std::filesystem;
    // Also for a file not there yet (a -wal): by its full name, links followed.
    const auto fullName = [](const std::string& path) {
        std::error_code ec;
        const fs::path full = fs::weakly_canonical(fs::absolute(path, ec), ec);
        return ec ? fs::path() : full;
    };
    const fs::path out_name = fullName(out);
    for (const std::string suffix : {"", "-wal", "-shm", "-journal"}) {
        const std::string file = trace + suffix;
        std::error_code ec;
        if ((fs::equivalent(file, out, ec) && !ec) ||
            (!out_name.empty() && out_name == fullName(file))) {
            return trace::TraceStatus::error(
                Code::BadInput,
                out + (suffix.empty() ? ": is the trace being exported; refusing to overwrite it"
                                      : ": is the SQLite " + suffix +
                                            " file of the trace being exported; refusing to "
                                            "write there"));
        }
    }
    return trace::TraceStatus::success();
}

AtomicFile::~AtomicFile() {
    discard();
}

trace::TraceStatus AtomicFile::open(const std::string& target) {
    discard();
    target_ = target;
    error_ = {};
    namespace fs = std::filesystem;
    std::error_code ec;
    if (const int named = trace::namedDescriptor(target); named >= 0) {
        // Standard output and the like: written as they are open (a shell's `>>` appends).
        direct_ = true;
        fd_ = ::fcntl(named, F_DUPFD_CLOEXEC, 0);
        if (fd_ < 0) {
            fail("cannot write", errno);
            return error_;
        }
        buffer_.reserve(kBufferBytes);
        return error_;
    }
    // Through a link, the file it names is replaced and the link kept.
    file_ = trace::followLinks(target);
    if (fs::is_directory(file_, ec)) {
        error_ =
            trace::TraceStatus::error(Code::IoError, target + ": cannot write: it is a directory");
        return error_;
    }
    const auto status = fs::status(file_, ec);
    direct_ = !ec && fs::exists(status) && !fs::is_regular_file(status);
    if (direct_) {
        fd_ = ::open(file_.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) {
            fail("cannot write", errno);
            return error_;
        }
        buffer_.reserve(kBufferBytes);
        return error_;
    }
    fd_ = createBeside(file_, ".tmp", &temp_);
    if (fd_ < 0) {
        const int err = errno;
        temp_.clear();
        fail("cannot write", err);
        return error_;
    }
    buffer_.reserve(kBufferBytes);
    return error_;
}

void AtomicFile::write(std::string_view bytes) {
    if (fd_ < 0 || !error_.ok()) {
        return;
    }
    buffer_.append(bytes);
    if (buffer_.size() >= kBufferBytes) {
        flushBuffer();
    }
}

void AtomicFile::flushBuffer() {
    const char* p = buffer_.data();
    std::size_t left = buffer_.size();
    while (left > 0 && error_.ok()) {
        const ssize_t n = ::write(fd_, p, left);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            fail("writing failed", errno);
            break;
        }
        p += n;
        left -= static_cast<std::size_t>(n);
    }
    buffer_.clear();
}

trace::TraceStatus AtomicFile::commit() {
    if (fd_ < 0) {
        return error_.ok() ? trace::TraceStatus::error(Code::IoError, target_ + ": not open")
                           : error_;
    }
    flushBuffer();
    if (error_.ok() && !direct_ && ::fsync(fd_) != 0 && errno != EINVAL) {
        fail("writing failed", errno);  // EINVAL: a file system without fsync (e.g. a pipe)
    }
    if (::close(fd_) != 0 && error_.ok()) {
        fail("writing failed", errno);
    }
    fd_ = -1;
    if (direct_) {
        return error_;
    }
    if (error_.ok() && std::rename(temp_.c_str(), file_.c_str()) != 0) {
        fail("cannot replace it", errno);
    }
    if (!error_.ok()) {
        std::remove(temp_.c_str());
    }
    temp_.clear();
    return error_;
}

void AtomicFile::discard() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    if (!temp_.empty()) {
        std::remove(temp_.c_str());
        temp_.clear();
    }
    buffer_.clear();
}

void AtomicFile::fail(const std::string& what, int err) {
    if (error_.ok()) {
        error_ = trace::TraceStatus::error(Code::IoError,
                                           target_ + ": " + what + ": " + std::strerror(err));
    }
}

PartialTrace::~PartialTrace() {
    discard();
}

void PartialTrace::discard() {
    if (temp_.empty()) {
        return;
    }
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::filesystem::remove(temp_ + suffix, ec);
    }
    temp_.clear();
}

trace::TraceStatus PartialTrace::prepare(const std::string& target, bool overwrite) {
    discard();
    target_ = target;
    namespace fs = std::filesystem;
    std::error_code ec;
    if (const std::string problem = trace::traceStreamProblem(target); !problem.empty()) {
        return trace::TraceStatus::error(Code::BadInput, problem);
    }
    if (fs::is_directory(target, ec)) {
        return trace::TraceStatus::error(Code::IoError,
                                         target + ": cannot write: it is a directory");
    }
    if (!overwrite && fs::exists(target, ec)) {
        return trace::TraceStatus::error(Code::Exists,
                                         target + ": file exists (refusing to overwrite it)");
    }
    file_ = trace::followLinks(target);  // a link is kept; the file it names is replaced
    if (trace::traceBeingWritten(file_)) {
        return trace::refuseToReplaceTraceBeingWritten(target);
    }
    std::string temp;
    const int fd = createBeside(file_, ".partial", &temp);
    if (fd < 0) {
        return trace::TraceStatus::error(Code::IoError,
                                         target + ": cannot write: " + std::strerror(errno));
    }
    ::close(fd);  // the writer opens it itself; the name is reserved
    temp_ = temp;
    return trace::TraceStatus::success();
}

trace::TraceStatus PartialTrace::named(trace::TraceStatus status) const {
    if (!temp_.empty()) {
        for (std::size_t at = status.message.find(temp_); at != std::string::npos;
             at = status.message.find(temp_, at + target_.size())) {
            status.message.replace(at, temp_.size(), target_);
        }
    }
    return status;
}

trace::TraceStatus PartialTrace::commit() {
    if (temp_.empty()) {
        return trace::TraceStatus::error(Code::IoError, target_ + ": nothing to commit");
    }
    if (std::rename(temp_.c_str(), file_.c_str()) != 0) {
        const int err = errno;
        discard();
        return trace::TraceStatus::error(Code::IoError,
                                         target_ + ": cannot replace it: " + std::strerror(err));
    }
    temp_.clear();
    return trace::TraceStatus::success();
}

}  // namespace pipescope::interop::detail
