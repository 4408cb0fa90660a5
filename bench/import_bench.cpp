// Nsight import benchmark: the time and memory `pipescope-trace import-nsys` takes for a run of N
// ops whose export has an NVTX range, K runtime calls and K kernels per op.
//
//   import_bench [--ops N] [--calls K] [--ranks R] [--dir DIR] [--keep]
//
// The export is made with the trace writer, whose GPU tables have Nsight's names and columns,
// and then stripped of what makes it a PipeScope trace, so the import reads it as an export.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sqlite3.h>
#include <string>
#include <sys/resource.h>
#include <vector>

#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/nvtx_op.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "synthetic_ops.h"

using namespace pipescope;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::int64_t kSession = 5'000'000;  // Nsight's session began 5 ms before the run
constexpr std::int64_t kPid = 4242;

double secondsSince(Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
}

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "import_bench: %s\n", what.c_str());
    std::exit(1);
}

// The export of the run at `run`: per host op, its NVTX range, `calls` launches inside it and
// their kernels.
std::int64_t writeExport(const std::string& run, const std::string& path, int calls) {
    trace::TraceReader reader;
    if (const auto st = reader.open(run); !st.ok()) {
        die(st.message);
    }
    trace::TraceWriter w;
    trace::WriterOptions wo;
    wo.overwrite = true;
    if (const auto st = w.create(path, bench::benchRun(reader.rankCount()), wo); !st.ok()) {
        die(st.message);
    }
    std::int64_t correlation = 1, records = 0;
    const auto st = reader.forEachOp([&](const trace::OpRecord& op) {
        const std::int64_t thread = (kPid << 24) | (10 * op.rank + static_cast<int>(op.lane));
        const std::int64_t start = op.start_ns + kSession + 300;
        const std::int64_t end = std::max(op.end_ns + kSession, start + 100 * calls + 100);
        trace::NvtxRecord n;
        n.start = start;
        n.end = end;
        n.text = trace::nvtxOpText(trace::opLabel(op), op.rank, op.iteration, op.op_index);
        n.global_tid = thread;
        w.addNvtx(n);
        for (int c = 0; c < calls; ++c, ++correlation) {
            trace::RuntimeRecord r;
            r.start = start + 50 + 100 * c;
            r.end = r.start + 40;
            r.global_tid = thread;
            r.correlation_id = correlation;
            r.name = "cudaLaunchKernel_v7000";
            w.addRuntime(r);
            trace::KernelRecord k;
            k.start = r.start + 2000;
            k.end = k.start + 5000;
            k.correlation_id = correlation;
            k.global_pid = kPid << 24;
            k.demangled_name = "void gemm<float>(int)";
            k.short_name = "gemm";
            w.addKernel(k);
            records += 2;
        }
        ++records;
        return true;
    });
    if (!st.ok()) {
        die(st.message);
    }
    if (const auto fin = w.finish(trace::RunStatus::Complete); !fin.ok()) {
        die(fin.message);
    }
    // What makes it a PipeScope trace goes: the import then reads it as an Nsight export.
    sqlite3* db = nullptr;
    if (sqlite3_open(path.c_str(), &db) != SQLITE_OK ||
        sqlite3_exec(db, "DROP TABLE pipescope_meta", nullptr, nullptr, nullptr) != SQLITE_OK) {
        die("cannot strip " + path);
    }
    sqlite3_close(db);
    return records;
}

long maxRssMiB() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024;
}

