#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <pipescope/interop/chrome_export.h>
#include <pipescope/trace/op_bounds.h>

#include "atomic_file.h"
#include "chrome_lanes.h"
#include "known_rows.h"
#include "pipescope/trace/json_text.h"
#include "progress.h"

namespace pipescope::interop {

namespace {

using trace::appendInt;
using trace::appendJsonString;
using trace::appendMicros;

class ChromeWriter {
  public:
    ChromeWriter(const trace::TraceReader& reader, const std::function<bool(double)>& progress)
        : reader_(reader),
          bounds_(trace::OpBounds::of(reader.run())),
          virtual_clock_(reader.run().backend == "sim"),
          progress_(progress, 1.0, "the export") {
        // Two passes over the ops (pairing the flows, then writing), then the memory samples.
        progress_.addTotal(2 * reader.opCount() + reader.memorySampleCount());
    }

    trace::TraceStatus run(const std::string& out_path) {
        if (trace::TraceStatus st = detail::notTheTrace(reader_.path(), out_path); !st.ok()) {
            return st;
        }
        detail::FlowMatcher flows;
        trace::TraceStatus st = reader_.forEachOp([&](const trace::OpRecord& op) {
            if (detail::isKnownOp(op) && placeable(op)) {
                flows.count(op);
            } else if (detail::isKnownOp(op)) {
                ++stats_.outside_ops;
            }
            return progress_.step();
        });
        if (!st.ok() || progress_.stopped()) {
            return progress_.stopped() ? progress_.cancelled() : st;
        }
        flows.seal();
        stats_.flows = flows.pairs();
        if (st = file_.open(out_path); !st.ok()) {
            return st;
        }
        file_.write("{\"traceEvents\":[");
        writeRankMetadata();
        if (st = writeOps(&flows); !st.ok() || progress_.stopped()) {
            return progress_.stopped() ? progress_.cancelled() : st;
        }
        if (st = writeMemory(); !st.ok() || progress_.stopped()) {
            return progress_.stopped() ? progress_.cancelled() : st;
        }
        if (st = writeKernels(); !st.ok()) {
            return st;
        }
        writeFooter();
        return file_.commit();
    }

    const ChromeExportStats& stats() const { return stats_; }

  private:
    // Whether a viewer can place a row (JSON readers hold times as doubles of microseconds, and
    // Perfetto turns them back into 64-bit nanoseconds): an op the analysis takes as measured
    // (trace::OpBounds), a measured one checked as a kernel is, so that in a run without an end
    // it lies within 73 years of the time origin too; a memory sample on the clock of the run's
    // ops.
    bool placeable(const trace::OpRecord& op) const {
        return op.source == trace::Source::Sim ? bounds_.holds(op)
                                               : bounds_.holdsRecord(op.start_ns, op.end_ns);
    }
    bool placeable(std::int64_t t_ns) const {
        trace::OpRecord instant;
        instant.source = virtual_clock_ ? trace::Source::Sim : trace::Source::Host;
        instant.start_ns = t_ns;
        instant.end_ns = t_ns;
        return placeable(instant);
    }

    // Starts an event in ev_ with its name, phase and pid.
    void begin(std::string_view name, const char* ph, std::int64_t pid) {
        ev_.clear();
        ev_ += "{\"name\":";
        appendJsonString(&ev_, name);
        ev_ += ",\"ph\":\"";
        ev_ += ph;
        ev_ += "\",\"pid\":";
        appendInt(&ev_, pid);
    }
    void field(const char* key, std::int64_t v) {
        ev_ += ",\"";
        ev_ += key;
        ev_ += "\":";
        appendInt(&ev_, v);
    }
    void field(const char* key, std::string_view v) {
        ev_ += ",\"";
        ev_ += key;
        ev_ += "\":";
        appendJsonString(&ev_, v);
    }
    void micros(const char* key, std::int64_t ns) {
        ev_ += ",\"";
        ev_ += key;
        ev_ += "\":";
        appendMicros(&ev_, ns);
    }
    // Closes the event in ev_ and writes it, one event per line.
    void emit() {
        ev_ += '}';
        file_.write(first_ ? "\n" : ",\n");
        first_ = false;
        file_.write(ev_);
    }

