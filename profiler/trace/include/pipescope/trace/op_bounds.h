// Where a measured op can lie: within the run's recorded wall-clock span. A host or device op far
// outside it (an end edited to 2^63, a start hours before the run began) cannot be right, and one
// such op would make its iteration last for centuries and its rank busy throughout; the analysis
// leaves these out and says so, and so does the Chrome export. Simulated ops run on a virtual clock
// the run's span does not bound; only an op decades from its start is left out.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include <pipescope/trace/types.h>

namespace pipescope::trace {

class OpBounds {
  public:
    // No bounds: a run still being written (no end), or a run table whose end is before its start.
    OpBounds() = default;

    // The run's span, 0 to end - start, widened on both sides by the span itself and at least a
    // second: ranks of merged files start at their own times, and Nsight imports are shifted by a
    // measured clock offset, so only what no clock can explain is left out.
    static OpBounds of(const RunInfo& run) {
        OpBounds b;
        if (!run.end_ns || *run.end_ns < run.start_ns) {
            return b;
        }
        constexpr std::int64_t kSecond = 1'000'000'000;
        // A span of over 73 years is a damaged run table, and keeps the bounds below from
        // overflowing.
        std::int64_t span = 0;
        if (__builtin_sub_overflow(*run.end_ns, run.start_ns, &span) ||
            span > (std::int64_t{1} << 61)) {
            return b;
        }
        const std::int64_t margin = std::max(span, kSecond);
        b.bounded_ = true;
        b.lo_ = -margin;
        b.hi_ = span + margin;
        b.span_ = span;
        return b;
    }

    bool bounded() const { return bounded_; }
    std::int64_t span() const { return span_; }

    // True when the op can be taken as measured: within the bounds, or simulated and within 73
    // years (2^61 ns) of the virtual clock's start, which no simulation comes near (an edited
    // file's op from -2^63 to 2^63 - 1 would make every sum over it overflow).
    bool holds(const OpRecord& op) const {
        const std::int64_t end = std::max(op.start_ns, op.end_ns);
        if (op.source == Source::Sim) {
            constexpr std::int64_t kSimFar = std::int64_t{1} << 61;
            return op.start_ns >= -kSimFar && end <= kSimFar;
        }
        return !bounded_ || (op.start_ns >= lo_ && end <= hi_);
    }

    // The same for a device record of the trace's GPU tables (a kernel) from `start` to `end`;
    // in a run without bounds (still being written), within 73 years of the time origin, so that
    // sums over it cannot overflow either.
    bool holdsRecord(std::int64_t start, std::int64_t end) const {
        const std::int64_t last = std::max(start, end);
        constexpr std::int64_t kFar = std::int64_t{1} << 61;
        return bounded_ ? start >= lo_ && last <= hi_ : start >= -kFar && last <= kFar;
    }

  private:
    bool bounded_ = false;
    std::int64_t lo_ = std::numeric_limits<std::int64_t>::min();
    std::int64_t hi_ = std::numeric_limits<std::int64_t>::max();
    std::int64_t span_ = 0;
};

}  // namespace pipescope::trace
