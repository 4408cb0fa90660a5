// The validator rejects hand-broken schedules, each with a message that names rank, op and
// reason.
#include <algorithm>

#include <QtTest>

#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/validate.h>

#include "config_fixtures.h"

using namespace pipescope::schedule;
using pipescope::test::makeConfig;

namespace {

Schedule generated(int p, int m, const char* sched, const char* vocab) {
    auto g = generateSchedule(makeConfig(p, m, sched, vocab));
    if (!g.schedule) {
        qFatal("generation failed: %s", g.error.c_str());
    }
    return *g.schedule;
}

std::size_t find(const std::vector<Op>& ops, const std::string& label, bool last = false) {
    std::size_t at = ops.size();
    for (std::size_t i = 0; i < ops.size(); ++i) {
        if (ops[i].label() == label) {
            at = i;
            if (!last) {
                break;
            }
        }
    }
    if (at == ops.size()) {
        qFatal("no op %s", label.c_str());
    }
    return at;
}

QString check(const Schedule& s) {
    const auto e = validateSchedule(s);
    return e ? QString::fromStdString(e->message) : QString();
}

}  // namespace

class TstValidate : public QObject {
    Q_OBJECT

  private slots:
    void generatedSchedulesPass();
    void missingOp();
    void duplicatedOp();
    void opThatDoesNotBelong();
    void sendWithoutReceive();
    void receivesOutOfOrder();
    void collectivesInDifferentOrders();
    void collectiveMissingOnOneRank();
    void dependencyCycle();
    void sendToTheWrongRank();
    void consumerBeforeProducer();
    void weightGradientBeforeItsBackward();
    void optNotLast();
};

void TstValidate::generatedSchedulesPass() {
    QCOMPARE(check(generated(4, 8, "1f1b", "vocab-1")), QString());
    QCOMPARE(check(generated(4, 8, "v-half", "vocab-2")), QString());
    QCOMPARE(check(generated(4, 8, "interleaved-1f1b", "interlaced")), QString());
}

void TstValidate::missingOp() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r1 = s.ops[1];
    r1.erase(r1.begin() + static_cast<long>(find(r1, "F2")));
    QCOMPARE(check(s), QString("rank 1: F2 is missing"));
}

void TstValidate::duplicatedOp() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r0 = s.ops[0];
    r0.insert(r0.begin() + 1, r0[find(r0, "F0")]);
    QCOMPARE(check(s), QString("rank 0, op 1 (F0): appears twice on this rank (first as op 0)"));
}

void TstValidate::opThatDoesNotBelong() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    Op w;
    w.kind = OpKind::W;
    w.microbatch = 0;
    s.ops[0].insert(s.ops[0].end() - 1, w);
    const QString msg = check(s);
    QVERIFY2(msg.contains("(W0): this rank has no such op in a 1f1b schedule"), qPrintable(msg));
}

void TstValidate::sendWithoutReceive() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r1 = s.ops[1];
    r1.erase(r1.begin() + static_cast<long>(find(r1, "RECV_F3<0")));
    const QString msg = check(s);
    QVERIFY2(msg.contains("(SEND_F3>1): has no matching receive on rank 1"), qPrintable(msg));
}

void TstValidate::receivesOutOfOrder() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r1 = s.ops[1];
    // Receive F1 before F0: the first receive pairs with the first send, which carries F0.
    std::iter_swap(r1.begin() + static_cast<long>(find(r1, "RECV_F0<0")),
                   r1.begin() + static_cast<long>(find(r1, "RECV_F1<0")));
    const QString msg = check(s);
    QVERIFY2(msg.contains("pairs with rank 0") && msg.contains("a different micro-batch"),
             qPrintable(msg));
}

