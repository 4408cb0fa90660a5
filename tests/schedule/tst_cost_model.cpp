// The analytic cost model against docs/cost-model.md: its worked example on
// resources/presets/default.json, the vocabulary terms under naive at the end positions, the split
// backward, the sharded passes of vocab-1, the communication bytes of every collective and their
// times. The expected values are written out from the doc's formulas, not taken from the code.
#include <QtTest>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/model_math.h>

#include "testsupport.h"

using namespace pipescope::schedule;

namespace {

// default.json: s = 64, b = 1, h = 128, f = 512, d = 4, V = 32768, p = 4, 2 layers per stage,
// 5e10 FLOP/s, 20 GB/s memory, 10 GB/s links, 5 us latency.
constexpr double kGemm = 0.1e12 * 0.5;
constexpr double kMemory = 20e9;
constexpr double kLink = 10e9;
constexpr double kLatency = 5e-6;
constexpr double kLayerForward = 27262976;         // 8bsh² + 4bs²h + 4bshf
constexpr double kLayerBackwardInput = 29360128;   // 8bsh² + 8bs²h + 4bshf
constexpr double kLayerBackwardWeight = 25165824;  // 8bsh² + 4bshf
constexpr double kHidden = 32768;                  // s·b·h·4 bytes (fp32)
constexpr double kParamsPerLayer = 198272;

Config preset(const std::vector<std::string>& sets) {
    std::vector<Override> ov;
    for (const auto& kv : sets) {
        std::string why;
        auto o = parseOverride(kv, &why);
        if (!o) {
            qFatal("%s", why.c_str());
        }
        ov.push_back(*o);
    }
    const auto r = loadConfigFile(
        pipescope::test::sourcePath("resources/presets/default.json").toStdString(), ov);
    if (!r.ok()) {
        qFatal("%s", r.errorText().c_str());
    }
    return *r.config;
}

Op op(OpKind kind, int mb = 0, int chunk = 0) {
    Op o;
    o.kind = kind;
    o.microbatch = mb;
    o.chunk = chunk;
    return o;
}

Op collective(Collective c, int mb) {
    Op o;
    o.kind = c == Collective::OutputBcast || c == Collective::InputGradBcast ? OpKind::Bcast
                                                                             : OpKind::AllReduce;
    o.collective = c;
    o.microbatch = mb;
    return o;
}

// Equal within a nanosecond's millionth: every value here is a few FLOPs or bytes over a rate.
bool near(double a, double b) {
    return std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

#define CHECK_NEAR(actual, expected)                                                     \
    QVERIFY2(near((actual), (expected)), qPrintable(QString("%1 is %2 s, expected %3 s") \
                                                        .arg(#actual)                    \
                                                        .arg((actual), 0, 'g', 12)       \
                                                        .arg((expected), 0, 'g', 12)))

}  // namespace

class TstCostModel : public QObject {
    Q_OBJECT

  private slots:
    void workedExample();
    void splitBackwardOnVocab2();
    void naiveEndPositions();
    void naiveSplitBackwardKeepsTheOutputLayerInB();
    void vocab1Passes();
    void optimizerAndLoss();
    void collectiveBytes();
    void collectiveTimes();
    void bf16BytesAreOfTheirDtype();
};

void TstCostModel::workedExample() {
    const Config c = preset({});
    const Placement pl = computePlacement(c);
    const AnalyticCostModel m(c, pl);
    for (int rank = 0; rank < 4; ++rank) {
        // vocab-2 takes the vocabulary out of F and B at every position.
        CHECK_NEAR(m.compute(rank, op(OpKind::F)), 2 * kLayerForward / kGemm);
        CHECK_NEAR(m.compute(rank, op(OpKind::B)),
                   2 * (kLayerBackwardInput + kLayerBackwardWeight) / kGemm);
    }
    QCOMPARE(std::llround(m.compute(0, op(OpKind::F)) * 1e7), 10905LL);  // 1090.5 us
    // S: 4bsh·V'/p FLOPs + 3 × 4bs·V'/p bytes; T: 2bsh·V'/p + 2 × 4bs·V'/p.
    CHECK_NEAR(m.compute(1, op(OpKind::S)), 268435456 / kGemm + 6291456 / kMemory);
    CHECK_NEAR(m.compute(1, op(OpKind::T)), 134217728 / kGemm + 4194304 / kMemory);
    QCOMPARE(std::llround(m.compute(1, op(OpKind::S)) * 1e7), 56833LL);  // 5683.3 us
    QCOMPARE(std::llround(m.compute(1, op(OpKind::T)) * 1e7), 28941LL);  // 2894.1 us
    CHECK_NEAR(m.compute(2, op(OpKind::IF)), 2 * kHidden / kMemory);
    CHECK_NEAR(m.compute(2, op(OpKind::IB)), 3 * kHidden / kMemory);
    Op send = op(OpKind::SendF);
    send.peer = 1;
    CHECK_NEAR(m.send(0, send), kLatency + kHidden / kLink);
}

void TstCostModel::splitBackwardOnVocab2() {
    const Config c = preset({"parallel.schedule=zb-h1"});
    const Placement pl = computePlacement(c);
    const AnalyticCostModel m(c, pl);
    for (int rank = 0; rank < 4; ++rank) {
        CHECK_NEAR(m.compute(rank, op(OpKind::B)), 2 * kLayerBackwardInput / kGemm);
        CHECK_NEAR(m.compute(rank, op(OpKind::W)), 2 * kLayerBackwardWeight / kGemm);
    }
}

void TstCostModel::naiveEndPositions() {
    const Config c = preset({"parallel.vocab=naive"});
    const Placement pl = computePlacement(c);
    const AnalyticCostModel m(c, pl);
    const double f = 2 * kLayerForward / kGemm;
    const double b = 2 * (kLayerBackwardInput + kLayerBackwardWeight) / kGemm;
    // Position 0: + the embedding lookup (2sbhd) in F, + its scatter-add (sbhd + 2 · 4sbh) in B.
    CHECK_NEAR(m.compute(0, op(OpKind::F)), f + 2 * kHidden / kMemory);
    CHECK_NEAR(m.compute(0, op(OpKind::B)), b + 3 * kHidden / kMemory);
    // Middle positions: the layers only.
    for (int rank : {1, 2}) {
        CHECK_NEAR(m.compute(rank, op(OpKind::F)), f);
        CHECK_NEAR(m.compute(rank, op(OpKind::B)), b);
    }
    // The last position: + the output projection (2bshV) and 3 × 4bsV bytes of softmax in F,
    // + 4bshV and 2 × 4bsV in B.
    const double v = 32768;
    CHECK_NEAR(m.compute(3, op(OpKind::F)),
               f + 2 * 64 * 128 * v / kGemm + 3 * 4 * 64 * v / kMemory);
    CHECK_NEAR(m.compute(3, op(OpKind::B)),
               b + 4 * 64 * 128 * v / kGemm + 2 * 4 * 64 * v / kMemory);
}

void TstCostModel::naiveSplitBackwardKeepsTheOutputLayerInB() {
    const Config c = preset({"parallel.vocab=naive", "parallel.schedule=zb-h1"});
    const Placement pl = computePlacement(c);
    const AnalyticCostModel m(c, pl);
    const double v = 32768;
    CHECK_NEAR(
        m.compute(3, op(OpKind::B)),
        2 * kLayerBackwardInput / kGemm + 4 * 64 * 128 * v / kGemm + 2 * 4 * 64 * v / kMemory);
    CHECK_NEAR(m.compute(3, op(OpKind::W)), 2 * kLayerBackwardWeight / kGemm);
}

void TstCostModel::vocab1Passes() {
    // vocab-1 on V = 32767: the shard is of the padded vocabulary, 8192 rows.
    const Config c = preset({"parallel.vocab=vocab-1", "model.vocab=32767"});
    QCOMPARE(paddedVocab(c), std::int64_t{32768});
    const Placement pl = computePlacement(c);
    const AnalyticCostModel m(c, pl);
    const double shard = 8192;
    CHECK_NEAR(m.compute(0, op(OpKind::S)),
               2 * 64 * 128 * shard / kGemm + 3 * 4 * 64 * shard / kMemory);
    CHECK_NEAR(m.compute(0, op(OpKind::T)),
               4 * 64 * 128 * shard / kGemm + 2 * 4 * 64 * shard / kMemory);
}

void TstCostModel::optimizerAndLoss() {
    const Config c = preset({});
    const Placement pl = computePlacement(c);
    const AnalyticCostModel m(c, pl);
    // Each rank: 2 layers, 2 · (V'/p) · h vocabulary rows; + s·h on rank 0, + 2h on rank 3.
    const double transformer = 2 * kParamsPerLayer;
    const double vocab = 2 * 8192 * 128;
    const double params[] = {transformer + vocab + 64 * 128, transformer + vocab,
                             transformer + vocab, transformer + vocab + 2 * 128};
    for (int rank = 0; rank < 4; ++rank) {
        Op opt = op(OpKind::Opt, -1);
        // AdamW reads and writes weights, gradients and both moments: 16 bytes each in fp32.
        CHECK_NEAR(m.compute(rank, opt), 2 * params[rank] * 16 / kMemory);
    }
    CHECK_NEAR(m.compute(3, op(OpKind::L)), 2 * kHidden / kMemory);
}

void TstCostModel::collectiveBytes() {
    const Config v2 = preset({});
    const Config v1 = preset({"parallel.vocab=vocab-1"});
    const Config il = preset({"parallel.vocab=interlaced"});
    const std::int64_t sbh4 = 32768;  // X(i), fp32
    const std::int64_t sb4 = 256;     // g(i), fp32
    // [X(i) ‖ g(i−1)]: X alone for i = 0, g alone for i = m (8), both between.
    QCOMPARE(commBytes(v2, collective(Collective::OutputBcast, 0)), sbh4);
    QCOMPARE(commBytes(v2, collective(Collective::OutputBcast, 3)), sbh4 + sb4);
    QCOMPARE(commBytes(v2, collective(Collective::OutputBcast, 8)), sb4);
    QCOMPARE(commBytes(v1, collective(Collective::OutputBcast, 0)), sbh4);
    QCOMPARE(commBytes(v1, collective(Collective::OutputBcast, 5)), sbh4 + sb4);
    QCOMPARE(commBytes(il, collective(Collective::OutputBcast, 5)), sbh4);
    // Max, sum of exponentials and target logit; vocab-2 adds the partial input gradient.
    QCOMPARE(commBytes(v1, collective(Collective::OutputAllReduce, 2)), 3 * sb4);
    QCOMPARE(commBytes(il, collective(Collective::OutputAllReduce, 2)), 3 * sb4);
    QCOMPARE(commBytes(v2, collective(Collective::OutputAllReduce, 2)), 3 * sb4 + sbh4);
    QCOMPARE(commBytes(v1, collective(Collective::OutputGradAllReduce, 2)), sbh4);
    QCOMPARE(commBytes(v2, collective(Collective::InputAllReduce, 2)), sbh4);
    QCOMPARE(commBytes(v2, collective(Collective::InputGradBcast, 2)), sbh4);
    QCOMPARE(commBytes(v2, op(OpKind::RecvB, 2)), sbh4);
}

void TstCostModel::collectiveTimes() {
    const Config c = preset({});
    const AnalyticCostModel m(c, computePlacement(c));
    // A ring all-reduce moves 2 (p − 1) / p of the bytes; a broadcast all of them once.
    CHECK_NEAR(m.collective(collective(Collective::OutputAllReduce, 1)),
               kLatency + 2.0 * 3 / 4 * (3 * 256 + 32768) / kLink);
    CHECK_NEAR(m.collective(collective(Collective::OutputBcast, 1)),
               kLatency + (32768 + 256) / kLink);
    const Config one = preset({"parallel.pipeline=1"});
    const AnalyticCostModel single(one, computePlacement(one));
    QCOMPARE(single.collective(collective(Collective::OutputAllReduce, 1)), 0.0);
}

void TstCostModel::bf16BytesAreOfTheirDtype() {
    // d = 2: the activations and sends are bf16, the loss's s·b·h tensor and the gradient rows
    // of the input layer fp32 (docs/cost-model.md: IF 2sbhd, IB sbhd + 2 · 4sbh, L 2 · 4sbh).
    const Config c = preset({"model.dtype=bf16"});
    const AnalyticCostModel m(c, computePlacement(c));
    const double sbh = 64 * 128;
    CHECK_NEAR(m.compute(0, op(OpKind::IF)), 2 * sbh * 2 / kMemory);
    CHECK_NEAR(m.compute(0, op(OpKind::IB)), (sbh * 2 + 2 * 4 * sbh) / kMemory);
    CHECK_NEAR(m.compute(3, op(OpKind::L)), 2 * 4 * sbh / kMemory);
    Op send = op(OpKind::SendB);
    send.peer = 0;
    CHECK_NEAR(m.send(1, send), kLatency + sbh * 2 / kLink);
    // AdamW on bf16: 18 bytes per parameter (weights 2, gradients 4, master and moments 12).
    const double rank1 = 2 * kParamsPerLayer + 2 * 8192 * 128;
    CHECK_NEAR(m.compute(1, op(OpKind::Opt, -1)), 2 * rank1 * 18 / kMemory);
}

QTEST_GUILESS_MAIN(TstCostModel)
#include "tst_cost_model.moc"
