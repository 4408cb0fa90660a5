#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>

#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/nvtx_op.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

// The trace library's SQLite wrappers: reading a foreign SQLite file is the one place outside
// that library that needs them.
#include "sqlite_util.h"

namespace pipescope::interop {

namespace {

using trace::TraceStatus;
using trace::detail::Db;
using trace::detail::Stmt;
using Code = TraceStatus::Code;

constexpr int kNvtxMark = 34;
constexpr int kNvtxPushPop = 59;
constexpr int kNvtxStartEnd = 60;

// (rank, iteration, op index) in one integer; nullopt past the ranges a trace can hold.
std::optional<std::uint64_t> opKey(int rank, int iteration, int op_index) {
    if (rank < 0 || rank >= trace::kMaxRanks || iteration < 0 || iteration >= (1 << 23) ||
        op_index < 0 || op_index >= (1 << 24)) {
        return std::nullopt;
    }
    return (static_cast<std::uint64_t>(rank) << 47) |
           (static_cast<std::uint64_t>(iteration) << 24) | static_cast<std::uint64_t>(op_index);
}

// Nsight serialises a thread as (pid << 24) | tid, and a process as pid << 24.
std::int64_t processOf(std::int64_t global_id) {
    return global_id >> 24;
}

struct OpRange {
    std::int64_t start = 0, end = 0;
    std::uint64_t key = 0;
};

struct Span {
    std::int64_t start = 0, end = 0;
};

// How far an import is (NsysImportOptions::progress): rows read over the rows it reads in all.
class Progress {
  public:
    explicit Progress(const std::function<bool(double)>& fn) : fn_(fn) {}
    void addTotal(std::int64_t rows) { total_ += std::max<std::int64_t>(rows, 0); }
    // Counts a row read; false once the caller asked to stop. The caller hears of it about 200
    // times over an import (every row of a small one, every 16384th of a large one).
    bool step() {
        if (++done_ >= next_ && fn_ && !stopped_) {
            next_ = done_ + std::clamp<std::int64_t>(total_ / 200, 1, 16384);
            const double read =
                total_ > 0 ? std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_))
                           : 0.0;
            stopped_ = !fn_(kReadShare * read);
        }
        return !stopped_;
    }
    bool stopped() const { return stopped_; }
    static TraceStatus cancelled() {
        return TraceStatus::error(Code::Cancelled, "the import was cancelled");
    }

  private:
    // Reading is about two thirds of an import (import_bench, 400 000 ops: 4.3 of 6.8 s); the
    // writer's finish, which builds the indexes and summary levels, the rest, without a word.
    static constexpr double kReadShare = 0.65;
    const std::function<bool(double)>& fn_;
    std::int64_t total_ = 0, done_ = 0, next_ = 0;
    bool stopped_ = false;
};

// One Nsight export, opened and checked, with its op ranges and clock offset.
struct Report {
    NsysReportSummary summary;
    Progress* progress = nullptr;
    Db db;
    std::unordered_map<std::int64_t, std::string> strings;
    std::map<std::int64_t, std::vector<OpRange>> ranges_by_thread;  // sorted by start
    // The runtime calls made inside op ranges, sorted by (process, correlation id, start): flat,
    // as an export can hold millions (correlation ids wrap around in a long run).
    struct Launch {
        std::int64_t process = 0, correlation = 0, start = 0;
        std::uint64_t op = 0;
        bool operator<(const Launch& o) const {
            return std::tie(process, correlation, start) <
                   std::tie(o.process, o.correlation, o.start);
        }
    };
    std::vector<Launch> launches;

    std::string fail(const std::string& what) const { return summary.path + ": " + what; }

