// The synthetic training data: the same batch for the same (iteration, micro-batch) on every
// call, tokens inside the vocabulary, and a chain a model can learn: the next token's measured
// uncertainty matches the chain's entropy rate, far below the uniform log V.
#include <cmath>
#include <map>

#include <QtTest>

#include <pipescope/exec/synthetic_data.h>

using namespace pipescope;

class TstExecData : public QObject {
    Q_OBJECT

  private slots:
    void batchesAreReproducible();
    void tokensStayInTheVocabulary();
    void entropyRateMatchesTheSamples_data();
    void entropyRateMatchesTheSamples();
};

void TstExecData::batchesAreReproducible() {
    const exec::MarkovData a(1000, 7), b(1000, 7), other_seed(1000, 8);
    QCOMPARE(a.batch(3, 5, 2, 16), b.batch(3, 5, 2, 16));
    QVERIFY(a.batch(3, 5, 2, 16) != a.batch(3, 6, 2, 16));
    QVERIFY(a.batch(3, 5, 2, 16) != a.batch(4, 5, 2, 16));
    QVERIFY(a.batch(3, 5, 2, 16) != other_seed.batch(3, 5, 2, 16));
    // Rows of one micro-batch differ from each other.
    const auto two = a.batch(0, 0, 2, 16);
    QVERIFY(!std::equal(two.begin(), two.begin() + 17, two.begin() + 17));
    QCOMPARE(two.size(), std::size_t{2 * 17});
}

void TstExecData::tokensStayInTheVocabulary() {
    for (int vocab : {2, 3, 257, 256000}) {
        const exec::MarkovData d(vocab, 1);
        for (std::int32_t t : d.batch(0, 1, 4, 300)) {
            QVERIFY2(t >= 0 && t < vocab, qPrintable(QString("%1 of %2").arg(t).arg(vocab)));
        }
    }
}

void TstExecData::entropyRateMatchesTheSamples_data() {
    QTest::addColumn<int>("vocab");
    QTest::addColumn<int>("successors");
    QTest::addColumn<double>("concentration");
    QTest::newRow("default") << 64 << 4 << 0.9;
    QTest::newRow("one successor") << 64 << 1 << 0.95;
    QTest::newRow("uniform") << 32 << 4 << 0.0;
}

// Conditional entropy of next given current, measured from bigram counts over many sequences.
void TstExecData::entropyRateMatchesTheSamples() {
    QFETCH(int, vocab);
    QFETCH(int, successors);
    QFETCH(double, concentration);
    const exec::MarkovData d(vocab, 42, successors, concentration);
    std::map<std::pair<int, int>, double> pairs;
    std::map<int, double> firsts;
    double n = 0;
    for (int mb = 0; mb < 200; ++mb) {
        const auto tokens = d.batch(0, mb, 1, 2000);
        for (std::size_t i = 1; i < tokens.size(); ++i) {
            pairs[{tokens[i - 1], tokens[i]}] += 1;
            firsts[tokens[i - 1]] += 1;
            n += 1;
        }
    }
    double measured = 0;
    for (const auto& [pair, count] : pairs) {
        measured -= count / n * std::log(count / firsts[pair.first]);
    }
    const double rate = d.entropyRate();
    QVERIFY2(std::abs(measured - rate) < 0.03 * rate,
             qPrintable(QString("measured %1 nats, chain %2").arg(measured).arg(rate)));
    if (concentration == 0.0) {
        QVERIFY(std::abs(rate - std::log(vocab)) < 1e-12);
    } else {
        QVERIFY(rate < 0.6 * std::log(vocab));  // learnable: well below guessing
    }
}

QTEST_GUILESS_MAIN(TstExecData)
#include "tst_exec_data.moc"
