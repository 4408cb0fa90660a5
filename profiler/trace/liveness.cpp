#include <cerrno>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <pipescope/trace/liveness.h>

namespace pipescope::trace {

std::string thisHost() {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) {
        return {};
    }
    return buf;
}

bool runnerGone(const TraceReader& reader) {
    if (reader.run().status != RunStatus::Running) {
        return false;
    }
    const std::string here = thisHost();
    bool any_here = false;
    for (const RankInfo& r : reader.ranks()) {
        if (r.pid <= 0 || (!r.host.empty() && r.host != here)) {
            continue;
        }
        any_here = true;
        if (::kill(static_cast<pid_t>(r.pid), 0) == 0 || errno == EPERM) {
            return false;  // still there (or another user's process with that id)
        }
    }
    return any_here;
}

}  // namespace pipescope::trace
