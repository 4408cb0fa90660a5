// The interpreter's side of asynchronous lanes (rank_backend.h: asyncLanes, waitFor, endOp's
// `awaited`), checked on the CPU, where no GPU can show a race: a backend that claims
// asynchronous lanes wraps the CPU backend and runs a race detector over every buffer the
// interpreter hands to it or to its communication.
//
// The detector models what the CUDA backend's events give (lane_events.h): each lane has a
// vector clock; an op that others wait for publishes its lane's clock at endOp, and waitFor
// joins it into the waiting lane's clock. Every buffer access (reads through const pointers,
// writes through the others, both for collectives) is stamped with its lane's clock; a write
// must follow every earlier access by another lane, and a read the last write. A freed buffer's
// history ends with it (the backend fences freed memory on every lane).
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <QtTest>

#include <pipescope/exec/cpu_rank_backend.h>
#include <pipescope/exec/pipeline_executor.h>
#include <pipescope/exec/socket_transport.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>

#include "config_fixtures.h"
#include "testsupport.h"

using namespace pipescope;

namespace {

constexpr int kLanes = schedule::kStreamCount;
using Clock = std::array<long, kLanes>;

// One rank's lanes, their clocks, the published clocks of ended ops and the history of every
// live buffer.
class RaceDetector {
  public:
    void begin(int lane) {
        std::lock_guard<std::mutex> lock(m_);
        ++clock_[idx(lane)][idx(lane)];
    }
    void ended(int lane, std::uint64_t op, int awaited) {
        std::lock_guard<std::mutex> lock(m_);
        if (awaited > 0) {
            published_[op] = {clock_[idx(lane)], awaited};
        }
    }
    void waitFor(int lane, std::uint64_t op) {
        std::lock_guard<std::mutex> lock(m_);
        auto it = published_.find(op);
        if (it == published_.end()) {
            problem("lane " + std::to_string(lane) + " waits for op " + std::to_string(op) +
                    ", which did not end with waiters");
            return;
        }
        Clock& c = clock_[idx(lane)];
        for (int l = 0; l < kLanes; ++l) {
            c[idx(l)] = std::max(c[idx(l)], it->second.clock[idx(l)]);
        }
        ++waits_;
        if (--it->second.left == 0) {
            published_.erase(it);
        }
    }
    void allocated(const float* base, std::int64_t floats) {
        std::lock_guard<std::mutex> lock(m_);
        live_[base] = Live{floats, {}, {}};
    }
    void freed(const float* base) {
        std::lock_guard<std::mutex> lock(m_);
        live_.erase(base);
    }
    void access(int lane, const float* p, bool write, const char* what) {
        if (p == nullptr) {
            return;
        }
        std::lock_guard<std::mutex> lock(m_);
        auto it = live_.upper_bound(p);
        if (it == live_.begin()) {
            return;  // not an interpreter buffer (a backend's own)
        }
        --it;
        if (p >= it->first + std::max<std::int64_t>(it->second.floats, 1)) {
            return;
        }
        Live& b = it->second;
        const Clock& now = clock_[idx(lane)];
        const auto ordered = [&](const Stamp& s) {
            return s.lane == lane || s.lane < 0 || s.clock[idx(s.lane)] <= now[idx(s.lane)];
        };
        ++accesses_;
        if (!ordered(b.last_write)) {
            problem(std::string(what) + " on lane " + std::to_string(lane) +
                    " is not ordered after the write on lane " + std::to_string(b.last_write.lane));
        }
        if (write) {
            for (const Stamp& r : b.reads) {
                if (!ordered(r)) {
                    problem(std::string(what) + " on lane " + std::to_string(lane) +
                            " writes what lane " + std::to_string(r.lane) + " may still read");
                }
            }
            b.reads.clear();
            b.last_write = {lane, now};
        } else {
            auto r = std::find_if(b.reads.begin(), b.reads.end(),
                                  [&](const Stamp& s) { return s.lane == lane; });
            if (r == b.reads.end()) {
                b.reads.push_back({lane, now});
            } else {
                r->clock = now;
            }
        }
    }

    std::vector<std::string> problems() const {
        std::lock_guard<std::mutex> lock(m_);
        return problems_;
    }
    long waits() const {
        std::lock_guard<std::mutex> lock(m_);
        return waits_;
    }
    long accesses() const {
        std::lock_guard<std::mutex> lock(m_);
        return accesses_;
    }
    std::size_t unclaimed() const {
        std::lock_guard<std::mutex> lock(m_);
        return published_.size();
    }

