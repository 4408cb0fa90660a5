// The CUDA backend's CUPTI tracing (runner/cuda/gpu_trace.h). Without a GPU: op ids survive the
// trip through CUPTI's external correlation id, device spans become gpu-lane rows of the right
// ops, ids of no op are counted and left out, and tracing that cannot start says why. With a
// GPU: a 2-stage run traced end to end has kernel rows and one gpu-lane row per op that ran
// device work, each inside its op's host span. A plain program (0 pass, 1 fail), so it runs on a
// GPU host without Qt.
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>
#include <filesystem>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include <pipescope/cuda/cuda_rank_backend.h>
#include <pipescope/cuda/gpu_trace.h>
#include <pipescope/exec/pipeline_executor.h>
#include <pipescope/exec/rank_backend.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "cuda_test_support.h"

namespace ps = pipescope;
using ps::test::expect;
using ps::test::g_failures;

namespace {

ps::schedule::Config tinyConfig() {
    const std::string json = R"({
      "name": "tiny-traced",
      "model": {"layers": 4, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 64,
                "micro_batch": 2, "dtype": "fp32"},
      "parallel": {"pipeline": 2, "microbatches": 4, "schedule": "1f1b", "vocab": "vocab-2"},
      "run": {"iterations": 2, "warmup": 0, "seed": 5}
    })";
    auto parsed = ps::schedule::parseConfig(json, "tiny-traced");
    if (!parsed.ok()) {
        std::printf("FAIL the test's config: %s\n", parsed.errorText().c_str());
        std::exit(1);
    }
    return *parsed.config;
}

void opIdsRoundTrip() {
    const ps::exec::OpKey keys[] = {{0, 0, 0}, {3, 7, 123}, {65535, 8388607, 16777215}};
    bool all = true;
    for (const auto& k : keys) {
        const std::uint64_t id = ps::exec::opKeyId(k);
        const auto back = ps::exec::opKeyFromId(id);
        all = all && id != 0 && back && *back == k;
    }
    expect(all, "op ids round-trip through opKeyId / opKeyFromId");
    expect(!ps::exec::opKeyFromId(0) && !ps::exec::opKeyFromId(12345),
           "ids no op gives (0, no iteration part) decode to nothing");
    bool threw = false;
    try {
        (void)ps::exec::opKeyId({0, 0, 1 << 24});
    } catch (const std::invalid_argument&) {
        threw = true;
    }
    expect(threw, "an op index beyond the id's range is refused");
}

void spansBecomeGpuRows(const ps::schedule::Schedule& s) {
    // Rank 1's op 2 in iteration 1, rank 0's op 0 in iteration 0, and two ids of no op.
    std::map<std::uint64_t, ps::cuda::OpGpuSpan> spans;
    spans[ps::exec::opKeyId({1, 1, 2})] = {5'000, 7'000};
    spans[ps::exec::opKeyId({0, 0, 0})] = {1'000, 1'500};
    spans[ps::exec::opKeyId({5, 0, 0})] = {1, 2};  // no rank 5
    spans[ps::exec::opKeyId({0, 0, static_cast<int>(s.ops[0].size())})] = {1, 2};
    std::int64_t unknown = -1;
    const auto rows = ps::cuda::gpuOpRows(s, spans, &unknown);
    expect(unknown == 2 && rows.size() == 2, "ids of no op are counted and left out");
    if (rows.size() != 2) {
        return;
    }
    const auto& a = rows[0];
    const auto& op_a = s.ops[0][0];
    expect(a.rank == 0 && a.iteration == 0 && a.op_index == 0 && a.start_ns == 1'000 &&
               a.end_ns == 1'500 && a.lane == ps::trace::Lane::Gpu &&
               a.source == ps::trace::Source::Gpu &&
               a.kind == static_cast<ps::trace::OpKind>(op_a.kind) &&
               a.microbatch == op_a.microbatch,
           "a span becomes its op's row on the gpu lane, source gpu, rank order");
    const auto& b = rows[1];
    const auto& op_b = s.ops[1][2];
    expect(b.rank == 1 && b.iteration == 1 && b.op_index == 2 &&
               b.kind == static_cast<ps::trace::OpKind>(op_b.kind) && b.chunk == op_b.chunk,
           "the row carries the op's kind, micro-batch and chunk from the schedule");
}

