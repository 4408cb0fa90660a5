#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>
#include <type_traits>
#include <utility>

#include <pipescope/interop/merge.h>
#include <pipescope/trace/number_text.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "atomic_file.h"
#include "chrome_lanes.h"
#include "clock_math.h"
#include "progress.h"

namespace pipescope::interop {

namespace {

using trace::OpKind;
using trace::TraceStatus;
using Code = TraceStatus::Code;
using detail::moved;
using detail::since;

struct Input {
    std::string path;
    trace::TraceReader reader;
    std::int64_t shift = 0;  // added to this file's times
    std::vector<trace::RankInfo> own;
};

// The shift of a file that started at `start` with the measured `offset` onto rank 0's clock
// (rank 0 started at `s0`), or nullopt when it is more than 2^62 ns (146 years) either way: no
// two clocks are that far apart, the file is damaged or was edited (an offset of 2^63 - 1 wrapped
// every time of the file around).
std::optional<std::int64_t> clockShift(std::int64_t start, std::int64_t offset, std::int64_t s0) {
    std::int64_t on_zero = 0;
    std::int64_t shift = 0;
    if (__builtin_add_overflow(start, offset, &on_zero) ||
        __builtin_sub_overflow(on_zero, s0, &shift) || shift > detail::kFarNs ||
        shift < -detail::kFarNs) {
        return std::nullopt;
    }
    return shift;
}

std::string micros(std::int64_t ns) {
    return trace::fixedText(static_cast<double>(ns) / 1e3, 1) + " us";
}

}  // namespace

TraceStatus mergeTraces(const std::vector<std::string>& inputs, const std::string& output,
                        const MergeOptions& options, MergeReport* report) {
    *report = {};
    if (inputs.empty()) {
        return TraceStatus::error(Code::BadInput, "no traces to merge");
    }
    std::vector<std::unique_ptr<Input>> in;
    std::map<int, std::size_t> file_of_rank;
    for (const std::string& path : inputs) {
        auto i = std::make_unique<Input>();
        i->path = path;
        if (TraceStatus st = i->reader.open(path); !st.ok()) {
            return st;
        }
        // The ranks this file holds: those of its rank table.
        const auto& listed = i->reader.listedRanks();
        for (const auto& r : i->reader.ranks()) {
            if (std::find(listed.begin(), listed.end(), r.rank) == listed.end()) {
                continue;
            }
            i->own.push_back(r);
            if (const auto [it, fresh] = file_of_rank.try_emplace(r.rank, in.size()); !fresh) {
                return TraceStatus::error(Code::BadInput, path + " and " + inputs[it->second] +
                                                              " both hold rank " +
                                                              std::to_string(r.rank));
            }
        }
        in.push_back(std::move(i));
    }
    const trace::RunInfo& first = in.front()->reader.run();
    for (const auto& i : in) {
        const trace::RunInfo& r = i->reader.run();
        // Two launches of one config have the same config and world: their run ids tell them
        // apart (files written before run ids existed have none, and are taken at their word).
        const bool other_launch =
            !r.run_id.empty() && !first.run_id.empty() && r.run_id != first.run_id;
        if (r.config_json != first.config_json || r.ranks != first.ranks || other_launch) {
            return TraceStatus::error(
                Code::BadInput, i->path + " is not of the same run as " + in.front()->path + " (" +
                                    (r.ranks != first.ranks ? std::string("a different world size")
                                     : other_launch ? "another launch of the same config: run " +
                                                          r.run_id + ", not " + first.run_id
                                                    : std::string("a different config")) +
                                    ")");
        }
    }
    const auto zero = file_of_rank.find(0);
    if (zero == file_of_rank.end()) {
        return TraceStatus::error(Code::BadInput,
                                  "none of the traces holds rank 0, whose clock the merged trace "
                                  "uses");
    }
    const Input& base = *in[zero->second];
    const std::int64_t s0 = base.reader.run().start_ns;

    // The time shift of each file, from its rank's measured offset to rank 0's clock. Files of
    // rank 0's machine read its very clock: their measured offset is only the measurement's
    // noise (up to tens of microseconds here), which would make receives end before their
    // sends, so it is not applied.
    const std::string& base_boot = base.reader.run().boot_id;
    const auto sameClock = [&](const Input& i) {
        return !base_boot.empty() && i.reader.run().boot_id == base_boot;
    };
    for (auto& i : in) {
        std::int64_t offset = 0;
        if (!i->own.empty() && !sameClock(*i)) {
            offset = i->own.front().clock_offset_ns;
        }
        const auto shift = clockShift(i->reader.run().start_ns, offset, s0);
        if (!shift) {
            return TraceStatus::error(
                Code::BadInput, i->path + ": its start (" +
                                    std::to_string(i->reader.run().start_ns) +
                                    " ns) and clock offset (" + std::to_string(offset) +
                                    " ns) put it over 146 " + "years from rank 0's start (" +
                                    std::to_string(s0) + " ns): the file is damaged or was edited");
        }
        i->shift = *shift;
    }

    // The merged run's status: complete only when every process completed.
    trace::RunInfo info = base.reader.run();
    info.ranks = first.ranks;
    std::string failures;
    std::string cancelled_ranks;
    bool failed = false, cancelled = false;
    std::int64_t end = 0;
    for (const auto& i : in) {
        const trace::RunInfo& r = i->reader.run();
        std::string ranks;
        for (const auto& rk : i->own) {
            ranks += (ranks.empty() ? "" : ",") + std::to_string(rk.rank);
        }
        const std::string who =
            ranks.empty() ? std::string("a process that recorded no rank") : "rank " + ranks;
        if (r.status == trace::RunStatus::Running) {
            failed = true;
            failures += (failures.empty() ? "" : "; ") + who +
                        " stopped without finishing its trace (killed or crashed)";
        } else if (r.status == trace::RunStatus::Failed) {
            failed = true;
            failures += (failures.empty() ? "" : "; ") + who + ": " + r.message;
        } else if (r.status == trace::RunStatus::Cancelled) {
            cancelled = true;
            cancelled_ranks += (cancelled_ranks.empty() ? "" : "; ") + who + " cancelled";
        }
        std::string drift;
        std::optional<double> start_offset, end_offset, start_rtt, end_rtt;
        for (const auto& m : i->reader.metrics()) {
            if (m.key == "clock_offset_start_ns") {
                start_offset = m.value;
            } else if (m.key == "clock_offset_end_ns") {
                end_offset = m.value;
            } else if (m.key == "clock_offset_start_rtt_ns") {
                start_rtt = m.value;
            } else if (m.key == "clock_offset_end_rtt_ns") {
                end_rtt = m.value;
            }
        }
        if (start_offset && end_offset && !sameClock(*i)) {
            // How far the clocks moved apart over the run (the merge uses the start offset);
            // each offset is known to half its round trip.
            const double error = (start_rtt.value_or(0) + end_rtt.value_or(0)) / 2;
            drift =
                "; drift over the run " +
                micros(static_cast<std::int64_t>(*end_offset - *start_offset)) +
                (start_rtt || end_rtt ? " (+/- " + micros(static_cast<std::int64_t>(error)) + ")"
                                      : std::string());
        }
        const std::string clock =
            &i == &in[zero->second] ? std::string(", rank 0's clock")
            : sameClock(*i)
                ? ", on rank 0's machine: its clock (measured offset " +
                      micros(i->own.empty() ? 0 : i->own.front().clock_offset_ns) +
                      ", only the measurement's noise, not applied)"
                : ", clock shifted by " +
                      micros(i->own.empty() ? 0 : i->own.front().clock_offset_ns) + " to rank 0's";
        report->notes.push_back(who + " (" + i->path +
                                "): " + std::string(trace::toString(r.status)) + clock + drift);
        if (r.end_ns) {
            end = std::max(end, moved(since(r.start_ns, *r.end_ns), i->shift));
        }
    }
    for (int r = 0; r < first.ranks; ++r) {
        if (!file_of_rank.count(r)) {
            report->notes.push_back("rank " + std::to_string(r) + ": missing (no input holds it)");
            failed = true;
            failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(r) +
                        "'s trace is missing";
        }
    }

    detail::Progress progress(options.progress, kMergeWritingFrom, "the merge");
    for (const auto& i : in) {
        progress.addTotal(i->reader.opCount() + i->reader.memorySampleCount());
    }
    // Written beside `output` and renamed onto it when finished: a merge that cannot finish
    // leaves no half-merged file, and the file --force replaces stays until then.
    detail::PartialTrace partial;
    if (TraceStatus st = partial.prepare(output, options.overwrite); !st.ok()) {
        return st;
    }
    trace::TraceWriter writer;
    trace::WriterOptions wo;
    wo.overwrite = true;  // the partial file's reserved, empty name
    info.status = trace::RunStatus::Running;
    info.end_ns.reset();
    if (TraceStatus st = writer.create(partial.path(), info, wo); !st.ok()) {
        return partial.named(st);
    }
    const auto fail = [&](const TraceStatus& why) {
        // A cancelled one is discarded at once: building its indexes first (seconds for a large
        // trace) held up the Ctrl+C that asked to stop.
        if (why.code != TraceStatus::Code::Cancelled) {
            writer.finish(trace::RunStatus::Failed, why.message);
        }
        return why;
    };
    // Times are on rank 0's clock now: the offsets are applied (kept as metrics).
    for (const auto& i : in) {
        for (trace::RankInfo rk : i->own) {
            writer.addMetric({"clock_offset_applied_ns",
                              sameClock(*i) ? 0.0 : static_cast<double>(rk.clock_offset_ns),
                              rk.rank, std::nullopt});
            rk.clock_offset_ns = 0;
            writer.addRank(rk);
        }
    }

    // Ops, with the iteration windows over every rank and the sides of each transfer.
    std::map<int, std::pair<std::int64_t, std::int64_t>> windows;
    // Point-to-point ops in stream order, paired by the Chrome export's rule (FlowMatcher: the
    // k-th send from a to b in an iteration with the k-th receive on b from a).
    std::vector<trace::OpRecord> p2p;
    detail::FlowMatcher flows;
    std::set<std::tuple<int, std::string, std::string>> gpus_seen;  // id, uuid, bus
    std::set<std::pair<std::int64_t, std::string>> threads_seen;    // globalTid, name
    for (const auto& i : in) {
        const std::int64_t shift = i->shift;
        // A file holds the ranks of its rank table: a row of another rank (a damaged or edited
        // file) would land on that rank's lanes beside the rows of the file that holds it.
        const auto foreign = [&](int rank, const std::string& what) -> std::optional<TraceStatus> {
            if (i->own.empty() ||
                std::any_of(i->own.begin(), i->own.end(),
                            [rank](const trace::RankInfo& r) { return r.rank == rank; })) {
                return std::nullopt;
            }
            std::string held;
            for (const auto& r : i->own) {
                held += (held.empty() ? "" : ", ") + std::to_string(r.rank);
            }
            return TraceStatus::error(
                Code::BadInput, i->path + ": " + what + " is of rank " + std::to_string(rank) +
                                    ", but the file holds rank " + held +
                                    " (its rank table): the file is damaged or was "
                                    "edited");
        };
        std::optional<TraceStatus> stray;
        TraceStatus st = i->reader.forEachOp([&](const trace::OpRecord& op) {
            if ((stray = foreign(op.rank, "op row " + std::to_string(op.id)))) {
                return false;
            }
            trace::OpRecord o = op;
            o.start_ns = moved(o.start_ns, shift);
            o.end_ns = moved(o.end_ns, shift);
            writer.addOp(o);
            ++report->ops;
            end = std::max(end, o.end_ns);
            if (o.lane != trace::Lane::Gpu) {
                auto [w, fresh] = windows.try_emplace(o.iteration, o.start_ns, o.end_ns);
                if (!fresh) {
                    w->second.first = std::min(w->second.first, o.start_ns);
                    w->second.second = std::max(w->second.second, o.end_ns);
                }
            }
            if (o.lane != trace::Lane::Gpu && o.peer >= 0 &&
                (o.kind == OpKind::SendF || o.kind == OpKind::SendB || o.kind == OpKind::RecvF ||
                 o.kind == OpKind::RecvB)) {
                flows.count(o);
                p2p.push_back(o);
            }
            return progress.step();
        });
        if (st.ok() && !progress.stopped() && !stray) {
            st = i->reader.forEachMemory([&](const trace::MemorySample& m) {
                if ((stray =
                         foreign(m.rank, "a memory sample at " + std::to_string(m.t_ns) + " ns"))) {
                    return false;
                }
                trace::MemorySample s = m;
                s.t_ns = moved(s.t_ns, shift);
                writer.addMemory(s);
                return progress.step();
            });
        }
        if (stray) {
            st = *stray;
        } else if (st.ok() && progress.stopped()) {
            st = progress.cancelled();
        }
        if (!st.ok()) {
            return fail(st);
        }
        // The GPU tables, on rank 0's clock. Each process traced its own device work, so the
        // rows add up; a GPU listed by several files (ranks sharing it) is listed once.
        // Each table: its reader's forEach into its writer's add, every time moved by `shift`.
        const auto copyTable = [&](auto for_each, auto add) {
            if (!st.ok()) {
                return;
            }
            st = (i->reader.*for_each)([&](const auto& row) {
                auto r = row;
                r.start = moved(r.start, shift);
                if constexpr (std::is_same_v<decltype(r), trace::NvtxRecord>) {
                    if (r.end) {
                        *r.end = moved(*r.end, shift);  // marks have no end
                    }
                } else if constexpr (!std::is_same_v<decltype(r), trace::GpuMemoryEvent> &&
                                     !std::is_same_v<decltype(r), trace::OpCorrelation>) {
                    r.end =
                        moved(r.end, shift);  // an op_correlation row names its record by its start
                }
                (writer.*add)(r);
                return true;
            });
        };
        using R = trace::TraceReader;
        using W = trace::TraceWriter;
        copyTable(&R::forEachKernel, &W::addKernel);
        copyTable(&R::forEachMemcpy, &W::addMemcpy);
        copyTable(&R::forEachMemset, &W::addMemset);
        copyTable(&R::forEachRuntime, &W::addRuntime);
        copyTable(&R::forEachSync, &W::addSync);
        copyTable(&R::forEachNvtx, &W::addNvtx);
        copyTable(&R::forEachGpuMemoryEvent, &W::addGpuMemoryEvent);
        copyTable(&R::forEachOpCorrelation, &W::addOpCorrelation);
        if (st.ok()) {
            st = i->reader.forEachThreadName([&](const trace::ThreadName& t) {
                if (threads_seen.insert({t.global_tid, t.name}).second) {
                    writer.addThreadName(t);
                }
                return true;
            });
        }
        if (!st.ok()) {
            return fail(st);
        }
        for (const trace::GpuInfo& g : i->reader.gpus()) {
            if (gpus_seen.insert({g.id, g.uuid, g.bus_location}).second) {
                writer.addGpuInfo(g);
            }
        }
        // Per-rank metrics from every file; run-level ones from rank 0's, and the loss from
        // the file whose rank computed it. Iteration times are made anew below.
        for (const auto& m : i->reader.metrics()) {
            if (m.key == "iteration_time_ns" && !m.rank) {
                continue;
            }
            if (m.rank || m.key == "loss" || i.get() == &base) {
                writer.addMetric(m);
            }
        }
    }
    for (const auto& [iteration, w] : windows) {
        writer.addMetric({"iteration_time_ns", static_cast<double>(w.second - w.first),
                          std::nullopt, iteration});
    }

    // Causality: no receive may end before its send started.
    flows.seal();
    std::map<std::int64_t, const trace::OpRecord*> send_of;  // flow id -> its send
    std::vector<std::pair<std::int64_t, const trace::OpRecord*>> receives;
    for (const auto& op : p2p) {
        if (const std::int64_t id = flows.idFor(op); id > 0) {
            if (op.kind == OpKind::SendF || op.kind == OpKind::SendB) {
                send_of[id] = &op;
            } else {
                receives.emplace_back(id, &op);
            }
        }
    }
    for (const auto& [id, recv] : receives) {
        const trace::OpRecord& send = *send_of.at(id);
        ++report->pairs_checked;
        if (recv->end_ns < send.start_ns) {
            ++report->violation_count;
            report->violations.push_back({send.rank, recv->rank, send.iteration,
                                          detail::opName(send) + " \u2192 " + detail::opName(*recv),
                                          send.start_ns - recv->end_ns});
        }
    }
    std::sort(
        report->violations.begin(), report->violations.end(),
        [](const CausalityViolation& a, const CausalityViolation& b) { return a.by_ns > b.by_ns; });
    if (report->violations.size() > 20) {
        report->violations.resize(20);
    }
    writer.addMetric({"causality_violations", static_cast<double>(report->violation_count),
                      std::nullopt, std::nullopt});
    report->files = static_cast<int>(in.size());
    report->ranks = static_cast<int>(file_of_rank.size());

    const trace::RunStatus status = failed      ? trace::RunStatus::Failed
                                    : cancelled ? trace::RunStatus::Cancelled
                                                : trace::RunStatus::Complete;
    std::string message = failed ? failures : cancelled_ranks;
    report->status = status;
    report->status_message = message;
    if (TraceStatus st = writer.finish(status, message, s0 + end,
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
