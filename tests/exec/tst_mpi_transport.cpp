// The MPI transport of multi-process runs, with real processes under mpirun: each case starts
// this program as three MPI processes in worker mode (`--worker CASE`), and every worker prints
// one line per check, "rank R: ok ..." or "rank R: FAIL ...". Messages between two ranks keep
// their order and tags, broadcasts and all-reduces give every member the result, rank 0's
// bootstrap bytes (NCCL's ids in a GPU run) reach everyone, clocks compare, an abort reaches
// every rank with its reason, a killed rank fails the others' waits at once, naming it, a
// stopped rank is named by the waits that time out on it and holds no one after that, and a
// process of another config is refused by every process.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <future>
#include <thread>
#include <unistd.h>

#include <QProcess>
#include <QtTest>

#include <pipescope/exec/mpi_transport.h>

using namespace pipescope::exec;
using std::chrono::milliseconds;

namespace {

constexpr int kWorld = 3;

int g_rank = -1;
int g_failures = 0;

void report(bool ok, const std::string& what) {
    std::printf("rank %d: %s %s\n", g_rank, ok ? "ok" : "FAIL", what.c_str());
    std::fflush(stdout);
    g_failures += ok ? 0 : 1;
}

void orderAndTags(MpiTransport& t) {
    report(t.comm((t.rank() + 1) % kWorld, 0) == nullptr, "one rank per process");
    const std::vector<float> a(1000, 1.5f), b(3, -2.0f);
    if (t.rank() == 1) {
        auto c = t.comm(1, 0);
        // Two tags, sent in one order, taken in the other; big enough for MPI's rendezvous path.
        report(c->send(2, 7, a.data(), a.size()).ok() && c->send(2, 9, b.data(), b.size()).ok() &&
                   c->send(2, 7, b.data(), b.size()).ok(),
               "sends");
    } else if (t.rank() == 2) {
        auto c = t.comm(2, 0);
        std::vector<float> got(3), big(1000);
        report(c->recv(1, 9, got.data(), 3).ok() && got[2] == -2.0f, "tag 9 first");
        report(c->recv(1, 7, big.data(), 1000).ok() && big[999] == 1.5f, "the first tag 7");
        report(c->recv(1, 7, big.data(), 1000).code == CommStatus::Code::BadCall,
               "a wrong count is named");
    }
}

void collectives(MpiTransport& t) {
    const int r = t.rank();
    const std::vector<int> all{0, 1, 2};
    auto c = t.comm(r, 2);
    std::vector<float> s{static_cast<float>(r), 1.0f};
    report(c->allReduce(all, 5, s.data(), 2, ReduceOp::Sum).ok() &&
               s == std::vector<float>{3.0f, 3.0f},
           "all-reduce sum");
    std::vector<float> m{static_cast<float>(10 - r)};
    report(c->allReduce(all, 6, m.data(), 1, ReduceOp::Max).ok() && m[0] == 10.0f,
           "all-reduce max");
    std::vector<float> b{r == 1 ? 3.25f : 0.0f};
    report(c->broadcast(all, 1, 8, b.data(), 1).ok() && b[0] == 3.25f, "broadcast from rank 1");
    std::vector<char> bytes;
    if (r == 0) {
        bytes = {'n', 'c', 'c', 'l', '\0', 'x'};
    }
    report(
        t.shareFromRank0(&bytes).ok() && bytes == std::vector<char>{'n', 'c', 'c', 'l', '\0', 'x'},
        "rank 0's bootstrap bytes");
}

void clocks(MpiTransport& t) {
    const ClockOffset o = t.measureClockOffset(8);
    if (t.rank() == 0) {
        report(o.samples == 0, "rank 0 is the reference");
        return;
    }
    // One machine, one clock: the offset is within the round trip.
    report(o.samples == 8 && o.rtt_ns > 0 && std::llabs(o.offset_ns) <= o.rtt_ns,
           "offset " + std::to_string(o.offset_ns) + " ns within the round trip " +
               std::to_string(o.rtt_ns) + " ns");
}

void abortReachesEveryRank(MpiTransport& t) {
    if (t.rank() == 1) {
        std::this_thread::sleep_for(milliseconds(100));
        t.abort("out of memory in F3");
        report(true, "aborted");
    } else if (t.rank() == 2) {
        std::vector<float> x(1);
        const CommStatus st = t.comm(2, 0)->recv(0, 1, x.data(), 1);  // never sent
        report(st.code == CommStatus::Code::Aborted &&
                   st.message.find("rank 1 stopped: out of memory in F3") != std::string::npos,
               "the wait ends with: " + st.message);
    } else {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (t.problem().empty() && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(milliseconds(10));
        }
        report(t.problem().find("rank 1 stopped") != std::string::npos,
               "rank 0 knows: " + t.problem());
    }
}

void goneRankIsNamed(MpiTransport& t) {
    if (t.rank() == 1) {
        std::this_thread::sleep_for(milliseconds(200));
        std::raise(SIGKILL);  // a crash: no finish, no goodbye
    }
    // mpirun ends the job soon after a rank dies (SIGTERM, then SIGKILL): report first, as the
    // runner finishes its trace first.
    std::signal(SIGTERM, SIG_IGN);
    const auto start = std::chrono::steady_clock::now();
    std::vector<float> x(1);
    const CommStatus st = t.comm(t.rank(), 0)->recv(1, 1, x.data(), 1);
    const auto waited =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    // At once (the watch looks every 100 ms), not at the 20 s timeout, and before mpirun's
    // own SIGTERM to the survivors.
    report(st.code == CommStatus::Code::Aborted &&
               st.message.find("rank 1 is gone") != std::string::npos && waited.count() < 3000,
           "after " + std::to_string(waited.count()) + " ms: " + st.message);
    // (Rank 1 at least: the other survivor may have left already too.)
    const std::vector<int> gone = t.goneRanks();
    report(std::find(gone.begin(), gone.end(), 1) != gone.end() &&
               std::find(gone.begin(), gone.end(), t.rank()) == gone.end(),
           "goneRanks names rank 1");
}

// Rank 1 stops (SIGSTOP) without going away. The others' waits on it time out naming it, and
// after that failure neither finish() nor leaving MPI (MPI_Finalize waits for every process)
// waits for it; mpirun then ends the job.
void stoppedRankHoldsNoOne(std::unique_ptr<MpiTransport>& t) {
    if (t->rank() == 1) {
        std::raise(SIGSTOP);
        return;  // not reached before mpirun's SIGKILL
    }
    // mpirun ends the job once the first survivor has left (SIGTERM, then SIGKILL): each
    // reports first, and stays a while for the other to do the same.
    std::signal(SIGTERM, SIG_IGN);
    std::vector<float> x(1);
    const CommStatus st = t->comm(t->rank(), 0)->recv(1, 1, x.data(), 1);
    // Its own timeout, or the other survivor's abort with the same reason when that one's
    // wait began first.
    report((st.code == CommStatus::Code::Timeout || st.code == CommStatus::Code::Aborted) &&
               st.message.find("from rank 1") != std::string::npos,
           "the wait ends with: " + st.message);
    t->abort(st.message);  // as a failed run does
    const auto start = std::chrono::steady_clock::now();
    t->finish();
    t.reset();
    const auto took =
        std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - start);
    // Below the 2 s timeout another wait for rank 1 would take (the other survivor's Finish,
    // which it waits for, may come late on a loaded machine).
    report(took.count() < 1900, "finished and left MPI in " + std::to_string(took.count()) + " ms");
}