  private:
    struct Stamp {
        int lane = -1;
        Clock clock{};
    };
    struct Live {
        std::int64_t floats = 0;
        Stamp last_write;
        std::vector<Stamp> reads;
    };
    struct Published {
        Clock clock{};
        int left = 0;
    };
    static std::size_t idx(int i) { return static_cast<std::size_t>(i); }
    void problem(std::string what) {
        if (problems_.size() < 20) {
            problems_.push_back(std::move(what));
        }
    }

    mutable std::mutex m_;
    std::array<Clock, kLanes> clock_{};
    std::map<std::uint64_t, Published> published_;
    std::map<const float*, Live> live_;
    std::vector<std::string> problems_;
    long waits_ = 0, accesses_ = 0;
};

// A lane's communication, its buffers seen by the detector.
class CheckedComm final : public exec::Comm {
  public:
    CheckedComm(std::unique_ptr<exec::Comm> inner, RaceDetector* d, int lane)
        : inner_(std::move(inner)), d_(d), lane_(lane) {}
    int rank() const override { return inner_->rank(); }
    int size() const override { return inner_->size(); }
    void setActivity(std::string what) override { inner_->setActivity(std::move(what)); }
    exec::CommStatus send(int peer, std::uint64_t tag, const float* data,
                          std::size_t count) override {
        d_->access(lane_, data, false, "send");
        return inner_->send(peer, tag, data, count);
    }
    exec::CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        d_->access(lane_, data, true, "recv");
        return inner_->recv(peer, tag, data, count);
    }
    exec::CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag,
                               float* data, std::size_t count) override {
        d_->access(lane_, data, true, "broadcast");
        return inner_->broadcast(group, root, tag, data, count);
    }
    exec::CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                               std::size_t count, exec::ReduceOp op) override {
        d_->access(lane_, data, true, "all-reduce");
        if (fail_code_ && --fail_countdown_ == 0) {
            // A transport's own call failing (NCCL, CUDA) before it meets its peers: it says so
            // and nothing else reports it.
            return exec::CommStatus::error(*fail_code_, "injected transport failure");
        }
        return inner_->allReduce(group, tag, data, count, op);
    }
    // The `nth` all-reduce on this lane returns `code` instead of reducing.
    void failAllReduce(int nth, exec::CommStatus::Code code) {
        fail_countdown_ = nth;
        fail_code_ = code;
    }

  private:
    std::unique_ptr<exec::Comm> inner_;
    RaceDetector* d_;
    int lane_;
    int fail_countdown_ = 0;
    std::optional<exec::CommStatus::Code> fail_code_;
};

// How the interpreter bracketed a rank's ops: every beginOp is followed by one endOp or one
// abandonOp (an op that threw), on the same thread and lane.
struct OpCounts {
    std::atomic<int> begun{0}, ended{0}, abandoned{0}, stray_abandons{0};
};

// The CPU backend, claiming asynchronous lanes, every pointer checked on the calling lane.
class AsyncCheckedBackend final : public exec::RankBackend {
  public:
    AsyncCheckedBackend(std::unique_ptr<exec::CpuRankBackend> cpu, RaceDetector* d)
        : cpu_(std::move(cpu)), d_(d) {}

    void beginOp(int lane, std::uint64_t op_id, const std::string& label) override {
        QVERIFY2(t_open_op == 0, "beginOp while the thread's previous op is still open");
        t_open_op = op_id;
        counts_->begun.fetch_add(1);
        t_lane = lane;
        t_op = op_id;
        t_issued = false;
        d_->begin(lane);
        cpu_->beginOp(lane, op_id, label);
    }
    void endOp(int lane, int awaited) override {
        QVERIFY2(t_open_op == t_op, "endOp without its beginOp");
        t_open_op = 0;
        counts_->ended.fetch_add(1);
        cpu_->endOp(lane, awaited);
        d_->ended(lane, t_op, awaited);
    }
    void abandonOp(int lane) noexcept override {
        if (t_open_op != t_op || lane != t_lane) {
            counts_->stray_abandons.fetch_add(1);
        }
        t_open_op = 0;
        counts_->abandoned.fetch_add(1);
        cpu_->abandonOp(lane);
    }
    // Where to count how the interpreter brackets this rank's ops (outlives the backend).
    void setOpCounts(OpCounts* counts) { counts_ = counts; }
    bool asyncLanes() const override { return true; }
    void waitFor(int lane, std::uint64_t op_id) override {
        QVERIFY2(lane == t_lane, "waitFor names another lane than its op's");
        QVERIFY2(!t_issued, "waitFor after the op issued work");
        d_->waitFor(lane, op_id);
    }