    std::set<std::string> columns(const std::string& table) const {
        std::set<std::string> out;
        Stmt s(db, "SELECT name FROM pragma_table_info('" + table + "')");
        while (s.valid() && s.step() == SQLITE_ROW) {
            out.insert(s.text(0));
        }
        return out;
    }
    // A SELECT of `wanted` from `table`: a column the export lacks reads as NULL, except the
    // `required` ones, whose absence is an error.
    TraceStatus select(const std::string& table, const std::vector<std::string>& wanted,
                       const std::set<std::string>& required, Stmt* out) const {
        const auto have = columns(table);
        std::string sql = "SELECT ";
        for (std::size_t i = 0; i < wanted.size(); ++i) {
            const std::string& c = wanted[i];
            if (!have.count(c) && required.count(c)) {
                return TraceStatus::error(Code::BadInput,
                                          fail("table " + table + " has no column " + c));
            }
            sql += (i ? ", " : "") + (have.count(c) ? "\"" + c + "\"" : std::string("NULL"));
        }
        sql += " FROM \"" + table + "\"";
        if (out->prepare(db, sql) != SQLITE_OK) {
            return TraceStatus::error(Code::BadInput,
                                      fail("cannot read " + table + ": " + db.errorMessage()));
        }
        return TraceStatus::success();
    }
    std::string string(const Stmt& s, int col) const {
        if (s.isNull(col)) {
            return {};
        }
        const auto it = strings.find(s.int64(col));
        return it == strings.end() ? std::string() : it->second;
    }
    TraceStatus readError(const std::string& table) const {
        return TraceStatus::error(
            Code::BadInput,
            fail("reading " + table + " failed (SQLite: " + db.errorMessage() + ")"));
    }
    // The export's name for one of Nsight's tables: the name itself, or a versioned one
    // (NAME_V2, ...) as some Nsight versions write; empty when it has neither.
    std::string resolve(const std::string& name) const {
        if (db.tableExists(name)) {
            return name;
        }
        Stmt s(db,
               "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB ? ORDER BY name");
        s.bind(1, std::string_view(name + "_V[0-9]*"));
        return s.valid() && s.step() == SQLITE_ROW ? s.text(0) : std::string();
    }
    // Calls fn(row) for each row of a select() of one of Nsight's tables (resolve()); a table
    // the export does not have has no rows.
    template <class Fn>
    TraceStatus forEachRow(const std::string& name, const std::vector<std::string>& wanted,
                           const std::set<std::string>& required, Fn&& fn) const {
        const std::string table = resolve(name);
        if (table.empty()) {
            return TraceStatus::success();
        }
        Stmt s;
        if (TraceStatus st = select(table, wanted, required, &s); !st.ok()) {
            return st;
        }
        int rc = SQLITE_DONE;
        while ((rc = s.step()) == SQLITE_ROW) {
            fn(s);
            if (progress && !progress->step()) {
                return Progress::cancelled();
            }
        }
        return rc == SQLITE_DONE ? TraceStatus::success() : readError(table);
    }
    // The rows of one of Nsight's tables (0 when the export does not have it).
    std::int64_t rows(const std::string& name) const {
        const std::string table = resolve(name);
        return table.empty()
                   ? 0
                   : trace::detail::queryInt(db, "SELECT count(*) FROM \"" + table + "\"");
    }
    // The rows the import reads: the strings, the NVTX events twice (ranges, then copied) and
    // the tables it copies.
    std::int64_t rowsToRead() const {
        std::int64_t n = rows("StringIds") + 2 * rows("NVTX_EVENTS");
        for (const char* t : {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "TARGET_INFO_GPU"}) {
            n += rows(t);
        }
        return n;
    }

    // The op whose range on `tid` holds the instant `t`, if any.
    std::optional<std::uint64_t> opAt(std::int64_t tid, std::int64_t t) const {
        const auto it = ranges_by_thread.find(tid);
        if (it == ranges_by_thread.end()) {
            return std::nullopt;
        }
        const auto& r = it->second;
        auto after = std::upper_bound(r.begin(), r.end(), t,
                                      [](std::int64_t v, const OpRange& x) { return v < x.start; });
        if (after == r.begin()) {
            return std::nullopt;
        }
        --after;
        return t <= after->end ? std::optional<std::uint64_t>(after->key) : std::nullopt;
    }
    // The op that launched a device record: the latest call with its correlation id that
    // started before the record did.
    std::optional<std::uint64_t> launcher(std::int64_t global_pid, std::int64_t correlation,
                                          std::int64_t start) const {
        const std::int64_t process = processOf(global_pid);
        const Launch key{process, correlation, start, 0};
        // The first call past (process, correlation, start), then back to the last one before
        // it with the same id.
        auto after = std::upper_bound(launches.begin(), launches.end(), key);
        if (after != launches.begin() && std::prev(after)->process == process &&
            std::prev(after)->correlation == correlation) {
            return std::prev(after)->op;
        }
        if (after != launches.end() && after->process == process &&
            after->correlation == correlation) {
            return after->op;  // clocks a hair apart: the call started after its record
        }
        return std::nullopt;
    }
};

