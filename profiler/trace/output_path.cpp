#include <charconv>
#include <filesystem>
#include <string_view>

#include <pipescope/trace/output_path.h>

namespace pipescope::trace {

namespace {

constexpr int kMaxLinks = 40;

// The descriptor number after `prefix` in `path` ("/dev/fd/3" → 3), or -1.
int descriptorAfter(std::string_view path, std::string_view prefix) {
    if (path.substr(0, prefix.size()) != prefix || path.size() == prefix.size()) {
        return -1;
    }
    const std::string_view digits = path.substr(prefix.size());
    int fd = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), fd);
    return ec == std::errc() && end == digits.data() + digits.size() && fd >= 0 ? fd : -1;
}

int descriptorOf(const std::filesystem::path& path) {
    const std::string p = path.lexically_normal().string();
    if (p == "/dev/stdout") {
        return 1;
    }
    if (p == "/dev/stderr") {
        return 2;
    }
    if (const int fd = descriptorAfter(p, "/dev/fd/"); fd >= 0) {
        return fd;
    }
    return descriptorAfter(p, "/proc/self/fd/");
}

// The path the link `path` names, or an empty path when `path` is not a link.
std::filesystem::path nextLink(const std::filesystem::path& path) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(path, ec))) {
        return {};
    }
    const fs::path target = fs::read_symlink(path, ec);
    if (ec || target.empty()) {
        return {};
    }
    return target.is_absolute() ? target : path.parent_path() / target;
}

}  // namespace

int namedDescriptor(const std::string& path) {
    if (path == "-") {
        return 1;
    }
    std::filesystem::path p(path);
    for (int hops = 0; hops <= kMaxLinks && !p.empty(); ++hops) {
        if (const int fd = descriptorOf(p); fd >= 0) {
            return fd;
        }
        p = nextLink(p);
    }
    return -1;
}

std::string traceStreamProblem(const std::string& path) {
    if (namedDescriptor(path) >= 0) {
        return path + ": a trace is an SQLite file; it cannot be written to a stream";
    }
    // Writing a trace replaces what is there: never a device, a pipe or a socket (as root,
    // /dev/null itself).
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status st = fs::status(followLinks(path), ec);
    if (ec || !fs::exists(st) || fs::is_regular_file(st) || fs::is_directory(st)) {
        return {};
    }
    const char* what = fs::is_fifo(st)     ? "a named pipe"
                       : fs::is_socket(st) ? "a socket"
                                           : "a device";
    return path + ": it is " + what +
           ", not a file; a trace is an SQLite file of its own, so give the name of a file";
}

std::string followLinks(const std::string& path) {
    std::filesystem::path p(path);
    for (int hops = 0; hops < kMaxLinks; ++hops) {
        std::filesystem::path next = nextLink(p);
        if (next.empty()) {
            break;
        }
        p = std::move(next);
    }
    return p.string();
}

}  // namespace pipescope::trace