    exec::Buffer allocate(std::int64_t floats, trace::MemoryCategory category) override {
        exec::Buffer b = cpu_->allocate(floats, category);
        float* p = b.memory.release();
        auto inner = b.memory.get_deleter();
        d_->allocated(p, floats);
        b.memory = {p, [this, inner](float* q) {
                        d_->freed(q);
                        inner(q);
                    }};
        return b;
    }
    void copy(float* dst, const float* src, std::int64_t floats) override {
        r(src, "copy");
        w(dst, "copy");
        cpu_->copy(dst, src, floats);
    }
    void fill(float* dst, std::int64_t floats, float value) override {
        w(dst, "fill");
        cpu_->fill(dst, floats, value);
    }
    void scaleRows(float* x, const float* g, std::int64_t rows, std::int64_t cols) override {
        r(g, "scaleRows");
        w(x, "scaleRows");
        cpu_->scaleRows(x, g, rows, cols);
    }
    void rescaleShardSum(float* sum, const float* local_max, const float* global_max,
                         std::int64_t rows) override {
        r(local_max, "rescaleShardSum");
        r(global_max, "rescaleShardSum");
        w(sum, "rescaleShardSum");
        cpu_->rescaleShardSum(sum, local_max, global_max, rows);
    }
    void basisCombine(const float* a, const float* g, const float* row_max, const float* row_sum,
                      const float* global_max, const float* global_sum, float* out,
                      std::int64_t rows, std::int64_t cols) override {
        for (const float* p : {a, g, row_max, row_sum, global_max, global_sum}) {
            r(p, "basisCombine");
        }
        w(out, "basisCombine");
        cpu_->basisCombine(a, g, row_max, row_sum, global_max, global_sum, out, rows, cols);
    }
    double meanLoss(const float* global_max, const float* global_sum, const float* target_logit,
                    std::int64_t rows) override {
        for (const float* p : {global_max, global_sum, target_logit}) {
            r(p, "meanLoss");
        }
        return cpu_->meanLoss(global_max, global_sum, target_logit, rows);
    }

    int chunkCount() const override { return cpu_->chunkCount(); }
    int chunkPosition(int chunk) const override { return cpu_->chunkPosition(chunk); }
    int layerCount(int chunk) const override { return cpu_->layerCount(chunk); }
    bool hasInput() const override { return cpu_->hasInput(); }
    bool hasOutput() const override { return cpu_->hasOutput(); }
    // Counts abort() calls in `aborts`; throws from layerForward of `fail_microbatch`.
    void setAbortCount(std::atomic<int>* aborts) { aborts_ = aborts; }
    void setFailingMicrobatch(int microbatch) { fail_microbatch_ = microbatch; }
    void abort() override {
        if (aborts_ != nullptr) {
            aborts_->fetch_add(1);
        }
        cpu_->abort();
    }

