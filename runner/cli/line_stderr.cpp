#include "line_stderr.h"

#include <cerrno>
#include <iostream>
#include <mutex>
#include <streambuf>
#include <string>
#include <unistd.h>

namespace pipescope::cli {

namespace {

class LineAtATime final : public std::streambuf {
  public:
    explicit LineAtATime(int fd) : fd_(fd) {}

  protected:
    int_type overflow(int_type c) override {
        if (traits_type::eq_int_type(c, traits_type::eof())) {
            return traits_type::not_eof(c);
        }
        const char ch = traits_type::to_char_type(c);
        (void)xsputn(&ch, 1);
        return c;
    }

    std::streamsize xsputn(const char* s, std::streamsize n) override {
        const std::lock_guard<std::mutex> lock(m_);
        line_.append(s, static_cast<std::size_t>(n));
        // Whole lines go out; a piece without its end waits for it (or for 4 KiB).
        const auto end = line_.rfind('\n');
        if (end != std::string::npos) {
            writeOut(end + 1);
        } else if (line_.size() >= kMax) {
            writeOut(line_.size());
        }
        return n;
    }

    int sync() override {
        const std::lock_guard<std::mutex> lock(m_);
        writeOut(line_.size());
        return 0;
    }

  private:
    static constexpr std::size_t kMax = 4096;

    // The first `count` bytes, in as few writes as the pipe takes (one, for a line).
    void writeOut(std::size_t count) {
        std::size_t done = 0;
        while (done < count) {
            const ssize_t w = ::write(fd_, line_.data() + done, count - done);
            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                break;  // stderr is gone: nothing else to tell
            }
            done += static_cast<std::size_t>(w);
        }
        line_.erase(0, count);
    }

    int fd_;
    std::mutex m_;
    std::string line_;
};

}  // namespace

void writeStderrByLines() {
    // Never destroyed: std::cerr is flushed once more as the program ends, after any static
    // object here would be gone.
    static auto* const buffer = new LineAtATime(STDERR_FILENO);
    std::cerr.flush();
    std::cerr.rdbuf(buffer);
    std::cerr.unsetf(std::ios::unitbuf);  // else every << would flush a piece of a line
}

}  // namespace pipescope::cli
