// Window and level-of-detail queries checked against brute force on random traces: the file's
// precomputed levels and indexed queries must give exactly what a direct computation over all
// ops gives, and the result must stay within a few entries per pixel.
#include <algorithm>
#include <map>
#include <random>
#include <sqlite3.h>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

#include "testsupport.h"

using namespace pipescope::trace;

namespace {

struct RandomTrace {
    std::vector<OpRecord> ops;  // id = insertion order + 1 (the rowid)
    std::vector<MemorySample> memory;
    int ranks = 3;
    std::int64_t span = 0;
};

// Pipeline-like lanes: mostly back-to-back ops with gaps, durations spread over six orders of
// magnitude (so every level has wide and narrow ops), a few overlapping ops, instants.
RandomTrace makeTrace(std::uint64_t seed, int ops_per_lane) {
    std::mt19937_64 rng(seed);
    RandomTrace t;
    std::uniform_real_distribution<double> log_dur(1.0, 7.0);
    std::uniform_int_distribution<int> kind(0, kOpKindCount - 1);
    std::uniform_int_distribution<int> pct(0, 99);
    for (int r = 0; r < t.ranks; ++r) {
        for (int lane = 0; lane < kLaneCount; ++lane) {
            std::int64_t now = static_cast<std::int64_t>(rng() % 5000);
            for (int i = 0; i < ops_per_lane; ++i) {
                OpRecord o;
                o.rank = r;
                o.lane = static_cast<Lane>(lane);
                o.iteration = i * 3 / ops_per_lane;
                o.kind = static_cast<OpKind>(kind(rng));
                o.microbatch = i % 16;
                o.op_index = i;
                const int p = pct(rng);
                const auto dur =
                    p < 3 ? 0 : static_cast<std::int64_t>(std::pow(10.0, log_dur(rng)));
                o.start_ns = p < 8 && now > dur ? now - dur / 2 : now;  // some overlap
                o.end_ns = o.start_ns + dur;
                now = std::max(now, o.end_ns) +
                      static_cast<std::int64_t>(std::pow(10.0, log_dur(rng) - 1.0));
                t.ops.push_back(o);
            }
        }
        std::int64_t tm = 0;
        for (int i = 0; i < ops_per_lane; ++i) {
            tm += static_cast<std::int64_t>(std::pow(10.0, log_dur(rng)));
            const auto cat = static_cast<MemoryCategory>(rng() % kMemoryCategoryCount);
            t.memory.push_back({r, tm, static_cast<std::int64_t>(rng() % 1'000'000), cat});
            if (pct(rng) < 10) {  // two changes at one instant
                const auto cat2 = static_cast<MemoryCategory>(rng() % kMemoryCategoryCount);
                t.memory.push_back({r, tm, static_cast<std::int64_t>(rng() % 1'000'000), cat2});
            }
        }
    }
    for (std::size_t i = 0; i < t.ops.size(); ++i) {
        t.ops[i].id = static_cast<std::int64_t>(i) + 1;
        t.span = std::max(t.span, t.ops[i].end_ns);
    }
    return t;
}

bool overlapsWindow(const OpRecord& o, std::int64_t t0, std::int64_t t1) {
    return o.start_ns < t1 && (o.end_ns > t0 || (o.end_ns == o.start_ns && o.start_ns >= t0));
}

// The folding rules of lod.h, computed directly from all ops of one rank and lane.
std::vector<LodEntry> foldedGroups(const RandomTrace& t, int rank, int lane, int level) {
    std::vector<const OpRecord*> lane_ops;
    for (const auto& o : t.ops) {
        if (o.rank == rank) {
            lane_ops.push_back(&o);
        }
    }
    std::stable_sort(lane_ops.begin(), lane_ops.end(), [](const OpRecord* a, const OpRecord* b) {
        return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->id < b->id;
    });
    std::vector<LodEntry> out;
    bool open = false;
    std::int64_t bucket = 0;
    std::map<int, std::int64_t> busy;
    int first_kind = 0;
    LodEntry cur;
    auto close = [&] {
        if (!open) {
            return;
        }
        int k = first_kind;
        for (const auto& [kind, b] : busy) {
            if (b > busy[k]) {
                k = kind;
            }
        }
        cur.kind = static_cast<OpKind>(k);
        cur.mixed = busy.size() > 1;
        out.push_back(cur);
        open = false;
    };
    for (const OpRecord* o : lane_ops) {
        if (static_cast<int>(o->lane) != lane) {
            continue;
        }
        if (durLevel(o->duration()) > level) {
            close();
            continue;
        }
        const std::int64_t b = o->start_ns / lodWidth(level);
        if (open && b != bucket) {
            close();
        }
        if (!open) {
            open = true;
            bucket = b;
            cur = LodEntry{};
            cur.start_ns = o->start_ns;
            cur.end_ns = o->end_ns;
            cur.count = 0;
            cur.busy_ns = 0;
            busy.clear();
            first_kind = static_cast<int>(o->kind);
        }
        cur.end_ns = std::max(cur.end_ns, o->end_ns);
        cur.count += 1;
        cur.busy_ns += o->duration();
        busy[static_cast<int>(o->kind)] += o->duration();
    }
    close();
    return out;
}

std::vector<LodEntry> expectedLane(const RandomTrace& t, int rank, int lane, int level,
                                   std::int64_t t0, std::int64_t t1, double threshold) {
    std::vector<OpRecord> raw;
    for (const auto& o : t.ops) {
        if (o.rank == rank && static_cast<int>(o.lane) == lane && overlapsWindow(o, t0, t1) &&
            (level < 0 || durLevel(o.duration()) > level)) {
            raw.push_back(o);
        }
    }
    std::sort(raw.begin(), raw.end(), [](const OpRecord& a, const OpRecord& b) {
        return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.id < b.id;
    });
    std::vector<LodEntry> entries;
    for (const auto& o : raw) {
        LodEntry e;
        e.start_ns = o.start_ns;
        e.end_ns = o.end_ns;
        e.busy_ns = o.duration();
        e.kind = o.kind;
        e.op_id = o.id;
        entries.push_back(e);
    }
    if (level >= 0) {
        for (const auto& g : foldedGroups(t, rank, lane, level)) {
            if (g.start_ns < t1 &&
                (g.end_ns > t0 || (g.end_ns == g.start_ns && g.start_ns >= t0))) {
                entries.push_back(g);
            }
        }
        std::stable_sort(entries.begin(), entries.end(), [](const LodEntry& a, const LodEntry& b) {
            return a.start_ns < b.start_ns;
        });
    }
    // Pixel folding, as the reader does it.
    std::vector<LodEntry> out;
    for (const auto& e : entries) {
        if (!out.empty()) {
            LodEntry& c = out.back();
            const double w_c = static_cast<double>(c.end_ns - c.start_ns);
            const double w_e = static_cast<double>(e.end_ns - e.start_ns);
            const double merged = static_cast<double>(std::max(c.end_ns, e.end_ns) - c.start_ns);
            if (w_c < threshold && w_e < threshold &&
                static_cast<double>(e.start_ns - c.end_ns) < threshold && merged <= threshold) {
                if (e.busy_ns > c.busy_ns) {
                    c.kind = e.kind;
                }
                c.mixed = c.mixed || e.mixed || c.kind != e.kind;
                c.end_ns = std::max(c.end_ns, e.end_ns);
                c.busy_ns += e.busy_ns;
                c.count += e.count;
                c.op_id = -1;
                continue;
            }
        }
        out.push_back(e);
    }
    return out;
}

QString describe(const LodEntry& e) {
    return QString("[%1,%2) n=%3 busy=%4 kind=%5 mixed=%6 op=%7")
        .arg(e.start_ns)
        .arg(e.end_ns)
        .arg(e.count)
        .arg(e.busy_ns)
        .arg(int(e.kind))
        .arg(e.mixed)
        .arg(e.op_id);
}

}  // namespace

