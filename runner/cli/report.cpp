#include "report.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include <pipescope/schedule/config.h>
#include <pipescope/trace/output_path.h>
#include <pipescope/trace/units.h>

namespace pipescope::cli {

namespace {

std::string fixed(double v, int digits) {
    std::ostringstream s;
    s << std::fixed << std::setprecision(digits) << v;
    return s.str();
}

std::string csvField(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) {
        return s;
    }
    std::string out = "\"";
    for (char c : s) {
        out += c == '"' ? std::string("\"\"") : std::string(1, c);
    }
    return out + "\"";
}

std::string signedPercent(double now, double base) {
    if (base == 0) {
        return "";
    }
    const double d = 100.0 * (now - base) / base;
    const std::string text = fixed(d, 1);
    if (text.find_first_of("123456789") == std::string::npos) {
        return "0.0%";  // no sign on a change that rounds to zero (nor "-0.0%")
    }
    return (d > 0 ? "+" : "") + text + "%";
}

}  // namespace

nlohmann::ordered_json summaryFiguresJson(const SummaryFigures& f) {
    const auto orNull = [](const auto& v) {
        return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
    };
    nlohmann::ordered_json j;
    j["name"] = f.name;
    j["backend"] = f.backend;
    j["schedule"] = std::string(schedule::toString(f.config->parallel.schedule));
    j["vocab"] = std::string(schedule::toString(f.config->parallel.vocab));
    j["pipeline"] = f.pipeline;
    j["microbatches"] = f.microbatches;
    j["iteration_time_ms"] = orNull(f.iteration_time_ms);
    j["model_flops"] = orNull(f.model_flops);
    j["mfu"] = orNull(f.mfu);
    j["tokens_per_s"] = orNull(f.tokens_per_s);
    j["bubble_ratio"] = orNull(f.bubble_ratio);
    j["imbalance"] = {{"busy", orNull(f.busy_imbalance)},
                      {"peak_memory", orNull(f.memory_imbalance)}};
    j["max_peak_memory_bytes"] = orNull(f.max_peak_memory_bytes);
    j["memory_capacity_bytes"] = orNull(f.memory_capacity_bytes);
    j["fits"] = f.max_peak_memory_bytes && f.memory_capacity_bytes
                    ? nlohmann::ordered_json(*f.max_peak_memory_bytes <= *f.memory_capacity_bytes)
                    : nlohmann::ordered_json(nullptr);
    auto ranks = nlohmann::ordered_json::array();
    for (const SummaryRank& rk : f.ranks) {
        nlohmann::ordered_json x;
        x["rank"] = rk.rank;
        x["busy_ms"] = orNull(rk.busy_ms);
        x["bubble_ms"] = orNull(rk.bubble_ms);
        x["bubble_ratio"] = orNull(rk.bubble_ratio);
        x["comm_wait_ms"] = orNull(rk.comm_wait_ms);
        x["peak_memory_bytes"] = orNull(rk.peak_memory_bytes);
        if (rk.peak_activation_microbatches) {
            x["peak_activation_microbatches"] = *rk.peak_activation_microbatches;
        }
        ranks.push_back(std::move(x));
    }
    j["ranks"] = std::move(ranks);
    return j;
}

std::string summaryJson(const sim::SimResult& r, const std::string& trace_path) {
    SummaryFigures f;
    f.name = r.config.name;
    f.backend = "sim";
    f.config = &r.config;
    f.pipeline = r.schedule.ranks;
    f.microbatches = r.schedule.microbatches;
    f.iteration_time_ms = r.iteration_time_s * 1e3;
    f.model_flops = r.model_flops;
    f.mfu = r.mfu;
    f.tokens_per_s = r.tokens_per_s;
    f.bubble_ratio = r.bubble_ratio;
    f.busy_imbalance = r.busy_imbalance;
    f.memory_imbalance = r.memory_imbalance;
    f.max_peak_memory_bytes = r.maxPeakMemory();
    f.memory_capacity_bytes = r.memory_capacity_bytes;
    for (const auto& rk : r.ranks) {
        f.ranks.push_back({rk.rank, rk.busy_s * 1e3, rk.bubble_s * 1e3, rk.bubble_ratio,
                           rk.comm_wait_s * 1e3, rk.peak_memory_bytes,
                           rk.peak_activation_microbatches});
    }
    nlohmann::ordered_json j = summaryFiguresJson(f);
    if (r.spread) {
        j["recorded_spread"] = {{"timings", r.spread->timings},
                                {"iteration_time_ms", r.spread->mean_s * 1e3},
                                {"p10_ms", r.spread->p10_s * 1e3},
                                {"p90_ms", r.spread->p90_s * 1e3}};
    }
    j["trace"] =
        trace_path.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(trace_path);
    return j.dump(2) + "\n";
}

