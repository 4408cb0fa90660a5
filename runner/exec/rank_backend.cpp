#include <cstdio>
#include <stdexcept>
#include <string>

#include <pipescope/exec/op_record.h>
#include <pipescope/exec/rank_backend.h>

namespace pipescope::exec {

namespace {

// id = (iteration + 1) << 40 | rank << 24 | op_index: never 0, and each part readable in hex.
constexpr int kIndexBits = 24;
constexpr int kRankBits = 16;
constexpr int kIterationShift = kIndexBits + kRankBits;

}  // namespace

std::uint64_t opKeyId(const OpKey& key) {
    if (key.rank < 0 || key.rank >= kOpKeyMaxRanks || key.op_index < 0 ||
        key.op_index >= kOpKeyMaxOps || key.iteration < 0 || key.iteration >= kOpKeyMaxIterations) {
        throw std::invalid_argument("op id out of range: rank " + std::to_string(key.rank) +
                                    ", iteration " + std::to_string(key.iteration) + ", op " +
                                    std::to_string(key.op_index));
    }
    return (static_cast<std::uint64_t>(key.iteration) + 1) << kIterationShift |
           static_cast<std::uint64_t>(key.rank) << kIndexBits |
           static_cast<std::uint64_t>(key.op_index);
}

std::optional<OpKey> opKeyFromId(std::uint64_t id) {
    const std::uint64_t iteration_plus_one = id >> kIterationShift;
    if (iteration_plus_one == 0 ||
        iteration_plus_one > static_cast<std::uint64_t>(kOpKeyMaxIterations)) {
        return std::nullopt;
    }
    OpKey key;
    key.iteration = static_cast<int>(iteration_plus_one - 1);
    key.rank = static_cast<int>((id >> kIndexBits) & ((1u << kRankBits) - 1));
    key.op_index = static_cast<int>(id & ((1u << kIndexBits) - 1));
    return key;
}

trace::OpRecord opRecord(const schedule::Op& op, const OpKey& key, std::int64_t start_ns,
                         std::int64_t end_ns, trace::Source source) {
    trace::OpRecord rec;
    rec.rank = key.rank;
    rec.iteration = key.iteration;
    rec.kind = static_cast<trace::OpKind>(op.kind);
    rec.microbatch = op.microbatch;
    rec.chunk = op.chunk;
    rec.lane = source == trace::Source::Gpu ? trace::Lane::Gpu
               : schedule::isComm(op.kind)  ? trace::Lane::Comm
                                            : trace::Lane::Compute;
    rec.start_ns = start_ns;
    rec.end_ns = end_ns;
    rec.source = source;
    rec.op_index = key.op_index;
    rec.peer = op.kind == schedule::OpKind::Bcast ? op.root : op.peer;
    rec.collective = static_cast<int>(op.collective);
    return rec;
}

std::string divergenceCause(double learning_rate) {
    char lr[32];
    std::snprintf(lr, sizeof lr, "%g", learning_rate);
    return std::string("the training diverged; the learning rate (run.learning_rate = ") + lr +
           ") is probably too large";
}

}  // namespace pipescope::exec