class TstTraceLod : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void windowQueries();
    void opsLodMatchesBruteForce_data();
    void opsLodMatchesBruteForce();
    void lodBoundsEntriesPerPixel();
    void foldedTiesKeepTheFirstKind();
    void windowsStartingInsideAFoldedEntry();
    void memoryLodRawIsExact_data();
    void memoryLodRawIsExact();
    void memoryLodKeepsPeaks();
    void memoryLodKeepsDips();
    void memoryLodStartsEachRankEmpty();
    void unfinishedTraceStillAnswers();
    void emptyTraceHasNoIterations();
    void levelsSkipOpsOfANewerKind();
    void damagedLevelsAreNotTrusted();
    void damagedTimeRangeIsNotTrusted();
    void wrongLevelsInRangeAreNotTrusted();
    void memoryTotalsNeverWrap();

  private:
    QString writeTrace(const RandomTrace& t, const QString& name, bool finish);
    void compareWithBruteForce(std::int64_t t0, std::int64_t t1, int pixels);
    QTemporaryDir dir_;
    RandomTrace trace_;
    TraceReader reader_;
};

QString TstTraceLod::writeTrace(const RandomTrace& t, const QString& name, bool finish) {
    const QString path = dir_.filePath(name);
    TraceWriter w;
    RunInfo run;
    run.name = name.toStdString();
    run.config_json = "{}";
    run.backend = "sim";
    run.ranks = t.ranks;
    run.iterations = 3;
    WriterOptions opt;
    opt.batch_rows = 5000;
    if (!w.create(path.toStdString(), run, opt).ok()) {
        return {};
    }
    for (int r = 0; r < t.ranks; ++r) {
        w.addRank({r, std::to_string(r), "sim", "", 0, 0});
    }
    for (const auto& o : t.ops) {
        w.addOp(o);
    }
    for (const auto& m : t.memory) {
        w.addMemory(m);
    }
    if (finish) {
        w.finish(RunStatus::Complete);
    } else {
        w.flush();
    }
    return path;
}

void TstTraceLod::initTestCase() {
    trace_ = makeTrace(20261122, 4000);
    const QString path = writeTrace(trace_, "random.db", true);
    const auto st = reader_.open(path.toStdString());
    QVERIFY2(st.ok(), st.message.c_str());
    QVERIFY(reader_.finalized());
    QCOMPARE(reader_.opCount(), static_cast<std::int64_t>(trace_.ops.size()));
}