bool samePath(const std::string& a, const std::string& b) {
    std::error_code ec;
    return a == b || (std::filesystem::equivalent(a, b, ec) && !ec);
}

std::int64_t median(std::vector<std::int64_t> v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

// Opens an export and checks that it is one, with NVTX events.
TraceStatus openExport(const std::string& path, Report* r) {
    r->summary.path = path;
    {
        trace::TraceReader probe;
        const TraceStatus st = probe.open(path);
        if (st.ok()) {
            return TraceStatus::error(Code::BadInput,
                                      path + ": a PipeScope trace, not an Nsight Systems export");
        }
        if (st.code != Code::NsightExport) {
            return st;
        }
    }
    if (r->db.open(path, SQLITE_OPEN_READONLY) != SQLITE_OK) {
        return TraceStatus::error(Code::BadInput, r->fail("cannot open: " + r->db.errorMessage()));
    }
    if (r->resolve("NVTX_EVENTS").empty()) {
        return TraceStatus::error(
            Code::BadInput,
            r->fail("no NVTX_EVENTS table: profile with NVTX on (nsys profile -t cuda,nvtx ...)"));
    }
    return TraceStatus::success();
}

// Reads an opened export's strings and NVTX op ranges and fits its clock to the run's.
TraceStatus readRanges(const std::unordered_map<std::uint64_t, trace::OpRecord>& host_ops,
                       const std::string& run_path, Report* r) {
    TraceStatus st =
        r->forEachRow("StringIds", {"id", "value"}, {"id", "value"},
                      [&](const Stmt& s) { r->strings.emplace(s.int64(0), s.text(1)); });
    if (!st.ok()) {
        return st;
    }
    std::vector<std::int64_t> offsets;
    st = r->forEachRow(
        "NVTX_EVENTS", {"start", "end", "eventType", "text", "textId", "globalTid"},
        {"start", "end", "eventType"}, [&](const Stmt& s) {
            const int type = s.int32(2);
            if ((type != kNvtxPushPop && type != kNvtxStartEnd) || s.isNull(1)) {
                return;
            }
            const std::string text = s.isNull(3) ? r->string(s, 4) : s.text(3);
            const auto ref = trace::parseNvtxOpText(text);
            if (!ref) {
                return;
            }
            ++r->summary.op_ranges;
            const auto key = opKey(ref->rank, ref->iteration, ref->op_index);
            const auto host = key ? host_ops.find(*key) : host_ops.end();
            if (host == host_ops.end()) {
                return;
            }
            ++r->summary.matched;
            const std::int64_t start = s.int64(0), end = s.int64(1);
            offsets.push_back(host->second.start_ns - start);
            r->ranges_by_thread[s.isNull(5) ? 0 : s.int64(5)].push_back({start, end, *key});
        });
    if (!st.ok()) {
        return st;
    }
    if (r->summary.op_ranges == 0) {
        return TraceStatus::error(
            Code::BadInput,
            r->fail("no NVTX range names a PipeScope op (such ranges read like \"F3 [r0 i1 #5]\"); "
                    "import the export of `nsys profile -t cuda,nvtx pipescope-run ... --backend "
                    "cuda`"));
    }
    if (r->summary.matched == 0) {
        return TraceStatus::error(
            Code::BadInput,
            r->fail("none of its " + std::to_string(r->summary.op_ranges) +
                    " op ranges is an op of " + run_path + " (is it the export of another run?)"));
    }
    r->summary.clock_offset_ns = median(offsets);
    for (auto& d : offsets) {
        d = std::abs(d - r->summary.clock_offset_ns);
    }
    r->summary.offset_spread_ns = median(offsets);
    for (auto& [tid, ranges] : r->ranges_by_thread) {
        std::sort(ranges.begin(), ranges.end(),
                  [](const OpRange& a, const OpRange& b) { return a.start < b.start; });
    }
    return TraceStatus::success();
}

// Copies a report's GPU tables into the writer, on the run's clock, and widens the device span
// of each op by the records it launched.
TraceStatus copyReport(Report& r, trace::TraceWriter& writer, std::set<int>* gpus,
                       std::unordered_map<std::uint64_t, Span>* spans) {
    const std::int64_t shift = r.summary.clock_offset_ns;
    NsysReportSummary& sum = r.summary;
    TraceStatus st = r.forEachRow(
        "NVTX_EVENTS", {"start", "end", "eventType", "text", "textId", "globalTid", "domainId"},
        {"start", "eventType"}, [&](const Stmt& s) {
            trace::NvtxRecord n;
            n.event_type = s.int32(2);
            if (n.event_type != kNvtxMark && n.event_type != kNvtxPushPop &&
                n.event_type != kNvtxStartEnd) {
                return;  // domain and category registrations and the like
            }
            n.start = s.int64(0) + shift;
            if (!s.isNull(1)) {
                n.end = s.int64(1) + shift;
            }
            n.text = s.isNull(3) ? r.string(s, 4) : s.text(3);
            n.global_tid = s.int64(5);
            n.domain_id = s.int32(6);
            writer.addNvtx(n);
            ++sum.nvtx_events;
        });
    if (st.ok()) {
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_RUNTIME",
                          {"start", "end", "globalTid", "correlationId", "nameId", "returnValue"},
                          {"start", "end", "globalTid", "correlationId"}, [&](const Stmt& s) {
                              trace::RuntimeRecord rt;
                              rt.start = s.int64(0) + shift;
                              rt.end = s.int64(1) + shift;
                              rt.global_tid = s.int64(2);
                              rt.correlation_id = s.int64(3);
                              rt.name = r.string(s, 4);
                              rt.return_value = s.int32(5);
                              writer.addRuntime(rt);
                              ++sum.runtime_calls;
                              const auto op =
                                  s.isNull(3) ? std::nullopt : r.opAt(rt.global_tid, s.int64(0));
                              if (op) {
                                  r.launches.push_back({processOf(rt.global_tid), rt.correlation_id,
                                                        s.int64(0), *op});
                              }
                          });
    }
    if (!st.ok()) {
        return st;
    }
    std::sort(r.launches.begin(), r.launches.end());
    // A device record (start, end, deviceId, contextId, streamId, correlationId, globalPid in
    // its first seven columns): widens its op's span, or counts as launched outside every op.
    const auto device = [&](const Stmt& s, auto* record) {
        record->start = s.int64(0) + shift;
        record->end = s.int64(1) + shift;
        record->device_id = s.int32(2);
        record->context_id = s.int32(3);
        record->stream_id = s.int32(4);
        record->correlation_id = s.int64(5);
        record->global_pid = s.int64(6);
        const auto op =
            s.isNull(5) ? std::nullopt : r.launcher(record->global_pid, s.int64(5), s.int64(0));
        if (!op) {
            ++sum.unattributed;
            return;
        }
        auto [it, fresh] = spans->try_emplace(*op, Span{record->start, record->end});
        if (!fresh) {
            it->second.start = std::min(it->second.start, record->start);
            it->second.end = std::max(it->second.end, record->end);
        }
    };
    const std::vector<std::string> head = {"start",    "end",           "deviceId", "contextId",
                                           "streamId", "correlationId", "globalPid"};
    const auto with = [&](std::vector<std::string> more) {
        more.insert(more.begin(), head.begin(), head.end());
        return more;
    };
    const std::set<std::string> required = {"start", "end", "correlationId"};
    st = r.forEachRow(
        "CUPTI_ACTIVITY_KIND_KERNEL",
        with({"gridId", "demangledName", "shortName", "gridX", "gridY", "gridZ", "blockX", "blockY",
              "blockZ", "registersPerThread", "staticSharedMemory", "dynamicSharedMemory"}),
        required, [&](const Stmt& s) {
            trace::KernelRecord k;
            device(s, &k);
            k.grid_id = s.int64(7);
            k.demangled_name = r.string(s, 8);
            k.short_name = r.string(s, 9);
            int* dims[] = {&k.grid_x, &k.grid_y, &k.grid_z, &k.block_x, &k.block_y, &k.block_z};
            for (int i = 0; i < 6; ++i) {
                *dims[i] = s.isNull(10 + i) ? 1 : s.int32(10 + i);
            }
            k.registers_per_thread = s.int32(16);
            k.static_shared_memory = s.int32(17);
            k.dynamic_shared_memory = s.int32(18);
            writer.addKernel(k);
            ++sum.kernels;
        });
    if (st.ok()) {
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_MEMCPY",
                          with({"bytes", "copyKind", "srcKind", "dstKind"}), required,
                          [&](const Stmt& s) {
                              trace::MemcpyRecord m;
                              device(s, &m);
                              m.bytes = s.int64(7);
                              m.copy_kind = s.int32(8);
                              m.src_kind = s.int32(9);
                              m.dst_kind = s.int32(10);
                              writer.addMemcpy(m);
                              ++sum.memcpys;
                          });
    }
    if (st.ok()) {
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_MEMSET", with({"value", "bytes", "memKind"}),
                          required, [&](const Stmt& s) {
                              trace::MemsetRecord m;
                              device(s, &m);
                              m.value = s.int32(7);
                              m.bytes = s.int64(8);
                              m.mem_kind = s.int32(9);
                              writer.addMemset(m);
                              ++sum.memsets;
                          });
    }
    if (st.ok()) {
        // Synchronizations are no op's device work: copied, not attributed.
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", with({"syncType", "eventId"}),
                          {"start", "end"}, [&](const Stmt& s) {
                              trace::SyncRecord y;
                              y.start = s.int64(0) + shift;
                              y.end = s.int64(1) + shift;
                              y.device_id = s.int32(2);
                              y.context_id = s.int32(3);
                              y.stream_id = s.int32(4);
                              y.correlation_id = s.int64(5);
                              y.global_pid = s.int64(6);
                              y.sync_type = s.int32(7);
                              y.event_id = s.int64(8);
                              writer.addSync(y);
                              ++sum.syncs;
                          });
    }
    if (st.ok()) {
        st = r.forEachRow("TARGET_INFO_GPU",
                          {"id", "name", "busLocation", "totalMemory", "memoryBandwidth",
                           "clockRate", "smCount", "uuid", "computeMajor", "computeMinor"},
                          {"id"}, [&](const Stmt& s) {
                              trace::GpuInfo g;
                              g.id = s.int32(0);
                              if (!gpus->insert(g.id).second) {
                                  return;  // the same GPU in another process's report
                              }
                              g.name = s.text(1);
                              g.bus_location = s.text(2);
                              g.total_memory = s.int64(3);
                              g.memory_bandwidth = s.int64(4);
                              g.clock_rate = s.int64(5);
                              g.sm_count = s.int32(6);
                              g.uuid = s.text(7);
                              g.compute_major = s.int32(8);
                              g.compute_minor = s.int32(9);
                              writer.addGpuInfo(g);
                          });
    }
    return st;
}

