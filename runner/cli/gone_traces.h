// A multi-process run in which a rank's process died: its trace was left "running", without
// indexes. The survivors mark it failed, so that every file of the run says what happened.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pipescope::cli {

// For each rank of `gone`, the trace its process was writing (rankTracePath(out, rank)): when
// its rank row says it ran on this machine (`host`) and that process has ended, the file gets
// its indexes and is marked failed with a message naming the rank and `seen_by`, this process's
// rank. Every surviving process calls it, so that a rank that died on another machine is marked
// by a survivor there; the write lock decides which survivor of one machine marks a file, and
// the others leave it. The one that marks it says so on `log`. With `report`, a file this
// process cannot mark (another machine's, missing, unreadable, its writer still up) gets a line
// on `log` too: the lowest rank still up reports, so that the run says it once.
void markGoneTraces(const std::string& out, const std::vector<int>& gone, int seen_by,
                    const std::string& host, bool report, std::ostream& log);

}  // namespace pipescope::cli
