// The critical path recovered from a trace's ops: a hand-made two-rank iteration whose path,
// gaps and waits are known, and the edge cases (no ops, another iteration, device spans).
#include <QtTest>

#include <pipescope/analysis/critical_path.h>

using namespace pipescope;
using analysis::PathCategory;
using trace::OpKind;
using trace::OpRecord;

namespace {

OpRecord op(int rank, int index, OpKind kind, int microbatch, std::int64_t start, std::int64_t end,
            int peer = -1) {
    OpRecord o;
    o.rank = rank;
    o.op_index = index;
    o.kind = kind;
    o.microbatch = microbatch;
    o.start_ns = start;
    o.end_ns = end;
    o.peer = peer;
    o.lane = kind == OpKind::F || kind == OpKind::B ? trace::Lane::Compute : trace::Lane::Comm;
    o.source = trace::Source::Host;
    return o;
}

// Rank 0 runs F0, sends it, waits for the gradient and runs B0; rank 1 waits for the
// activation (its receive was posted at 5 and the send ended at 12), runs F0 after a 1 ns gap,
// B0, and sends the gradient back. Rank 0's B0 starts 2 ns after its receive ended.
std::vector<OpRecord> twoRanks() {
    return {
        op(0, 0, OpKind::F, 0, 0, 10),         op(0, 1, OpKind::SendF, 0, 10, 12, 1),
        op(0, 2, OpKind::RecvB, 0, 12, 40, 1), op(0, 3, OpKind::B, 0, 42, 60),
        op(1, 0, OpKind::RecvF, 0, 5, 13, 0),  op(1, 1, OpKind::F, 0, 14, 24),
        op(1, 2, OpKind::B, 0, 24, 36),        op(1, 3, OpKind::SendB, 0, 36, 39, 0),
    };
}

}  // namespace

class TstCriticalPath : public QObject {
    Q_OBJECT

  private slots:
    void followsWaitsAcrossRanks();
    void ignoresOtherIterationsAndDeviceSpans();
    void nothingToWalk();
    void lastEndTiesGoToTheLaterStart();
    void aMemberJoiningTogetherIsNotWaitedFor();
    void outputBroadcastFollowsThePreviousLoss();
    void endTiesGoToTheOpFirstInSchedule();
    void aCollectiveWaitsFromTheLastMembersJoin();
    void aReceiveWaitsForTheSendToItsRank();
    void aReceivePostedAfterItsSendDidNotWait();
    void aCollectiveWaitsForItsOwnMember();
    void predecessorTiesGoToTheStream();
    void stepsAreNamed_data();
    void stepsAreNamed();
};

void TstCriticalPath::followsWaitsAcrossRanks() {
    const auto path = analysis::criticalPath(twoRanks(), 0, 2);
    QVERIFY(path);
    QCOMPARE(path->start_ns, std::int64_t{0});
    QCOMPARE(path->end_ns, std::int64_t{60});
    struct Expected {
        int rank;
        OpKind kind;
        std::int64_t from, to;
        PathCategory category;
    };
    const std::vector<Expected> expected = {
        {0, OpKind::F, 0, 10, PathCategory::Compute},
        {0, OpKind::SendF, 10, 12, PathCategory::P2P},
        {1, OpKind::RecvF, 12, 13, PathCategory::P2P},  // arrived with the send's end
        {1, OpKind::F, 13, 14, PathCategory::Gap},
        {1, OpKind::F, 14, 24, PathCategory::Compute},
        {1, OpKind::B, 24, 36, PathCategory::Compute},
        {1, OpKind::SendB, 36, 39, PathCategory::P2P},
        {0, OpKind::RecvB, 39, 40, PathCategory::P2P},
        {0, OpKind::B, 40, 42, PathCategory::Gap},
        {0, OpKind::B, 42, 60, PathCategory::Compute},
    };
    QCOMPARE(path->steps.size(), expected.size());
    for (std::size_t k = 0; k < expected.size(); ++k) {
        const auto& s = path->steps[k];
        const auto& e = expected[k];
        const QString where = QString("step %1").arg(k);
        QVERIFY2(s.op.rank == e.rank && s.op.kind == e.kind, qPrintable(where));
        QVERIFY2(s.start_ns == e.from && s.end_ns == e.to, qPrintable(where));
        QVERIFY2(s.category == e.category, qPrintable(where));
    }
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Compute)], std::int64_t{50});
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::P2P)], std::int64_t{7});
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Gap)], std::int64_t{3});
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Collective)],
             std::int64_t{0});
    QCOMPARE(path->by_rank, (std::vector<std::int64_t>{33, 27}));
    // Every op of this iteration is on it, once, in time order.
    const auto ops = path->ops();
    QCOMPARE(ops.size(), std::size_t{8});
    QVERIFY(ops.front().kind == OpKind::F);
    QVERIFY(ops.back().kind == OpKind::B);
    QCOMPARE(ops.back().rank, 0);
}