void removeTrace(const std::string& path) {
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
        std::filesystem::remove(path + suffix, ec);
    }
}

}  // namespace

std::string describeImport(const NsysImportReport& report, const std::string& output) {
    const auto micros = [](std::int64_t ns) {
        char text[32];
        std::snprintf(text, sizeof text, "%.1f us", static_cast<double>(ns) / 1e3);
        return std::string(text);
    };
    std::string text;
    for (const auto& r : report.reports) {
        text += r.path + ": " + std::to_string(r.matched) + " of " + std::to_string(r.op_ranges) +
                " op ranges matched ops of the run; clock offset " + micros(r.clock_offset_ns) +
                " (spread " + micros(r.offset_spread_ns) + ")\n";
        text += "  " + std::to_string(r.kernels) + " kernels, " + std::to_string(r.memcpys) +
                " copies, " + std::to_string(r.memsets) + " memsets, " +
                std::to_string(r.runtime_calls) + " runtime calls, " + std::to_string(r.syncs) +
                " synchronizations, " + std::to_string(r.nvtx_events) + " NVTX events\n";
        if (r.unattributed > 0) {
            text += "  " + std::to_string(r.unattributed) +
                    " device records were launched outside every op (parameter upload, ...)\n";
        }
    }
    text += "wrote " + output + ": " + std::to_string(report.gpu_rows) +
            " ops with device work on the gpu lane\n";
    return text;
}

