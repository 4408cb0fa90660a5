// Where an output file named on a command line (or in a save dialog) is really written.
#pragma once

#include <string>

namespace pipescope::trace {

// The descriptor an output path names instead of a file: "-" (standard output), /dev/stdout,
// /dev/stderr, /dev/fd/N and /proc/self/fd/N, also through symbolic links to them. Writing goes
// to that descriptor as it is open (a shell's `>` or `>>` file, a pipe, a terminal); -1 when
// `path` names none.
int namedDescriptor(const std::string& path);

// Why a trace (an SQLite file) cannot be written to `path` when it names a descriptor ("PATH: a
// trace is an SQLite file; it cannot be written to a stream") or an existing device, pipe or
// socket, which writing would replace; "" when it names a file, a folder or nothing yet.
std::string traceStreamProblem(const std::string& path);

// `path` with symbolic links in its last component followed to the file they name (relative
// targets from the link's folder; at most 40 links). Outputs are written there, so that replacing
// a file through a link keeps the link and changes the file it points to.
std::string followLinks(const std::string& path);

}  // namespace pipescope::trace
