// Schedule generation: every base schedule with every vocabulary method produces a valid
// schedule whose own timing the execution graph reproduces exactly; base orders follow their
// textbook definitions; schedules survive a JSON round trip.
#include <atomic>
#include <cmath>

#include <QtTest>

#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/message_order.h>
#include <pipescope/schedule/schedule_json.h>
#include <pipescope/schedule/validate.h>

#include "config_fixtures.h"

using namespace pipescope::schedule;
using pipescope::test::makeConfig;

namespace {
const char* kSchedules[] = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "v-half"};
const char* kMethods[] = {"naive", "redistributed", "interlaced", "vocab-1", "vocab-2"};

std::vector<std::string> computeOrder(const Schedule& s, int rank) {
    std::vector<std::string> out;
    for (const auto& o : s.ops[static_cast<std::size_t>(rank)]) {
        if (o.kind == OpKind::F || o.kind == OpKind::B) {
            out.push_back(o.label());
        }
    }
    return out;
}
}  // namespace

class TstGenerate : public QObject {
    Q_OBJECT

  private slots:
    void everyCombination_data();
    void everyCombination();
    void oneF1BOrderIsTextbook_data();
    void oneF1BOrderIsTextbook();
    void interleavedOrderIsMegatrons();
    void vocabPassesLineUp();
    void interlacedEmbeddingBackwardsStartAsDocumented_data();
    void interlacedEmbeddingBackwardsStartAsDocumented();
    void vocab1RunsAheadOnInterleaved();
    void jsonRoundTrip();
    void vHalfWithEvenCostsIsScheduled();
    void handEditedScheduleIsChecked();
    void parseLabels_data();
    void parseLabels();
    void sendsPairAtManyStages_data();
    void sendsPairAtManyStages();
    void cancelStopsEverySchedule_data();
    void cancelStopsEverySchedule();
};

void TstGenerate::everyCombination_data() {
    QTest::addColumn<QString>("sched");
    QTest::addColumn<QString>("method");
    QTest::addColumn<int>("p");
    QTest::addColumn<int>("m");
    for (const char* s : kSchedules) {
        for (const char* v : kMethods) {
            for (auto [p, m] :
                 {std::pair{2, 4}, std::pair{4, 8}, std::pair{4, 12}, std::pair{8, 16}}) {
                QTest::addRow("%s %s p=%d m=%d", s, v, p, m) << s << v << p << m;
            }
        }
    }
}

void TstGenerate::everyCombination() {
    QFETCH(QString, sched);
    QFETCH(QString, method);
    QFETCH(int, p);
    QFETCH(int, m);
    const Config c = makeConfig(p, m, sched.toStdString(), method.toStdString());
    GenerateOptions options;
    options.record_timing = true;
    const auto g = generateSchedule(c, options);
    QVERIFY2(g.schedule.has_value(), g.error.c_str());
    const Schedule& s = *g.schedule;
    const auto err = validateSchedule(s);
    QVERIFY2(!err, err ? err->message.c_str() : "");
    // What a transport that matches messages by order (NCCL) relies on: each rank receives
    // from a peer in the order the peer sends, and all meet the collectives in one order.
    const auto built = buildGraph(s);
    QVERIFY(!built.error);
    const MessageOrder order = messageOrder(s, built.graph);
    QVERIFY(order.p2p_in_order_per_kind);
    QVERIFY2(order.collectives_in_order, order.first_difference.c_str());
    if (sched != QLatin1String("v-half")) {  // in V, two kinds share a direction
        QVERIFY2(order.p2p_in_order, order.first_difference.c_str());
    }
    // The simulator's clock replays the generator's decisions exactly.
    const auto build = buildGraph(s);
    QVERIFY(!build.error);
    const AnalyticCostModel costs(c, s.placement);
    const auto t = timeGraph(s, build.graph, costs);
    QVERIFY(t.complete);
    for (int r = 0; r < s.ranks; ++r) {
        for (std::size_t i = 0; i < s.ops[static_cast<std::size_t>(r)].size(); ++i) {
            const auto nt =
                t.times[static_cast<std::size_t>(build.graph.node(r, static_cast<int>(i)))];
            const double ds = std::abs(nt.start - g.start[static_cast<std::size_t>(r)][i]);
            const double de = std::abs(nt.end - g.end[static_cast<std::size_t>(r)][i]);
            QVERIFY2(ds < 1e-12 && de < 1e-12,
                     qPrintable(QString("rank %1 op %2 (%3): generator %4..%5, graph %6..%7")
                                    .arg(r)
                                    .arg(i)
                                    .arg(QString::fromStdString(
                                        s.ops[static_cast<std::size_t>(r)][i].label()))
                                    .arg(g.start[static_cast<std::size_t>(r)][i])
                                    .arg(g.end[static_cast<std::size_t>(r)][i])
                                    .arg(nt.start)
                                    .arg(nt.end)));
        }
    }
}

