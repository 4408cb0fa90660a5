#include <pipescope/app/run_data.h>

namespace pipescope::app {

RunData::~RunData() = default;

std::string opLabel(const trace::OpRecord& op) {
    using trace::OpKind;
    std::string s(trace::toString(op.kind));
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
            const auto name = trace::collectiveName(op.collective);
            return s + "(" + (name.empty() ? std::string("?") : std::string(name)) + "," + mb + ")";
        }
        case OpKind::Opt:
            return s;
        default:
            return op.chunk > 0 ? s + mb + ".c" + std::to_string(op.chunk) : s + mb;
    }
}

}  // namespace pipescope::app