void TstTraceLod::windowQueries() {
    std::mt19937_64 rng(7);
    for (int q = 0; q < 200; ++q) {
        const int rank = static_cast<int>(rng() % 3);
        const std::int64_t a =
            static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(trace_.span));
        const std::int64_t len = static_cast<std::int64_t>(
            std::pow(10.0, 1.0 + static_cast<double>(rng() % 600) / 100.0));
        const std::int64_t b = a + len;
        std::vector<std::int64_t> expected;
        for (const auto& o : trace_.ops) {
            if (o.rank == rank && overlapsWindow(o, a, b)) {
                expected.push_back(o.id);
            }
        }
        std::vector<std::int64_t> got;
        for (const auto& o : reader_.ops(rank, a, b)) {
            got.push_back(o.id);
        }
        std::sort(expected.begin(), expected.end());
        std::sort(got.begin(), got.end());
        QVERIFY2(got == expected, qPrintable(QString("rank %1 window [%2,%3): %4 ops, expected %5")
                                                 .arg(rank)
                                                 .arg(a)
                                                 .arg(b)
                                                 .arg(got.size())
                                                 .arg(expected.size())));
    }
}

void TstTraceLod::opsLodMatchesBruteForce_data() {
    QTest::addColumn<double>("from");
    QTest::addColumn<double>("fraction");
    QTest::addColumn<int>("pixels");
    QTest::newRow("all, 1000 px") << 0.0 << 1.0 << 1000;
    QTest::newRow("all, 37 px") << 0.0 << 1.0 << 37;
    QTest::newRow("wider than the run") << -0.5 << 2.0 << 800;
    QTest::newRow("tenth") << 0.3 << 0.1 << 1000;
    QTest::newRow("hundredth") << 0.55 << 0.01 << 1000;
    QTest::newRow("thousandth") << 0.71 << 0.001 << 1000;
    QTest::newRow("1e-5") << 0.2 << 0.00001 << 600;
    QTest::newRow("tiny window") << 0.4 << 0.0000005 << 1000;
}

void TstTraceLod::opsLodMatchesBruteForce() {
    QFETCH(double, from);
    QFETCH(double, fraction);
    QFETCH(int, pixels);
    const auto span = static_cast<double>(trace_.span);
    const auto t0 = static_cast<std::int64_t>(from * span);
    const auto t1 = t0 + std::max<std::int64_t>(1, static_cast<std::int64_t>(fraction * span));
    compareWithBruteForce(t0, t1, pixels);
}

// The reader's opsLod for [t0, t1) against the folding rules computed from all ops.
void TstTraceLod::compareWithBruteForce(std::int64_t t0, std::int64_t t1, int pixels) {
    const LodOptions options;
    const auto result = reader_.opsLod(t0, t1, pixels, options);
    QCOMPARE(result.lanes.size(), std::size_t(3 * kLaneCount));
    const double threshold = options.fold_pixels * result.ns_per_pixel;
    for (const auto& lane : result.lanes) {
        const auto expected = expectedLane(trace_, lane.rank, static_cast<int>(lane.lane),
                                           result.level, t0, t1, threshold);
        if (lane.entries.size() != expected.size()) {
            QFAIL(qPrintable(QString("rank %1 lane %2 level %3: %4 entries, expected %5")
                                 .arg(lane.rank)
                                 .arg(int(lane.lane))
                                 .arg(result.level)
                                 .arg(lane.entries.size())
                                 .arg(expected.size())));
        }
        for (std::size_t i = 0; i < expected.size(); ++i) {
            const auto& g = lane.entries[i];
            const auto& e = expected[i];
            const bool same = g.start_ns == e.start_ns && g.end_ns == e.end_ns &&
                              g.count == e.count && g.busy_ns == e.busy_ns && g.kind == e.kind &&
                              g.mixed == e.mixed && g.op_id == e.op_id;
            QVERIFY2(same, qPrintable(QString("rank %1 lane %2 entry %3: got %4, expected %5")
                                          .arg(lane.rank)
                                          .arg(int(lane.lane))
                                          .arg(i)
                                          .arg(describe(g), describe(e))));
        }
        // Every op in the window is inside an entry that counts it.
        std::int64_t counted = 0;
        for (const auto& g : lane.entries) {
            counted += g.count;
        }
        std::int64_t in_window = 0;
        for (const auto& o : trace_.ops) {
            if (o.rank == lane.rank && o.lane == lane.lane && overlapsWindow(o, t0, t1)) {
                ++in_window;
            }
        }
        QVERIFY(counted >= in_window);
    }
}

void TstTraceLod::lodBoundsEntriesPerPixel() {
    // A dense trace: at full zoom-out the answer must stay near the pixel count, and reading it
    // must not touch most rows.
    const RandomTrace dense = makeTrace(99, 30000);
    const QString path = writeTrace(dense, "dense.db", true);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    const int pixels = 500;
    const auto result = r.opsLod(0, dense.span, pixels);
    QVERIFY(result.level >= 0);
    std::size_t most = 0;
    for (const auto& lane : result.lanes) {
        most = std::max(most, lane.entries.size());
        QVERIFY(std::is_sorted(
            lane.entries.begin(), lane.entries.end(),
            [](const LodEntry& a, const LodEntry& b) { return a.start_ns < b.start_ns; }));
    }
    QVERIFY2(most <= std::size_t(2 * pixels),
             qPrintable(QString("%1 entries in one lane").arg(most)));
    QVERIFY2(result.rows_read < static_cast<std::int64_t>(dense.ops.size()) / 4,
             qPrintable(QString("read %1 of %2 rows").arg(result.rows_read).arg(dense.ops.size())));
}