void TstGenerate::oneF1BOrderIsTextbook_data() {
    QTest::addColumn<int>("p");
    QTest::addColumn<int>("m");
    QTest::newRow("p2 m4") << 2 << 4;
    QTest::newRow("p4 m8") << 4 << 8;
    QTest::newRow("p4 m3 (fewer micro-batches than stages)") << 4 << 3;
    QTest::newRow("p8 m16") << 8 << 16;
}

void TstGenerate::oneF1BOrderIsTextbook() {
    QFETCH(int, p);
    QFETCH(int, m);
    const auto g = generateSchedule(makeConfig(p, m, "1f1b", "naive"));
    QVERIFY(g.schedule);
    for (int r = 0; r < p; ++r) {
        const int w = std::min(p - r - 1, m);
        std::vector<std::string> want;
        for (int i = 0; i < w; ++i) {
            want.push_back("F" + std::to_string(i));
        }
        for (int i = 0; i < m - w; ++i) {
            want.push_back("F" + std::to_string(w + i));
            want.push_back("B" + std::to_string(i));
        }
        for (int i = m - w; i < m; ++i) {
            want.push_back("B" + std::to_string(i));
        }
        QCOMPARE(computeOrder(*g.schedule, r), want);
    }
    // GPipe: all forwards, then all backwards.
    const auto gp = generateSchedule(makeConfig(p, m, "gpipe", "naive"));
    QVERIFY(gp.schedule);
    const auto order = computeOrder(*gp.schedule, p - 1);
    QCOMPARE(order.front(), std::string("F0"));
    QCOMPARE(order[static_cast<std::size_t>(m)], std::string("B0"));
}

void TstGenerate::interleavedOrderIsMegatrons() {
    // p = 2, v = 2, m = 4: rank 0 warms up with (p-1)*2 + (v-1)*p = 4 forwards, walking the
    // chunks in groups of p micro-batches.
    const auto g = generateSchedule(makeConfig(2, 4, "interleaved-1f1b", "naive"));
    QVERIFY(g.schedule);
    const std::vector<std::string> r0 = {"F0",    "F1",    "F0.c1", "F1.c1", "F2",    "B0.c1",
                                         "F3",    "B1.c1", "F2.c1", "B0",    "F3.c1", "B1",
                                         "B2.c1", "B3.c1", "B2",    "B3"};
    QCOMPARE(computeOrder(*g.schedule, 0), r0);
}

void TstGenerate::vocabPassesLineUp() {
    // The building-block property: S(i) of every rank lands near the last stage's S(i), within
    // about one transformer op, never a whole round of micro-batches apart.
    const Config c = makeConfig(4, 16, "1f1b", "vocab-2");
    GenerateOptions options;
    options.record_timing = true;
    const auto g = generateSchedule(c, options);
    QVERIFY(g.schedule);
    const Schedule& s = *g.schedule;
    const AnalyticCostModel costs(c, s.placement);
    Op b;
    b.kind = OpKind::B;
    b.microbatch = 0;
    const double block = costs.compute(0, b) * 2;  // generous: one F plus one B
    for (int i = 0; i < 16; ++i) {
        double lo = 1e30, hi = -1;
        for (int r = 0; r < 4; ++r) {
            const auto& ops = s.ops[static_cast<std::size_t>(r)];
            for (std::size_t k = 0; k < ops.size(); ++k) {
                if (ops[k].kind == OpKind::S && ops[k].microbatch == i) {
                    lo = std::min(lo, g.start[static_cast<std::size_t>(r)][k]);
                    hi = std::max(hi, g.start[static_cast<std::size_t>(r)][k]);
                }
            }
        }
        QVERIFY2(hi - lo <= block,
                 qPrintable(QString("S%1 spread %2 s > %3 s").arg(i).arg(hi - lo).arg(block)));
    }
}

