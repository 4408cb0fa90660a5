#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <system_error>
#include <thread>
#include <unistd.h>

#include <pipescope/exec/cpu_rank_backend.h>
#include <pipescope/exec/op_record.h>
#include <pipescope/kernels/cpu/gemm.h>
#include <pipescope/trace/writer.h>

#include "executor_internal.h"

namespace pipescope::exec {

namespace detail {

Run::Run(const schedule::Config& c, schedule::Schedule s, ExecOptions o)
    : config(c),
      schedule(std::move(s)),
      options(std::move(o)),
      shape(modelShapeFromConfig(c)),
      data(static_cast<int>(c.model.vocab), options.seed),
      sharded(schedule::isShardedVocab(c.parallel.vocab)) {}

const TokenRows& Run::tokens(RankState& rs, int iteration, int mb) {
    if (rs.token_iteration != iteration) {
        rs.tokens.clear();
        rs.token_iteration = iteration;
    }
    auto it = rs.tokens.find(mb);
    if (it == rs.tokens.end()) {
        const auto seqs = data.batch(iteration, mb, shape.micro_batch, shape.seq_len);
        it = rs.tokens.emplace(mb, splitTokens(seqs, shape.micro_batch, shape.seq_len)).first;
    }
    return it->second;
}

void Run::recordLoss(int iteration, double loss) {
    std::lock_guard<std::mutex> lock(book_m);
    loss_sum[static_cast<std::size_t>(iteration)] += loss;
    loss_count[static_cast<std::size_t>(iteration)] += 1;
}

}  // namespace detail

using detail::CommError;
using detail::OpError;
using detail::RankState;
using Clock = std::chrono::steady_clock;

namespace {

std::int64_t threadCpuNs() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// An op between beginOp and endOp: if it throws, the backend abandons it (rank_backend.h).
struct OpInProgress {
    OpInProgress(RankBackend* b, int l) : backend(b), lane(l) {}
    OpInProgress(const OpInProgress&) = delete;
    OpInProgress& operator=(const OpInProgress&) = delete;
    ~OpInProgress() {
        if (backend != nullptr) {
            backend->abandonOp(lane);
        }
    }
    RankBackend* backend;
    int lane;
};

}  // namespace

struct PipelineExecutor::Impl {
    detail::Run run;
    bool ran = false;

    std::mutex state_m;
    ExecResult result;
    bool failed = false;     // the first real error is in result.message
    bool cancelled = false;  // the user asked to stop
    // Per iteration: ranks done, first op start and last op end (ns since origin).
    std::vector<int> ranks_done;
    std::vector<int> local;  // the ranks this process runs
    std::vector<std::int64_t> first_start, last_end;
    int next_report = 0;

    Impl(const schedule::Config& c, schedule::Schedule s, ExecOptions o)
        : run(c, std::move(s), std::move(o)) {}

    std::int64_t nowNs() const {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                                    run.options.origin)
            .count();
    }

    bool stopping() {
        if (run.options.cancel != nullptr && run.options.cancel->load()) {
            bool first = false;
            {
                std::lock_guard<std::mutex> lock(state_m);
                if (!cancelled && !failed) {
                    cancelled = first = true;
                    run.fabric->abort(kCancelledReason);
                    if (run.options.transport != nullptr) {
                        run.options.transport->abort(kCancelledReason);
                    }
                }
            }
            if (first) {
                abortBackends();
            }
        }
        std::lock_guard<std::mutex> lock(state_m);
        return failed || cancelled;
    }

    void fail(const std::string& message) {
        bool first = false;
        {
            std::lock_guard<std::mutex> lock(state_m);
            // The first failure is the run's. An aborted wait is most often the consequence of
            // a failure recorded before the abort (or of a cancel) and adds nothing then; one
            // with no cause recorded (a transport that stopped on its own, another process's
            // failure) is this run's failure, with its own message, never a silent success.
            if (!failed && !cancelled) {
                failed = first = true;
                result.message = message;
                if (run.options.transport != nullptr) {
                    run.options.transport->abort(message);
                }
            }
            run.fabric->abort(message);
        }
        if (first) {
            abortBackends();
        }
    }

    // Outside state_m: a backend's abort may wait for its own communication calls to return.
    void abortBackends() {
        for (int r : local) {
            if (auto& backend = run.ranks[static_cast<std::size_t>(r)].backend) {
                backend->abort();
            }
        }
    }

