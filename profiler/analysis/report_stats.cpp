// `stats` output: a table for people, JSON for programs.
#include <algorithm>

#include <pipescope/analysis/report.h>
#include <pipescope/trace/units.h>

#include "json_value.h"
#include "text_table.h"

namespace pipescope::analysis {

using detail::fixed;
using detail::iterationList;
using detail::Json;
using detail::percent;

namespace {

constexpr double kNsPerMs = 1e6;
using trace::kBytesPerGiB;
constexpr std::size_t kMaxListedIterations = 16;

std::optional<double> toMs(std::optional<double> ns) {
    return ns ? std::optional<double>(*ns / kNsPerMs) : std::nullopt;
}

std::string describeMeasured(const RunStats& s) {
    const std::size_t recorded = s.iterations.size();
    std::string text =
        std::to_string(recorded) + " recorded, warm-up " + std::to_string(s.run.warmup) + "; ";
    const std::optional<int> cut = s.cut_short_iteration;
    const std::string cut_text = cutShortText(s);
    const std::string were = cut_text.rfind("iterations", 0) == 0 ? " were" : " was";
    if (s.measured.empty()) {
        return text + "no iteration to average" +
               (cut ? " (" + cut_text + were + " cut short by the run's end)" : std::string());
    }
    const std::string list = iterationList(s.measured);
    const std::string plural = s.measured.size() == 1 ? "iteration " : "iterations ";
    if (s.single_iteration) {
        return text + "figures for iteration " + list + " only" +
               (s.cutShort(s.measured.front())
                    ? ", which the run's end cut short (no MFU or tokens/s: they would count a "
                      "whole iteration's work)"
                    : "");
    }
    if (s.warmup_fallback && cut && *cut >= s.run.warmup) {
        return text + cut_text + ", past the warm-up," + were +
               " cut short by the run's end, so figures average the warm-up: " + plural + list;
    }
    const std::string cut_note =
        cut ? " (" + cut_text + were + " cut short by the run's end)" : std::string();
    if (s.warmup_fallback) {
        return text + "none past the warm-up, so figures average all: " + plural + list + cut_note;
    }
    return text + "figures average " + plural + list + cut_note;
}

std::string perIterationLine(const RunStats& s) {
    std::string out;
    std::size_t shown = 0;
    for (const IterationStats& it : s.iterations) {
        if (shown == kMaxListedIterations) {
            out += ", ... (" + std::to_string(s.iterations.size() - shown) + " more)";
            break;
        }
        if (shown > 0) {
            out += ", ";
        }
        out += std::to_string(it.iteration) + ": " +
               fixed(static_cast<double>(it.timeNs()) / kNsPerMs, 3);
        if (s.cutShort(it.iteration)) {
            out += " (cut short, not averaged)";
        } else if (!it.measured) {
            out += " (not averaged)";
        }
        ++shown;
    }
    return out;
}

std::string peakText(const MemoryPeak& p, const trace::MemoryUnit& unit) {
    return p.present ? fixed(unit.of(static_cast<double>(p.bytes)), unit.decimals) : "-";
}

}  // namespace

std::string describeStatus(const trace::RunInfo& run) {
    const std::string name(trace::toString(run.status));
    if (run.status == trace::RunStatus::Complete) {
        return name;
    }
    std::string text = name;
    if (!run.message.empty()) {
        text += ": " + detail::printable(run.message);
    }
    return text + " (the run did not finish; figures cover what was recorded)";
}

std::string partialRunNote(const RunStats& s) {
    if (!s.partial()) {
        return {};
    }
    std::string ranks;
    for (int r : s.held_ranks) {
        ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    }
    return "this file holds rank" + std::string(s.held_ranks.size() == 1 ? " " : "s ") + ranks +
           " of the run's " + std::to_string(s.rank_count) +
           " (one process of a multi-process run): the figures are its rank's, and the "
           "imbalances need every rank; merge every rank's file for the run's figures "
           "(pipescope-trace merge RUN-rank0.db RUN-rank1.db ... -o RUN.db)";
}

std::string formatStatsTable(const RunStats& s) {
    std::string out;
    out += "run: " + detail::printable(s.run.name) + " (backend " +
           detail::printable(s.run.backend) + ", " + std::to_string(s.rank_count) + " ranks)\n";
    out += "file: " + detail::printable(s.path) + "\n";
    out += "status: " + describeStatus(s.run) + "\n";
    out += "iterations: " + describeMeasured(s) + "\n\n";

    std::vector<std::string> header = {"rank",      "stages",   "busy ms",
                                       "bubble ms", "bubble %", "comm wait ms"};
    if (s.gpu_spans) {
        header.push_back("gpu busy ms");
    }
    // MiB when every rank's peak is under 1 GiB; the capacity below stays in GiB.
    double largest = 0;
    for (const RankStats& r : s.ranks) {
        if (r.peak_memory.present) {
            largest = std::max(largest, static_cast<double>(r.peak_memory.bytes));
        }
    }
    const trace::MemoryUnit unit = trace::memoryUnitFor(largest);
    header.push_back(std::string("peak memory ") + unit.name);
    detail::TextTable table(header, 0);
    const bool have = s.iteration_time_ns.has_value();
    for (const RankStats& r : s.ranks) {
        auto ms = [&](double ns) { return have ? fixed(ns / kNsPerMs, 3) : "-"; };
        std::vector<std::string> row = {std::to_string(r.rank),
                                        r.stages.empty() ? "-" : detail::printable(r.stages),
                                        ms(r.busy_ns),
                                        ms(r.bubble_ns),
                                        have ? percent(r.bubble_ratio) : "-",
                                        ms(r.comm_wait_ns)};
        if (s.gpu_spans) {
            row.push_back(ms(r.gpu_busy_ns));
        }
        row.push_back(peakText(r.peak_memory, unit));
        table.addRow(row);
    }
    out += table.render() + "\n";
    if (s.hostSpansAreIssueTimes()) {
        out += std::string(
                   "note: asynchronous lanes (--lane-sync event): host spans are the times "
                   "ops were issued, so busy, bubble and comm wait describe the host; ") +
               (s.gpu_spans ? "the device's busy time is gpu busy ms"
                            : "this trace has no gpu lane to show the device's") +
               "\n\n";
    }

    detail::TextTable summary({"", ""}, 1);
    summary.addRow({"iteration time ms", fixed(toMs(s.iteration_time_ns), 3)});
    summary.addRow({"MFU", percent(s.mfu)});
    summary.addRow(
        {"tokens/s", fixed(s.tokens_per_s, trace::rateDecimals(s.tokens_per_s.value_or(0)))});
    summary.addRow({"mean bubble ratio", percent(s.mean_bubble_ratio)});
    summary.addRow({"busy imbalance", fixed(s.imbalance.busy, 3)});
    summary.addRow({"peak memory imbalance", fixed(s.imbalance.peak_memory, 3)});
    const auto capacity = s.inputs.memory_capacity_bytes;
    summary.addRow(
        {"memory capacity GiB",
         fixed(capacity ? std::optional<double>(*capacity / kBytesPerGiB) : std::nullopt, 2)});
    // The header row of this two-column list is empty; drop its blank line.
    std::string lines = summary.render();
    lines.erase(0, lines.find('\n') + 1);
    out += lines;
    if (s.inputs.hardwareFromConfig()) {
        const auto tflops = s.inputs.peak_flops_per_rank
                                ? std::optional<double>(*s.inputs.peak_flops_per_rank / 1e12)
                                : std::nullopt;
        out += "note: MFU and memory capacity use the config's hardware section (" +
               fixed(tflops, 3) + " TFLOP/s per rank), not this machine's\n";
    }
    if (s.mfu && *s.mfu > 1) {
        out +=
            "note: MFU above 100%: the run was faster than the peak it is taken against "
            "allows for the model's FLOPs\n";
    }
    if (!s.iterations.empty()) {
        out += "per iteration ms: " + perIterationLine(s) + "\n";
    }
    if (s.partial()) {
        out += "note: " + partialRunNote(s) + "\n";
    }
    return out;
}

std::string formatStatsJson(const RunStats& s) {
    Json root = Json::object();
    root.set("file", s.path);
    root.set("run", s.run.name);
    root.set("backend", s.run.backend);
    root.set("status", std::string(trace::toString(s.run.status)));
    root.set("status_message", s.run.message.empty() ? Json() : Json(s.run.message));
    root.set("iteration_time_ms", toMs(s.iteration_time_ns));
    root.set("mfu", s.mfu);
    root.set("tokens_per_s", s.tokens_per_s);
    root.set("bubble_ratio", s.mean_bubble_ratio);
    Json imbalance = Json::object();
    imbalance.set("busy", s.imbalance.busy);
    imbalance.set("peak_memory", s.imbalance.peak_memory);
    root.set("imbalance", std::move(imbalance));
    root.set("memory_capacity_bytes", s.inputs.memory_capacity_bytes);
    root.set("peak_flops_per_rank", s.inputs.peak_flops_per_rank);
    root.set("hardware_from_config", s.inputs.hardwareFromConfig());
    root.set("host_spans", std::string(s.hostSpansAreIssueTimes() ? "issue" : "execution"));

    Json its = Json::object();
    its.set("recorded", static_cast<std::int64_t>(s.iterations.size()));
    its.set("warmup", s.run.warmup);
    its.set("measured", static_cast<std::int64_t>(s.measured.size()));
    Json selected = Json::array();
    for (int i : s.measured) {
        selected.push(i);
    }
    its.set("selected", std::move(selected));
    its.set("cut_short", s.cut_short_iteration);
    Json damage = Json::array();
    for (const std::string& problem : s.damage) {
        damage.push(problem);
    }
    root.set("damage", std::move(damage));
    Json held = Json::array();
    for (int r : s.held_ranks) {
        held.push(r);
    }
    root.set("held_ranks", std::move(held));
    Json numbers = Json::array();
    Json per = Json::array();
    for (const IterationStats& it : s.iterations) {
        numbers.push(it.iteration);
        per.push(static_cast<double>(it.timeNs()) / kNsPerMs);
    }
    its.set("numbers", std::move(numbers));
    its.set("per_iteration_ms", std::move(per));
    root.set("iterations", std::move(its));

    Json ranks = Json::array();
    const bool have = s.iteration_time_ns.has_value();
    for (const RankStats& r : s.ranks) {
        Json o = Json::object();
        o.set("rank", r.rank);
        o.set("stages", r.stages);
        o.set("busy_ms", have ? Json(r.busy_ns / kNsPerMs) : Json());
        o.set("bubble_ms", have ? Json(r.bubble_ns / kNsPerMs) : Json());
        o.set("bubble_ratio", have ? Json(r.bubble_ratio) : Json());
        o.set("comm_wait_ms", have ? Json(r.comm_wait_ns / kNsPerMs) : Json());
        o.set("gpu_busy_ms", have && s.gpu_spans ? Json(r.gpu_busy_ns / kNsPerMs) : Json());
        const MemoryPeak& p = r.peak_memory;
        o.set("peak_memory_bytes", p.present ? Json(p.bytes) : Json());
        o.set("peak_memory_t_ns", p.present ? Json(p.t_ns) : Json());
        Json cats = p.present ? Json::object() : Json();
        if (p.present) {
            for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
                cats.set(std::string(trace::toString(static_cast<trace::MemoryCategory>(c))),
                         p.by_category[static_cast<std::size_t>(c)]);
            }
        }
        o.set("peak_memory_by_category", std::move(cats));
        ranks.push(std::move(o));
    }
    root.set("ranks", std::move(ranks));
    return root.dump();
}

}  // namespace pipescope::analysis