void TstCriticalPath::ignoresOtherIterationsAndDeviceSpans() {
    auto ops = twoRanks();
    // A later iteration, and a device span longer than everything: neither is walked.
    auto later = op(0, 0, OpKind::F, 0, 100, 110);
    later.iteration = 1;
    ops.push_back(later);
    auto gpu = op(0, 3, OpKind::B, 0, 42, 80);
    gpu.lane = trace::Lane::Gpu;
    ops.push_back(gpu);
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    QCOMPARE(path->end_ns, std::int64_t{60});
    QCOMPARE(path->lengthNs(), std::int64_t{60});
    const auto second = analysis::criticalPath(ops, 1, 2);
    QVERIFY(second);
    QCOMPARE(second->steps.size(), std::size_t{1});
    QCOMPARE(second->lengthNs(), std::int64_t{10});
}

void TstCriticalPath::nothingToWalk() {
    QVERIFY(!analysis::criticalPath({}, 0, 2));
    QVERIFY(!analysis::criticalPath(twoRanks(), 3, 2));
}

void TstCriticalPath::lastEndTiesGoToTheLaterStart() {
    // Two unrelated forwards end together: the walk starts at the one that started later, and the
    // time before it is a gap of its rank (docs/metrics.md, "Critical path").
    const auto path = analysis::criticalPath(
        {op(0, 0, OpKind::F, 0, 0, 10), op(1, 0, OpKind::F, 0, 4, 10)}, 0, 2);
    QVERIFY(path);
    QCOMPARE(path->steps.size(), std::size_t{2});
    QCOMPARE(path->steps.back().op.rank, 1);
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Compute)], std::int64_t{6});
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Gap)], std::int64_t{4});
    QCOMPARE(path->by_rank, (std::vector<std::int64_t>{0, 10}));
}

void TstCriticalPath::aMemberJoiningTogetherIsNotWaitedFor() {
    // Both ranks join the all-reduce at 10: neither waited for the other, so the path stays on
    // the rank it started from.
    std::vector<OpRecord> ops = {
        op(0, 0, OpKind::F, 0, 0, 10), op(0, 1, OpKind::AllReduce, 0, 10, 20),
        op(1, 0, OpKind::F, 0, 0, 10), op(1, 1, OpKind::AllReduce, 0, 10, 20)};
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    QCOMPARE(path->by_rank, (std::vector<std::int64_t>{20, 0}));
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Collective)],
             std::int64_t{10});
    for (const auto& o : path->ops()) {
        QCOMPARE(o.rank, 0);
    }
}

