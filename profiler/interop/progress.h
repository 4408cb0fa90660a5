// How far a long interop job (an import, a merge, an export) is, for its caller's progress
// callback: the rows read over the rows it reads in all, as the first share of the job, then the
// writer's finish (indexes and summary levels) as the rest; an export is all reading (share 1).
// Private to profiler/interop.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include <pipescope/trace/types.h>

namespace pipescope::interop::detail {

class Progress {
  public:
    // `fn` may be empty; `read_share` (0..1) is the part of the job the reading is; `job` names
    // it in the cancelled status ("the import").
    Progress(const std::function<bool(double)>& fn, double read_share, std::string job)
        : fn_(fn), read_share_(read_share), job_(std::move(job)) {}
    void addTotal(std::int64_t rows) { total_ += std::max<std::int64_t>(rows, 0); }
    // Counts a row read; false once the caller asked to stop. The caller hears of it about 200
    // times over a job (every row of a small one, every 16384th of a large one).
    bool step() {
        if (++done_ >= next_ && fn_ && !stopped_) {
            next_ = done_ + std::clamp<std::int64_t>(total_ / 200, 1, 16384);
            const double read =
                total_ > 0 ? std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_))
                           : 0.0;
            stopped_ = !fn_(read_share_ * read);
        }
        return !stopped_;
    }
    bool stopped() const { return stopped_; }
    // The writer's finish, after the reading: `fraction` of it done. It is not stopped midway
    // (the file would be left half built), but a stop asked for during it is kept: stopped()
    // then tells the job to discard what it finished rather than deliver it.
    void finishing(double fraction) {
        if (fn_ && !fn_(read_share_ + (1 - read_share_) * fraction)) {
            stopped_ = true;
        }
    }
    trace::TraceStatus cancelled() const {
        return trace::TraceStatus::error(trace::TraceStatus::Code::Cancelled,
                                         job_ + " was cancelled");
    }

  private:
    const std::function<bool(double)>& fn_;
    double read_share_;
    std::string job_;
    std::int64_t total_ = 0, done_ = 0, next_ = 0;
    bool stopped_ = false;
};

}  // namespace pipescope::interop::detail