void recordsBecomeOpCorrelationRows(const ps::schedule::Schedule& s) {
    // Three records of ops the schedule has (two of one op) and one of no rank 5, in CUPTI's
    // order: each becomes the op_correlation row of its op, in that order.
    constexpr std::int64_t kPid = std::int64_t{31} << 24;
    const std::vector<ps::cuda::OpDeviceRecord> records = {
        {ps::exec::opKeyId({1, 1, 2}), kPid, 900, 5'000},
        {ps::exec::opKeyId({5, 0, 0}), kPid, 901, 5'100},
        {ps::exec::opKeyId({0, 0, 0}), kPid, 7, 1'000},
        {ps::exec::opKeyId({1, 1, 2}), kPid, 902, 6'000},
    };
    std::int64_t unknown = -1;
    const auto rows = ps::cuda::opCorrelationRows(s, records, &unknown);
    expect(unknown == 1 && rows.size() == 3, "records of no op are counted and left out");
    if (rows.size() != 3) {
        return;
    }
    expect(rows[0].rank == 1 && rows[0].iteration == 1 && rows[0].op_index == 2 &&
               rows[0].global_pid == kPid && rows[0].correlation_id == 900 &&
               rows[0].start == 5'000,
           "a record's row names its op (rank, iteration, index) and the record");
    expect(rows[1].rank == 0 && rows[1].op_index == 0 && rows[1].correlation_id == 7 &&
               rows[2].correlation_id == 902 && rows[2].start == 6'000,
           "the rows keep the records' order");
}

bool haveDevice(std::string* why) {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        *why = e != cudaSuccess ? cudaGetErrorName(e) : "the driver reports 0 devices";
        return false;
    }
    return true;
}

void tracedRun(const ps::schedule::Config& c, const ps::schedule::Schedule& s) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("pipescope-gpu-trace-" + std::to_string(getpid()) + ".db"))
                                 .string();
    ps::trace::TraceWriter writer;
    ps::trace::WriterOptions wo;
    wo.overwrite = true;
    ps::trace::RunInfo info;
    info.name = c.name;
    info.backend = "cuda";
    info.start_ns = ps::trace::wallClockNs();
    info.ranks = s.ranks;
    info.iterations = 2;
    if (auto st = writer.create(path, info, wo); !st.ok()) {
        expect(false, "create the trace: " + st.message);
        return;
    }
    for (int r = 0; r < s.ranks; ++r) {
        writer.addRank({r, "", "cuda:0", "", 0, 0});
    }
    const auto origin = std::chrono::steady_clock::now();
    ps::cuda::GpuOpTrace gpu(s, &writer, origin, {0});
    const std::string why = gpu.start();
    expect(why.empty(), "CUPTI starts on a GPU" + (why.empty() ? "" : ": " + why));
    ps::exec::ExecOptions eo;
    eo.iterations = 2;
    eo.seed = c.run.seed;
    eo.writer = &writer;
    eo.origin = origin;
    ps::cuda::CudaBackendOptions co;
    co.seed = eo.seed;
    co.memory_fraction = 0.2;
    co.devices = {0};
    eo.backend = ps::cuda::cudaBackendFactory(co);
    eo.on_iteration = [&](int, double, double) { gpu.iterationDone(); };
    ps::exec::PipelineExecutor ex(c, s, eo);
    const auto result = ex.run();
    expect(result.status == ps::exec::ExecResult::Status::Complete,
           "the traced run completes " + result.message);
    const auto summary = gpu.finish();
    std::printf(
        "     %lld kernels, %lld copies, %lld memsets, %lld runtime calls, %lld op rows, "
        "%lld records outside ops, %lld dropped, %lld untimed, %lld forgotten; clock %s\n",
        static_cast<long long>(summary.kernels), static_cast<long long>(summary.memcpys),
        static_cast<long long>(summary.memsets), static_cast<long long>(summary.runtime_calls),
        static_cast<long long>(summary.op_rows), static_cast<long long>(summary.unattributed),
        static_cast<long long>(summary.dropped), static_cast<long long>(summary.untimed),
        static_cast<long long>(summary.forgotten),
        summary.steady_clock ? "steady (CUPTI's callback)" : "CUPTI's own, paired once");
    if (!summary.problem.empty()) {
        std::printf("     CUPTI problem: %s\n", summary.problem.c_str());
    }
    expect(writer.finish(ps::trace::RunStatus::Complete).ok(), "the trace is written");

    ps::trace::TraceReader reader;
    if (auto st = reader.open(path); !st.ok()) {
        expect(false, "reopen the trace: " + st.message);
        return;
    }
    expect(reader.kernelCount() > 0 && reader.kernelCount() == summary.kernels,
           "every kernel record is a row of the Nsight kernel table");
    // Every compute op (F, B, W, the vocabulary passes, OPT) launched kernels: each has a gpu
    // row inside its host span (with a little slack for the clock pairing).
    constexpr std::int64_t kSlackNs = 50'000;
    std::map<std::tuple<int, int, int>, ps::trace::OpRecord> host, device;
    (void)reader.forEachOp([&](const ps::trace::OpRecord& op) {
        (op.lane == ps::trace::Lane::Gpu ? device : host)[{op.rank, op.iteration, op.op_index}] =
            op;
        return true;
    });
    int compute = 0, matched = 0, inside = 0;
    for (const auto& [key, op] : host) {
        if (op.lane != ps::trace::Lane::Compute || ps::trace::isBlockingWait(op.kind)) {
            continue;
        }
        ++compute;
        const auto it = device.find(key);
        if (it == device.end()) {
            continue;
        }
        ++matched;
        inside += it->second.start_ns >= op.start_ns - kSlackNs &&
                          it->second.end_ns <= op.end_ns + kSlackNs
                      ? 1
                      : 0;
    }
    expect(compute > 0 && matched == compute, "each compute op has a gpu row (" +
                                                  std::to_string(matched) + " of " +
                                                  std::to_string(compute) + ")");
    expect(inside == matched, "each gpu row lies inside its op's host span (" +
                                  std::to_string(inside) + " of " + std::to_string(matched) + ")");
    // Every kernel of an op is tied to it: its op has a gpu row that holds the kernel.
    std::int64_t linked = 0, held = 0;
    (void)reader.forEachKernelWithOp([&](const ps::trace::KernelRecord& k,
                                         const ps::trace::OpCorrelation* op) {
        if (op == nullptr) {
            return true;
        }
        ++linked;
        const auto it = device.find({op->rank, op->iteration, op->op_index});
        held += it != device.end() && it->second.start_ns <= k.start && k.end <= it->second.end_ns
                    ? 1
                    : 0;
        return true;
    });
    expect(linked > 0 && held == linked && reader.opCorrelationCount() >= linked,
           "each kernel of an op is tied to it by op_correlation, inside its gpu row (" +
               std::to_string(held) + " of " + std::to_string(linked) + ")");
    // The app's click finds the same kernels one op at a time: each gpu row holds the kernels
    // the lookup returns for its op, they add up to every tied kernel, and every compute op
    // finds at least one.
    int inside_rows = 0, compute_found = 0;
    std::int64_t looked_up = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (const auto& [key, row] : device) {
        const auto& [rank, iteration, index] = key;
        const auto kernels = reader.opKernels(rank, iteration, index, deadline);
        bool ok = kernels.has_value();
        for (const auto& k : kernels.value_or(std::vector<ps::trace::KernelRecord>{})) {
            ok = ok && row.start_ns <= k.start && k.end <= row.end_ns;
        }
        inside_rows += ok ? 1 : 0;
        looked_up += kernels ? static_cast<std::int64_t>(kernels->size()) : 0;
        const auto h = host.find(key);
        compute_found += h != host.end() && h->second.lane == ps::trace::Lane::Compute &&
                                 !ps::trace::isBlockingWait(h->second.kind) && kernels &&
                                 !kernels->empty()
                             ? 1
                             : 0;
    }
    expect(inside_rows == static_cast<int>(device.size()) && looked_up == linked &&
               compute_found == compute,
           "each op's kernel lookup finds its kernels inside its gpu row (" +
               std::to_string(inside_rows) + " of " + std::to_string(device.size()) + " rows; " +
               std::to_string(looked_up) + " kernels of " + std::to_string(linked) + "; " +
               std::to_string(compute_found) + " of " + std::to_string(compute) + " compute ops)");
    std::filesystem::remove(path);
}

}  // namespace

int main() {
    // Line by line into the log, which keeps what was printed when a time limit stops the test.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const auto c = tinyConfig();
    const auto gen = ps::schedule::generateSchedule(c);
    if (!gen.schedule) {
        std::printf("FAIL the test's schedule\n");
        return 1;
    }
    opIdsRoundTrip();
    spansBecomeGpuRows(*gen.schedule);
    recordsBecomeOpCorrelationRows(*gen.schedule);
    std::string why;
    if (haveDevice(&why)) {
        tracedRun(c, *gen.schedule);
    } else {
        ps::cuda::GpuOpTrace gpu(*gen.schedule, nullptr, std::chrono::steady_clock::now(), {0});
        const std::string refused = gpu.start();
        expect(!refused.empty() && !gpu.active() && gpu.finish().op_rows == 0,
               "without a GPU tracing refuses to start and says why: " + refused);
        std::printf("SKIPPED the traced run: no CUDA device here (%s)\n", why.c_str());
    }
    std::printf("%d failed\n", g_failures);
    return g_failures == 0 ? 0 : 1;
}
