// A pipescope-trace command that writes for a while (merge, import-nsys, the exports): it shows a
// percentage on stderr when stderr is a terminal (a file or a pipe wants the result, not the
// count), and Ctrl+C or SIGTERM stops it through its progress callback, so that it leaves no
// half-built output instead of dying with one. One at a time; the signals are caught while it
// lives.
#pragma once

#include <csignal>
#include <functional>
#include <string>

#include <pipescope/trace/types.h>

namespace pipescope::cli {

class LongWrite {
  public:
    explicit LongWrite(std::string name);
    ~LongWrite();  // gives the signals back to what handled them before
    LongWrite(const LongWrite&) = delete;
    LongWrite& operator=(const LongWrite&) = delete;

    // For the job's options: shows the fraction done; false once interrupted.
    std::function<bool(double)> callback();
    // After the job: wipes the percentage; true when `st` says the job stopped on an interrupt.
    bool interrupted(const trace::TraceStatus& st);

  private:
    void show(double fraction);

    std::string name_;
    bool tty_ = false;
    int shown_ = -1;
    void (*int_)(int) = SIG_DFL;
    void (*term_)(int) = SIG_DFL;
};

}  // namespace pipescope::cli