void TstTraceLod::foldedTiesKeepTheFirstKind() {
    // F and B of one duration take turns, two of each per W_2 bucket: every stored entry holds
    // as much F as B, and the first kind, F, colours it (as an entry folded on reading does).
    RandomTrace t;
    t.ranks = 1;
    for (int p = 0; p < 2000; ++p) {
        for (const auto& [kind, offset] : {std::pair{OpKind::F, 0}, std::pair{OpKind::B, 4096}}) {
            OpRecord o;
            o.rank = 0;
            o.kind = kind;
            o.microbatch = p % 8;
            o.op_index = static_cast<int>(t.ops.size());
            o.start_ns = std::int64_t{p} * 8192 + offset;
            o.end_ns = o.start_ns + 100;
            o.id = static_cast<std::int64_t>(t.ops.size()) + 1;
            t.ops.push_back(o);
            t.span = o.end_ns;
        }
    }
    // Then an op exactly W_3 long, the shortest that level 3 does not fold: it stays itself.
    OpRecord wide = t.ops.back();
    wide.op_index += 1;
    wide.id += 1;
    wide.start_ns = 16'400'000;
    wide.end_ns = wide.start_ns + lodWidth(3);
    t.ops.push_back(wide);
    t.span = wide.end_ns;
    const QString path = writeTrace(t, "ties.db", true);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    LodOptions no_folding;
    no_folding.fold_pixels = 0;
    const auto result = r.opsLod(0, t.span, 100, no_folding);
    QCOMPARE(result.level, 3);
    std::size_t entries = 0;
    bool wide_seen = false;
    for (const auto& lane : result.lanes) {
        for (const auto& e : lane.entries) {
            if (e.op_id >= 0) {
                QCOMPARE(e.op_id, wide.id);
                wide_seen = true;
                continue;
            }
            QVERIFY2(e.kind == OpKind::F && e.mixed, qPrintable(describe(e)));
            ++entries;
        }
    }
    QVERIFY(wide_seen);
    QVERIFY(entries > 10);

    // Two ops whose joined span is exactly the fold threshold (2 pixels) fold into one entry.
    RandomTrace pair;
    pair.ranks = 1;
    for (const auto& [start, end] : {std::pair{0, 50}, std::pair{100, 200}}) {
        OpRecord o;
        o.rank = 0;
        o.op_index = static_cast<int>(pair.ops.size());
        o.start_ns = start;
        o.end_ns = end;
        o.id = static_cast<std::int64_t>(pair.ops.size()) + 1;
        pair.ops.push_back(o);
    }
    const QString pair_path = writeTrace(pair, "fold-threshold.db", true);
    TraceReader p;
    QVERIFY(p.open(pair_path.toStdString()).ok());
    const auto folded = p.opsLod(0, 1000, 10);  // 100 ns a pixel: a threshold of 200 ns
    QCOMPARE(folded.lanes.front().entries.size(), std::size_t(1));
    QCOMPARE(folded.lanes.front().entries.front().count, 2);
}

void TstTraceLod::windowsStartingInsideAFoldedEntry() {
    // A folded entry can begin up to 2 W before a window and still reach into it (a bucket of
    // narrow ops and the last one's length): windows that start just before such entries end.
    const std::int64_t span = trace_.span;
    const int pixels = 400;
    int checked = 0;
    for (int level = 2; level < kLodLevels && lodWidth(level) * pixels < span; ++level) {
        const auto probe = reader_.opsLod(0, lodWidth(level) * pixels, pixels);
        if (probe.level != level) {
            continue;
        }
        for (int rank = 0; rank < trace_.ranks; ++rank) {
            int here = 0;
            for (const auto& g : foldedGroups(trace_, rank, 0, level)) {
                if (g.end_ns - g.start_ns <= lodWidth(level) + 1 || here == 5) {
                    continue;
                }
                const std::int64_t t0 = g.end_ns - 1;
                compareWithBruteForce(t0, t0 + lodWidth(level) * pixels, pixels);
                if (QTest::currentTestFailed()) {
                    return;
                }
                ++here;
                ++checked;
            }
        }
    }
    QVERIFY2(checked > 0, "no folded entry longer than its bucket width");
}

void TstTraceLod::memoryLodKeepsDips() {
    // A level that dips for one sample in ten: every pixel of a zoomed-out view shows the dip.
    RandomTrace t;
    t.ranks = 1;
    for (int i = 0; i < 2000; ++i) {
        t.memory.push_back(
            {0, std::int64_t{i} * 1000, i % 10 == 5 ? 10 : 1000, MemoryCategory::Weights});
    }
    OpRecord o;
    o.rank = 0;
    o.id = 1;
    o.end_ns = 2'000'000;
    t.ops.push_back(o);
    const QString path = writeTrace(t, "dips.db", true);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    const auto result = r.memoryLod(0, 0, 2'000'000, 10);
    QVERIFY2(result.level >= 0, "the view reads raw samples, not levels");
    for (const auto& px : result.pixels) {
        QCOMPARE(px.max[kMemoryCategoryCount], std::int64_t{1000});
        if (px.t_ns > 0) {  // the first pixel starts from nothing allocated
            QCOMPARE(px.min[kMemoryCategoryCount], std::int64_t{10});
            QCOMPARE(px.min[0], std::int64_t{10});
        }
    }
}