    void metadata(const char* what, std::int64_t pid, int tid, std::string_view name) {
        begin(what, "M", pid);
        field("tid", tid);
        ev_ += ",\"args\":{\"name\":";
        appendJsonString(&ev_, name);
        ev_ += '}';
        emit();
    }
    void sortIndex(const char* what, std::int64_t pid, int tid, std::int64_t index) {
        begin(what, "M", pid);
        field("tid", tid);
        ev_ += ",\"args\":{\"sort_index\":";
        appendInt(&ev_, index);
        ev_ += '}';
        emit();
    }

    void writeRankMetadata() {
        for (const trace::RankInfo& r : reader_.ranks()) {
            std::string name = "rank " + std::to_string(r.rank);
            if (!r.stages.empty()) {
                name += " (stages " + r.stages + ")";
            }
            const std::int64_t pid = detail::rankPid(r.rank);
            metadata("process_name", pid, 0, name);
            sortIndex("process_sort_index", pid, 0, r.rank);
            for (int lane = 0; lane < detail::kFixedChromeLanes; ++lane) {
                const int tid = detail::laneTid(static_cast<trace::Lane>(lane));
                metadata("thread_name", pid, tid, trace::toString(static_cast<trace::Lane>(lane)));
                sortIndex("thread_sort_index", pid, tid, tid);
            }
        }
    }

    void writeOp(const trace::OpRecord& op, int tid) {
        begin(detail::opName(op), "X", detail::rankPid(op.rank));
        field("tid", tid);
        field("cat", trace::toString(op.lane));
        micros("ts", op.start_ns);
        micros("dur", std::max<std::int64_t>(op.end_ns - op.start_ns, 0));
        ev_ += ",\"args\":{\"iteration\":";
        appendInt(&ev_, op.iteration);
        if (op.microbatch >= 0) {
            field("microbatch", op.microbatch);
        }
        field("chunk", op.chunk);
        field("op_index", op.op_index);
        field("source", trace::toString(op.source));
        if (op.peer >= 0) {
            field("peer", op.peer);
        }
        if (const std::string_view collective = detail::collectiveName(op.collective);
            !collective.empty()) {
            field("collective", collective);
        }
        if (op.bytes >= 0) {
            field("bytes", op.bytes);
        }
        if (op.cpu_ns >= 0) {
            micros("cpu_us", op.cpu_ns);
        }
        ev_ += '}';
        emit();
    }

    // The arrow starts and ends at the middle of its ops, where the viewers' "enclosing slice"
    // binding finds them unambiguously even when another op starts where this one ends.
    void writeFlow(const trace::OpRecord& op, int tid, std::int64_t id) {
        const bool send = op.kind == trace::OpKind::SendF || op.kind == trace::OpKind::SendB;
        const bool forward = op.kind == trace::OpKind::SendF || op.kind == trace::OpKind::RecvF;
        begin(forward ? "SEND_F" : "SEND_B", send ? "s" : "f", detail::rankPid(op.rank));
        field("tid", tid);
        field("cat", "p2p");
        field("id", id);
        if (!send) {
            field("bp", "e");
        }
        micros("ts", op.start_ns + std::max<std::int64_t>(op.end_ns - op.start_ns, 0) / 2);
        emit();
    }

    void writeExtraLanes(int rank, const detail::LanePacker& packer) {
        for (const auto& extra : packer.extraLanes()) {
            std::string name(trace::toString(extra.lane));
            if (extra.overlap_index > 0) {
                name += " (overlap " + std::to_string(extra.overlap_index) + ")";
                ++stats_.overlap_lanes;
            }
            metadata("thread_name", detail::rankPid(rank), extra.tid, name);
            sortIndex("thread_sort_index", detail::rankPid(rank), extra.tid, extra.tid);
        }
    }