// What the app's click on an op costs to find its kernels in the imported trace: the lookups of
// kLookups ops spread over the run, each of which must find its `calls` kernels.
bool timeOpKernels(const std::string& out, int calls) {
    constexpr std::int64_t kLookups = 1000;
    trace::TraceReader reader;
    if (const auto st = reader.open(out); !st.ok()) {
        die(st.message);
    }
    const std::int64_t rows = reader.opCorrelationCount();
    const std::int64_t stride = std::max<std::int64_t>(1, rows / kLookups);
    std::vector<trace::OpCorrelation> ops;
    std::int64_t row = 0;
    reader.forEachOpCorrelation([&](const trace::OpCorrelation& c) {
        if (row++ % stride == 0) {
            ops.push_back(c);
        }
        return true;
    });
    double total = 0, longest = 0;
    std::size_t short_answers = 0;
    for (const auto& op : ops) {
        const auto t = Clock::now();
        const auto kernels =
            reader.opKernels(op.rank, op.iteration, op.op_index, t + std::chrono::seconds(10));
        const double ms = secondsSince(t) * 1e3;
        total += ms;
        longest = std::max(longest, ms);
        short_answers += !kernels || kernels->size() != static_cast<std::size_t>(calls);
    }
    std::printf(
        "an op's kernels (the app's click): %zu lookups, mean %.3f ms, longest %.3f ms; "
        "%zu without their %d kernels\n",
        ops.size(), ops.empty() ? 0.0 : total / static_cast<double>(ops.size()), longest,
        short_answers, calls);
    return short_answers == 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::int64_t ops = 200'000;
    int calls = 4, ranks = 8;
    std::string dir = std::filesystem::temp_directory_path() / "pipescope-import-bench";
    bool keep = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                die(a + " needs a value");
            }
            return argv[++i];
        };
        if (a == "--ops") {
            ops = std::atoll(value().c_str());
        } else if (a == "--calls") {
            calls = std::atoi(value().c_str());
        } else if (a == "--ranks") {
            ranks = std::atoi(value().c_str());
        } else if (a == "--dir") {
            dir = value();
        } else if (a == "--keep") {
            keep = true;
        } else {
            die("unknown option " + a + " (--ops N --calls K --ranks R --dir DIR --keep)");
        }
    }
    if (ops <= 0 || calls <= 0 || ranks <= 0) {
        die("--ops, --calls and --ranks must be positive");
    }
    std::filesystem::create_directories(dir);
    const std::string run = dir + "/run.db", report = dir + "/run.sqlite", out = dir + "/out.db";
    auto t = Clock::now();
    if (const auto st = bench::writeSyntheticTrace(run, ops, ranks); !st.ok()) {
        die(st.message);
    }
    const std::int64_t records = writeExport(run, report, calls);
    std::printf(
        "inputs: %lld ops on %d ranks, an export of %lld records (%d kernels per op), "
        "made in %.1f s\n",
        static_cast<long long>(ops), ranks, static_cast<long long>(records), calls,
        secondsSince(t));
    const long rss_before = maxRssMiB();
    t = Clock::now();
    interop::NsysImportOptions options;
    options.overwrite = true;
    // When the progress the app shows passed each tenth, against the time: an even import
    // reads 10%, 20%, ... at even steps.
    std::vector<double> tenths;
    options.progress = [&](double fraction) {
        while (tenths.size() < 10 && fraction >= 0.1 * static_cast<double>(tenths.size() + 1)) {
            tenths.push_back(secondsSince(t));
        }
        return true;
    };
    interop::NsysImportReport result;
    if (const auto st = interop::importNsys(run, {report}, out, options, &result); !st.ok()) {
        die(st.message);
    }
    const double seconds = secondsSince(t);
    std::fputs(interop::describeImport(result, out).c_str(), stdout);
    std::printf("import: %.2f s, %.2f M export records/s; peak RSS %ld MiB (%ld MiB before)\n",
                seconds, static_cast<double>(records) / seconds / 1e6, maxRssMiB(), rss_before);
    std::printf("progress reached");
    for (std::size_t i = 0; i < tenths.size(); ++i) {
        std::printf(" %zu0%%: %.0f%%%s", i + 1, 100 * tenths[i] / seconds,
                    i + 1 < tenths.size() ? "," : "");
    }
    std::printf(" of the time\n");
    std::printf("files: run %.1f MiB, export %.1f MiB, output %.1f MiB\n",
                static_cast<double>(std::filesystem::file_size(run)) / (1 << 20),
                static_cast<double>(std::filesystem::file_size(report)) / (1 << 20),
                static_cast<double>(std::filesystem::file_size(out)) / (1 << 20));
    const bool lookups_ok = timeOpKernels(out, calls);
    if (!keep) {
        std::filesystem::remove_all(dir);
    }
    return result.gpu_rows == ops && lookups_ok ? 0 : 1;
}
