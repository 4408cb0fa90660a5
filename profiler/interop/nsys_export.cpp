#include "nsys_export.h"

#include <cstdlib>

#include <pipescope/trace/nvtx_op.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "clock_math.h"
#include "record_rows.h"

namespace pipescope::interop::detail {

namespace {

std::int64_t median(std::vector<std::int64_t> v) {
    const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

}  // namespace

TraceStatus openExport(const std::string& path, Report* r) {
    r->summary.path = path;
    {
        trace::TraceReader probe;
        const TraceStatus st = probe.open(path);
        if (st.ok()) {
            return TraceStatus::error(Code::BadInput,
                                      path + ": a PipeScope trace, not an Nsight Systems export");
        }
        // The reader's words are about PipeScope traces; here the file was meant to be an export.
        if (st.code == Code::NotSqlite) {
            return TraceStatus::error(Code::BadInput,
                                      path +
                                          ": not a SQLite database, so not an Nsight Systems "
                                          "export (nsys export --type sqlite writes one)");
        }
        if (st.code == Code::NotPipeScope) {
            return TraceStatus::error(
                Code::BadInput,
                path +
                    ": a SQLite database, but not an Nsight Systems export (it has none of "
                    "Nsight's tables: TARGET_INFO_SESSION_START_TIME, CUPTI_ACTIVITY_KIND_KERNEL, "
                    "NVTX_EVENTS); export the report with nsys export --type sqlite");
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

TraceStatus readRanges(const std::unordered_map<std::uint64_t, trace::OpRecord>& host_ops,
                       const std::string& run_path, Report* r) {
    TraceStatus st =
        r->forEachRow("StringIds", {"id", "value"}, {"id", "value"},
                      [&](const Stmt& s) { r->strings.emplace(s.int64(0), s.text(1)); });
    if (!st.ok()) {
        return st;
    }
    std::vector<std::int64_t> offsets;
    std::int64_t misfits = 0;
    std::string first_misfit;
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
            const trace::OpRecord& op = host->second;
            if (!trace::nvtxLabelFits(ref->label, trace::toString(op.kind), op.microbatch)) {
                if (misfits++ == 0) {
                    first_misfit = "\"" + text + "\" is op #" + std::to_string(op.op_index) +
                                   " of rank " + std::to_string(op.rank) + " in iteration " +
                                   std::to_string(op.iteration) + ", which is " +
                                   trace::opLabel(op) + " in " + run_path;
                }
                return;
            }
            ++r->summary.matched;
            const std::int64_t start = s.int64(0), end = s.int64(1);
            offsets.push_back(since(start, host->second.start_ns));
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
    // A range at an op's place that names another op: the ops of another run, whose kernels
    // would be laid on the wrong ops.
    if (misfits > 0) {
        return TraceStatus::error(
            Code::BadInput,
            r->fail(std::to_string(misfits) + " of its " + std::to_string(r->summary.op_ranges) +
                    " op ranges name other ops than the run has at their places (" + first_misfit +
                    "): is it the export of another run?"));
    }
    if (r->summary.matched == 0) {
        return TraceStatus::error(
            Code::BadInput,
            r->fail("none of its " + std::to_string(r->summary.op_ranges) +
                    " op ranges is an op of " + run_path + " (is it the export of another run?)"));
    }
    r->summary.clock_offset_ns = median(offsets);
    if (r->summary.clock_offset_ns > kFarNs || r->summary.clock_offset_ns < -kFarNs) {
        return TraceStatus::error(
            Code::BadInput,
            r->fail("its op ranges put its clock " + std::to_string(r->summary.clock_offset_ns) +
                    " ns from the run's, more than 146 years: the export's times are damaged"));
    }
    for (auto& d : offsets) {
        d = distance(d, r->summary.clock_offset_ns);
    }
    r->summary.offset_spread_ns = median(offsets);
    for (auto& [tid, ranges] : r->ranges_by_thread) {
        std::sort(ranges.begin(), ranges.end(),
                  [](const OpRange& a, const OpRange& b) { return a.start < b.start; });
    }
    return TraceStatus::success();
}

TraceStatus copyReport(Report& r, trace::TraceWriter& writer, GpuSet* gpus, ThreadSet* threads,
                       std::unordered_map<std::uint64_t, Span>* spans) {
    const std::int64_t shift = r.summary.clock_offset_ns;
    NsysReportSummary& sum = r.summary;
    TraceStatus st = r.forEachRow(
        "NVTX_EVENTS", {"start", "end", "eventType", "text", "textId", "globalTid", "domainId"},
        {"start", "eventType"}, [&](const Stmt& s) {
            trace::NvtxRecord n;
            n.event_type = s.int32(2);
            if (n.event_type != kNvtxMark && n.event_type != kNvtxPushPop &&
                n.event_type != kNvtxStartEnd && n.event_type != kNvtxDomainCreate) {
                return;  // category registrations, payload schemas and the like
            }
            n.start = moved(s.int64(0), shift);
            if (!s.isNull(1)) {
                n.end = moved(s.int64(1), shift);
            }
            n.text = s.isNull(3) ? r.string(s, 4) : s.text(3);
            n.global_tid = s.int64(5);
            n.domain_id = s.int32(6);
            writer.addNvtx(n);
            ++sum.nvtx_events;
        });
    if (st.ok()) {
        st = r.forEachRow(
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            {"start", "end", "globalTid", "correlationId", "nameId", "returnValue", "eventClass"},
            {"start", "end", "globalTid", "correlationId"}, [&](const Stmt& s) {
                trace::RuntimeRecord rt;
                rt.start = moved(s.int64(0), shift);
                rt.end = moved(s.int64(1), shift);
                rt.global_tid = s.int64(2);
                rt.correlation_id = s.int64(3);
                rt.name = r.string(s, 4);
                rt.return_value = s.int32(5);
                rt.event_class = s.isNull(6) ? trace::kEventClassCudaRuntime : s.int32(6);
                writer.addRuntime(rt);
                ++sum.runtime_calls;
                const auto op = s.isNull(3) ? std::nullopt : r.opAt(rt.global_tid, s.int64(0));
                if (op) {
                    r.launches.push_back(
                        {processOf(rt.global_tid), rt.correlation_id, s.int64(0), *op});
                }
            });
    }
    if (!st.ok()) {
        return st;
    }
    std::sort(r.launches.begin(), r.launches.end());
    // A device record on the run's clock: shifted, and for the op's device work, tied to the op
    // that launched it and widening its span, or counted as launched outside every op.
    const auto shifted = [&](auto* record) {
        record->start = moved(record->start, shift);
        record->end = moved(record->end, shift);
    };
    const auto attribute = [&](const Stmt& s, const auto& record) {
        const auto op =
            s.isNull(5) ? std::nullopt : r.launcher(record.global_pid, s.int64(5), s.int64(0));
        if (!op) {
            ++sum.unattributed;
            return;
        }
        writer.addOpCorrelation(
            opCorrelation(*op, record.global_pid, record.correlation_id, record.start));
        // One that ends before it starts takes no time: its end would give its op's device span
        // an end before its start.
        const std::int64_t end = std::max(record.start, record.end);
        auto [it, fresh] = spans->try_emplace(*op, Span{record.start, end});
        if (!fresh) {
            it->second.start = std::min(it->second.start, record.start);
            it->second.end = std::max(it->second.end, end);
        }
    };
    const auto backwards = [&](const auto& record) {
        if (record.end < record.start) {
            ++sum.backwards;
        }
    };
    const std::set<std::string> required = {"start", "end", "correlationId"};
    st = r.forEachRow("CUPTI_ACTIVITY_KIND_KERNEL", trace::detail::kKernelColumns, required,
                      [&](const Stmt& s) {
                          trace::KernelRecord k;
                          trace::detail::fillKernel(s, k);
                          k.demangled_name = r.string(s, 8);
                          k.short_name = r.string(s, 9);
                          shifted(&k);
                          backwards(k);
                          attribute(s, k);
                          writer.addKernel(k);
                          ++sum.kernels;
                      });
    if (st.ok()) {
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_MEMCPY", trace::detail::kMemcpyColumns, required,
                          [&](const Stmt& s) {
                              trace::MemcpyRecord m;
                              trace::detail::fillMemcpy(s, m);
                              shifted(&m);
                              backwards(m);
                              attribute(s, m);
                              writer.addMemcpy(m);
                              ++sum.memcpys;
                          });
    }
    if (st.ok()) {
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_MEMSET", trace::detail::kMemsetColumns, required,
                          [&](const Stmt& s) {
                              trace::MemsetRecord m;
                              trace::detail::fillMemset(s, m);
                              shifted(&m);
                              backwards(m);
                              attribute(s, m);
                              writer.addMemset(m);
                              ++sum.memsets;
                          });
    }
    if (st.ok()) {
        // Synchronizations are no op's device work: copied, not attributed.
        st = r.forEachRow("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", trace::detail::kSyncColumns,
                          {"start", "end"}, [&](const Stmt& s) {
                              trace::SyncRecord y;
                              trace::detail::fillSync(s, y);
                              shifted(&y);
                              writer.addSync(y);
                              ++sum.syncs;
                          });
    }
    if (st.ok()) {
        st =
            r.forEachRow("TARGET_INFO_GPU", trace::detail::kGpuColumns, {"id"}, [&](const Stmt& s) {
                trace::GpuInfo g;
                trace::detail::fillGpuInfo(s, g);
                if (gpus->insert({g.id, g.uuid, g.bus_location}).second) {
                    writer.addGpuInfo(g);  // else the same GPU in another report
                }
            });
    }
    if (st.ok()) {
        st = r.forEachRow("ThreadNames", {"nameId", "priority", "globalTid"}, {"globalTid"},
                          [&](const Stmt& s) {
                              trace::ThreadName t;
                              t.name = r.string(s, 0);
                              t.priority = s.int32(1);
                              t.global_tid = s.int64(2);
                              if (threads->insert({t.global_tid, t.name}).second) {
                                  writer.addThreadName(t);
                                  ++sum.thread_names;
                              }
                          });
    }
    return st;
}

}  // namespace pipescope::interop::detail