    trace::TraceStatus writeOps(detail::FlowMatcher* flows) {
        detail::LanePacker packer;
        bool in_rank = false;
        int rank = 0;
        const trace::TraceStatus st = reader_.forEachOp([&](const trace::OpRecord& op) {
            if (!detail::isKnownOp(op) || !placeable(op)) {
                return true;  // counted by the first pass
            }
            if (!in_rank || op.rank != rank) {
                if (in_rank) {
                    writeExtraLanes(rank, packer);
                }
                packer.beginRank();
                rank = op.rank;
                in_rank = true;
            }
            const int tid = packer.place(op.lane, op.start_ns, op.end_ns);
            writeOp(op, tid);
            ++stats_.ops;
            if (const std::int64_t id = flows->idFor(op); id > 0) {
                writeFlow(op, tid, id);
            }
            return progress_.step();
        });
        if (in_rank) {
            writeExtraLanes(rank, packer);
        }
        return st;
    }

    trace::TraceStatus writeMemory() {
        // The categories each rank uses: its counter carries those and no empty series.
        std::map<int, std::uint32_t> used;
        trace::TraceStatus st = reader_.forEachMemory([&](const trace::MemorySample& s) {
            if (detail::isKnownCategory(s.category) && placeable(s.t_ns)) {
                used[s.rank] |= 1u << static_cast<unsigned>(s.category);
            } else if (detail::isKnownCategory(s.category)) {
                ++stats_.outside_memory;
            }
            return true;
        });
        if (!st.ok()) {
            return st;
        }
        std::array<std::int64_t, trace::kMemoryCategoryCount> level{};
        std::array<std::int64_t, trace::kMemoryCategoryCount> shown{};
        bool started = false;
        bool pending = false;
        bool any_shown = false;
        int rank = 0;
        std::int64_t t = 0;
        // Samples of one instant apply together; one event per instant that changed a value.
        auto close = [&] {
            if (!pending || (any_shown && level == shown)) {
                pending = false;
                return;
            }
            begin("memory", "C", detail::rankPid(rank));
            micros("ts", t);
            ev_ += ",\"args\":{";
            bool first = true;
            for (int c = 0; c < trace::kMemoryCategoryCount; ++c) {
                if (used[rank] & (1u << c)) {
                    ev_ += first ? "" : ",";
                    first = false;
                    appendJsonString(&ev_, trace::toString(static_cast<trace::MemoryCategory>(c)));
                    ev_ += ':';
                    appendInt(&ev_, level[static_cast<std::size_t>(c)]);
                }
            }
            ev_ += '}';
            emit();
            ++stats_.counter_events;
            shown = level;
            any_shown = true;
            pending = false;
        };
        st = reader_.forEachMemory([&](const trace::MemorySample& s) {
            if (!detail::isKnownCategory(s.category) || !placeable(s.t_ns)) {
                return true;
            }
            if (pending && (s.rank != rank || s.t_ns != t)) {
                close();
            }
            if (!started || s.rank != rank) {
                level.fill(0);  // a rank starts with nothing allocated
                any_shown = false;
                started = true;
            }
            rank = s.rank;
            t = s.t_ns;
            level[static_cast<std::size_t>(s.category)] = s.bytes;
            pending = true;
            return progress_.step();
        });
        close();
        return st;
    }

