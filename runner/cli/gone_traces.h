// A multi-process run in which a rank's process died: its trace was left "running", without
// indexes. The survivors mark it failed, so that every file of the run says what happened.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace pipescope::cli {

// For each rank of `gone`, the trace its process was writing (rankTracePath(out, rank)): when
// its rank row says it ran on this machine (`host`) and that process has ended, the file gets
// its indexes and is marked failed with a message naming the rank and `seen_by`, the rank that
// saw it go. A file it cannot mark (another machine's, missing, unreadable) gets a line on `log`
// instead. One process calls it: the lowest rank still up.
void markGoneTraces(const std::string& out, const std::vector<int>& gone, int seen_by,
                    const std::string& host, std::ostream& log);

}  // namespace pipescope::cli