namespace {

SummaryFigures measuredFigures(const analysis::RunStats& s, const schedule::Config& config,
                               const schedule::Schedule& schedule, const std::string& backend) {
    const auto ms = [](std::optional<double> ns) {
        return ns ? std::optional<double>(*ns / 1e6) : std::nullopt;
    };
    const auto whole = [](std::optional<double> v) {
        return v ? std::optional<std::int64_t>(static_cast<std::int64_t>(*v)) : std::nullopt;
    };
    SummaryFigures f;
    f.name = config.name;
    f.backend = backend;
    f.config = &config;
    f.pipeline = schedule.ranks;
    f.microbatches = schedule.microbatches;
    f.iteration_time_ms = ms(s.iteration_time_ns);
    f.model_flops = s.inputs.model_flops_per_iteration;
    f.mfu = s.mfu;
    f.tokens_per_s = s.tokens_per_s;
    f.bubble_ratio = s.mean_bubble_ratio;
    f.busy_imbalance = s.imbalance.busy;
    f.memory_imbalance = s.imbalance.peak_memory;
    f.max_peak_memory_bytes = s.maxPeakMemory();
    f.memory_capacity_bytes = whole(s.inputs.memory_capacity_bytes);
    const bool have = s.iteration_time_ns.has_value();
    for (const analysis::RankStats& rk : s.ranks) {
        SummaryRank x;
        x.rank = rk.rank;
        if (have) {
            x.busy_ms = rk.busy_ns / 1e6;
            x.bubble_ms = rk.bubble_ns / 1e6;
            x.bubble_ratio = rk.bubble_ratio;
            x.comm_wait_ms = rk.comm_wait_ns / 1e6;
        }
        if (rk.peak_memory.present) {
            x.peak_memory_bytes = rk.peak_memory.bytes;
        }
        f.ranks.push_back(x);
    }
    return f;
}

}  // namespace

std::string measuredSummaryJson(const analysis::RunStats& s, const schedule::Config& config,
                                const schedule::Schedule& schedule, const std::string& backend,
                                const MeasuredExtras& extras) {
    nlohmann::ordered_json j = summaryFiguresJson(measuredFigures(s, config, schedule, backend));
    j["status"] = std::string(trace::toString(extras.status));
    j["losses"] = extras.losses;
    j["iteration_s"] = extras.iteration_s;
    j["memory_estimate_bytes"] = extras.memory_estimate_bytes;
    j["hardware_from_config"] = true;
    j["trace"] = extras.trace_path;
    return j.dump(2) + "\n";
}

