#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include <pipescope/analysis/kernels.h>
#include <pipescope/trace/op_bounds.h>

#include "json_value.h"
#include "text_table.h"

namespace pipescope::analysis {

using detail::fixed;
using detail::Json;
using detail::percent;
using detail::TextTable;

namespace {

constexpr double kNsPerMs = 1e6;
constexpr double kNsPerUs = 1e3;
constexpr std::size_t kMaxNameWidth = 60;

// The union of the measured iterations' windows, device spans included (asynchronous lanes put
// an iteration's kernels past its host window), as disjoint ranges by start.
std::vector<trace::TimeRange> measuredWindows(const RunStats& stats) {
    std::vector<trace::TimeRange> windows;
    for (const auto& it : stats.iterations) {
        if (it.measured) {
            windows.push_back({it.device_start_ns, it.device_end_ns});
        }
    }
    std::sort(windows.begin(), windows.end(),
              [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    std::vector<trace::TimeRange> merged;
    for (const auto& w : windows) {
        if (!merged.empty() && w.start_ns <= merged.back().end_ns) {
            merged.back().end_ns = std::max(merged.back().end_ns, w.end_ns);
        } else {
            merged.push_back(w);
        }
    }
    return merged;
}

bool inside(const std::vector<trace::TimeRange>& windows, std::int64_t t) {
    // The last range starting at or before t (the ranges are disjoint).
    auto it = std::upper_bound(windows.begin(), windows.end(), t,
                               [](std::int64_t v, const auto& w) { return v < w.start_ns; });
    return it != windows.begin() && t <= std::prev(it)->end_ns;
}

// A long template name cut in the middle: "void gemm<…>(float const*)" stays recognisable.
std::string shortened(const std::string& name) {
    if (name.size() <= kMaxNameWidth) {
        return name;
    }
    const std::size_t half = (kMaxNameWidth - 3) / 2;
    return name.substr(0, half) + "..." + name.substr(name.size() - half);
}

double iterationsOf(const RunStats& stats) {
    return static_cast<double>(std::max<std::size_t>(1, stats.measured.size()));
}

// Kernel times by name (the demangled one, the short one when there is none).
class ByName {
  public:
    // Adds one launch; returns its time.
    std::int64_t add(const trace::KernelRecord& k) {
        // No time for one that ends before it starts; no wrap for one from -2^63 to 2^63 - 1.
        std::int64_t d = 0;
        if (k.end > k.start && __builtin_sub_overflow(k.end, k.start, &d)) {
            d = INT64_MAX;
        }
        const std::string& name = k.demangled_name.empty() ? k.short_name : k.demangled_name;
        auto [it, inserted] = names_.try_emplace(name);
        KernelNameStats& n = it->second;
        if (inserted) {
            n.name = name;
            n.short_name = k.short_name;
        }
        n.add(d);
        return d;
    }
    // Most time first, then by name.
    std::vector<KernelNameStats> mostTimeFirst() {
        std::vector<KernelNameStats> out;
        for (auto& [name, n] : names_) {
            out.push_back(std::move(n));
        }
        std::stable_sort(out.begin(), out.end(),
                         [](const auto& a, const auto& b) { return a.total_ns > b.total_ns; });
        return out;
    }

  private:
    std::map<std::string, KernelNameStats> names_;
};

std::string milliseconds(std::int64_t ns) {
    std::ostringstream out;
    out.setf(std::ios::fixed);
    out.precision(3);
    out << static_cast<double>(ns) / kNsPerMs << " ms";
    return out.str();
}

std::string kernelName(const trace::KernelRecord& k) {
    return detail::printable(k.demangled_name.empty() ? k.short_name : k.demangled_name);
}

}  // namespace

trace::TraceStatus summarizeKernels(const trace::TraceReader& reader, const RunStats& stats,
                                    KernelSummary* out) {
    KernelSummary s;
    s.rule = reader.opCorrelationCount() > 0 ? KernelRule::Op : KernelRule::Window;
    const auto windows = measuredWindows(stats);
    const std::set<int> measured(stats.measured.begin(), stats.measured.end());
    ByName by_name;
    const auto counted = [&](const trace::KernelRecord& k, const trace::OpCorrelation* op) {
        if (s.rule == KernelRule::Window) {
            return inside(windows, k.start);
        }
        if (op == nullptr) {
            ++s.outside_ops;
            return false;
        }
        return measured.count(op->iteration) > 0;
    };
    // A kernel that cannot have run when the run did (an end edited to 2^63 - 1) would make the
    // device's kernel time centuries long: left out, as the run's figures leave such ops out.
    const trace::OpBounds bounds = trace::OpBounds::of(reader.run());
    std::int64_t outside_run = 0;
    std::int64_t backwards = 0;
    std::optional<trace::KernelRecord> first_outside;
    const trace::TraceStatus st = reader.forEachKernelWithOp(
        [&](const trace::KernelRecord& k, const trace::OpCorrelation* op) {
            ++s.kernels_in_trace;
            if (!bounds.holdsRecord(k.start, k.end)) {
                if (outside_run++ == 0) {
                    first_outside = k;
                }
                return true;
            }
            if (!counted(k, op)) {
                return true;
            }
            if (k.end < k.start) {
                ++backwards;
            }
            const std::int64_t d = by_name.add(k);
            ++s.launches;
            s.total_ns += d;
            s.by_device_ns[k.device_id] += d;
            return true;
        });
    if (!st.ok()) {
        return st;
    }
    if (outside_run > 0) {
        const bool one = outside_run == 1;
        const trace::KernelRecord& k = *first_outside;
        s.damage.push_back(
            std::to_string(outside_run) + (one ? " kernel lies" : " kernels lie") +
            " far outside the run's recorded time" +
            (bounds.bounded() ? " (0 to " + milliseconds(bounds.span()) + ")" : std::string()) +
            ": " + (one ? "" : "the first, ") + kernelName(k) + " on device " +
            std::to_string(k.device_id) + ", from " + milliseconds(k.start) + " to " +
            milliseconds(k.end) + "; left out of every figure");
    }
    if (backwards > 0) {
        s.damage.push_back(
            std::to_string(backwards) +
            (backwards == 1 ? " kernel ends before it starts" : " kernels end before they start") +
            "; counted as taking no time");
    }
    s.kernels = by_name.mostTimeFirst();
    *out = std::move(s);
    return trace::TraceStatus::success();
}

OpKernels summarizeOpKernels(const std::vector<trace::KernelRecord>& kernels) {
    OpKernels s;
    ByName by_name;
    for (const auto& k : kernels) {
        s.total_ns += by_name.add(k);
        s.first_start_ns = s.launches == 0 ? k.start : std::min(s.first_start_ns, k.start);
        s.last_end_ns = s.launches == 0 ? k.end : std::max(s.last_end_ns, k.end);
        ++s.launches;
    }
    s.kernels = by_name.mostTimeFirst();
    return s;
}

std::string formatKernelsTable(const KernelSummary& summary, const RunStats& stats,
                               std::size_t top) {
    const double n = iterationsOf(stats);
    std::string out = "GPU kernels of iteration" +
                      std::string(stats.measured.size() == 1 ? " " : "s ") +
                      detail::iterationList(stats.measured) + ", per iteration (" +
                      detail::printable(stats.path) + ")\n";
    if (summary.kernels_in_trace == 0) {
        return out +
               "no GPU kernels in this trace: a simulated or CPU run, or a CUDA run traced "
               "with --cupti off (pipescope-trace import-nsys adds Nsight's)\n";
    }
    const bool by_op = summary.rule == KernelRule::Op;
    if (summary.launches == 0) {
        return out + "none of the trace's " + std::to_string(summary.kernels_in_trace) +
               (by_op ? " kernels were launched by an op of these iterations\n"
                      : " kernels started inside these iterations\n");
    }
    out += detail::perIteration(summary.launches, n) + " launches, " +
           fixed(static_cast<double>(summary.total_ns) / n / kNsPerMs, 3) + " ms of kernel time";
    if (summary.by_device_ns.size() > 1) {
        for (const auto& [device, ns] : summary.by_device_ns) {
            out += "; device " + std::to_string(device) + " " +
                   fixed(static_cast<double>(ns) / n / kNsPerMs, 3) + " ms";
        }
    }
    out += "\n";
    out += by_op ? "(kernels counted by the iteration of the op that launched them"
                 : "(kernels counted by start time inside the iterations' windows: this trace "
                   "does not tie kernels to ops";
    if (by_op && summary.outside_ops > 0) {
        out += "; " + std::to_string(summary.outside_ops) + " of the trace's kernels are of no op";
    }
    out += ")\n\n";
    TextTable table({"kernel", "launches", "ms", "share", "mean us", "min us", "max us"}, 1);
    const std::size_t shown =
        top == 0 ? summary.kernels.size() : std::min(top, summary.kernels.size());
    for (std::size_t i = 0; i < shown; ++i) {
        const KernelNameStats& k = summary.kernels[i];
        table.addRow(
            {detail::printable(shortened(k.name)), detail::perIteration(k.count, n),
             fixed(static_cast<double>(k.total_ns) / n / kNsPerMs, 3),
             percent(static_cast<double>(k.total_ns) /
                     static_cast<double>(std::max<std::int64_t>(1, summary.total_ns))),
             fixed(static_cast<double>(k.total_ns) / static_cast<double>(k.count) / kNsPerUs, 1),
             fixed(static_cast<double>(k.min_ns) / kNsPerUs, 1),
             fixed(static_cast<double>(k.max_ns) / kNsPerUs, 1)});
    }
    out += table.render();
    if (shown < summary.kernels.size()) {
        std::int64_t rest_ns = 0;
        std::int64_t rest_launches = 0;
        for (std::size_t i = shown; i < summary.kernels.size(); ++i) {
            rest_ns += summary.kernels[i].total_ns;
            rest_launches += summary.kernels[i].count;
        }
        out += "(" + std::to_string(summary.kernels.size() - shown) +
               " more kernels: " + detail::perIteration(rest_launches, n) + " launches, " +
               fixed(static_cast<double>(rest_ns) / n / kNsPerMs, 3) + " ms; --top 0 lists all)\n";
    }
    return out;
}

std::string formatKernelsJson(const KernelSummary& summary, const RunStats& stats) {
    Json root = Json::object();
    root.set("path", stats.path);
    root.set("iterations", detail::intArray(stats.measured));
    root.set("kernels_in_trace", summary.kernels_in_trace);
    root.set("rule", summary.rule == KernelRule::Op ? "op" : "window");
    root.set("kernels_outside_ops", summary.outside_ops);
    Json damage = Json::array();
    for (const std::string& d : summary.damage) {
        damage.push(d);
    }
    root.set("damage", std::move(damage));
    root.set("launches", summary.launches);
    root.set("total_ns", summary.total_ns);
    Json devices = Json::array();
    for (const auto& [device, ns] : summary.by_device_ns) {
        Json d = Json::object();
        d.set("device", device);
        d.set("total_ns", ns);
        devices.push(std::move(d));
    }
    root.set("devices", std::move(devices));
    Json kernels = Json::array();
    for (const KernelNameStats& k : summary.kernels) {
        Json row = Json::object();
        row.set("name", k.name);
        row.set("short_name", k.short_name);
        row.set("launches", k.count);
        row.set("total_ns", k.total_ns);
        row.set("min_ns", k.min_ns);
        row.set("max_ns", k.max_ns);
        kernels.push(std::move(row));
    }
    root.set("kernels", std::move(kernels));
    return root.dump();
}

}  // namespace pipescope::analysis