void TstTraceLod::memoryLodStartsEachRankEmpty() {
    // Rank 0 holds weights and gradients, rank 1 only weights: rank 1's summary levels count
    // none of rank 0's gradients (its first samples set one category of seven).
    RandomTrace t;
    t.ranks = 2;
    for (int i = 0; i < 2000; ++i) {
        const std::int64_t at = std::int64_t{i} * 1000;
        t.memory.push_back({0, at, 1000, MemoryCategory::Weights});
        t.memory.push_back({0, at, 500, MemoryCategory::Grads});
        t.memory.push_back({1, at, 100 + i % 2, MemoryCategory::Weights});
    }
    OpRecord o;
    o.rank = 0;
    o.id = 1;
    o.end_ns = 2'000'000;
    t.ops.push_back(o);
    const QString path = writeTrace(t, "two-ranks-memory.db", true);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    const auto result = r.memoryLod(1, 0, 2'000'000, 10);
    QVERIFY2(result.level >= 0, "the view reads raw samples, not levels");
    QVERIFY(!result.pixels.empty());
    for (const auto& px : result.pixels) {
        QVERIFY2(px.max[kMemoryCategoryCount] <= 101,
                 qPrintable(QString("rank 1 at %1 ns: a total of %2 bytes, expected at most 101")
                                .arg(px.t_ns)
                                .arg(px.max[kMemoryCategoryCount])));
        QCOMPARE(px.max[static_cast<std::size_t>(MemoryCategory::Grads)], std::int64_t{0});
    }
}

void TstTraceLod::memoryLodRawIsExact_data() {
    QTest::addColumn<std::int64_t>("offset");
    QTest::newRow("starting between samples") << std::int64_t{-500};
    QTest::newRow("starting at a sample") << std::int64_t{0};
}

void TstTraceLod::memoryLodRawIsExact() {
    // Narrow windows are answered from raw samples: compare pixel by pixel.
    QFETCH(std::int64_t, offset);
    const int rank = 1;
    std::vector<MemorySample> samples;
    for (const auto& m : trace_.memory) {
        if (m.rank == rank) {
            samples.push_back(m);
        }
    }
    const std::int64_t t0 = samples[samples.size() / 2].t_ns + offset;
    const std::int64_t t1 = t0 + 100'000;
    const int pixels = 400;
    const auto result = reader_.memoryLod(rank, t0, t1, pixels);
    QCOMPARE(result.level, -1);
    std::array<std::int64_t, kMemoryCategoryCount> cur{};
    std::size_t i = 0;
    auto total = [&] {
        std::int64_t s = 0;
        for (auto v : cur) {
            s += v;
        }
        return s;
    };
    for (; i < samples.size() && samples[i].t_ns < t0; ++i) {
        cur[static_cast<std::size_t>(samples[i].category)] = samples[i].bytes;
    }
    for (int p = 0; p < pixels; ++p) {
        const auto& px = result.pixels[static_cast<std::size_t>(p)];
        const auto end = p + 1 == pixels ? t1 : result.pixels[static_cast<std::size_t>(p + 1)].t_ns;
        std::int64_t lo = total(), hi = total();
        while (i < samples.size() && samples[i].t_ns < end) {
            const auto t = samples[i].t_ns;
            while (i < samples.size() && samples[i].t_ns == t) {
                cur[static_cast<std::size_t>(samples[i].category)] = samples[i].bytes;
                ++i;
            }
            lo = std::min(lo, total());
            hi = std::max(hi, total());
        }
        QCOMPARE(px.min[kMemoryCategoryCount], lo);
        QCOMPARE(px.max[kMemoryCategoryCount], hi);
        QCOMPARE(px.last[kMemoryCategoryCount], total());
    }
}

void TstTraceLod::memoryLodKeepsPeaks() {
    for (int rank = 0; rank < 3; ++rank) {
        std::array<std::int64_t, kMemoryCategoryCount> cur{};
        std::int64_t peak = 0, last = 0;
        std::vector<MemorySample> samples;
        for (const auto& m : trace_.memory) {
            if (m.rank == rank) {
                samples.push_back(m);
            }
        }
        for (std::size_t i = 0; i < samples.size();) {
            const auto t = samples[i].t_ns;
            while (i < samples.size() && samples[i].t_ns == t) {
                cur[static_cast<std::size_t>(samples[i].category)] = samples[i].bytes;
                ++i;
            }
            last = 0;
            for (auto v : cur) {
                last += v;
            }
            peak = std::max(peak, last);
        }
        QVERIFY(!samples.empty());
        const std::int64_t end = samples.back().t_ns + 1;
        for (int pixels : {1000, 100, 7}) {
            const auto result = reader_.memoryLod(rank, 0, end, pixels);
            // Samples are about 1 ms apart: 1000 pixels still read raw rows, fewer use levels.
            QVERIFY(pixels > 100 || result.level >= 0);
            std::int64_t got = 0;
            for (const auto& px : result.pixels) {
                got = std::max(got, px.max[kMemoryCategoryCount]);
            }
            QCOMPARE(got, peak);
            QCOMPARE(result.pixels.back().last[kMemoryCategoryCount], last);
        }
    }
}