    void layerForward(int chunk, int layer, int microbatch, const float* x, float* y) override {
        if (microbatch == fail_microbatch_) {
            throw std::runtime_error("injected failure");
        }
        r(x, "layerForward");
        w(y, "layerForward");
        cpu_->layerForward(chunk, layer, microbatch, x, y);
    }
    void layerBackward(int chunk, int layer, int microbatch, const float* dy, float* dx,
                       bool whole) override {
        r(dy, "layerBackward");
        w(dx, "layerBackward");
        cpu_->layerBackward(chunk, layer, microbatch, dy, dx, whole);
    }
    void layerBackwardWeight(int chunk, int layer, int microbatch) override {
        t_issued = true;
        cpu_->layerBackwardWeight(chunk, layer, microbatch);
    }
    void finalNormForward(int chunk, int microbatch, const float* x, float* y) override {
        r(x, "finalNormForward");
        w(y, "finalNormForward");
        cpu_->finalNormForward(chunk, microbatch, x, y);
    }
    void finalNormBackward(int chunk, int microbatch, const float* dy, float* dx) override {
        r(dy, "finalNormBackward");
        w(dx, "finalNormBackward");
        cpu_->finalNormBackward(chunk, microbatch, dy, dx);
    }
    void inputForward(const exec::TokenRows& tokens, float* out) override {
        w(out, "inputForward");
        cpu_->inputForward(tokens, out);
    }
    void inputBackward(const exec::TokenRows& tokens, const float* dout) override {
        r(dout, "inputBackward");
        cpu_->inputBackward(tokens, dout);
    }
    void outputForwardStats(int microbatch, const float* x, const exec::TokenRows& tokens,
                            float* row_max, float* row_sum, float* target_logit) override {
        r(x, "outputForwardStats");
        for (float* p : {row_max, row_sum, target_logit}) {
            w(p, "outputForwardStats");
        }
        cpu_->outputForwardStats(microbatch, x, tokens, row_max, row_sum, target_logit);
    }
    void outputGradientBasis(int microbatch, const float* row_max, const float* row_sum, float* a,
                             float* g) override {
        r(row_max, "outputGradientBasis");
        r(row_sum, "outputGradientBasis");
        w(a, "outputGradientBasis");
        w(g, "outputGradientBasis");
        cpu_->outputGradientBasis(microbatch, row_max, row_sum, a, g);
    }
    void outputBackward(int microbatch, const float* global_max, const float* global_sum,
                        const float* dloss, float* dx_part) override {
        for (const float* p : {global_max, global_sum, dloss}) {
            r(p, "outputBackward");
        }
        w(dx_part, "outputBackward");
        cpu_->outputBackward(microbatch, global_max, global_sum, dloss, dx_part);
    }
    void zeroGrads() override {
        t_issued = true;
        cpu_->zeroGrads();
    }
    void optimizerStep(const kernels::cpu::AdamWConfig& config, std::int64_t step) override {
        t_issued = true;
        cpu_->optimizerStep(config, step);
    }
    std::unique_ptr<exec::Comm> comm(std::unique_ptr<exec::Comm> host, int lane) override {
        auto c = std::make_unique<CheckedComm>(cpu_->comm(std::move(host), lane), d_, lane);
        if (comm_fail_code_) {
            c->failAllReduce(comm_fail_nth_, *comm_fail_code_);
        }
        return c;
    }
    // Every lane's `nth` all-reduce fails with `code` (CheckedComm::failAllReduce).
    void setFailingAllReduce(int nth, exec::CommStatus::Code code) {
        comm_fail_nth_ = nth;
        comm_fail_code_ = code;
    }

  private:
    void r(const float* p, const char* what) {
        t_issued = true;
        d_->access(t_lane, p, false, what);
    }
    void w(const float* p, const char* what) {
        t_issued = true;
        d_->access(t_lane, p, true, what);
    }

    static thread_local int t_lane;
    static thread_local std::uint64_t t_op;
    static thread_local bool t_issued;
    static thread_local std::uint64_t t_open_op;  // begun and neither ended nor abandoned
    std::unique_ptr<exec::CpuRankBackend> cpu_;
    OpCounts own_counts_;
    OpCounts* counts_ = &own_counts_;
    RaceDetector* d_;
    std::atomic<int>* aborts_ = nullptr;
    int fail_microbatch_ = -1;
    int comm_fail_nth_ = 0;
    std::optional<exec::CommStatus::Code> comm_fail_code_;
};
thread_local int AsyncCheckedBackend::t_lane = -1;
thread_local std::uint64_t AsyncCheckedBackend::t_op = 0;
thread_local bool AsyncCheckedBackend::t_issued = false;
thread_local std::uint64_t AsyncCheckedBackend::t_open_op = 0;

// A CPU backend for `rank` behind the asynchronous-lane checks, seen by `detector`.
std::unique_ptr<AsyncCheckedBackend> checkedBackend(const schedule::Config& config,
                                                    const schedule::Schedule& sch, int rank,
                                                    exec::MemoryTracker* tracker,
                                                    const exec::ExecOptions& eo,
                                                    RaceDetector* detector) {
    return std::make_unique<AsyncCheckedBackend>(
        std::make_unique<exec::CpuRankBackend>(config, sch, rank, eo.seed, tracker, eo.init_stddev),
        detector);
}