int worker(const std::string& which) {
    const std::uint64_t key = which == "stranger" &&
                                      std::getenv("OMPI_COMM_WORLD_RANK") != nullptr &&
                                      std::string(std::getenv("OMPI_COMM_WORLD_RANK")) == "2"
                                  ? 43
                                  : 42;
    const milliseconds timeout(which == "gone" ? 20000 : which == "stopped" ? 2000 : 10000);
    std::string error;
    auto t = MpiTransport::start(key, timeout, &error);
    if (which == "stranger") {
        g_rank = std::atoi(std::getenv("OMPI_COMM_WORLD_RANK"));
        report(!t && error.find("rank 2 of this MPI job run another config") != std::string::npos,
               "refused: " + error);
        return g_failures == 0 ? 0 : 1;
    }
    if (!t) {
        std::printf("FAIL: %s\n", error.c_str());
        return 1;
    }
    g_rank = t->rank();
    report(t->world() == kWorld && t->describe().find("MPI (") == 0, t->describe());
    if (which == "order") {
        orderAndTags(*t);
    } else if (which == "collectives") {
        collectives(*t);
    } else if (which == "clocks") {
        clocks(*t);
    } else if (which == "abort") {
        abortReachesEveryRank(*t);
    } else if (which == "stopped") {
        stoppedRankHoldsNoOne(t);
        std::fflush(stdout);
        std::this_thread::sleep_for(std::chrono::seconds(2));
        _exit(g_failures == 0 ? 0 : 1);
    } else if (which == "gone") {
        goneRankIsNamed(*t);
        std::fflush(stdout);
        // Stay until the other survivor has seen rank 1 go (it would see this one go too), or
        // until mpirun's SIGKILL. A job with a dead rank cannot finalize.
        std::this_thread::sleep_for(std::chrono::seconds(2));
        _exit(g_failures == 0 ? 0 : 1);
    } else {
        report(false, "no case " + which);
    }
    t->finish();
    t.reset();
    return g_failures == 0 ? 0 : 1;
}

}  // namespace