TraceStatus importNsys(const std::string& run, const std::vector<std::string>& reports,
                       const std::string& output, const NsysImportOptions& options,
                       NsysImportReport* report) {
    *report = {};
    if (reports.empty()) {
        return TraceStatus::error(Code::BadInput, "no Nsight Systems export to import");
    }
    for (std::size_t i = 0; i < reports.size(); ++i) {
        if (samePath(reports[i], run)) {
            return TraceStatus::error(Code::BadInput, reports[i] + " is the run's trace itself");
        }
        for (std::size_t j = 0; j < i; ++j) {
            if (samePath(reports[i], reports[j])) {
                return TraceStatus::error(Code::BadInput, reports[i] + " is given twice");
            }
        }
    }
    trace::TraceReader reader;
    if (TraceStatus st = reader.open(run); !st.ok()) {
        return st;
    }
    // Traced with CUPTI, or imported into before: Nsight's records would count the device work
    // twice.
    const std::string twice =
        ": already has GPU records (traced with CUPTI, or imported into before); Nsight's "
        "would count the device work twice";
    if (reader.kernelCount() > 0) {
        return TraceStatus::error(Code::BadInput, run + twice);
    }
    // The exports first, so that the progress counts every row there is to read.
    Progress progress(options.progress);
    std::vector<std::unique_ptr<Report>> opened;
    for (const std::string& path : reports) {
        auto r = std::make_unique<Report>();
        r->progress = &progress;
        if (TraceStatus st = openExport(path, r.get()); !st.ok()) {
            return st;
        }
        progress.addTotal(r->rowsToRead());
        opened.push_back(std::move(r));
    }
    progress.addTotal(2 * reader.opCount() + reader.memorySampleCount());

    std::unordered_map<std::uint64_t, trace::OpRecord> host_ops;
    bool has_gpu_lane = false;
    TraceStatus st = reader.forEachOp([&](const trace::OpRecord& op) {
        if (op.lane == trace::Lane::Gpu) {
            has_gpu_lane = true;
            return false;
        }
        if (const auto key = opKey(op.rank, op.iteration, op.op_index)) {
            host_ops.emplace(*key, op);
        }
        return progress.step();
    });
    if (!st.ok()) {
        return st;
    }
    if (has_gpu_lane) {
        return TraceStatus::error(Code::BadInput, run + twice);
    }
    if (progress.stopped()) {
        return Progress::cancelled();
    }
    for (auto& r : opened) {
        if (st = readRanges(host_ops, run, r.get()); !st.ok()) {
            return st;
        }
    }

    trace::RunInfo info = reader.run();
    const trace::RunStatus status = info.status;
    const std::string message = info.message;
    const auto end_ns = info.end_ns;
    info.status = trace::RunStatus::Running;
    info.end_ns.reset();
    trace::TraceWriter writer;
    trace::WriterOptions wo;
    wo.overwrite = options.overwrite;
    if (st = writer.create(output, info, wo); !st.ok()) {
        return st;
    }
    const auto fail = [&](TraceStatus why) {
        writer.finish(trace::RunStatus::Failed, why.message);
        removeTrace(output);
        return why;
    };
    // The ranks the file lists: one process's file of a multi-process run lists its own.
    const auto& listed = reader.listedRanks();
    for (const auto& rk : reader.ranks()) {
        if (std::find(listed.begin(), listed.end(), rk.rank) != listed.end()) {
            writer.addRank(rk);
        }
    }
    st = reader.forEachOp([&](const trace::OpRecord& op) {
        writer.addOp(op);
        return progress.step();
    });
    if (st.ok() && !progress.stopped()) {
        st = reader.forEachMemory([&](const trace::MemorySample& m) {
            writer.addMemory(m);
            return progress.step();
        });
    }
    if (st.ok() && progress.stopped()) {
        st = Progress::cancelled();
    }
    if (!st.ok()) {
        return fail(st);
    }
    for (const auto& m : reader.metrics()) {
        writer.addMetric(m);
    }
    writer.addMetric(
        {"nsys_reports", static_cast<double>(opened.size()), std::nullopt, std::nullopt});

    std::set<int> gpus;
    std::unordered_map<std::uint64_t, Span> spans;
    for (auto& r : opened) {
        if (st = copyReport(*r, writer, &gpus, &spans); !st.ok()) {
            return fail(st);
        }
        report->reports.push_back(r->summary);
    }
    std::vector<trace::OpRecord> rows;
    rows.reserve(spans.size());
    for (const auto& [key, span] : spans) {
        trace::OpRecord row = host_ops.at(key);
        row.lane = trace::Lane::Gpu;
        row.source = trace::Source::Gpu;
        row.start_ns = span.start;
        row.end_ns = span.end;
        row.cpu_ns = -1;
        rows.push_back(row);
    }
    std::sort(rows.begin(), rows.end(), [](const trace::OpRecord& a, const trace::OpRecord& b) {
        return a.rank != b.rank ? a.rank < b.rank : a.start_ns < b.start_ns;
    });
    for (const auto& row : rows) {
        writer.addOp(row);
    }
    report->gpu_rows = static_cast<std::int64_t>(rows.size());
    if (st = writer.finish(status, message, end_ns); !st.ok()) {
        removeTrace(output);
        return st;
    }
    return TraceStatus::success();
}

}  // namespace pipescope::interop
