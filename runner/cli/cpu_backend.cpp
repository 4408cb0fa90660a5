#include "cpu_backend.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>
#include <unistd.h>

#include <pipescope/analysis/report.h>
#include <pipescope/exec/pipeline_executor.h>
#include <pipescope/kernels/cpu/gemm.h>
#include <pipescope/kernels/cpu/gemm_profile.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/model_math.h>
#include <pipescope/sim/simulator.h>
#include <pipescope/trace/liveness.h>
#include <pipescope/trace/units.h>
#include <pipescope/trace/writer.h>

#include "exit_codes.h"
#include "gemm_report.h"
#include "gone_traces.h"
#include "launch.h"
#include "report.h"
#include "run_memory.h"
#include "world.h"
#if PIPESCOPE_HAVE_CUDA
#include <pipescope/cuda/cuda_rank_backend.h>
#include <pipescope/cuda/devices.h>
#include <pipescope/cuda/gpu_trace.h>
#endif

namespace pipescope::cli {

namespace {

using trace::memoryText;

std::atomic<bool> g_cancel{false};

extern "C" void onSignal(int) {
    g_cancel.store(true);
}

// The wall clock at the moment of a steady-clock reading. Ops are timed on the steady clock from
// `steady`, and merging processes' traces places them by `wall_ns`: a preemption between two
// separate reads would shift a whole trace by a time slice, enough for receives to seem to end
// before their sends began. Of 16 wall readings bracketed by steady ones, the tightest is kept,
// paired with its bracket's midpoint.
struct ClockPair {
    std::int64_t wall_ns = 0;
    std::chrono::steady_clock::time_point steady;
};
ClockPair readClockPair() {
    ClockPair best;
    auto best_gap = std::chrono::steady_clock::duration::max();
    for (int i = 0; i < 16; ++i) {
        const auto before = std::chrono::steady_clock::now();
        const std::int64_t wall = trace::wallClockNs();
        const auto after = std::chrono::steady_clock::now();
        if (after - before < best_gap) {
            best_gap = after - before;
            best = {wall, before + (after - before) / 2};
        }
    }
    return best;
}

}  // namespace

bool cpuBackendBuilt(std::string* why) {
#if PIPESCOPE_HAVE_CPU_BACKEND
    (void)why;
    return true;
#else
    *why = "this build has no CPU backend (configure found no OpenBLAS: install libopenblas-dev)";
    return false;
#endif
}

void catchCancelSignals() {
    std::signal(SIGINT, onSignal);
    std::signal(SIGTERM, onSignal);
}

int runExecBackend(const Options& o, const schedule::Config& config,
                   const schedule::Schedule& schedule, const std::string& command_line,
                   std::ostream& human) {
    const int iterations = o.iterations.value_or(config.run.iterations);
    // Every exit after "started" reports "finished", so that a reader of the progress stream
    // never waits for it.
    const auto refused = [&](int rc) {
        progressEvent(o, {{"event", "finished"},
                          {"status", rc == kExitCancelled ? "cancelled" : "failed"},
                          {"db", nullptr}});
        return rc;
    };
    // A signal (caught since before "started") that came before the run, while it was simulated
    // or its memory estimated.
    const auto cancelledBeforeRun = [&] {
        std::cerr << "pipescope-run: cancelled (Ctrl-C or SIGTERM) before the run started\n";
        return refused(kExitCancelled);
    };
    if (g_cancel.load()) {
        return cancelledBeforeRun();
    }
    // One process per rank when a launcher (or --rank/--world-size) says so.
    std::string launch_error;
    const auto launch = launchContext(
        o, [](const char* name) -> const char* { return std::getenv(name); }, &launch_error);
    if (!launch) {
        std::cerr << "pipescope-run: " << launch_error << "\n";
        return refused(kExitBadInput);
    }
    if (!launch->warning.empty()) {
        if (o.progress_jsonl) {
            progressEvent(o, {{"event", "warning"}, {"message", launch->warning}});
        } else {
            std::cerr << "pipescope-run: warning: " << launch->warning << "\n";
        }
    }
    const bool multi = launch->world > 1;
    if (!multi && o.transport == "mpi") {
        std::cerr << "pipescope-run: --transport mpi connects the processes of a multi-process "
                     "run, but this process "
                  << (launch->source.empty() ? std::string("was started alone")
                                             : "is the only one (from " + launch->source + ")")
                  << " and runs every rank itself; start one process per rank (mpirun -np "
                  << schedule.ranks << "), or leave --transport out\n";
        return refused(kExitBadInput);
    }
    // Flags say how many processes there are; a launcher's one process runs every rank.
    if ((multi || launch->source == "flags") && launch->world != schedule.ranks) {
        std::cerr << "pipescope-run: " << launch->world
                  << (launch->world == 1 ? " process was" : " processes were") << " started (from "
                  << launch->source << ") but the schedule has " << schedule.ranks
                  << " ranks: start one process per rank (parallel.pipeline)\n";
        return refused(kExitBadInput);
    }
    const std::string out_path = multi ? rankTracePath(o.out, launch->rank) : o.out;
    const std::string summary_path = multi && o.summary_json != "-"
                                         ? rankTracePath(o.summary_json, launch->rank)
                                         : o.summary_json;
    if (const std::string clash =
            multi ? rankOutputClash(o, launch->rank, out_path, summary_path) : std::string();
        !clash.empty()) {
        std::cerr << "pipescope-run: " << clash << "\n";
        return refused(kExitBadInput);
    }
    // The ranks this process runs.
    std::vector<int> local;
    for (int r = 0; r < schedule.ranks; ++r) {
        if (!multi || r == launch->rank) {
            local.push_back(r);
        }
    }
    // Refuse before allocating anything when the ranks cannot fit in memory together.
    std::string estimate_error;
    const auto estimate = estimateMemory(config, schedule, &estimate_error);
    if (!estimate) {
        std::cerr << "pipescope-run: " << estimate_error << "\n";
        return refused(kExitBadInput);
    }
    std::int64_t total = 0;
    for (int r : local) {
        total += (*estimate)[static_cast<std::size_t>(r)];
    }
    const bool cuda = o.backend == "cuda";
    bool shared_device = false;  // several ranks (of any process here) on one GPU
#if PIPESCOPE_HAVE_CUDA
    cuda::CudaBackendOptions cuda_options;
    cuda_options.seed = config.run.seed;
    cuda_options.nccl = o.nccl.value_or(false);
    cuda_options.lane_sync =
        o.event_sync.value_or(false) ? cuda::LaneSync::Event : cuda::LaneSync::Op;
    cuda_options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
    if (cuda) {
        if (multi) {
            // The GPU of this process's local rank; with fewer GPUs than processes on the
            // machine, they take turns (a one-GPU workstation runs every rank on its GPU).
            const int count = static_cast<int>(cuda::listDevices().devices.size());
            cuda_options.devices = {count > 0 ? launch->local_rank % count : 0};
            shared_device = launch->local_world > count;
            if (shared_device) {
                // The processes of a GPU share its memory: each takes its part of the fraction.
                const int per_gpu =
                    (launch->local_world + std::max(count, 1) - 1) / std::max(count, 1);
                cuda_options.memory_fraction /= per_gpu;
                if (cuda_options.nccl) {
                    std::cerr << "pipescope-run: --nccl on needs one GPU per process, but "
                              << launch->local_world << " processes share " << count
                              << " GPU(s) on this machine (NCCL refuses two ranks on one GPU); "
                                 "leave NCCL off, or start one process per GPU\n";
                    return refused(kExitBadInput);
                }
            }
        }
        // Each device's ranks share 90% of its free memory equally (cuda_rank_backend.h).
        std::map<int, int> ranks_on;
        for (int r : local) {
            shared_device |= ++ranks_on[cuda::deviceOfRank(cuda_options, r)] > 1;
        }
        for (int r : local) {
            const int d = cuda::deviceOfRank(cuda_options, r);
            std::string why;
            const std::int64_t free_bytes = cuda::freeDeviceMemory(d, &why);
            if (free_bytes < 0) {
                std::cerr << "pipescope-run: device " << d << ": " << why << "\n";
                return refused(kExitFailed);
            }
            const auto share = static_cast<std::int64_t>(
                static_cast<double>(free_bytes) * cuda_options.memory_fraction / ranks_on[d]);
            const std::int64_t need = (*estimate)[static_cast<std::size_t>(r)];
            if (need > share) {
                std::cerr << "pipescope-run: rank " << r << " needs about "
                          << memoryText(static_cast<double>(need)) << " on device " << d
                          << " (fp32 weights, gradients, AdamW state and activations) but its "
                             "share of the device's free memory is "
                          << memoryText(static_cast<double>(share)) << " (" << ranks_on[d]
                          << " ranks on it); make the model smaller or use more GPUs\n";
                return refused(kExitBadInput);
            }
        }
    }
#endif
    const std::int64_t available = availableMemory();
    if (!cuda && available > 0 && total > available * 9 / 10) {
        std::cerr << "pipescope-run: this config needs about "
                  << memoryText(static_cast<double>(total)) << " for its " << schedule.ranks
                  << " ranks on the CPU backend (fp32 weights, gradients, AdamW state and "
                     "activations; the largest rank "
                  << memoryText(
                         static_cast<double>(*std::max_element(estimate->begin(), estimate->end())))
                  << ") but only " << memoryText(static_cast<double>(available))
                  << " of memory is available; make the model smaller (model.layers, "
                     "model.hidden, model.vocab, model.seq_len) or use fewer "
                     "parallel.microbatches\n";
        return refused(kExitBadInput);
    }

    if (g_cancel.load()) {
        return cancelledBeforeRun();
    }
    // The other processes, before any file is made: a world that cannot form writes nothing.
    // The run's identity turns a process of another run away: its config and length, and what
    // runs it (a CPU rank and a CUDA rank of one config, or two builds whose ops or wire format
    // differ, must not form one run).
    int join_exit = kExitFailed;
    auto world = joinWorld(
        o, *launch,
        std::hash<std::string>{}(schedule::toJson(config) + "#" + std::to_string(iterations) + "#" +
                                 o.backend + "#" PIPESCOPE_VERSION),
        human, &join_exit, &g_cancel);
    if (!world) {
        return refused(join_exit);
    }
    std::unique_ptr<exec::Transport>& transport = world->transport;
    const exec::ClockOffset start_offset = world->start_offset;
    const std::string& run_id = world->run_id;

    trace::TraceWriter writer;
    trace::WriterOptions wo;
    wo.overwrite = o.force;
    trace::RunInfo info;
    info.name = config.name;
    info.config_json = schedule::toJson(config);
    info.backend = o.backend;
    const ClockPair start = readClockPair();
    info.start_ns = start.wall_ns;
    const auto origin = start.steady;
    info.host = trace::thisHost();
    info.versions = "pipescope " PIPESCOPE_VERSION;
    info.command_line = command_line;
    info.ranks = schedule.ranks;
    info.iterations = iterations;
    info.warmup = std::min(config.run.warmup, std::max(0, iterations - 1));
    info.run_id = run_id;
    info.boot_id = trace::thisBootId();
    if (auto st = writer.create(out_path, info, wo); !st.ok()) {
        if (transport) {
            transport->abort("it cannot write its trace " + out_path + ": " + st.message);
        }
        std::cerr << "pipescope-run: " << st.message
                  << (st.code == trace::TraceStatus::Code::Exists ? " (pass --force to replace it)"
                                                                  : "")
                  << "\n";
        if (transport) {
            // An orderly leave: a process that just closed its connection would count as gone,
            // and the others would take the file it refused to touch for its trace (and read
            // or mark it); under mpirun, its early exit would end them before their traces
            // are closed.
            transport->finish();
        }
        return refused(st.code == trace::TraceStatus::Code::Exists ||
                               st.code == trace::TraceStatus::Code::BadInput
                           ? kExitBadInput
                           : kExitFailed);
    }
    for (int r : local) {
        std::string device = "cpu";
#if PIPESCOPE_HAVE_CUDA
        if (cuda) {
            device = "cuda:" + std::to_string(cuda::deviceOfRank(cuda_options, r));
        }
#endif
        writer.addRank({r, sim::rankStages(schedule, r), device, info.host, start_offset.offset_ns,
                        static_cast<std::int64_t>(getpid())});
    }
    // What MFU and tokens/s need, from the config: written first, so that a run killed midway
    // still reports them. The peak and the capacity are what hardware.* declares for one rank,
    // as the simulator assumes, so a prediction and its measurement share one yardstick.
    const auto run_metric = [&](const char* key, double value) {
        writer.addMetric({key, value, std::nullopt, std::nullopt});
    };
    run_metric("model_flops_per_iteration", schedule::modelFlopsPerIteration(config));
    run_metric("tokens_per_iteration", schedule::tokensPerIteration(config));
    run_metric("peak_flops_per_rank", config.hardware.peak_tflops * 1e12);
    run_metric("memory_capacity_bytes", config.hardware.memory_gib * 1024.0 * 1024.0 * 1024.0);
    run_metric("hardware_from_config", 1);
    // Each rank's ops per iteration: a run that stops tells its unfinished iterations by them.
    for (int r : local) {
        writer.addMetric({analysis::kMetricOpsPerIteration,
                          static_cast<double>(schedule.ops[static_cast<std::size_t>(r)].size()), r,
                          std::nullopt});
    }
    // On disk at once: a process killed before its first batch still says which rank it was.
    (void)writer.flush();

    // (Ctrl-C and SIGTERM are caught since catchCancelSignals: one that came since the world
    // formed cancels the run at its first op.)
    setGemmRecording(o.gemm_report, cuda);
    keepFreedMemory();

    exec::ExecOptions eo;
    eo.iterations = iterations;
    eo.seed = config.run.seed;
    eo.adamw.lr = config.run.learning_rate;
    eo.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(o.timeout_s * 1000));
    eo.writer = &writer;
    eo.origin = origin;
    eo.cancel = &g_cancel;
    if (multi) {
        eo.local_ranks = local;
        eo.transport = transport.get();
        // This machine's cores are shared by its processes, not just this one's threads.
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        eo.blas_threads = std::max(1, cores / launch->local_world);
    }
#if PIPESCOPE_HAVE_CUDA
    std::unique_ptr<cuda::GpuOpTrace> gpu_trace;
    if (cuda) {
        cuda_options.transport = transport.get();
        eo.backend = cuda::cudaBackendFactory(cuda_options);
        human << "communication: "
              << (!multi              ? cuda::describeCommunication(cuda_options, schedule)
                  : cuda_options.nccl ? "NCCL between the processes' GPUs (ids shared over " +
                                            transport->describe() + ")"
                                      : "between processes over " + transport->describe() +
                                            ", staged through host memory")
              << "\n";
        if (o.cupti.value_or(true)) {
            std::vector<int> devices;
            for (int r : local) {
                devices.push_back(cuda::deviceOfRank(cuda_options, r));
            }
            std::sort(devices.begin(), devices.end());
            devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
            gpu_trace =
                std::make_unique<cuda::GpuOpTrace>(schedule, &writer, origin, std::move(devices));
            if (const std::string why = gpu_trace->start(); !why.empty()) {
                std::cerr << "pipescope-run: no CUPTI trace: " << why
                          << "; the run goes on with NVTX ranges and host spans\n";
                gpu_trace.reset();
            }
        }
        writer.addMetric({"cupti", gpu_trace ? 1.0 : 0.0, std::nullopt, std::nullopt});
        // 1: host spans are issue times (asynchronous lanes), 0: execution times.
        const bool events = cuda_options.lane_sync == cuda::LaneSync::Event;
        writer.addMetric({"lane_sync_event", events ? 1.0 : 0.0, std::nullopt, std::nullopt});
        human << "lanes: "
              << (events ? "asynchronous, ordered by CUDA events (host spans are issue times"
                         : "each op waits for its stream (host spans are execution times")
              << (events && !gpu_trace ? "; without CUPTI nothing records the execution)\n"
                                       : ")\n");
    }
#endif
    // A loss far above a uniform guess over the vocabulary (ln V, about where training starts)
    // is a training that diverges: the numbers alone said nothing of it (run.learning_rate = 1
    // took the small presets from 8.3 to 140). Said once, with the likely cause.
    const double uniform_loss = std::log(static_cast<double>(config.model.vocab));
    bool diverging = false;
    eo.on_iteration = [&](int it, double loss, double seconds) {
#if PIPESCOPE_HAVE_CUDA
        if (gpu_trace) {
            gpu_trace->iterationDone();
        }
#endif
        progressEvent(o, {{"event", "progress"},
                          {"iteration", it + 1},
                          {"of", iterations},
                          {"loss", loss},
                          {"seconds", seconds}});
        // Numbered from 0, as the trace and every report number them; the count after it.
        human << "iteration " << std::setw(3) << it << " (" << it + 1 << "/" << iterations
              << ")  loss ";
        if (std::isnan(loss)) {
            human << "-     ";  // another process's rank computes it
        } else {
            human << std::fixed << std::setprecision(4) << loss;
        }
        human << "  " << std::fixed << std::setprecision(1) << seconds * 1e3 << " ms";
        if (multi) {
            // Under a launcher that merges the processes' output, whose line this is.
            human << "  (rank " << launch->rank << ")";
        }
        human << "\n" << std::flush;
        if (!diverging && loss > 2 * uniform_loss) {  // (false for NaN: another process's)
            diverging = true;
            char text[300];
            std::snprintf(text, sizeof text,
                          "iteration %d: the loss (%.4g) is more than twice that of a uniform "
                          "guess over the vocabulary (ln %lld = %.4g): the training diverges; the "
                          "learning rate (run.learning_rate = %g) is probably too large",
                          it, loss, static_cast<long long>(config.model.vocab), uniform_loss,
                          eo.adamw.lr);
            if (o.progress_jsonl) {
                progressEvent(o, {{"event", "warning"}, {"message", text}});
            } else {
                std::cerr << "pipescope-run: warning: " << text << "\n";
            }
        }
    };
    exec::PipelineExecutor executor(config, schedule, eo);
    exec::ExecResult result = executor.run();
    std::vector<int> gone;  // ranks whose processes ended before they finished
    // (The handlers stay until the trace is finished: a second Ctrl-C must not leave it
    // unfinished.)
    if (transport) {
        gone = transport->goneRanks();
        // Ctrl-C on a terminal reaches every process of the run: one that heard first tells
        // the others it was cancelled, and one that learns so before its own signal is handled
        // would fail. A process that got the signal itself was cancelled, however it stopped.
        // Its signal may still be on the way when another rank's cancel stops it (mpirun passes
        // Ctrl-C to its processes one by one): it waits a moment for it. A process that hears
        // none was stopped by another rank's cancel alone, and fails saying so.
        if (result.status == exec::ExecResult::Status::Failed && gone.empty() &&
            transport->stoppedByCancel()) {
            for (int i = 0; i < 50 && !g_cancel.load(); ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        if (result.status == exec::ExecResult::Status::Failed && gone.empty() && g_cancel.load()) {
            result.status = exec::ExecResult::Status::Cancelled;
            result.message =
                "cancelled (Ctrl-C or SIGTERM) as the other ranks were: " + result.message;
        }
        // A run stopped by a signal while another rank's process is gone was stopped because
        // of it: mpirun ends every process of a job once one of them dies.
        if (result.status == exec::ExecResult::Status::Cancelled && !gone.empty()) {
            result.status = exec::ExecResult::Status::Failed;
            result.message = "rank " + std::to_string(gone.front()) +
                             " is gone: its process ended before it finished (then a signal "
                             "stopped this process: its launcher ends the whole job)";
        }
        // The clocks again at the end (drift over the run).
        const exec::ClockOffset end_offset = transport->measureClockOffset(32);
        const int r = launch->rank;
        writer.addMetric({"clock_offset_start_ns", static_cast<double>(start_offset.offset_ns), r,
                          std::nullopt});
        writer.addMetric({"clock_offset_start_rtt_ns", static_cast<double>(start_offset.rtt_ns), r,
                          std::nullopt});
        if (end_offset.samples > 0) {
            writer.addMetric({"clock_offset_end_ns", static_cast<double>(end_offset.offset_ns), r,
                              std::nullopt});
            writer.addMetric({"clock_offset_end_rtt_ns", static_cast<double>(end_offset.rtt_ns), r,
                              std::nullopt});
        }
    }
#if PIPESCOPE_HAVE_CUDA
    if (gpu_trace) {
        const cuda::GpuTraceSummary g = gpu_trace->finish();
        human << "gpu trace (CUPTI): " << g.kernels << " kernels, " << g.memcpys << " copies, "
              << g.memsets << " memsets, " << g.runtime_calls << " runtime calls; " << g.op_rows
              << " op spans on the gpu lane";
        if (g.unattributed > 0) {
            human << " (" << g.unattributed << " device records outside any op)";
        }
        human << (g.steady_clock ? "" : "; CUPTI kept its own clock, paired with the host's once")
              << "\n";
        if (g.untimed > 0) {
            std::cerr << "pipescope-run: CUPTI could not time " << g.untimed
                      << " device records (left out of the trace)\n";
        }
        if (g.dropped > 0) {
            std::cerr << "pipescope-run: CUPTI dropped " << g.dropped
                      << " records for want of buffer space: the gpu lane misses some work\n";
        }
        if (!g.problem.empty()) {
            std::cerr << "pipescope-run: " << g.problem << "\n";
        }
        writer.addMetric(
            {"cupti_kernels", static_cast<double>(g.kernels), std::nullopt, std::nullopt});
        writer.addMetric(
            {"cupti_dropped_records", static_cast<double>(g.dropped), std::nullopt, std::nullopt});
    }
#endif

    for (int r : local) {
        const auto i = static_cast<std::size_t>(r);
        if (i < result.peak_bytes.size()) {
            writer.addMetric(
                {"peak_memory_bytes", static_cast<double>(result.peak_bytes[i]), r, std::nullopt});
        }
        writer.addMetric(
            {"memory_estimate_bytes", static_cast<double>((*estimate)[i]), r, std::nullopt});
    }
    const trace::RunStatus status =
        result.status == exec::ExecResult::Status::Complete    ? trace::RunStatus::Complete
        : result.status == exec::ExecResult::Status::Cancelled ? trace::RunStatus::Cancelled
                                                               : trace::RunStatus::Failed;
    const auto fin = writer.finish(status, result.message);
    if (!fin.ok()) {
        std::cerr << "pipescope-run: " << fin.message << "\n";
    }
    // A rank whose process died left its trace "running": a survivor on its machine marks it,
    // and the lowest rank still up reports what nobody here could mark. The signals are still
    // caught while it does: mpirun sends SIGTERM to every process once one has ended, and that
    // must not kill the survivor between the gone rank's trace and its mark.
    if (transport && !gone.empty()) {
        int lowest_up = 0;
        while (std::find(gone.begin(), gone.end(), lowest_up) != gone.end()) {
            ++lowest_up;
        }
        markGoneTraces(o.out, gone, launch->rank, info.host, launch->rank == lowest_up, std::cerr);
    }
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
    if (transport) {
        // Every rank's trace is closed before any process leaves: a launcher that ends the job
        // when its first process exits with an error (mpirun does) cuts no trace short. This
        // also keeps rank 0, the socket transport's relay, up until the others are done.
        transport->finish();
    }

    if (result.status == exec::ExecResult::Status::Failed) {
        std::cerr << "pipescope-run: the run failed: " << result.message << "\n";
    } else if (result.status == exec::ExecResult::Status::Cancelled) {
        std::cerr << "pipescope-run: " << result.message << "\n";
    }
    // One unit for the line, so ranks and their estimates read side by side.
    double largest = 0;
    for (int r : local) {
        const auto i = static_cast<std::size_t>(r);
        largest = std::max({largest, static_cast<double>(result.peak_bytes[i]),
                            static_cast<double>((*estimate)[i])});
    }
    const trace::MemoryUnit unit = trace::memoryUnitFor(largest);
    human << "\npeak memory per rank (measured / estimated):";
    for (int r : local) {
        const auto i = static_cast<std::size_t>(r);
        human << "  " << r << ": " << memoryText(static_cast<double>(result.peak_bytes[i]), unit)
              << " / " << memoryText(static_cast<double>((*estimate)[i]), unit);
    }
    human << "\ntrace: " << out_path << "\n";
    // The figures of the run as pipescope-trace stats gives them, from the trace just written:
    // the same numbers the app and the summary JSON show.
    analysis::RunStats stats;
    const trace::TraceStatus analysed =
        fin.ok() ? analysis::analyzeFile(out_path, {}, &stats) : fin;
    if (analysed.ok()) {
        human << "\n" << analysis::formatStatsTable(stats);
    } else {
        std::cerr << "pipescope-run: no figures for the run: " << analysed.message << "\n";
        stats = {};
    }
    if (o.gemm_report) {
        writeGemmReport(human, cuda, shared_device);
    }
    bool summary_written = true;
    if (!o.summary_json.empty()) {
        // One per process, as the traces are: the processes of a run must not write one file.
        summary_written = writeOutput(
            summary_path,
            measuredSummaryJson(stats, config, schedule, o.backend,
                                {status, result.losses, result.iteration_s, *estimate, out_path}));
    }
    const char* word = status == trace::RunStatus::Complete    ? "complete"
                       : status == trace::RunStatus::Cancelled ? "cancelled"
                                                               : "failed";
    progressEvent(o, {{"event", "finished"}, {"status", word}, {"db", out_path}});
    if (!fin.ok() || (!summary_written && status == trace::RunStatus::Complete)) {
        return kExitFailed;
    }
    return status == trace::RunStatus::Complete    ? kExitOk
           : status == trace::RunStatus::Cancelled ? kExitCancelled
                                                   : kExitFailed;
}

}  // namespace pipescope::cli
