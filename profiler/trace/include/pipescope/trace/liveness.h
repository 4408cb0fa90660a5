// Whether the process that writes a trace is still there. A trace's run row says "running"
// until its writer finishes it, so a runner that was killed (or crashed) leaves a file that
// looks like a run in progress; the rank rows' host and pid tell the two apart on this machine.
#pragma once

#include <cstdint>
#include <string>

#include <pipescope/trace/reader.h>

namespace pipescope::trace {

// This machine's host name, as the runners write it in the rank table ("" when unknown).
std::string thisHost();

// This machine's boot id (Linux: /proc/sys/kernel/random/boot_id), the same for every process
// of one machine, containers included, and so for every process reading one clock; "" where
// there is none.
std::string thisBootId();

// True when `reader`'s run is still marked running but every rank process recorded on this
// host has exited. Ranks on other hosts cannot be checked: a run with none here is not gone.
bool runnerGone(const TraceReader& reader);

// While `reader`'s run is marked running: the id of a rank process recorded on this host that is
// still there (0 when none is, or none can be checked).
std::int64_t runnerAliveHere(const TraceReader& reader);

}  // namespace pipescope::trace