std::optional<schedule::Config> tinyConfig(int p, const std::string& sched,
                                           const std::string& vocab) {
    return test::tinyTrainingConfig(p, sched, vocab, 16, 8, 4, 2);
}

}  // namespace

class TstExecAsyncLanes : public QObject {
    Q_OBJECT

  private slots:
    void everyHandOffIsOrdered_data();
    void everyHandOffIsOrdered();
    void aMissingWaitIsSeen();
    void failureAndCancelAbortEveryBackend();
    void aTransportFailureFailsTheRun_data();
    void aTransportFailureFailsTheRun();
    void aFailureReachesTheOtherProcesses();
};

void TstExecAsyncLanes::everyHandOffIsOrdered_data() {
    QTest::addColumn<int>("p");
    QTest::addColumn<QString>("sched");
    QTest::addColumn<QString>("vocab");
    for (int p : {2, 4}) {
        for (const char* sched : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "v-half"}) {
            for (const char* vocab :
                 {"naive", "redistributed", "interlaced", "vocab-1", "vocab-2"}) {
                const auto c = tinyConfig(p, sched, vocab);
                if (c && schedule::generateSchedule(*c).schedule) {
                    QTest::addRow("p%d %s %s", p, sched, vocab) << p << sched << vocab;
                }
            }
        }
    }
}

void TstExecAsyncLanes::everyHandOffIsOrdered() {
    QFETCH(int, p);
    QFETCH(QString, sched);
    QFETCH(QString, vocab);
    const auto c = tinyConfig(p, sched.toStdString(), vocab.toStdString());
    QVERIFY(c);
    const auto s = *schedule::generateSchedule(*c).schedule;

    exec::ExecOptions plain;
    plain.iterations = 2;
    plain.seed = c->run.seed;
    const auto reference = exec::PipelineExecutor(*c, s, plain).run();
    QCOMPARE(reference.status, exec::ExecResult::Status::Complete);

    std::vector<std::unique_ptr<RaceDetector>> detectors;
    for (int r = 0; r < p; ++r) {
        detectors.push_back(std::make_unique<RaceDetector>());
    }
    exec::ExecOptions eo = plain;
    eo.backend = [&](const schedule::Config& config, const schedule::Schedule& sch, int rank,
                     exec::MemoryTracker* tracker) -> std::unique_ptr<exec::RankBackend> {
        return checkedBackend(config, sch, rank, tracker, eo,
                              detectors[static_cast<std::size_t>(rank)].get());
    };
    const auto checked = exec::PipelineExecutor(*c, s, eo).run();
    QCOMPARE(checked.status, exec::ExecResult::Status::Complete);
    QCOMPARE(checked.losses.size(), reference.losses.size());
    for (std::size_t i = 0; i < checked.losses.size(); ++i) {
        // The same arithmetic; only the order in which micro-batch losses are summed varies.
        QVERIFY(std::abs(checked.losses[i] - reference.losses[i]) <=
                1e-7 * std::abs(reference.losses[i]));
    }
    long waits = 0, accesses = 0;
    for (const auto& d : detectors) {
        for (const std::string& problem : d->problems()) {
            qWarning("%s", problem.c_str());
        }
        QVERIFY(d->problems().empty());
        QCOMPARE(d->unclaimed(), std::size_t(0));  // every announced waiter came
        waits += d->waits();
        accesses += d->accesses();
    }
    QVERIFY(waits > 0);  // sends and receives run on the communication lane
    QVERIFY(accesses > 0);
}

