// The reading side of the Nsight import (nsys_import.h), private to the interop library: one
// Nsight Systems export opened through the trace library's SQLite wrappers, its op ranges, the
// runtime calls made in them, and the copy of its GPU tables into a trace.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/types.h>

// The trace library's SQLite wrappers: reading a foreign SQLite file is the one place outside
// that library that needs them.
#include "progress.h"
#include "sqlite_util.h"

namespace pipescope::trace {
class TraceWriter;
}

namespace pipescope::interop::detail {

using trace::TraceStatus;
using trace::detail::Db;
using trace::detail::Stmt;
using Code = TraceStatus::Code;

inline constexpr int kNvtxMark = 34;
inline constexpr int kNvtxPushPop = 59;
inline constexpr int kNvtxStartEnd = 60;
inline constexpr int kNvtxDomainCreate = 75;  // a domain's name (text) for its domainId

// (rank, iteration, op index) in one integer; nullopt past the ranges a trace can hold.
inline std::optional<std::uint64_t> opKey(int rank, int iteration, int op_index) {
    if (rank < 0 || rank >= trace::kMaxRanks || iteration < 0 || iteration >= (1 << 23) ||
        op_index < 0 || op_index >= (1 << 24)) {
        return std::nullopt;
    }
    return (static_cast<std::uint64_t>(rank) << 47) |
           (static_cast<std::uint64_t>(iteration) << 24) | static_cast<std::uint64_t>(op_index);
}

// The op_correlation row of a device record of the op `key` (an opKey).
inline trace::OpCorrelation opCorrelation(std::uint64_t key, std::int64_t global_pid,
                                          std::int64_t correlation, std::int64_t start) {
    return {global_pid,
            correlation,
            start,
            static_cast<int>(key >> 47),
            static_cast<int>((key >> 24) & ((1u << 23) - 1)),
            static_cast<int>(key & ((1u << 24) - 1))};
}

// Nsight serialises a thread as (pid << 24) | tid, and a process as pid << 24.
inline std::int64_t processOf(std::int64_t global_id) {
    return global_id >> 24;
}

struct OpRange {
    std::int64_t start = 0, end = 0;
    std::uint64_t key = 0;
};

// The GPUs already written, by (id, uuid, bus location): the same GPU in several processes'
// reports is listed once, GPU 0 of two hosts twice.
using GpuSet = std::set<std::tuple<int, std::string, std::string>>;
// The thread names already written, by (globalTid, name): likewise.
using ThreadSet = std::set<std::pair<std::int64_t, std::string>>;

struct Span {
    std::int64_t start = 0, end = 0;
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
                return progress->cancelled();
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
        for (const char* t :
             {"CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
              "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
              "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "TARGET_INFO_GPU", "ThreadNames"}) {
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

// Opens an export and checks that it is one, with NVTX events.
TraceStatus openExport(const std::string& path, Report* r);
// Reads an opened export's strings and NVTX op ranges and fits its clock to the run's:
// `host_ops` are the run's host rows by opKey.
TraceStatus readRanges(const std::unordered_map<std::uint64_t, trace::OpRecord>& host_ops,
                       const std::string& run_path, Report* r);
// Copies a report's GPU tables and thread names into the writer, on the run's clock, ties each
// device record to the op that launched it (op_correlation), and widens the device span of each
// op (by opKey) by the records it launched.
TraceStatus copyReport(Report& r, trace::TraceWriter& writer, GpuSet* gpus, ThreadSet* threads,
                       std::unordered_map<std::uint64_t, Span>* spans);

}  // namespace pipescope::interop::detail