    trace::TraceStatus writeKernels() {
        bool in_device = false;
        int device = 0;
        std::set<int> streams;
        auto finishDevice = [&] {
            for (int s : streams) {
                metadata("thread_name", kGpuPidBase + device, s, "stream " + std::to_string(s));
                sortIndex("thread_sort_index", kGpuPidBase + device, s, s);
            }
            streams.clear();
        };
        const trace::TraceStatus st = reader_.forEachKernelWithOp(
            [&](const trace::KernelRecord& k, const trace::OpCorrelation* op) {
                if (!bounds_.holdsRecord(k.start, k.end)) {
                    ++stats_.outside_kernels;
                    return true;
                }
                const std::int64_t pid = kGpuPidBase + k.device_id;
                if (!in_device || k.device_id != device) {
                    if (in_device) {
                        finishDevice();
                    }
                    in_device = true;
                    device = k.device_id;
                    metadata("process_name", pid, 0, "GPU " + std::to_string(device));
                    sortIndex("process_sort_index", pid, 0, pid);
                }
                streams.insert(k.stream_id);
                const std::string& name = !k.short_name.empty()       ? k.short_name
                                          : !k.demangled_name.empty() ? k.demangled_name
                                                                      : kKernel;
                begin(name, "X", pid);
                field("tid", k.stream_id);
                field("cat", "kernel");
                micros("ts", k.start);
                micros("dur", std::max<std::int64_t>(k.end - k.start, 0));
                ev_ += ",\"args\":{\"name\":";
                appendJsonString(&ev_, k.demangled_name);
                field("correlation_id", k.correlation_id);
                ev_ += ",\"grid\":[" + std::to_string(k.grid_x) + "," + std::to_string(k.grid_y) +
                       "," + std::to_string(k.grid_z) + "],\"block\":[" +
                       std::to_string(k.block_x) + "," + std::to_string(k.block_y) + "," +
                       std::to_string(k.block_z) + "]";
                field("registers_per_thread", k.registers_per_thread);
                field("static_shared_memory", k.static_shared_memory);
                field("dynamic_shared_memory", k.dynamic_shared_memory);
                if (op != nullptr) {  // the op that launched it: its rank, iteration and index
                    field("op_rank", op->rank);
                    field("op_iteration", op->iteration);
                    field("op_index", op->op_index);
                }
                ev_ += '}';
                emit();
                ++stats_.kernels;
                return true;
            });
        if (in_device) {
            finishDevice();
        }
        return st;
    }

    void writeFooter() {
        const trace::RunInfo& run = reader_.run();
        std::string out = "\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{\"run\":";
        appendJsonString(&out, run.name);
        out += ",\"backend\":";
        appendJsonString(&out, run.backend);
        out += ",\"status\":";
        appendJsonString(&out, trace::toString(run.status));
        out += ",\"status_message\":";
        if (run.message.empty()) {
            out += "null";
        } else {
            appendJsonString(&out, run.message);
        }
        // The config is kept verbatim, as a string: re-encoding it would reorder its keys.
        out += ",\"config\":";
        appendJsonString(&out, run.config_json);
        out += ",\"time_origin_ns\":";
        appendInt(&out, run.start_ns);
        out += ",\"ranks\":";
        appendInt(&out, reader_.rankCount());
        out += ",\"iterations\":";
        appendInt(&out, run.iterations);
        out += ",\"warmup\":";
        appendInt(&out, run.warmup);
        out += ",\"host\":";
        appendJsonString(&out, run.host);
        out += ",\"exporter\":\"pipescope-trace export-chrome\"}}\n";
        file_.write(out);
    }

    inline static const std::string kKernel = "kernel";

    const trace::TraceReader& reader_;
    const trace::OpBounds bounds_;
    const bool virtual_clock_;  // a simulated run: its memory samples are on its ops' clock
    detail::Progress progress_;
    detail::AtomicFile file_;
    ChromeExportStats stats_;
    std::string ev_;
    bool first_ = true;
};

}  // namespace

std::string describeLeftOut(const ChromeExportStats& stats) {
    std::vector<std::string> parts;
    const auto count = [&](std::int64_t n, const char* one, const char* many) {
        if (n > 0) {
            parts.push_back(std::to_string(n) + " " + (n == 1 ? one : many));
        }
    };
    count(stats.outside_ops, "op", "ops");
    count(stats.outside_kernels, "kernel", "kernels");
    count(stats.outside_memory, "memory sample", "memory samples");
    if (parts.empty()) {
        return {};
    }
    std::string text = parts.front();
    for (std::size_t i = 1; i < parts.size(); ++i) {
        text += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
    }
    const bool one = stats.outside_ops + stats.outside_kernels + stats.outside_memory == 1;
    return text + (one ? " lies" : " lie") +
           " far outside the run's recorded time; left out of the export";
}

trace::TraceStatus exportChrome(const trace::TraceReader& reader, const std::string& out_path,
                                ChromeExportStats* stats,
                                const std::function<bool(double)>& progress) {
    ChromeWriter writer(reader, progress);
    const trace::TraceStatus st = writer.run(out_path);
    if (stats) {
        *stats = writer.stats();
    }
    return st;
}

}  // namespace pipescope::interop