void TstGenerate::vocab1RunsAheadOnInterleaved() {
    // vocab-1's B(i) on the last position waits for F(i + 1) there, which Megatron's order runs
    // a group of p forwards per other chunk later: every rank runs (v - 1) p + 1 forwards ahead.
    // With that the schedule exists for every chunk count and keeps vocab-2's iteration time
    // within its second barrier's cost.
    for (int v : {2, 3}) {
        for (auto [p, m] : {std::pair{2, 2}, std::pair{2, 6}, std::pair{4, 4}, std::pair{4, 12}}) {
            const std::vector<std::string> chunks = {"parallel.virtual_stages=" + std::to_string(v),
                                                     "model.layers=" + std::to_string(v * p * 2)};
            double makespan[2] = {0, 0};
            int k = 0;
            for (const char* method : {"vocab-1", "vocab-2"}) {
                const Config c = makeConfig(p, m, "interleaved-1f1b", method, chunks);
                QCOMPARE(vocabExtraWarmup(c),
                         std::string(method) == "vocab-1" ? (v - 1) * p + 1 : 1);
                const auto g = generateSchedule(c);
                QVERIFY2(g.schedule, qPrintable(QString("%1 v=%2 p=%3 m=%4: %5")
                                                    .arg(method)
                                                    .arg(v)
                                                    .arg(p)
                                                    .arg(m)
                                                    .arg(QString::fromStdString(g.error))));
                QVERIFY(!validateSchedule(*g.schedule));
                const auto built = buildGraph(*g.schedule);
                QVERIFY(!built.error);
                const AnalyticCostModel costs(c, g.schedule->placement);
                const auto t = timeGraph(*g.schedule, built.graph, costs);
                QVERIFY(t.complete);
                for (const auto& nt : t.times) {
                    makespan[k] = std::max(makespan[k], nt.end);
                }
                ++k;
            }
            QVERIFY2(makespan[0] <= makespan[1] * 1.03,
                     qPrintable(QString("v=%1 p=%2 m=%3: vocab-1 %4 s, vocab-2 %5 s")
                                    .arg(v)
                                    .arg(p)
                                    .arg(m)
                                    .arg(makespan[0])
                                    .arg(makespan[1])));
        }
    }
}

void TstGenerate::interlacedEmbeddingBackwardsStartAsDocumented_data() {
    QTest::addColumn<int>("p");
    QTest::addColumn<int>("first");  // output-layer steps before the first embedding backward
    // docs/schedules.md, interlaced, rule 6: the embedding backwards follow output-layer step
    // k = p + 1 on, k = p for odd p.
    QTest::newRow("p=4") << 4 << 6;
    QTest::newRow("p=6") << 6 << 8;
    QTest::newRow("p=3") << 3 << 4;
    QTest::newRow("p=5") << 5 << 6;
}

void TstGenerate::interlacedEmbeddingBackwardsStartAsDocumented() {
    QFETCH(int, p);
    QFETCH(int, first);
    const auto g = generateSchedule(makeConfig(p, 4 * p, "1f1b", "interlaced"));
    QVERIFY2(g.schedule, g.error.c_str());
    for (int r = 0; r < p; ++r) {
        int steps = 0;
        for (const Op& o : g.schedule->ops[static_cast<std::size_t>(r)]) {
            if (o.collective == Collective::OutputBcast) {
                ++steps;
            } else if (o.collective == Collective::InputGradBcast) {
                break;
            }
        }
        QVERIFY2(steps == first, qPrintable(QString("rank %1: %2 output-layer steps before the "
                                                    "first embedding backward, expected %3")
                                                .arg(r)
                                                .arg(steps)
                                                .arg(first)));
    }
}

void TstGenerate::jsonRoundTrip() {
    for (const char* sched : {"1f1b", "v-half", "interleaved-1f1b"}) {
        const Config c = makeConfig(4, 8, sched, "vocab-2");
        const auto g = generateSchedule(c);
        QVERIFY(g.schedule);
        const std::string text = scheduleToJson(*g.schedule);
        const auto back = scheduleFromJson(text, c, "<test>");
        QVERIFY2(back.schedule, back.error.c_str());
        QCOMPARE(back.schedule->ops.size(), g.schedule->ops.size());
        for (std::size_t r = 0; r < back.schedule->ops.size(); ++r) {
            QVERIFY(back.schedule->ops[r] == g.schedule->ops[r]);
        }
        QVERIFY(!validateSchedule(*back.schedule));
    }
}

// A model so small that every op costs about the same fixed latency puts all of a rank's
// forwards ahead of its first backward in the V-Half timetable. Every raise of the activation
// limit up to 2p stalled ("schedule generation stalled on rank 0 after 14 compute ops"), so a
// valid config could not be simulated (found by fuzzing configs).
void TstGenerate::vHalfWithEvenCostsIsScheduled() {
    const Config c = makeConfig(
        4, 16, "v-half", "naive",
        {"model.layers=24", "model.hidden=4", "model.heads=1", "model.seq_len=2", "model.vocab=4"});
    const auto g = generateSchedule(c);
    QVERIFY2(g.schedule, g.error.c_str());
    QVERIFY(!validateSchedule(*g.schedule));
}