void TstExecAsyncLanes::failureAndCancelAbortEveryBackend() {
    // A backend's own communication (NCCL) may wait for a peer that will never come: a failing
    // op on one rank, or a cancel, reaches every rank's backend once; a run that completes
    // aborts nothing. An op that throws is abandoned (its profiler ranges popped), not left open.
    const int p = 4;
    const auto c = tinyConfig(p, "1f1b", "vocab-2");
    QVERIFY(c);
    const auto s = *schedule::generateSchedule(*c).schedule;
    enum class How { Complete, FailOnRank2, Cancel };
    for (const How how : {How::Complete, How::FailOnRank2, How::Cancel}) {
        std::vector<std::unique_ptr<RaceDetector>> detectors;
        std::vector<std::atomic<int>> aborts(p);
        std::vector<OpCounts> counts(p);
        for (int r = 0; r < p; ++r) {
            detectors.push_back(std::make_unique<RaceDetector>());
        }
        std::atomic<bool> cancel{false};
        exec::ExecOptions eo;
        eo.iterations = how == How::Cancel ? 1000 : 2;
        eo.seed = c->run.seed;
        eo.cancel = &cancel;
        eo.on_iteration = [&](int it, double, double) {
            if (how == How::Cancel && it == 1) {
                cancel.store(true);
            }
        };
        eo.backend = [&](const schedule::Config& config, const schedule::Schedule& sch, int rank,
                         exec::MemoryTracker* tracker) -> std::unique_ptr<exec::RankBackend> {
            auto b = checkedBackend(config, sch, rank, tracker, eo,
                                    detectors[static_cast<std::size_t>(rank)].get());
            b->setAbortCount(&aborts[static_cast<std::size_t>(rank)]);
            b->setOpCounts(&counts[static_cast<std::size_t>(rank)]);
            if (how == How::FailOnRank2 && rank == 2) {
                b->setFailingMicrobatch(1);
            }
            return b;
        };
        const auto result = exec::PipelineExecutor(*c, s, eo).run();
        const int expected = how == How::Complete ? 0 : 1;
        QCOMPARE(result.status, how == How::Complete      ? exec::ExecResult::Status::Complete
                                : how == How::FailOnRank2 ? exec::ExecResult::Status::Failed
                                                          : exec::ExecResult::Status::Cancelled);
        if (how == How::FailOnRank2) {
            QVERIFY2(result.message.find("injected failure") != std::string::npos,
                     result.message.c_str());
        }
        for (int r = 0; r < p; ++r) {
            QCOMPARE(aborts[static_cast<std::size_t>(r)].load(), expected);
            const auto& n = counts[static_cast<std::size_t>(r)];
            QVERIFY(n.begun.load() > 0);
            QCOMPARE(n.ended.load() + n.abandoned.load(), n.begun.load());
            QCOMPARE(n.stray_abandons.load(), 0);
            if (how == How::Complete) {
                QCOMPARE(n.abandoned.load(), 0);
            }
        }
        if (how == How::FailOnRank2) {
            QVERIFY(counts[2].abandoned.load() >= 1);  // the op that threw
        }
    }
}

// A transport whose own call fails (NCCL and CUDA errors come back as Failed) fails the run with
// its message and stops every rank. An abort with no failure recorded before it fails the run
// too: nothing may end as a complete run with iterations missing.
void TstExecAsyncLanes::aTransportFailureFailsTheRun_data() {
    QTest::addColumn<int>("code");
    QTest::newRow("failed") << int(exec::CommStatus::Code::Failed);
    QTest::newRow("aborted, nothing recorded") << int(exec::CommStatus::Code::Aborted);
}

void TstExecAsyncLanes::aTransportFailureFailsTheRun() {
    QFETCH(int, code);
    const int p = 4;
    const auto c = tinyConfig(p, "1f1b", "vocab-2");
    QVERIFY(c);
    const auto s = *schedule::generateSchedule(*c).schedule;
    std::vector<std::unique_ptr<RaceDetector>> detectors;
    std::vector<std::atomic<int>> aborts(p);
    for (int r = 0; r < p; ++r) {
        detectors.push_back(std::make_unique<RaceDetector>());
    }
    exec::ExecOptions eo;
    eo.iterations = 3;
    eo.seed = c->run.seed;
    eo.backend = [&](const schedule::Config& config, const schedule::Schedule& sch, int rank,
                     exec::MemoryTracker* tracker) -> std::unique_ptr<exec::RankBackend> {
        auto b = checkedBackend(config, sch, rank, tracker, eo,
                                detectors[static_cast<std::size_t>(rank)].get());
        b->setAbortCount(&aborts[static_cast<std::size_t>(rank)]);
        if (rank == 1) {
            b->setFailingAllReduce(3, static_cast<exec::CommStatus::Code>(code));
        }
        return b;
    };
    const auto result = exec::PipelineExecutor(*c, s, eo).run();
    QCOMPARE(result.status, exec::ExecResult::Status::Failed);
    QVERIFY2(result.message.find("injected transport failure") != std::string::npos,
             result.message.c_str());
    QVERIFY(result.losses.size() < 3);
    for (int r = 0; r < p; ++r) {
        QCOMPARE(aborts[static_cast<std::size_t>(r)].load(), 1);
    }
}