    void opSpan(int rank, int it, int index, const schedule::Op& op, std::int64_t start,
                std::int64_t end, std::int64_t cpu, std::int64_t bytes) {
        {
            std::lock_guard<std::mutex> lock(state_m);
            auto& f = first_start[static_cast<std::size_t>(it)];
            auto& l = last_end[static_cast<std::size_t>(it)];
            f = f < 0 ? start : std::min(f, start);
            l = std::max(l, end);
        }
        if (run.options.writer == nullptr) {
            return;
        }
        trace::OpRecord rec = opRecord(op, {rank, it, index}, start, end, trace::Source::Host);
        rec.bytes = bytes;
        rec.cpu_ns = cpu;
        run.options.writer->addOp(rec);
    }

    // Reports the iterations every rank has finished, in order.
    void rankIterationDone(int it) {
        std::lock_guard<std::mutex> lock(state_m);
        ++ranks_done[static_cast<std::size_t>(it)];
        while (next_report < run.options.iterations &&
               ranks_done[static_cast<std::size_t>(next_report)] ==
                   static_cast<int>(local.size())) {
            const auto i = static_cast<std::size_t>(next_report);
            double loss = 0;
            {
                std::lock_guard<std::mutex> book(run.book_m);
                loss = run.loss_count[i] > 0 ? run.loss_sum[i] / run.loss_count[i]
                                             : std::numeric_limits<double>::quiet_NaN();
            }
            const double seconds = static_cast<double>(last_end[i] - first_start[i]) * 1e-9;
            result.losses.push_back(loss);
            result.iteration_s.push_back(seconds);
            if (run.options.writer != nullptr) {
                run.options.writer->addMetric({"iteration_time_ns",
                                               static_cast<double>(last_end[i] - first_start[i]),
                                               std::nullopt, next_report});
                if (!std::isnan(loss)) {  // NaN: another process's rank computes it
                    run.options.writer->addMetric({"loss", loss, std::nullopt, next_report});
                }
            }
            if (run.options.on_iteration) {
                run.options.on_iteration(next_report, loss, seconds);
            }
            ++next_report;
        }
    }

    void lane(int rank, int lane) {
        RankState& rs = run.ranks[static_cast<std::size_t>(rank)];
        const auto& ops = run.schedule.ops[static_cast<std::size_t>(rank)];
        const auto& g = run.graph;
        for (int it = 0; it < run.options.iterations; ++it) {
            bool first = true;
            for (int index : rs.lane_ops[static_cast<std::size_t>(lane)]) {
                const schedule::Op& op = ops[static_cast<std::size_t>(index)];
                const auto where = [&] {
                    return "iteration " + std::to_string(it) + ", rank " + std::to_string(rank) +
                           ", op " + std::to_string(index) + " (" + op.label() + ")";
                };
                if (stopping()) {
                    run.fabric->laneFinished(rank, lane);
                    return;
                }
                try {
                    const int node = g.node(rank, index);
                    const int b = g.start_dep_begin[static_cast<std::size_t>(node)];
                    const int e = g.start_dep_begin[static_cast<std::size_t>(node) + 1];
                    const auto ready = [&] {
                        for (int k = b; k < e; ++k) {
                            if (run.done[static_cast<std::size_t>(
                                             g.start_deps[static_cast<std::size_t>(k)])]
                                    .load() < it + 1) {
                                return false;
                            }
                        }
                        return true;
                    };
                    if (!ready()) {
                        if (auto st = run.fabric->waitLocal(rank, lane, ready,
                                                            "the inputs of " + where());
                            !st.ok()) {
                            throw CommError(st);
                        }
                    }
                    const std::int64_t start = nowNs();
                    const std::int64_t cpu0 = threadCpuNs();
                    rs.backend->beginOp(lane, opKeyId({rank, it, index}), op.label());
                    OpInProgress in_progress{rs.backend.get(), lane};
                    if (rs.backend->asyncLanes()) {
                        for (int k = b; k < e; ++k) {
                            const int dep = g.start_deps[static_cast<std::size_t>(k)];
                            if (run.laneOf(dep) != lane) {
                                rs.backend->waitFor(
                                    lane,
                                    opKeyId({rank, it,
                                             g.node_ref[static_cast<std::size_t>(dep)].index}));
                            }
                        }
                    }
                    if (first && lane == static_cast<int>(schedule::Stream::Compute)) {
                        // Gradients accumulate over one iteration's micro-batches.
                        rs.backend->zeroGrads();
                    }
                    first = false;
                    rs.comm[static_cast<std::size_t>(lane)]->setActivity(where());
                    const std::int64_t bytes = detail::runOp(run, rank, it, op);
                    in_progress.backend = nullptr;  // endOp cleans up even when it throws
                    rs.backend->endOp(lane, rs.backend->asyncLanes()
                                                ? run.awaited[static_cast<std::size_t>(node)]
                                                : 0);
                    const std::int64_t cpu = threadCpuNs() - cpu0;
                    opSpan(rank, it, index, op, start, nowNs(), cpu, bytes);
                    rs.comm[static_cast<std::size_t>(lane)]->setActivity("after " + where());
                    run.done[static_cast<std::size_t>(node)].store(it + 1);
                    run.fabric->wake(rank);
                    if (op.kind == schedule::OpKind::Opt) {
                        rankIterationDone(it);
                    }
                } catch (const CommError& e) {
                    fail(e.status.code == CommStatus::Code::Deadlock ||
                                 e.status.code == CommStatus::Code::Timeout
                             ? e.what()
                             : where() + ": " + e.what());
                    run.fabric->laneFinished(rank, lane);
                    return;
                } catch (const OpError& e) {
                    fail(where() + ": " + e.what());
                    run.fabric->laneFinished(rank, lane);
                    return;
                } catch (const std::bad_alloc&) {
                    fail(where() + ": out of memory");
                    run.fabric->laneFinished(rank, lane);
                    return;
                } catch (const std::exception& e) {
                    // The backend's own errors (a failed CUDA call, a full device arena).
                    fail(where() + ": " + e.what());
                    run.fabric->laneFinished(rank, lane);
                    return;
                }
            }
        }
        run.fabric->laneFinished(rank, lane);
    }
};

