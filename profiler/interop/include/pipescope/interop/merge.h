// Joins the per-process traces of a multi-process run (RUN-rank0.db, RUN-rank1.db, ...) into one
// trace on rank 0's clock, and checks the result for causality.
//
// Each process measured its wall clock against rank 0's at start (rank.clock_offset_ns, the
// round trip with the lowest delay); a time t of a file whose run started at S becomes
// t + S + offset − S0 in the merged file (S0: rank 0's start). After merging, no receive may end
// before its send started (the k-th SEND_F from a to b in an iteration pairs with the k-th RECV_F
// on b from a; likewise SEND_B / RECV_B): every pair that does is a violation, reported with by
// how much, never hidden or "fixed".
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <pipescope/trace/types.h>

namespace pipescope::interop {

struct CausalityViolation {
    int send_rank = 0;
    int recv_rank = 0;
    int iteration = 0;
    std::string what;        // "SEND_F3 → RECV_F3"
    std::int64_t by_ns = 0;  // how long before the send's start the receive ended
};

struct MergeReport {
    int files = 0;
    int ranks = 0;
    std::int64_t ops = 0;
    std::int64_t pairs_checked = 0;
    std::vector<CausalityViolation> violations;  // the worst first, at most 20
    std::int64_t violation_count = 0;
    std::vector<std::string> notes;  // per-rank status, missing ranks, clock drift, ...
    // The merged run's status and, unless complete, why (a process failed, a rank is missing).
    trace::RunStatus status = trace::RunStatus::Complete;
    std::string status_message;
};

struct MergeOptions {
    bool overwrite = false;
    // Called now and then with the share of the merge done (0..1): copying the rows up to
    // kMergeWritingFrom, then finishing the output. Returning false while copying stops the
    // merge, which then fails with Code::Cancelled and leaves no output; returning false after
    // that lets the output's indexes be built to their end, and then the merge fails the same
    // way, leaving no output.
    std::function<bool(double)> progress;
};

// From this share of the progress on, the merge writes its output's indexes and summary levels:
// it can no longer stop at once.
inline constexpr double kMergeWritingFrom = 0.6;

// Writes `output` from `inputs`. Fails (nothing written) when an input is not a trace, two inputs
// hold the same rank, or the inputs are not of one run (different configs or world sizes).
trace::TraceStatus mergeTraces(const std::vector<std::string>& inputs, const std::string& output,
                               const MergeOptions& options, MergeReport* report);

}  // namespace pipescope::interop