void TstCriticalPath::outputBroadcastFollowsThePreviousLoss() {
    // The last rank's BCAST(output_bcast,1) carries g(0), which L0 produced: it waits for L0
    // (ended at 20), not only for F1 of its own micro-batch (ended at 8). The op before it on
    // the compute stream, F2, ends after it starts.
    auto bcast = op(0, 3, OpKind::Bcast, 1, 20, 45);
    bcast.collective = 3;  // output_bcast
    auto loss = op(0, 1, OpKind::L, 0, 10, 20);
    loss.lane = trace::Lane::Compute;
    const auto path = analysis::criticalPath(
        {op(0, 0, OpKind::F, 1, 0, 8), loss, op(0, 2, OpKind::F, 2, 20, 30), bcast}, 0, 1);
    QVERIFY(path);
    const auto ops = path->ops();
    QCOMPARE(ops.size(), std::size_t{3});
    QVERIFY(ops[0].kind == OpKind::F && ops[0].microbatch == 1);
    QVERIFY(ops[1].kind == OpKind::L);
    QVERIFY(ops[2].kind == OpKind::Bcast);
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Gap)], std::int64_t{2});
}

// The report names each step by its op (trace::opLabel): kind, micro-batch, peer or collective.
void TstCriticalPath::stepsAreNamed_data() {
    QTest::addColumn<int>("kind");
    QTest::addColumn<int>("microbatch");
    QTest::addColumn<int>("collective");
    QTest::addColumn<QString>("label");
    const auto k = [](OpKind kind) { return static_cast<int>(kind); };
    QTest::newRow("forward") << k(OpKind::F) << 3 << 0 << "F3";
    QTest::newRow("send") << k(OpKind::SendF) << 3 << 0 << "SEND_F3 \u2192 1";
    QTest::newRow("all-reduce") << k(OpKind::AllReduce) << 3 << 5 << "ALLREDUCE(output_grad,3)";
    QTest::newRow("all-reduce, no micro-batch")
        << k(OpKind::AllReduce) << -1 << 5 << "ALLREDUCE(output_grad)";
    QTest::newRow("broadcast, unknown collective") << k(OpKind::Bcast) << 2 << 0 << "BCAST(?,2)";
    QTest::newRow("optimizer") << k(OpKind::Opt) << -1 << 0 << "OPT";
}

void TstCriticalPath::stepsAreNamed() {
    QFETCH(int, kind);
    QFETCH(int, microbatch);
    QFETCH(int, collective);
    QFETCH(QString, label);
    OpRecord o = op(0, 0, static_cast<OpKind>(kind), microbatch, 0, 1, 1);
    o.collective = collective;
    QCOMPARE(QString::fromStdString(trace::opLabel(o)), label);
}

void TstCriticalPath::endTiesGoToTheOpFirstInSchedule() {
    // B0 and the empty W0 behind it end together; the send that follows waited for B0, and the
    // path goes through it, not through the W that took no time.
    std::vector<OpRecord> ops = {
        op(0, 0, OpKind::F, 0, 0, 10),
        op(0, 1, OpKind::B, 0, 10, 20),
        op(0, 2, OpKind::W, 0, 20, 20),
        op(0, 3, OpKind::SendB, 0, 20, 25, 1),
    };
    ops[2].lane = trace::Lane::Compute;
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    std::vector<OpKind> kinds;
    for (const auto& o : path->ops()) {
        kinds.push_back(o.kind);
    }
    QCOMPARE(kinds, (std::vector<OpKind>{OpKind::F, OpKind::B, OpKind::SendB}));
}

void TstCriticalPath::aCollectiveWaitsFromTheLastMembersJoin() {
    // Rank 0 joined the all-reduce at 0, rank 1 only at 60, after its F: the all-reduce waited
    // for rank 1 from 60, and the path goes on there at its join.
    const std::vector<OpRecord> ops = {
        op(0, 0, OpKind::AllReduce, 0, 0, 101),
        op(1, 0, OpKind::F, 0, 0, 60),
        op(1, 1, OpKind::AllReduce, 0, 60, 99),
    };
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    const auto share = [&](PathCategory c) {
        return path->by_category[static_cast<std::size_t>(c)];
    };
    QCOMPARE(share(PathCategory::Compute), std::int64_t{60});
    QCOMPARE(share(PathCategory::Collective), std::int64_t{41});
    QCOMPARE(share(PathCategory::Gap), std::int64_t{0});
}

