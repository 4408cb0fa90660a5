#include "long_write.h"

#include <cstdio>
#include <unistd.h>

namespace pipescope::cli {

namespace {

volatile std::sig_atomic_t g_interrupted = 0;

extern "C" void onInterrupt(int) {
    g_interrupted = 1;
}

}  // namespace

LongWrite::LongWrite(std::string name) : name_(std::move(name)), tty_(isatty(fileno(stderr)) != 0) {
    g_interrupted = 0;
    int_ = std::signal(SIGINT, onInterrupt);
    term_ = std::signal(SIGTERM, onInterrupt);
}

LongWrite::~LongWrite() {
    std::signal(SIGINT, int_);
    std::signal(SIGTERM, term_);
}

std::function<bool(double)> LongWrite::callback() {
    return [this](double fraction) {
        show(fraction);
        return g_interrupted == 0;
    };
}

void LongWrite::show(double fraction) {
    const int pct = static_cast<int>(fraction * 100);
    if (tty_ && pct != shown_) {
        shown_ = pct;
        std::fprintf(stderr, "\r%s: %d%%", name_.c_str(), pct);
        std::fflush(stderr);
    }
}

bool LongWrite::interrupted(const trace::TraceStatus& st) {
    if (tty_ && shown_ >= 0) {
        std::fprintf(stderr, "\r%*s\r", static_cast<int>(name_.size()) + 6, "");
        std::fflush(stderr);
        shown_ = -1;
    }
    return st.code == trace::TraceStatus::Code::Cancelled;
}

}  // namespace pipescope::cli