class TstMpiTransport : public QObject {
    Q_OBJECT

  private slots:
    // The oks each rank reports, its transport's description included.
    void messagesKeepOrderAndTags() { runCase("order", {2, 3, 5}); }
    void collectivesAndBootstrap() { runCase("collectives", {5, 5, 5}); }
    void clocksCompare() { runCase("clocks", {2, 2, 2}); }
    void abortReachesEveryRank() { runCase("abort", {2, 2, 2}); }
    void goneRankIsNamed() { runCase("gone", {3, 1, 3}, false); }
    void stoppedRankHoldsNoOne() { runCase("stopped", {3, 1, 3}, false); }
    void anotherConfigIsRefused() { runCase("stranger", {1, 1, 1}); }

  private:
    // Runs case `which` as kWorld processes: rank r must report oks[r] oks and nobody a FAIL.
    // `clean`: the job itself succeeds (not so when a rank was killed).
    static void runCase(const QString& which, const std::vector<int>& oks, bool clean = true) {
        QProcess p;
        p.setProcessChannelMode(QProcess::MergedChannels);
        p.start(QStringLiteral(PIPESCOPE_MPIEXEC),
                {"--allow-run-as-root", "--oversubscribe", "-np", QString::number(kWorld),
                 QCoreApplication::applicationFilePath(), "--worker", which});
        QVERIFY2(p.waitForFinished(60000), "mpirun did not finish in 60 s");
        const QString out = QString::fromUtf8(p.readAll());
        QVERIFY2(!out.contains("FAIL"), qPrintable(out));
        for (int r = 0; r < kWorld; ++r) {
            const auto got = out.count(QStringLiteral("rank %1: ok").arg(r));
            QVERIFY2(got == oks[static_cast<std::size_t>(r)],
                     qPrintable(QStringLiteral("rank %1: %2 oks\n%3").arg(r).arg(got).arg(out)));
        }
        if (clean) {
            QVERIFY2(p.exitStatus() == QProcess::NormalExit && p.exitCode() == 0, qPrintable(out));
        }
    }
};

int main(int argc, char** argv) {
    if (argc == 3 && std::strcmp(argv[1], "--worker") == 0) {
        return worker(argv[2]);
    }
    QCoreApplication app(argc, argv);
    TstMpiTransport t;
    return QTest::qExec(&t, argc, argv);
}

#include "tst_mpi_transport.moc"