void TstGenerate::handEditedScheduleIsChecked() {
    const Config c = makeConfig(2, 4, "1f1b", "naive");
    const auto g = generateSchedule(c);
    QVERIFY(g.schedule);
    std::string text = scheduleToJson(*g.schedule);
    // A user swaps two backwards on rank 1: still valid (the receive order follows).
    Schedule edited = *g.schedule;
    auto& r0 = edited.ops[0];
    // Moving rank 0's last B before its first F breaks a dependency: the validator names it.
    const auto last_b =
        std::find_if(r0.rbegin(), r0.rend(), [](const Op& o) { return o.kind == OpKind::B; });
    const Op moved = *last_b;
    r0.erase(std::next(last_b).base());
    r0.insert(r0.begin(), moved);
    const auto err = validateSchedule(edited);
    QVERIFY(err);
    QVERIFY2(QString::fromStdString(err->message).contains("rank 0, op 0 (B3)"),
             err->message.c_str());

    const auto wrong = scheduleFromJson(R"({"format": "pipescope-schedule", "version": 1,
        "ranks": 3, "microbatches": 4, "schedule": "1f1b", "vocab": "naive", "ops": []})",
                                        c, "s.json");
    QVERIFY(!wrong.schedule);
    QCOMPARE(wrong.error,
             std::string("s.json: \"ranks\" is 3 but the config's parallel.pipeline is 2"));
    // Integers past int's range are the numbers written, not what get<int>() cut them to: 2^32 +
    // 2 read as 2 (and matched), 2^40 as 0, 2^32 + 1 as version 1.
    const std::string ops = scheduleToJson(*g.schedule);
    const auto withKey = [&](const std::string& key, const std::string& value) {
        std::string t = ops;
        const std::string from = "\"" + key + "\": ";
        const auto at = t.find(from) + from.size();
        t.replace(at, t.find(',', at) - at, value);
        return scheduleFromJson(t, c, "s.json");
    };
    QVERIFY(withKey("ranks", "2").schedule);
    const auto wrapped = withKey("ranks", "4294967298");
    QVERIFY(!wrapped.schedule);
    QCOMPARE(wrapped.error, std::string("s.json: \"ranks\" is 4294967298 but the config's "
                                        "parallel.pipeline is 2"));
    QCOMPARE(withKey("microbatches", "1099511627776").error,
             std::string("s.json: \"microbatches\" is 1099511627776 but the config's "
                         "parallel.microbatches is 4"));
    QCOMPARE(withKey("ranks", "18446744073709551615").error,
             std::string("s.json: \"ranks\" is 18446744073709551615 but the config's "
                         "parallel.pipeline is 2"));
    QCOMPARE(withKey("version", "4294967297").error, std::string("s.json: \"version\" must be 1"));
    // A "format" of another type was read with json::value(), whose exception aborted the run.
    for (const char* format : {"2147483648", "null", "[1]", "{}", "true"}) {
        QCOMPARE(withKey("format", format).error,
                 std::string("s.json: not a PipeScope schedule (\"format\" must be "
                             "\"pipescope-schedule\")"));
    }
    // A label the schedule cannot have is named, not found out as some other op missing.
    const auto withLabel = [&](const std::string& from, const std::string& to) {
        std::string t = ops;
        const auto at = t.find("\"" + from + "\"");
        t.replace(at + 1, from.size(), to);
        return scheduleFromJson(t, c, "s.json");
    };
    QCOMPARE(withLabel("SEND_F0>1", "SEND_F0>2147483647").error,
             std::string("s.json: ops[0][1] \"SEND_F0>2147483647\": peer 2147483647 is not "
                         "another rank of the 2-rank schedule (0 to 1, not 0 itself)"));
    QCOMPARE(withLabel("SEND_F0>1", "SEND_F0>0").error,
             std::string("s.json: ops[0][1] \"SEND_F0>0\": peer 0 is not another rank of the "
                         "2-rank schedule (0 to 1, not 0 itself)"));
    (void)text;
}