void TstTraceLod::unfinishedTraceStillAnswers() {
    const RandomTrace small = makeTrace(5, 300);
    const QString path = writeTrace(small, "unfinished.db", false);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QVERIFY(!r.finalized());
    QCOMPARE(int(r.run().status), int(RunStatus::Running));
    QCOMPARE(r.iterationCount(), 3);  // iterations 0 to 2, counted from the ops
    const auto result = r.opsLod(0, small.span, 300);
    QCOMPARE(result.level, -1);
    const double threshold = 2.0 * result.ns_per_pixel;
    for (const auto& lane : result.lanes) {
        const auto expected =
            expectedLane(small, lane.rank, int(lane.lane), -1, 0, small.span, threshold);
        QCOMPARE(lane.entries.size(), expected.size());
    }
    QCOMPARE(r.ops(2, 0, small.span).size(),
             static_cast<std::size_t>(
                 std::count_if(small.ops.begin(), small.ops.end(), [&](const OpRecord& o) {
                     return o.rank == 2 && overlapsWindow(o, 0, small.span);
                 })));
}

void TstTraceLod::emptyTraceHasNoIterations() {
    // A finished run without ops (a run stopped before its first op) has no iterations, as an
    // unfinished one without ops has none.
    const RandomTrace empty;
    for (const bool finish : {true, false}) {
        const QString path = writeTrace(empty, finish ? "empty.db" : "empty-unfinished.db", finish);
        TraceReader r;
        QVERIFY(r.open(path.toStdString()).ok());
        QCOMPARE(r.finalized(), finish);
        QCOMPARE(r.opCount(), std::int64_t{0});
        QCOMPARE(r.iterationCount(), 0);
    }
}

void TstTraceLod::levelsSkipOpsOfANewerKind() {
    // A file of a newer minor format may hold op kinds this build does not know (kind ==
    // kOpKindCount is the first of them). The summary levels leave them out as the raw views
    // do: counted into a folded entry they made it "mixed" and wrote past the per-kind sums.
    RandomTrace t;
    t.ranks = 1;
    for (int i = 0; i < 2000; ++i) {
        OpRecord o;
        o.rank = 0;
        o.id = i + 1;
        o.lane = Lane::Compute;
        o.kind = i % 2 == 0 ? OpKind::F : static_cast<OpKind>(kOpKindCount);
        o.microbatch = i;
        o.op_index = i;
        o.start_ns = std::int64_t{i} * 1000;
        o.end_ns = o.start_ns + 100;
        t.ops.push_back(o);
    }
    t.span = t.ops.back().end_ns;
    const QString path = writeTrace(t, "newer-kind.db", true);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QVERIFY(r.finalized());
    for (const int pixels : {100, 10}) {
        const auto result = r.opsLod(0, t.span, pixels);
        QVERIFY2(result.level >= 0, "the view reads raw ops, not levels");
        std::int64_t counted = 0;
        std::int64_t busy = 0;
        for (const auto& lane : result.lanes) {
            for (const auto& e : lane.entries) {
                QVERIFY2(lane.lane == Lane::Compute && e.kind == OpKind::F && !e.mixed,
                         qPrintable(describe(e)));
                counted += e.count;
                busy += e.busy_ns;
            }
        }
        QCOMPARE(counted, std::int64_t{1000});
        QCOMPARE(busy, std::int64_t{1000 * 100});
    }
}

void TstTraceLod::damagedLevelsAreNotTrusted() {
    // Level keys in pipescope_meta that no writer gives (a damaged or edited file): 2^32 + 3
    // read as an int is 3, 2^31 + 1 is negative. Found by fuzzing: a max_dur_level of
    // -2147483649 hung `pipescope --export memory` (billions of levels); these left ops out.
    const RandomTrace t = makeTrace(11, 800);
    const QString path = writeTrace(t, "damaged-levels.db", true);
    std::vector<std::int64_t> peaks;
    {
        TraceReader sound;
        QVERIFY(sound.open(path.toStdString()).ok());
        for (int rank = 0; rank < t.ranks; ++rank) {
            std::int64_t peak = 0;
            for (const auto& px : sound.memoryLod(rank, 0, t.span, 50).pixels) {
                peak = std::max(peak, px.max[kMemoryCategoryCount]);
            }
            peaks.push_back(peak);
        }
    }
    sqlite3* db = nullptr;
    QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
    QCOMPARE(sqlite3_exec(db,
                          "UPDATE pipescope_meta SET value = '4294967299' WHERE key = "
                          "'max_dur_level';"
                          "UPDATE pipescope_meta SET value = '-3' WHERE key = 'op_lod_min_level';"
                          "UPDATE pipescope_meta SET value = '4294967298' WHERE key = "
                          "'op_lod_max_level';"
                          "UPDATE pipescope_meta SET value = '2147483649' WHERE key = "
                          "'memory_lod_min_level';"
                          "UPDATE pipescope_meta SET value = '4294967297' WHERE key = "
                          "'memory_lod_max_level';",
                          nullptr, nullptr, nullptr),
             SQLITE_OK);
    sqlite3_close(db);

    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    for (int rank = 0; rank < t.ranks; ++rank) {
        const auto expected = std::count_if(t.ops.begin(), t.ops.end(), [&](const OpRecord& o) {
            return o.rank == rank && overlapsWindow(o, 0, t.span);
        });
        QCOMPARE(static_cast<std::int64_t>(r.ops(rank, 0, t.span).size()),
                 static_cast<std::int64_t>(expected));
    }
    const auto lod = r.opsLod(0, t.span, 200);
    for (const auto& lane : lod.lanes) {
        std::int64_t counted = 0;
        for (const auto& e : lane.entries) {
            counted += e.count;
        }
        const auto in_window = std::count_if(t.ops.begin(), t.ops.end(), [&](const OpRecord& o) {
            return o.rank == lane.rank && o.lane == lane.lane && overlapsWindow(o, 0, t.span);
        });
        QCOMPARE(counted, static_cast<std::int64_t>(in_window));
    }
    for (int rank = 0; rank < t.ranks; ++rank) {
        std::int64_t peak = 0;
        for (const auto& px : r.memoryLod(rank, 0, t.span, 50).pixels) {
            peak = std::max(peak, px.max[kMemoryCategoryCount]);
        }
        QCOMPARE(peak, peaks[static_cast<std::size_t>(rank)]);
    }
}

