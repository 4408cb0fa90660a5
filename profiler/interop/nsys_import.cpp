#include <algorithm>
#include <filesystem>
#include <memory>

#include <pipescope/interop/nsys_import.h>
#include <pipescope/trace/number_text.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "atomic_file.h"
#include "nsys_export.h"

namespace pipescope::interop {

namespace {

using detail::copyReport;
using detail::openExport;
using detail::opKey;
using detail::Progress;
using detail::readRanges;
using detail::Report;
using detail::Span;
using trace::TraceStatus;
using Code = TraceStatus::Code;

bool samePath(const std::string& a, const std::string& b) {
    std::error_code ec;
    return a == b || (std::filesystem::equivalent(a, b, ec) && !ec);
}

}  // namespace

std::string describeImport(const NsysImportReport& report, const std::string& output) {
    const auto micros = [](std::int64_t ns) {
        return trace::fixedText(static_cast<double>(ns) / 1e3, 1) + " us";
    };
    std::string text;
    for (const auto& r : report.reports) {
        text += r.path + ": " + std::to_string(r.matched) + " of " + std::to_string(r.op_ranges) +
                " op ranges matched ops of the run; clock offset " + micros(r.clock_offset_ns) +
                " (spread " + micros(r.offset_spread_ns) + ")\n";
        text += "  " + std::to_string(r.kernels) + " kernels, " + std::to_string(r.memcpys) +
                " copies, " + std::to_string(r.memsets) + " memsets, " +
                std::to_string(r.runtime_calls) + " runtime calls, " + std::to_string(r.syncs) +
                " synchronizations, " + std::to_string(r.nvtx_events) + " NVTX events, " +
                std::to_string(r.thread_names) + " thread names\n";
        if (r.unattributed > 0) {
            text += "  " + std::to_string(r.unattributed) +
                    " device records were launched outside every op (parameter upload, ...)\n";
        }
        if (r.backwards > 0) {
            text += "  " + std::to_string(r.backwards) +
                    " device records (kernels, copies, memsets) end before they start (the "
                    "export is damaged or was edited): copied as they are, taking no time in "
                    "their ops' gpu spans\n";
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
    // The app's save dialog lets the user pick an input as the output, which the import would
    // replace: the run's trace, or the export that cannot be made again without the profile.
    for (const std::string& input : reports) {
        if (samePath(input, output)) {
            return TraceStatus::error(Code::BadInput, output +
                                                          " is the Nsight Systems export read; "
                                                          "refusing to replace it (write to "
                                                          "another file)");
        }
    }
    if (samePath(run, output)) {
        return TraceStatus::error(Code::BadInput,
                                  output +
                                      " is the run's trace read; refusing to replace it (write "
                                      "to another file)");
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
    Progress progress(options.progress, kNsysImportWritingFrom, "the import");
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
        return progress.cancelled();
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
    // Written beside `output` and renamed onto it when finished: an import that fails, is
    // cancelled or is killed leaves no half-built file, and the file --force replaces stays
    // until then.
    detail::PartialTrace partial;
    if (st = partial.prepare(output, options.overwrite); !st.ok()) {
        return st;
    }
    trace::TraceWriter writer;
    trace::WriterOptions wo;
    wo.overwrite = true;  // the partial file's reserved, empty name
    if (st = writer.create(partial.path(), info, wo); !st.ok()) {
        return partial.named(st);
    }
    const auto fail = [&](TraceStatus why) {
        // A cancelled one is discarded at once: building its indexes first (seconds for a large
        // trace) held up the Ctrl+C that asked to stop.
        if (why.code != Code::Cancelled) {
            writer.finish(trace::RunStatus::Failed, why.message);
        }
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
        st = progress.cancelled();
    }
    if (!st.ok()) {
        return fail(st);
    }
    for (const auto& m : reader.metrics()) {
        writer.addMetric(m);
    }
    writer.addMetric(
        {"nsys_reports", static_cast<double>(opened.size()), std::nullopt, std::nullopt});

    detail::GpuSet gpus;
    detail::ThreadSet threads;
    std::unordered_map<std::uint64_t, Span> spans;
    for (auto& r : opened) {
        if (st = copyReport(*r, writer, &gpus, &threads, &spans); !st.ok()) {
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
    if (st = writer.finish(status, message, end_ns,
                           [&](double fraction) { progress.finishing(fraction); });
        !st.ok()) {
        return partial.named(st);
    }
    // Ctrl+C while the indexes were built: that part runs to its end, but the output is not
    // delivered (it was, with exit 0, as if nobody had asked to stop).
    if (progress.stopped()) {
        return progress.cancelled();
    }
    return partial.commit();
}

}  // namespace pipescope::interop
