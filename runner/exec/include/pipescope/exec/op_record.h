// The trace row of one executed op of the schedule IR, as every backend writes it: the host span
// the interpreter measures, and the device span a GPU profiler finds for the same op.
#pragma once

#include <cstdint>

#include <pipescope/exec/rank_backend.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/trace/types.h>

namespace pipescope::exec {

// The op's kind, micro-batch, chunk, peer, collective and lane (comm for communication ops,
// compute otherwise; gpu for source gpu), with the span and source given. `bytes` and `cpu_ns`
// are left unset (-1).
trace::OpRecord opRecord(const schedule::Op& op, const OpKey& key, std::int64_t start_ns,
                         std::int64_t end_ns, trace::Source source);

}  // namespace pipescope::exec
