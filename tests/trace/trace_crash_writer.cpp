// Test helper for tst_trace_crash: writes batches of ops into a trace until it is killed,
// printing "committed N" after each batch. Each batch transaction stays open for a while (the
// writer's test hook), so a kill almost always lands inside an open batch.
//
// With --slow PERIOD_MS it writes instead like a slow run: one op every PERIOD_MS into batches
// that never fill, printing "added N" after each, so that only the writer's batch age commits.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <pipescope/trace/writer.h>

int main(int argc, char** argv) {
    using namespace pipescope::trace;
    if (argc != 4) {
        std::fprintf(stderr,
                     "usage: trace_crash_writer OUT.db ROWS_PER_BATCH DELAY_MS\n"
                     "       trace_crash_writer OUT.db --slow PERIOD_MS\n");
        return 2;
    }
    const bool slow = std::string(argv[2]) == "--slow";
    const int rows = slow ? 1000000 : std::atoi(argv[2]);
    TraceWriter w;
    RunInfo run;
    run.name = "crash";
    run.config_json = "{}";
    run.backend = "cpu";
    run.ranks = 1;
    run.iterations = 1000000;
    WriterOptions options;
    options.batch_rows = static_cast<std::size_t>(rows);
    if (!slow) {
        options.max_batch_age = std::chrono::milliseconds(0);  // batches end by size only
    }
    if (!w.create(argv[1], run, options).ok()) {
        std::fprintf(stderr, "cannot create %s\n", argv[1]);
        return 1;
    }
    w.addRank({0, "0", "cpu", "", 0, 0});
    w.flush();
    if (slow) {
        const auto period = std::chrono::milliseconds(std::atoi(argv[3]));
        for (std::int64_t i = 0;; ++i) {
            OpRecord o;
            o.op_index = static_cast<int>(i);
            o.start_ns = i * 1000;
            o.end_ns = o.start_ns + 900;
            w.addOp(o);
            std::printf("added %lld\n", static_cast<long long>(i + 1));
            std::fflush(stdout);
            std::this_thread::sleep_for(period);
        }
    }
    w.setBatchDelayForTesting(std::atoi(argv[3]));
    for (std::int64_t i = 0;; ++i) {
        OpRecord o;
        o.iteration = static_cast<int>(i / rows);
        o.op_index = static_cast<int>(i % rows);
        o.start_ns = i * 1000;
        o.end_ns = o.start_ns + 900;
        w.addOp(o);  // the add that fills a batch hands it to the writer's committer
        if ((i + 1) % rows == 0) {
            // Report a batch once it is committed, so that the next one is the batch in its
            // transaction when the test kills this process.
            const std::int64_t batch = (i + 1) / rows;
            while (w.stats().batches < batch + 1) {  // + 1: the rank row's batch
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
            std::printf("committed %lld\n", static_cast<long long>(batch));
            std::fflush(stdout);
        }
    }
}