void TstTraceLod::damagedTimeRangeIsNotTrusted() {
    // time_start_ns and time_end_ns the ops do not fit (found by fuzzing: an end edited to
    // 2^63 - 1 opened the app's timeline on 292 years of empty lanes, a start of 2^63 - 1 on a
    // millisecond): the range is taken from the ops instead.
    const RandomTrace t = makeTrace(12, 500);
    const QString path = writeTrace(t, "damaged-range.db", true);
    TimeRange sound;
    {
        TraceReader r;
        QVERIFY(r.open(path.toStdString()).ok());
        sound = r.timeRange();
    }
    QVERIFY(sound.end_ns > sound.start_ns);
    const auto edit = [&](const std::string& sql) {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    };
    const std::string start = std::to_string(sound.start_ns);
    const std::string end = std::to_string(sound.end_ns);
    for (const auto& [key, value] :
         std::vector<std::pair<std::string, std::string>>{{"time_end_ns", "9223372036854775807"},
                                                          {"time_end_ns", "-5"},
                                                          {"time_start_ns", "9223372036854775807"},
                                                          {"time_start_ns", "-9223372036854775808"},
                                                          {"time_start_ns", "banana"}}) {
        edit("UPDATE pipescope_meta SET value = '" + start +
             "' WHERE key = 'time_start_ns';"
             "UPDATE pipescope_meta SET value = '" +
             end +
             "' WHERE key = 'time_end_ns';"
             "UPDATE pipescope_meta SET value = '" +
             value + "' WHERE key = '" + key + "';");
        TraceReader r;
        QVERIFY(r.open(path.toStdString()).ok());
        QVERIFY2(r.timeRange().start_ns == sound.start_ns && r.timeRange().end_ns == sound.end_ns,
                 qPrintable(QString("%1 = %2: [%3, %4), expected [%5, %6)")
                                .arg(QString::fromStdString(key), QString::fromStdString(value))
                                .arg(r.timeRange().start_ns)
                                .arg(r.timeRange().end_ns)
                                .arg(sound.start_ns)
                                .arg(sound.end_ns)));
    }
}