PipelineExecutor::PipelineExecutor(const schedule::Config& config, schedule::Schedule schedule,
                                   ExecOptions options)
    : impl_(std::make_unique<Impl>(config, std::move(schedule), std::move(options))) {}

PipelineExecutor::~PipelineExecutor() = default;

ExecResult PipelineExecutor::run() {
    Impl& im = *impl_;
    detail::Run& run = im.run;
    if (im.ran) {
        im.result.status = ExecResult::Status::Failed;
        im.result.message = "PipelineExecutor::run called twice";
        return im.result;
    }
    im.ran = true;
    const int p = run.schedule.ranks;
    const int iterations = run.options.iterations;
    auto built = schedule::buildGraph(run.schedule);
    if (built.error) {
        im.result.status = ExecResult::Status::Failed;
        im.result.message = built.error->message;
        return im.result;
    }
    run.graph = std::move(built.graph);
    run.done =
        std::make_unique<std::atomic<int>[]>(static_cast<std::size_t>(run.graph.nodeCount()));
    run.awaited.assign(static_cast<std::size_t>(run.graph.nodeCount()), 0);
    for (int n = 0; n < run.graph.nodeCount(); ++n) {
        run.done[static_cast<std::size_t>(n)].store(0);
        for (int k = run.graph.start_dep_begin[static_cast<std::size_t>(n)];
             k < run.graph.start_dep_begin[static_cast<std::size_t>(n) + 1]; ++k) {
            const int dep = run.graph.start_deps[static_cast<std::size_t>(k)];
            if (run.laneOf(dep) != run.laneOf(n)) {
                ++run.awaited[static_cast<std::size_t>(dep)];
            }
        }
    }
    run.loss_sum.assign(static_cast<std::size_t>(iterations), 0.0);
    run.loss_count.assign(static_cast<std::size_t>(iterations), 0);
    im.ranks_done.assign(static_cast<std::size_t>(iterations), 0);
    im.first_start.assign(static_cast<std::size_t>(iterations), -1);
    im.last_end.assign(static_cast<std::size_t>(iterations), 0);
    run.group.clear();
    for (int r = 0; r < p; ++r) {
        run.group.push_back(r);
    }
    run.fabric = std::make_unique<InProcessFabric>(p, run.options.timeout, schedule::kStreamCount);
    im.local = run.options.local_ranks;
    if (im.local.empty()) {
        im.local = run.group;
    }
    for (int r : im.local) {
        if (r < 0 || r >= p) {
            im.result.status = ExecResult::Status::Failed;
            im.result.message = "rank " + std::to_string(r) + " is not a rank of this schedule (" +
                                std::to_string(p) + " ranks)";
            return im.result;
        }
    }
    if (run.options.transport != nullptr) {
        for (int r = 0; r < p; ++r) {
            if (std::find(im.local.begin(), im.local.end(), r) == im.local.end()) {
                run.fabric->otherProcess(r);
            }
        }
        // A process runs its ranks alone: an op may wait only on ops of its own rank.
        for (int r : im.local) {
            for (int n = run.graph.node(r, 0); n < run.graph.node(r + 1, 0); ++n) {
                for (int k = run.graph.start_dep_begin[static_cast<std::size_t>(n)];
                     k < run.graph.start_dep_begin[static_cast<std::size_t>(n) + 1]; ++k) {
                    const int dep = run.graph.start_deps[static_cast<std::size_t>(k)];
                    if (run.graph.node_ref[static_cast<std::size_t>(dep)].rank != r) {
                        im.result.status = ExecResult::Status::Failed;
                        im.result.message = "rank " + std::to_string(r) +
                                            " has an op that waits on another rank's op "
                                            "directly; it cannot run in a process of its own";
                        return im.result;
                    }
                }
            }
        }
    }

    if (!run.options.backend) {
        // One BLAS thread per rank thread unless the cores outnumber the ranks.
        const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
        kernels::cpu::setBlasThreads(run.options.blas_threads > 0
                                         ? run.options.blas_threads
                                         : std::max(1, cores / static_cast<int>(im.local.size())));
    }

    run.ranks.resize(static_cast<std::size_t>(p));
    try {
        for (int r : im.local) {
            RankState& rs = run.ranks[static_cast<std::size_t>(r)];
            trace::TraceWriter* writer = run.options.writer;
            rs.tracker = std::make_unique<MemoryTracker>(
                [&im, writer, r](trace::MemoryCategory category, std::int64_t bytes) {
                    if (writer != nullptr) {
                        writer->addMemory({r, im.nowNs(), bytes, category});
                    }
                });
            if (run.options.backend) {
                rs.backend = run.options.backend(run.config, run.schedule, r, rs.tracker.get());
            } else {
                rs.backend =
                    std::make_unique<CpuRankBackend>(run.config, run.schedule, r, run.options.seed,
                                                     rs.tracker.get(), run.options.init_stddev);
            }
            rs.buffers = std::make_unique<detail::BufferStore>(rs.backend.get());
            for (int l = 0; l < schedule::kStreamCount; ++l) {
                std::unique_ptr<Comm> host =
                    run.options.transport != nullptr
                        ? run.fabric->watch(run.options.transport->comm(r, l), r, l)
                        : run.fabric->comm(r, l);
                if (!host) {
                    throw std::runtime_error("the transport has no endpoint for rank " +
                                             std::to_string(r));
                }
                rs.comm[static_cast<std::size_t>(l)] = rs.backend->comm(std::move(host), l);
            }
            const auto& ops = run.schedule.ops[static_cast<std::size_t>(r)];
            for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
                rs.lane_ops[static_cast<std::size_t>(ops[static_cast<std::size_t>(i)].stream())]
                    .push_back(i);
            }
        }
    } catch (const std::bad_alloc&) {
        im.result.status = ExecResult::Status::Failed;
        im.result.message = "out of memory while allocating the model's parameters";
        return im.result;
    } catch (const std::exception& e) {
        im.result.status = ExecResult::Status::Failed;
        im.result.message = std::string("setting up the ranks failed: ") + e.what();
        return im.result;
    }

    std::vector<std::thread> threads;
    try {
        for (int r : im.local) {
            for (int l = 0; l < schedule::kStreamCount; ++l) {
                threads.emplace_back([&im, r, l] { im.lane(r, l); });
            }
        }
    } catch (const std::system_error& e) {
        // The system gave no more threads (a limit on processes or memory): the lanes that
        // started would wait for the others forever, so the run fails and they stop.
        im.fail("cannot start the thread for " + std::to_string(threads.size() + 1) + " of " +
                std::to_string(im.local.size() * schedule::kStreamCount) + " lanes (" +
                std::to_string(schedule::kStreamCount) + " per rank): " + e.what() +
                "; run fewer ranks per process (parallel.pipeline) or raise the process limit");
    }
    for (auto& t : threads) {
        t.join();
    }
    for (int r = 0; r < p; ++r) {
        const auto& tracker = run.ranks[static_cast<std::size_t>(r)].tracker;
        im.result.peak_bytes.push_back(tracker ? tracker->peak() : -1);
    }
    im.result.status = im.failed      ? ExecResult::Status::Failed
                       : im.cancelled ? ExecResult::Status::Cancelled
                                      : ExecResult::Status::Complete;
    if (im.cancelled) {
        im.result.message = "cancelled after " + std::to_string(im.result.losses.size()) + " of " +
                            std::to_string(iterations) + " iterations";
    }
    return im.result;
}

RankModel& PipelineExecutor::rankModel(int rank) {
    auto* cpu = dynamic_cast<CpuRankBackend*>(
        impl_->run.ranks[static_cast<std::size_t>(rank)].backend.get());
    if (cpu == nullptr) {
        throw std::logic_error("PipelineExecutor::rankModel: rank " + std::to_string(rank) +
                               " does not run on the CPU backend");
    }
    return cpu->model();
}

const MemoryTracker& PipelineExecutor::memory(int rank) const {
    return *impl_->run.ranks[static_cast<std::size_t>(rank)].tracker;
}

int PipelineExecutor::ranks() const {
    return impl_->run.schedule.ranks;
}

}  // namespace pipescope::exec