void TstCriticalPath::aReceiveWaitsForTheSendToItsRank() {
    // Rank 0 sends micro-batch 0 forward twice, to rank 1 and later to rank 2 (a V-shaped
    // placement): rank 1's receive waited for the send to rank 1.
    const std::vector<OpRecord> ops = {
        op(0, 0, OpKind::F, 0, 0, 5),
        op(0, 1, OpKind::SendF, 0, 5, 10, 1),
        op(0, 2, OpKind::SendF, 0, 15, 18, 2),
        op(1, 0, OpKind::RecvF, 0, 0, 20, 0),
    };
    const auto path = analysis::criticalPath(ops, 0, 3);
    QVERIFY(path);
    std::vector<std::pair<OpKind, int>> on_path;
    for (const auto& o : path->ops()) {
        on_path.emplace_back(o.kind, o.peer);
    }
    const std::vector<std::pair<OpKind, int>> expected = {
        {OpKind::F, -1}, {OpKind::SendF, 1}, {OpKind::RecvF, 0}};
    QCOMPARE(on_path, expected);
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::P2P)], std::int64_t{15});
}

void TstCriticalPath::aReceivePostedAfterItsSendDidNotWait() {
    // Rank 1 posts the receive of micro-batch 0 at 30, long after rank 0's send ended at 8: it
    // did not wait, and the path stays on rank 1, behind its F of micro-batch 1.
    const std::vector<OpRecord> ops = {
        op(0, 0, OpKind::F, 0, 0, 5),   op(0, 1, OpKind::SendF, 0, 5, 8, 1),
        op(1, 0, OpKind::F, 1, 0, 30),  op(1, 1, OpKind::RecvF, 0, 30, 31, 0),
        op(1, 2, OpKind::F, 0, 31, 50),
    };
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    std::vector<std::pair<int, OpKind>> on_path;
    for (const auto& o : path->ops()) {
        on_path.emplace_back(o.rank, o.kind);
    }
    const std::vector<std::pair<int, OpKind>> expected = {
        {1, OpKind::F}, {1, OpKind::RecvF}, {1, OpKind::F}};
    QCOMPARE(on_path, expected);
}

void TstCriticalPath::aCollectiveWaitsForItsOwnMember() {
    // Rank 1 runs two all-reduces of micro-batch 0 (input and output gradients): rank 0's
    // first one waited for rank 1's first, which joined at 10, not for the second.
    std::vector<OpRecord> ops = {
        op(0, 0, OpKind::AllReduce, 0, 0, 101),
        op(1, 0, OpKind::F, 0, 0, 10),
        op(1, 1, OpKind::AllReduce, 0, 10, 100),
        op(1, 2, OpKind::AllReduce, 0, 70, 95),
    };
    ops[0].collective = 2;
    ops[2].collective = 2;
    ops[3].collective = 5;
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Collective)],
             std::int64_t{91});
    QCOMPARE(path->by_category[static_cast<std::size_t>(PathCategory::Gap)], std::int64_t{0});
}

void TstCriticalPath::predecessorTiesGoToTheStream() {
    // B0 starts as F1 (before it on the compute stream) and the send of micro-batch 0 end:
    // the stream's op is its predecessor.
    const std::vector<OpRecord> ops = {
        op(0, 0, OpKind::F, 0, 0, 5),
        op(0, 1, OpKind::SendF, 0, 5, 10, 1),
        op(0, 2, OpKind::F, 1, 5, 10),
        op(0, 3, OpKind::B, 0, 10, 20),
    };
    const auto path = analysis::criticalPath(ops, 0, 2);
    QVERIFY(path);
    std::vector<std::pair<OpKind, int>> on_path;
    for (const auto& o : path->ops()) {
        on_path.emplace_back(o.kind, o.microbatch);
    }
    const std::vector<std::pair<OpKind, int>> expected = {
        {OpKind::F, 0}, {OpKind::F, 1}, {OpKind::B, 0}};
    QCOMPARE(on_path, expected);
}

QTEST_GUILESS_MAIN(TstCriticalPath)
#include "tst_critical_path.moc"
