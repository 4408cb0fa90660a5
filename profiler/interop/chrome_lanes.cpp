#include "chrome_lanes.h"

#include <algorithm>

namespace pipescope::interop::detail {

void LanePacker::beginRank() {
    for (auto& subs : lanes_) {
        subs.clear();
    }
    extra_.clear();
    next_tid_ = kFirstExtraTid;
}

int LanePacker::place(trace::Lane lane, std::int64_t start_ns, std::int64_t end_ns) {
    auto& subs = lanes_[static_cast<std::size_t>(lane)];
    // A zero-length op keeps its thread busy for one more nanosecond, and needs one that was
    // free before its instant.
    const bool point = end_ns <= start_ns;
    const std::int64_t busy_until = point ? start_ns + 1 : end_ns;
    for (SubLane& s : subs) {
        if (point ? s.end_ns < start_ns : s.end_ns <= start_ns) {
            s.end_ns = busy_until;
            return s.tid;
        }
    }
    SubLane fresh;
    fresh.end_ns = busy_until;
    if (subs.empty() && static_cast<int>(lane) < kFixedChromeLanes) {
        fresh.tid = laneTid(lane);
    } else {
        fresh.tid = next_tid_++;
        extra_.push_back({fresh.tid, lane, static_cast<int>(subs.size())});
    }
    subs.push_back(fresh);
    return fresh.tid;
}

bool FlowMatcher::keyOf(const trace::OpRecord& op, Key* key, bool* send) {
    if (op.peer < 0) {
        return false;
    }
    switch (op.kind) {
        case trace::OpKind::SendF:
        case trace::OpKind::SendB:
            *send = true;
            *key = {op.iteration, op.kind == trace::OpKind::SendF ? 0 : 1, op.rank, op.peer};
            return true;
        case trace::OpKind::RecvF:
        case trace::OpKind::RecvB:
            *send = false;
            *key = {op.iteration, op.kind == trace::OpKind::RecvF ? 0 : 1, op.peer, op.rank};
            return true;
        default:
            return false;
    }
}

void FlowMatcher::count(const trace::OpRecord& op) {
    Key key;
    bool send = false;
    if (keyOf(op, &key, &send)) {
        Counts& c = counts_[key];
        (send ? c.sends : c.recvs) += 1;
    }
}

void FlowMatcher::seal() {
    pairs_ = 0;
    for (auto& [key, c] : counts_) {
        c.base = pairs_ + 1;
        pairs_ += std::min(c.sends, c.recvs);
    }
}

std::int64_t FlowMatcher::idFor(const trace::OpRecord& op) {
    Key key;
    bool send = false;
    if (!keyOf(op, &key, &send)) {
        return 0;
    }
    const auto it = counts_.find(key);
    if (it == counts_.end()) {
        return 0;
    }
    Counts& c = it->second;
    const std::int64_t k = send ? c.next_send++ : c.next_recv++;
    return k < std::min(c.sends, c.recvs) ? c.base + k : 0;
}

}  // namespace pipescope::interop::detail