void TstExecAsyncLanes::aFailureReachesTheOtherProcesses() {
    // One rank per "process" (executors on threads of this test, joined by the socket transport
    // as separate processes are): rank 1's op fails. Rank 0, waiting on rank 1, stops at once
    // with rank 1's reason, not after the transport's timeout with a message about a wait.
    const int p = 2;
    const auto c = tinyConfig(p, "1f1b", "vocab-2");
    QVERIFY(c);
    const auto s = *schedule::generateSchedule(*c).schedule;
    const auto timeout = std::chrono::milliseconds(20000);
    const exec::Rendezvous at{"127.0.0.1", test::freeLoopbackPort()};
    std::vector<std::future<std::unique_ptr<exec::SocketTransport>>> connecting;
    for (int r = 0; r < p; ++r) {
        connecting.push_back(std::async(std::launch::async, [&, r] {
            std::string error;
            return exec::SocketTransport::connect(r, p, at, 42, timeout,
                                                  std::chrono::milliseconds(10000), &error);
        }));
    }
    std::vector<std::unique_ptr<exec::SocketTransport>> world;
    for (auto& f : connecting) {
        world.push_back(f.get());
        QVERIFY(world.back());
    }
    std::vector<std::unique_ptr<RaceDetector>> detectors;
    for (int r = 0; r < p; ++r) {
        detectors.push_back(std::make_unique<RaceDetector>());
    }
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::future<exec::ExecResult>> runs;
    for (int r = 0; r < p; ++r) {
        runs.push_back(std::async(std::launch::async, [&, r] {
            exec::ExecOptions eo;
            eo.iterations = 3;
            eo.seed = c->run.seed;
            eo.local_ranks = {r};
            eo.transport = world[static_cast<std::size_t>(r)].get();
            eo.backend = [&](const schedule::Config& config, const schedule::Schedule& sch,
                             int rank,
                             exec::MemoryTracker* tracker) -> std::unique_ptr<exec::RankBackend> {
                auto b = checkedBackend(config, sch, rank, tracker, eo,
                                        detectors[static_cast<std::size_t>(rank)].get());
                if (rank == 1) {
                    b->setFailingMicrobatch(1);
                }
                return b;
            };
            auto result = exec::PipelineExecutor(*c, s, eo).run();
            world[static_cast<std::size_t>(r)]->finish();
            return result;
        }));
    }
    const exec::ExecResult r0 = runs[0].get();
    const exec::ExecResult r1 = runs[1].get();
    const auto took = std::chrono::steady_clock::now() - started;
    QCOMPARE(r1.status, exec::ExecResult::Status::Failed);
    QVERIFY2(r1.message.find("injected failure") != std::string::npos, r1.message.c_str());
    QCOMPARE(r0.status, exec::ExecResult::Status::Failed);
    QVERIFY2(r0.message.find("injected failure") != std::string::npos, r0.message.c_str());
    QVERIFY2(took < timeout / 2,
             qPrintable(QString("%1 ms").arg(
                 std::chrono::duration_cast<std::chrono::milliseconds>(took).count())));
}

void TstExecAsyncLanes::aMissingWaitIsSeen() {
    // The detector itself: a receive on the communication lane read by the compute lane without
    // a wait is a race; with the wait it is not.
    RaceDetector d;
    std::vector<float> buffer(8);
    d.allocated(buffer.data(), 8);
    const int comm = static_cast<int>(schedule::Stream::P2P);
    const int compute = static_cast<int>(schedule::Stream::Compute);
    d.begin(comm);
    d.access(comm, buffer.data(), true, "recv");
    d.ended(comm, 1, 1);
    d.begin(compute);
    d.access(compute, buffer.data() + 4, false, "layerForward");
    QCOMPARE(d.problems().size(), std::size_t(1));
    d.begin(compute);
    d.waitFor(compute, 1);
    d.access(compute, buffer.data(), false, "layerForward");
    QCOMPARE(d.problems().size(), std::size_t(1));
    // A write on the communication lane while compute may still read: a race again.
    d.begin(comm);
    d.access(comm, buffer.data(), true, "recv");
    QCOMPARE(d.problems().size(), std::size_t(2));
}

QTEST_GUILESS_MAIN(TstExecAsyncLanes)
#include "tst_exec_async_lanes.moc"
