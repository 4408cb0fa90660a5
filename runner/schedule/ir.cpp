#include <array>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::schedule {

static_assert(kCollectiveCount == static_cast<int>(kCollectiveKinds),
              "CostsConfig::collectives_us has one entry per Collective");

namespace {
constexpr std::array<std::string_view, kOpKindCount> kKindNames = {
    "F",      "B",      "W",      "IF",     "IB",    "S",         "T",  "L",
    "SEND_F", "RECV_F", "SEND_B", "RECV_B", "BCAST", "ALLREDUCE", "OPT"};
constexpr std::array<std::string_view, kCollectiveCount> kCollectiveNames = {
    "none", "input", "input_grad", "output_bcast", "output", "output_grad"};
}  // namespace

std::string_view toString(OpKind k) {
    const auto i = static_cast<std::size_t>(k);
    return i < kKindNames.size() ? kKindNames[i] : std::string_view("?");
}

std::string_view toString(Collective c) {
    const auto i = static_cast<std::size_t>(c);
    return i < kCollectiveNames.size() ? kCollectiveNames[i] : std::string_view("?");
}

std::optional<OpKind> opKindFromString(std::string_view s) {
    for (std::size_t i = 0; i < kKindNames.size(); ++i) {
        if (kKindNames[i] == s) {
            return static_cast<OpKind>(i);
        }
    }
    return std::nullopt;
}

std::optional<Collective> collectiveFromString(std::string_view s) {
    for (std::size_t i = 0; i < kCollectiveNames.size(); ++i) {
        if (kCollectiveNames[i] == s) {
            return static_cast<Collective>(i);
        }
    }
    return std::nullopt;
}

std::string Op::label() const {
    std::string s(toString(kind));
    switch (kind) {
        case OpKind::SendF:
        case OpKind::SendB:
        case OpKind::RecvF:
        case OpKind::RecvB:
            s += std::to_string(microbatch);
            if (chunk != 0) {
                s += ".c" + std::to_string(chunk);
            }
            s +=
                (kind == OpKind::SendF || kind == OpKind::SendB ? ">" : "<") + std::to_string(peer);
            break;
        case OpKind::Bcast:
        case OpKind::AllReduce:
            s += "(" + std::string(toString(collective)) + "," + std::to_string(microbatch) + ")";
            break;
        case OpKind::Opt:
            break;
        default:
            s += std::to_string(microbatch);
            if (chunk != 0) {
                s += ".c" + std::to_string(chunk);
            }
            break;
    }
    return s;
}

bool Op::operator==(const Op& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk && peer == o.peer &&
           collective == o.collective && root == o.root && blocking == o.blocking &&
           bytes == o.bytes;
}

std::size_t Schedule::opCount() const {
    std::size_t n = 0;
    for (const auto& r : ops) {
        n += r.size();
    }
    return n;
}

}  // namespace pipescope::schedule