void TstValidate::collectivesInDifferentOrders() {
    Schedule s = generated(2, 4, "1f1b", "vocab-2");
    auto& r1 = s.ops[1];
    std::iter_swap(r1.begin() + static_cast<long>(find(r1, "ALLREDUCE(input,0)")),
                   r1.begin() + static_cast<long>(find(r1, "ALLREDUCE(input,1)")));
    const QString msg = check(s);
    QVERIFY2(msg.contains("collectives must come in the same order on every rank"),
             qPrintable(msg));
    QVERIFY2(msg.startsWith("rank 1, op"), qPrintable(msg));
}

void TstValidate::collectiveMissingOnOneRank() {
    Schedule s = generated(2, 4, "1f1b", "vocab-2");
    auto& r0 = s.ops[0];
    r0.erase(r0.begin() + static_cast<long>(find(r0, "ALLREDUCE(output,3)")));
    const QString msg = check(s);
    QVERIFY2(msg.contains("ALLREDUCE(output,3)"), qPrintable(msg));
}

void TstValidate::dependencyCycle() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r0 = s.ops[0];
    // Rank 0 waits for B0's gradient before it runs F0, which rank 1 needs to produce it.
    const auto at = find(r0, "RECV_B0<1");
    const Op recv = r0[at];
    r0.erase(r0.begin() + static_cast<long>(at));
    r0.insert(r0.begin(), recv);
    const QString msg = check(s);
    QVERIFY2(msg.startsWith("deadlock: rank 0, op 0 (RECV_B0<1) waits for rank 1"),
             qPrintable(msg));
    QVERIFY2(msg.contains("which waits for the first again"), qPrintable(msg));
}

void TstValidate::sendToTheWrongRank() {
    // Sends and receives that pair up but skip a stage: rank 0 sends F0 straight to rank 2.
    Schedule s = generated(3, 4, "1f1b", "naive");
    auto& r0 = s.ops[0];
    auto& r1 = s.ops[1];
    auto& r2 = s.ops[2];
    r1.erase(r1.begin() + static_cast<long>(find(r1, "SEND_F0>2")));
    Op send = r0[find(r0, "SEND_F0>1")];
    send.peer = 2;
    r0.insert(r0.begin() + static_cast<long>(find(r0, "SEND_F0>1")) + 1, send);
    r2[find(r2, "RECV_F0<1")].peer = 0;
    const QString msg = check(s);
    QVERIFY2(msg.contains(
                 "(SEND_F0>2): its forward output goes to position 1, which is rank 1, not rank 2"),
             qPrintable(msg));
}

void TstValidate::consumerBeforeProducer() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r0 = s.ops[0];
    const auto at = find(r0, "B0");
    const Op b = r0[at];
    r0.erase(r0.begin() + static_cast<long>(at));
    r0.insert(r0.begin(), b);
    QCOMPARE(check(s),
             QString("rank 0, op 0 (B0): comes before op 1 (F0), which produces its input"));
}

void TstValidate::weightGradientBeforeItsBackward() {
    // A split backward's W turns the gradients its B produced into the parameters' own: a
    // hand-edited zero-bubble schedule that runs W0 ahead of B0 is refused, not run on gradients
    // that do not exist yet.
    Schedule s = generated(2, 4, "zb-h1", "naive");
    auto& r1 = s.ops[1];
    const auto at = find(r1, "W0");
    const Op w = r1[at];
    r1.erase(r1.begin() + static_cast<long>(at));
    const auto b = find(r1, "B0");
    r1.insert(r1.begin() + static_cast<long>(b), w);
    QCOMPARE(check(s),
             QString("rank 1, op %1 (W0): comes before op %2 (B0), which produces its input")
                 .arg(b)
                 .arg(b + 1));
}

void TstValidate::optNotLast() {
    Schedule s = generated(2, 4, "1f1b", "naive");
    auto& r1 = s.ops[1];
    std::iter_swap(r1.end() - 1, r1.end() - 2);
    const QString msg = check(s);
    QVERIFY2(msg.contains("(OPT): OPT must be the rank's last op"), qPrintable(msg));
}

QTEST_GUILESS_MAIN(TstValidate)
#include "tst_validate.moc"