void TstTraceLod::wrongLevelsInRangeAreNotTrusted() {
    // Level keys within their ranges but not what the writer recorded (a damaged or edited
    // file): a max_dur_level below the ops' left the longer ops out of every window, a summary
    // level the tables do not hold drew the lanes and the memory empty when zoomed out. The
    // reader checks them against the tables on open and reads raw rows instead.
    const RandomTrace t = makeTrace(13, 800);
    const QString path = writeTrace(t, "wrong-levels.db", true);
    const auto meta = [&](const char* key) {
        sqlite3* db = nullptr;
        sqlite3_stmt* s = nullptr;
        std::int64_t v = -1;
        if (sqlite3_open(path.toUtf8().constData(), &db) == SQLITE_OK &&
            sqlite3_prepare_v2(db, "SELECT value FROM pipescope_meta WHERE key = ?", -1, &s,
                               nullptr) == SQLITE_OK &&
            sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW) {
            v = sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
        sqlite3_close(db);
        return v;
    };
    const std::int64_t max_dur = meta("max_dur_level");
    const std::int64_t op_min = meta("op_lod_min_level");
    const std::int64_t op_max = meta("op_lod_max_level");
    const std::int64_t mem_min = meta("memory_lod_min_level");
    const std::int64_t mem_max = meta("memory_lod_max_level");
    // The edits below stay in range and change what the queries read.
    QVERIFY(max_dur >= 2 && op_min >= 1 && op_max + 2 < kLodLevels && op_max >= op_min);
    QVERIFY(mem_min >= 1 && mem_max + 2 < kLodLevels && mem_max >= mem_min);

    // Windows that ask for the levels edited: below the lowest stored level, and coarser than the
    // highest (the whole run, and 20 times its span per pixel).
    const std::int64_t mid = t.span / 2;
    const auto below = [](std::int64_t lowest) { return lodWidth(static_cast<int>(lowest) - 1); };
    const std::vector<std::pair<std::int64_t, std::int64_t>> windows = {
        {mid, mid + below(op_min) * 1500},
        {mid, mid + below(mem_min) * 1500},
        {0, t.span},
        {-t.span * 10000, t.span * 10000}};
    std::vector<std::vector<std::int64_t>> peaks;  // per window and rank, from the sound file
    {
        TraceReader sound;
        QVERIFY(sound.open(path.toStdString()).ok());
        for (const auto& [t0, t1] : windows) {
            peaks.emplace_back();
            for (int rank = 0; rank < t.ranks; ++rank) {
                std::int64_t peak = 0;
                for (const auto& px : sound.memoryLod(rank, t0, t1, 1000).pixels) {
                    peak = std::max(peak, px.max[kMemoryCategoryCount]);
                }
                peaks.back().push_back(peak);
            }
        }
    }
    const auto set = [&](const char* key, std::int64_t value) {
        sqlite3* db = nullptr;
        QCOMPARE(sqlite3_open(path.toUtf8().constData(), &db), SQLITE_OK);
        const std::string sql = "UPDATE pipescope_meta SET value = '" + std::to_string(value) +
                                "' WHERE key = '" + key + "'";
        QCOMPARE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK);
        sqlite3_close(db);
    };
    const std::vector<std::tuple<const char*, std::int64_t, std::int64_t>> edits = {
        {"max_dur_level", max_dur, max_dur - 2},
        {"op_lod_min_level", op_min, 0},
        {"op_lod_max_level", op_max, op_max + 2},
        {"memory_lod_min_level", mem_min, 0},
        {"memory_lod_max_level", mem_max, mem_max + 2}};
    for (const auto& [key, sound, wrong] : edits) {
        set(key, wrong);
        TraceReader r;
        QVERIFY(r.open(path.toStdString()).ok());
        for (std::size_t w = 0; w < windows.size(); ++w) {
            const auto [t0, t1] = windows[w];
            const QString where =
                QString("%1 = %2, window [%3, %4)").arg(key).arg(wrong).arg(t0).arg(t1);
            for (int rank = 0; rank < t.ranks; ++rank) {
                const auto expected = std::count_if(
                    t.ops.begin(), t.ops.end(), [&, t0 = t0, t1 = t1](const OpRecord& o) {
                        return o.rank == rank && overlapsWindow(o, t0, t1);
                    });
                QVERIFY2(static_cast<std::int64_t>(r.ops(rank, t0, t1).size()) == expected,
                         qPrintable(where));
            }
            for (const auto& lane : r.opsLod(t0, t1, 1000).lanes) {
                std::int64_t counted = 0;
                for (const auto& e : lane.entries) {
                    counted += e.count;
                }
                const auto in_window = std::count_if(
                    t.ops.begin(), t.ops.end(), [&, t0 = t0, t1 = t1](const OpRecord& o) {
                        return o.rank == lane.rank && o.lane == lane.lane &&
                               overlapsWindow(o, t0, t1);
                    });
                QVERIFY2(counted >= in_window,
                         qPrintable(QString("%1: rank %2 lane %3 shows %4 of %5 ops")
                                        .arg(where)
                                        .arg(lane.rank)
                                        .arg(int(lane.lane))
                                        .arg(counted)
                                        .arg(in_window)));
            }
            for (int rank = 0; rank < t.ranks; ++rank) {
                std::int64_t peak = 0;
                for (const auto& px : r.memoryLod(rank, t0, t1, 1000).pixels) {
                    peak = std::max(peak, px.max[kMemoryCategoryCount]);
                }
                QVERIFY2(peak == peaks[w][static_cast<std::size_t>(rank)],
                         qPrintable(QString("%1: rank %2 memory peak %3, expected %4")
                                        .arg(where)
                                        .arg(rank)
                                        .arg(peak)
                                        .arg(peaks[w][static_cast<std::size_t>(rank)])));
            }
        }
        set(key, sound);
    }
    // The sound file's levels are still used.
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    QVERIFY(r.opsLod(0, t.span, 100).level >= 0);
    QVERIFY(r.memoryLod(0, 0, t.span, 100).level >= 0);
}

void TstTraceLod::memoryTotalsNeverWrap() {
    // Levels that add up past 2^63 - 1 bytes (a damaged or edited trace: two categories of 2^62
    // bytes each): the total is held at 2^63 - 1, in the raw samples' pixels and in the summary
    // levels the writer builds, not wrapped by signed overflow to a negative memory.
    RandomTrace t = makeTrace(14, 400);
    std::int64_t at = t.span;
    for (const auto& m : t.memory) {
        at = std::max(at, m.t_ns);
    }
    at += 1000;
    const std::int64_t huge = std::int64_t{1} << 62;
    t.memory.push_back({0, at, huge, MemoryCategory::Weights});
    t.memory.push_back({0, at + 1000, huge, MemoryCategory::Grads});
    t.memory.push_back({0, at + 2000, huge, MemoryCategory::Optimizer});
    const QString path = writeTrace(t, "memory-wrap.db", true);
    TraceReader r;
    QVERIFY(r.open(path.toStdString()).ok());
    for (const auto& [t0, t1, pixels] : std::vector<std::tuple<std::int64_t, std::int64_t, int>>{
             {at - 500, at + 2500, 600}, {0, at + 3000, 40}}) {
        const auto result = r.memoryLod(0, t0, t1, pixels);
        std::int64_t most = 0;
        for (const auto& px : result.pixels) {
            QVERIFY2(px.min[kMemoryCategoryCount] >= 0 && px.last[kMemoryCategoryCount] >= 0,
                     qPrintable(QString("level %1: a total of %2 bytes")
                                    .arg(result.level)
                                    .arg(px.min[kMemoryCategoryCount])));
            most = std::max(most, px.max[kMemoryCategoryCount]);
        }
        QCOMPARE(most, INT64_MAX);
    }
}

QTEST_GUILESS_MAIN(TstTraceLod)
#include "tst_trace_lod.moc"