void TstGenerate::parseLabels_data() {
    QTest::addColumn<QString>("label");
    QTest::addColumn<bool>("ok");
    QTest::newRow("F") << "F3" << true;
    QTest::newRow("chunk") << "B12.c1" << true;
    QTest::newRow("send") << "SEND_F3>2" << true;
    QTest::newRow("recv with chunk") << "RECV_B3.c1<1" << true;
    QTest::newRow("collective") << "ALLREDUCE(output,3)" << true;
    QTest::newRow("bcast") << "BCAST(output_bcast,8)" << true;
    QTest::newRow("opt") << "OPT" << true;
    QTest::newRow("no number") << "F" << false;
    QTest::newRow("send without peer") << "SEND_F3" << false;
    QTest::newRow("send with <") << "SEND_F3<2" << false;
    QTest::newRow("unknown collective") << "ALLREDUCE(loss,3)" << false;
    QTest::newRow("junk after") << "F3x" << false;
    QTest::newRow("unknown kind") << "Q3" << false;
}

void TstGenerate::parseLabels() {
    QFETCH(QString, label);
    QFETCH(bool, ok);
    std::string why;
    const auto op = parseOpLabel(label.toStdString(), &why);
    QCOMPARE(op.has_value(), ok);
    if (op) {
        QCOMPARE(QString::fromStdString(op->label()), label);
    } else {
        QVERIFY2(why.find(label.toStdString()) != std::string::npos, why.c_str());
    }
}

void TstGenerate::sendsPairAtManyStages_data() {
    QTest::addColumn<QString>("sched");
    QTest::addColumn<QString>("method");
    QTest::newRow("1f1b vocab-2") << "1f1b"
                                  << "vocab-2";
    QTest::newRow("zb-h1 redistributed") << "zb-h1"
                                         << "redistributed";
}

// Sends are paired per channel that carries messages (there used to be a list for each of the
// 2 p^2 possible ones): every receive waits for the send of its micro-batch and kind from its
// peer, at a pipeline far deeper than the other tests use.
void TstGenerate::sendsPairAtManyStages() {
    QFETCH(QString, sched);
    QFETCH(QString, method);
    const int p = 512;
    const int m = 16;
    const Config c = makeConfig(p, m, sched.toStdString(), method.toStdString());
    const auto g = generateSchedule(c, {});
    QVERIFY2(g.schedule.has_value(), g.error.c_str());
    const Schedule& s = *g.schedule;
    const auto built = buildGraph(s);
    QVERIFY2(!built.error, built.error ? built.error->message.c_str() : "");
    int receives = 0;
    for (int r = 0; r < p; ++r) {
        const auto& ops = s.ops[static_cast<std::size_t>(r)];
        for (std::size_t i = 0; i < ops.size(); ++i) {
            const Op& recv = ops[i];
            if (recv.kind != OpKind::RecvF && recv.kind != OpKind::RecvB) {
                continue;
            }
            ++receives;
            const int dep =
                built.graph
                    .end_dep[static_cast<std::size_t>(built.graph.node(r, static_cast<int>(i)))];
            QVERIFY(dep >= 0);
            const OpRef from = built.graph.node_ref[static_cast<std::size_t>(dep)];
            const Op& send =
                s.ops[static_cast<std::size_t>(from.rank)][static_cast<std::size_t>(from.index)];
            QCOMPARE(from.rank, recv.peer);
            QCOMPARE(send.peer, r);
            QVERIFY(send.kind == (recv.kind == OpKind::RecvF ? OpKind::SendF : OpKind::SendB));
            QCOMPARE(send.microbatch, recv.microbatch);
        }
    }
    // Forward and backward between each pair of neighbours, for every micro-batch.
    QVERIFY(receives >= 2 * (p - 1) * m);
    QVERIFY(!validateSchedule(s));
}

QTEST_GUILESS_MAIN(TstGenerate)
#include "tst_generate.moc"

void TstGenerate::cancelStopsEverySchedule_data() {
    QTest::addColumn<QString>("sched");
    QTest::addColumn<QString>("method");
    for (const char* sc : kSchedules) {
        for (const char* v : {"naive", "vocab-2"}) {
            QTest::addRow("%s %s", sc, v) << sc << v;
        }
    }
}

// A flag set before the start stops the list scheduler within its first few thousand steps,
// whatever the schedule (the app sets it when an edit replaces the config being simulated);
// with the flag clear, the same config generates.
void TstGenerate::cancelStopsEverySchedule() {
    QFETCH(QString, sched);
    QFETCH(QString, method);
    const Config c = makeConfig(8, 512, sched.toStdString(), method.toStdString());
    std::atomic<bool> flag{true};
    GenerateOptions options;
    options.cancel = &flag;
    const auto stopped = generateSchedule(c, options);
    QVERIFY(stopped.cancelled);
    QVERIFY(!stopped.schedule);
    flag = false;
    const auto done = generateSchedule(c, options);
    QVERIFY2(done.schedule.has_value(), done.error.c_str());
    QVERIFY(!done.cancelled);
}