bool writeOutput(const std::string& path, const std::string& text) {
    if (path == "-") {
        std::cout << text << std::flush;
        if (!std::cout) {  // a closed stdout, a full disk behind it
            std::cerr << "pipescope-run: cannot write to standard output\n";
            return false;
        }
        return true;
    }
    // A file is replaced by renaming a complete file written beside it, so that a full disk or a
    // file size limit leaves the file it would replace as it was (a sweep's table of last week),
    // not cut short. A link is kept (the file it names is replaced); a pipe or a device, which a
    // rename would replace, is written as it is.
    namespace fs = std::filesystem;
    std::error_code ec;
    const std::string file = trace::followLinks(path);
    const fs::file_status old = fs::status(file, ec);
    const bool direct =
        trace::namedDescriptor(path) >= 0 || (fs::exists(old) && !fs::is_regular_file(old));
    if (!direct && fs::exists(old) && ::access(file.c_str(), W_OK) != 0) {
        const int err = errno;  // a read-only file is not replaced behind its back
        std::cerr << "pipescope-run: cannot write " << path << ": " << std::strerror(err) << "\n";
        return false;
    }
    const fs::path target(file);
    const std::string temp =
        direct ? file
               : (target.parent_path() /
                  ("." + target.filename().string() + "." + std::to_string(::getpid()) + ".tmp"))
                     .string();
    errno = 0;
    std::ofstream f(temp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();  // the last of the text reaches the file only here, and so may fail only here
    int err = errno;
    if (f && !direct) {
        if (fs::exists(old)) {
            fs::permissions(temp, old.permissions(), ec);  // the file replaced keeps its mode
        }
        if (std::rename(temp.c_str(), file.c_str()) != 0) {
            err = errno;
            f.setstate(std::ios::failbit);
        }
    }
    if (!f) {
        if (!direct) {
            std::remove(temp.c_str());
        }
        std::cerr << "pipescope-run: cannot write " << path
                  << (err != 0 ? std::string(": ") + std::strerror(err) : std::string()) << "\n";
        return false;
    }
    return true;
}

void progressEvent(const Options& o, const nlohmann::ordered_json& event) {
    if (o.progress_jsonl) {
        std::cout << event.dump() << "\n" << std::flush;
    }
}

void printSummary(std::ostream& os, const sim::SimResult& r) {
    os << r.config.name << "\n"
       << "  " << schedule::toString(r.config.parallel.schedule) << ", vocabulary "
       << schedule::toString(r.config.parallel.vocab) << ", " << r.schedule.ranks << " stages, "
       << r.schedule.microbatches << " micro-batches, " << r.schedule.opCount()
       << " ops per iteration\n"
       << "  iteration " << fixed(r.iteration_time_s * 1e3, 3) << " ms   MFU "
       << fixed(100 * r.mfu, 1) << "%   "
       << fixed(r.tokens_per_s, trace::rateDecimals(r.tokens_per_s)) << " tokens/s   bubble "
       << fixed(100 * r.bubble_ratio, 1) << "% (mean)\n"
       << "  imbalance (max/mean): busy " << fixed(r.busy_imbalance, 3) << ", peak memory "
       << fixed(r.memory_imbalance, 3) << "\n";
    if (r.spread) {
        os << "  with the recorded run's spread of op times (" << r.spread->timings
           << " timings): iteration " << fixed(r.spread->mean_s * 1e3, 3) << " ms mean, "
           << fixed(r.spread->p10_s * 1e3, 3) << " to " << fixed(r.spread->p90_s * 1e3, 3)
           << " ms (10% to 90%)\n";
    }
    os << "\n";
    const trace::MemoryUnit unit = trace::memoryUnitFor(static_cast<double>(r.maxPeakMemory()));
    // Each column as wide as its widest cell: a long iteration (V = 10^9: 2196506.886 ms of
    // busy time) must not run into the rank before it.
    std::vector<std::vector<std::string>> cells{{"rank", "busy ms", "bubble ms", "bubble",
                                                 "wait ms", "peak " + std::string(unit.name),
                                                 "act. mb"}};
    for (const auto& rk : r.ranks) {
        cells.push_back({std::to_string(rk.rank), fixed(rk.busy_s * 1e3, 3),
                         fixed(rk.bubble_s * 1e3, 3), fixed(100 * rk.bubble_ratio, 1) + "%",
                         fixed(rk.comm_wait_s * 1e3, 3),
                         fixed(unit.of(static_cast<double>(rk.peak_memory_bytes)), unit.decimals),
                         fixed(rk.peak_activation_microbatches, 2)});
    }
    // The widths the table always had, unless a cell needs more (two spaces apart at least).
    std::vector<std::size_t> width{4, 11, 11, 8, 10, 10, 9};
    for (const auto& row : cells) {
        for (std::size_t c = 0; c < row.size(); ++c) {
            width[c] = std::max(width[c], row[c].size() + (c == 0 ? 0 : 2));
        }
    }
    for (const auto& row : cells) {
        os << "  ";
        for (std::size_t c = 0; c < row.size(); ++c) {
            os << std::setw(static_cast<int>(width[c])) << row[c];
        }
        os << "\n";
    }
    if (r.mfu > 1) {
        os << "  note: MFU above 100%: the op times are shorter than hardware.peak_tflops ("
           << fixed(r.config.hardware.peak_tflops, 3)
           << " TFLOP/s) allows for the model's FLOPs; check costs.per_stage_us or the peak\n";
    }
    if (r.maxPeakMemory() > r.memory_capacity_bytes) {
        os << "  does NOT fit: peak "
           << fixed(unit.of(static_cast<double>(r.maxPeakMemory())), unit.decimals) << " "
           << unit.name << " > "
           << fixed(unit.of(static_cast<double>(r.memory_capacity_bytes)), unit.decimals) << " "
           << unit.name << " of " << r.config.hardware.name << "\n";
    }
}

void printTable(std::ostream& os, const std::vector<std::string>& headers,
                const std::vector<Row>& rows, bool deltas) {
    std::vector<std::string> head = headers;
    // One memory unit for the column: MiB when every row's peak is under 1 GiB.
    double largest = 0;
    for (const auto& row : rows) {
        if (row.result) {
            largest = std::max(largest, static_cast<double>(row.result->maxPeakMemory()));
        }
    }
    const trace::MemoryUnit unit = trace::memoryUnitFor(largest);
    for (const std::string& h : {std::string("iteration ms"), std::string("MFU"),
                                 std::string("bubble"), "max peak " + std::string(unit.name),
                                 std::string("busy imb."), std::string("mem imb.")}) {
        head.push_back(h);
    }
    if (deltas) {
        head.emplace_back("time vs first");
        head.emplace_back("memory vs first");
    }
    std::vector<std::vector<std::string>> cells;
    const sim::SimResult* first = rows.empty() ? nullptr : rows.front().result;
    for (const auto& row : rows) {
        std::vector<std::string> c = row.labels;
        if (!row.result) {
            c.push_back("error: " + row.error);
        } else {
            const auto& r = *row.result;
            c.push_back(fixed(r.iteration_time_s * 1e3, 2));
            c.push_back(fixed(100 * r.mfu, 1) + "%");
            c.push_back(fixed(100 * r.bubble_ratio, 1) + "%");
            c.push_back(fixed(unit.of(static_cast<double>(r.maxPeakMemory())), unit.decimals) +
                        (r.maxPeakMemory() > r.memory_capacity_bytes ? " (OOM)" : ""));
            c.push_back(fixed(r.busy_imbalance, 2));
            c.push_back(fixed(r.memory_imbalance, 2));
            if (deltas && first) {
                c.push_back(signedPercent(r.iteration_time_s, first->iteration_time_s));
                c.push_back(signedPercent(static_cast<double>(r.maxPeakMemory()),
                                          static_cast<double>(first->maxPeakMemory())));
            }
        }
        cells.push_back(std::move(c));
    }
    // Widths in characters, not bytes: a label "ü x" is 3 wide in a terminal, 4 bytes long.
    const auto wide = [](const std::string& text) {
        return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
            return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // not a continuation byte
        }));
    };
    std::vector<std::size_t> width(head.size(), 0);
    for (std::size_t k = 0; k < head.size(); ++k) {
        width[k] = wide(head[k]);
    }
    // An error row has its labels and then one message, which runs on past the columns
    // instead of widening the first of them.
    auto isError = [&](std::size_t row) { return !rows[row].result; };
    for (std::size_t i = 0; i < cells.size(); ++i) {
        const std::size_t sized = isError(i) ? headers.size() : cells[i].size();
        for (std::size_t k = 0; k < sized && k < width.size(); ++k) {
            width[k] = std::max(width[k], wide(cells[i][k]));
        }
    }
    auto line = [&](const std::vector<std::string>& c, bool error) {
        for (std::size_t k = 0; k < c.size(); ++k) {
            const bool numeric = k >= headers.size();
            if (error && numeric) {
                os << "  " << c[k];
                continue;
            }
            const std::size_t pad =
                k < width.size() ? width[k] - std::min(width[k], wide(c[k])) : 0;
            os << (k ? "  " : "")
               << (numeric ? std::string(pad, ' ') + c[k] : c[k] + std::string(pad, ' '));
        }
        os << "\n";
    };
    line(head, false);
    for (std::size_t i = 0; i < cells.size(); ++i) {
        line(cells[i], isError(i));
    }
}

void writeCsv(std::ostream& os, const std::vector<std::string>& headers,
              const std::vector<Row>& rows) {
    for (const auto& h : headers) {
        os << csvField(h) << ",";
    }
    os << "iteration_time_ms,mfu,tokens_per_s,bubble_ratio,max_peak_memory_bytes,"
          "busy_imbalance,memory_imbalance,fits,error\r\n";
    for (const auto& row : rows) {
        for (const auto& l : row.labels) {
            os << csvField(l) << ",";
        }
        if (!row.result) {
            os << ",,,,,,,," << csvField(row.error) << "\r\n";
            continue;
        }
        const auto& r = *row.result;
        os << std::setprecision(10) << r.iteration_time_s * 1e3 << "," << r.mfu << ","
           << r.tokens_per_s << "," << r.bubble_ratio << "," << r.maxPeakMemory() << ","
           << r.busy_imbalance << "," << r.memory_imbalance << ","
           << (r.maxPeakMemory() <= r.memory_capacity_bytes ? "true" : "false") << ",\r\n";
    }
}

}  // namespace pipescope::cli
