#include "gone_traces.h"

#include <filesystem>

#include <pipescope/exec/process.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "launch.h"

namespace pipescope::cli {

void markGoneTraces(const std::string& out, const std::vector<int>& gone, int seen_by,
                    const std::string& host, std::ostream& log) {
    for (int rank : gone) {
        const std::string path = rankTracePath(out, rank);
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) {
            log << "pipescope-run: rank " << rank << "'s trace " << path
                << " is not here (its process may have written it on another machine)\n";
            continue;
        }
        std::int64_t pid = 0;
        std::string rank_host;
        trace::RunStatus status = trace::RunStatus::Running;
        {
            trace::TraceReader reader;
            if (!reader.open(path).ok()) {
                log << "pipescope-run: cannot read rank " << rank << "'s trace " << path << "\n";
                continue;
            }
            status = reader.run().status;
            for (const auto& r : reader.ranks()) {
                if (r.rank == rank) {
                    pid = r.pid;
                    rank_host = r.host;
                }
            }
        }
        if (status != trace::RunStatus::Running) {
            continue;  // it finished its trace after all
        }
        // Never touch a file whose writer may still be at it.
        if (rank_host != host || pid <= 0 || exec::processRuns(pid)) {
            log << "pipescope-run: rank " << rank << "'s trace " << path << " stays 'running'"
                << (rank_host != host ? " (written on " + rank_host + ")" : "")
                << ": once its process has ended, pipescope-trace repair marks it failed\n";
            continue;
        }
        const auto st = trace::finalizeTrace(
            path, "rank " + std::to_string(rank) + "'s process ended before it finished its " +
                      "trace (killed or crashed); marked failed by rank " +
                      std::to_string(seen_by));
        if (st.ok()) {
            log << "pipescope-run: marked rank " << rank << "'s trace " << path << " failed\n";
        } else {
            log << "pipescope-run: cannot mark rank " << rank << "'s trace failed: " << st.message
                << "\n";
        }
    }
}

}  // namespace pipescope::cli
