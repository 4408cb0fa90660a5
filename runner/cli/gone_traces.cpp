#include "gone_traces.h"

#include <filesystem>

#include <pipescope/exec/process.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "launch.h"

namespace pipescope::cli {

void markGoneTraces(const std::string& out, const std::vector<int>& gone, int seen_by,
                    const std::string& host, bool report, std::ostream& log) {
    for (int rank : gone) {
        const std::string path = rankTracePath(out, rank);
        const std::string whose = "rank " + std::to_string(rank) + "'s trace " + path;
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) {
            if (report) {
                log << "pipescope-run: " << whose
                    << " is not here (its process may have written it on another machine)\n";
            }
            continue;
        }
        std::int64_t pid = 0;
        std::string rank_host;
        trace::RunStatus status = trace::RunStatus::Running;
        {
            trace::TraceReader reader;
            if (!reader.open(path).ok()) {
                if (report) {
                    log << "pipescope-run: cannot read " << whose << "\n";
                }
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
            continue;  // it finished its trace after all, or a survivor marked it already
        }
        // Never touch a file whose writer may still be at it, nor one from another machine,
        // where this process cannot tell whether its writer has ended.
        if (rank_host != host) {
            if (report) {
                log << "pipescope-run: " << whose << " was written on " << rank_host
                    << ", where a rank still up marks it failed; if none is, run "
                    << "pipescope-trace repair on it there\n";
            }
            continue;
        }
        if (pid <= 0 || exec::processRuns(pid)) {
            if (report) {
                log << "pipescope-run: " << whose << " stays 'running': its process "
                    << (pid > 0 ? std::to_string(pid) + " " : "")
                    << "has not ended; once it has, pipescope-trace repair marks it failed\n";
            }
            continue;
        }
        bool marked = false;
        const auto st = trace::markRunningTraceFailed(
            path,
            "rank " + std::to_string(rank) + "'s process ended before it finished its " +
                "trace (killed or crashed); marked failed by rank " + std::to_string(seen_by),
            &marked);
        if (!st.ok()) {
            log << "pipescope-run: cannot mark " << whose << " failed: " << st.message << "\n";
        } else if (marked) {
            log << "pipescope-run: marked " << whose << " failed\n";
        }
    }
}

}  // namespace pipescope::cli
