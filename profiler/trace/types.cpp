#include <array>

#include <pipescope/trace/types.h>

namespace pipescope::trace {

namespace {
constexpr std::array<std::string_view, kOpKindCount> kOpKindNames = {
    "F",      "B",      "W",      "IF",     "IB",    "S",         "T",  "L",
    "SEND_F", "RECV_F", "SEND_B", "RECV_B", "BCAST", "ALLREDUCE", "OPT"};
constexpr std::array<std::string_view, kMemoryCategoryCount> kCategoryNames = {
    "weights", "grads", "optimizer", "activations", "vocab", "comm_buffers", "workspace"};
}  // namespace

std::string_view toString(OpKind k) {
    const auto i = static_cast<std::size_t>(k);
    return i < kOpKindNames.size() ? kOpKindNames[i] : std::string_view("?");
}

std::string_view toString(Lane l) {
    switch (l) {
        case Lane::Compute:
            return "compute";
        case Lane::Comm:
            return "comm";
        case Lane::Gpu:
            return "gpu";
    }
    return "?";
}

std::string_view toString(Source s) {
    switch (s) {
        case Source::Sim:
            return "sim";
        case Source::Host:
            return "host";
        case Source::Gpu:
            return "gpu";
    }
    return "?";
}

std::string_view toString(MemoryCategory c) {
    const auto i = static_cast<std::size_t>(c);
    return i < kCategoryNames.size() ? kCategoryNames[i] : std::string_view("?");
}

std::string_view toString(RunStatus s) {
    switch (s) {
        case RunStatus::Running:
            return "running";
        case RunStatus::Complete:
            return "complete";
        case RunStatus::Failed:
            return "failed";
        case RunStatus::Cancelled:
            return "cancelled";
    }
    return "?";
}

std::optional<OpKind> opKindFromString(std::string_view s) {
    for (std::size_t i = 0; i < kOpKindNames.size(); ++i) {
        if (kOpKindNames[i] == s) {
            return static_cast<OpKind>(i);
        }
    }
    return std::nullopt;
}

std::optional<RunStatus> runStatusFromString(std::string_view s) {
    for (auto st :
         {RunStatus::Running, RunStatus::Complete, RunStatus::Failed, RunStatus::Cancelled}) {
        if (toString(st) == s) {
            return st;
        }
    }
    return std::nullopt;
}

std::string_view collectiveName(int id) {
    constexpr std::array<std::string_view, 6> kNames = {
        "", "input", "input_grad", "output_bcast", "output", "output_grad"};
    return id > 0 && id < static_cast<int>(kNames.size()) ? kNames[static_cast<std::size_t>(id)]
                                                          : std::string_view();
}

bool isKnownOp(const OpRecord& op) {
    const auto kind = static_cast<int>(op.kind);
    const auto lane = static_cast<int>(op.lane);
    const auto source = static_cast<int>(op.source);
    return kind >= 0 && kind < kOpKindCount && lane >= 0 && lane < kLaneCount && source >= 0 &&
           source <= static_cast<int>(Source::Gpu);
}

bool isKnownCategory(MemoryCategory category) {
    const auto c = static_cast<int>(category);
    return c >= 0 && c < kMemoryCategoryCount;
}

bool isCommKind(OpKind k) {
    switch (k) {
        case OpKind::SendF:
        case OpKind::RecvF:
        case OpKind::SendB:
        case OpKind::RecvB:
        case OpKind::Bcast:
        case OpKind::AllReduce:
            return true;
        default:
            return false;
    }
}

bool isBlockingWait(OpKind k) {
    return k == OpKind::RecvF || k == OpKind::RecvB || k == OpKind::Bcast || k == OpKind::AllReduce;
}

std::string opLabel(const OpRecord& op) {
    std::string s(toString(op.kind));
    const std::string mb = op.microbatch >= 0 ? std::to_string(op.microbatch) : "";
    switch (op.kind) {
        case OpKind::SendF:
        case OpKind::SendB:
            return s + mb + " \u2192 " + std::to_string(op.peer);
        case OpKind::RecvF:
        case OpKind::RecvB:
            return s + mb + " \u2190 " + std::to_string(op.peer);
        case OpKind::Bcast:
        case OpKind::AllReduce: {
            // A collective of no one micro-batch (a hand-made or imported trace) is named
            // without the empty slot: ALLREDUCE(output_grad), not ALLREDUCE(output_grad,).
            const auto name = collectiveName(op.collective);
            return s + "(" + (name.empty() ? std::string("?") : std::string(name)) +
                   (mb.empty() ? "" : "," + mb) + ")";
        }
        case OpKind::Opt:
            return s;
        default:
            return op.chunk > 0 ? s + mb + ".c" + std::to_string(op.chunk) : s + mb;
    }
}

}  // namespace pipescope::trace
