// The GPT building blocks and the reference trainer: analytic gradients against finite
// differences, vocabulary shards against the full vocabulary, the B/W split against the combined
// backward, learning on the Markov data, and fp32 against fp64.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <QtTest>

#include <pipescope/exec/memory_tracker.h>
#include <pipescope/exec/model.h>
#include <pipescope/exec/reference_trainer.h>
#include <pipescope/exec/synthetic_data.h>
#include <pipescope/kernels/cpu/ops.h>
#include <pipescope/schedule/config.h>

using namespace pipescope;
using exec::ModelShape;
using kernels::cpu::VocabShard;

namespace {

ModelShape tinyShape() {
    ModelShape s;
    s.layers = 2;
    s.hidden = 8;
    s.ffn = 32;
    s.heads = 2;
    s.seq_len = 4;
    s.vocab = 11;
    s.micro_batch = 2;
    return s;
}

// `microbatches` micro-batches of sequences, as ReferenceTrainer::step takes them.
std::vector<std::int32_t> sequences(const exec::MarkovData& data, const ModelShape& shape,
                                    int iteration, int microbatches) {
    std::vector<std::int32_t> out;
    for (int mb = 0; mb < microbatches; ++mb) {
        const auto b = data.batch(iteration, mb, shape.micro_batch, shape.seq_len);
        out.insert(out.end(), b.begin(), b.end());
    }
    return out;
}

std::vector<double> randomVector(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);  // values only need to be arbitrary, not portable
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<double> v(n);
    for (double& x : v) {
        x = dist(gen);
    }
    return v;
}

std::vector<VocabShard> evenShards(std::int64_t vocab, int parts) {
    std::vector<VocabShard> out;
    for (int d = 0; d < parts; ++d) {
        out.push_back({vocab * d / parts, vocab * (d + 1) / parts});
    }
    return out;
}

double maxAbsDiff(const double* a, const double* b, std::size_t n) {
    double m = 0;
    for (std::size_t i = 0; i < n; ++i) {
        m = std::max(m, std::abs(a[i] - b[i]));
    }
    return m;
}

}  // namespace

class TstExecModel : public QObject {
    Q_OBJECT

  private slots:
    void shapeFromConfig();
    void gradientsMatchFiniteDifferences();
    void inputLayerShardsSumToTheFullEmbedding_data();
    void inputLayerShardsSumToTheFullEmbedding();
    void outputLayerShardsMatchTheFullVocabulary_data();
    void outputLayerShardsMatchTheFullVocabulary();
    void splitBackwardMatchesCombinedWithMicrobatchesInFlight();
    void memoryIsTrackedByCategory();
    void trainerLearnsTheMarkovChain();
    void floatAndDoubleAgree();
};

void TstExecModel::shapeFromConfig() {
    schedule::Config config;
    config.model.layers = 3;
    config.model.hidden = 64;
    config.model.ffn_hidden = 0;
    config.model.heads = 4;
    config.model.seq_len = 32;
    config.model.vocab = 1000;
    config.model.micro_batch = 2;
    const ModelShape s = exec::modelShapeFromConfig(config);
    QCOMPARE(s.layers, 3);
    QCOMPARE(s.ffn, 256);
    QCOMPARE(s.headDim(), 16);
    QCOMPARE(s.vocab, std::int64_t{1000});
    QCOMPARE(s.rows(), std::int64_t{64});
    config.model.ffn_hidden = 100;
    QCOMPARE(exec::modelShapeFromConfig(config).ffn, 100);
}

void TstExecModel::gradientsMatchFiniteDifferences() {
    const ModelShape shape = tinyShape();
    // A larger init than training uses, so every nonlinearity is exercised and no gradient is
    // tiny; and one AdamW step first, so LN scales and biases are no longer 1 and 0.
    exec::ReferenceTrainer<double> model(shape, 42, {.lr = 0.05}, 0.4);
    const exec::MarkovData data(static_cast<int>(shape.vocab), 5, 2, 0.7);
    model.step(sequences(data, shape, 1, 2));
    const auto tokens = sequences(data, shape, 0, 2);  // two micro-batches: grads accumulate
    model.computeGradients(tokens);

    const double eps = 1e-5;
    double worst = 0;
    int checked = 0;
    for (const auto& [name, p] : model.namedParams()) {
        const std::int64_t n = p->size();
        QVERIFY2(n > 0, name.c_str());
        double tensor_grad_norm = 0;
        for (double g : p->grad) {
            tensor_grad_norm += g * g;
        }
        QVERIFY2(tensor_grad_norm > 1e-12,
                 qPrintable(QString("all-zero grad: %1").arg(name.c_str())));
        for (int j = 0; j < 5; ++j) {
            const auto i = static_cast<std::size_t>((j * 7919 + 3) % n);
            const double saved = p->value[i];
            p->value[i] = saved + eps;
            const double up = model.evaluate(tokens);
            p->value[i] = saved - eps;
            const double down = model.evaluate(tokens);
            p->value[i] = saved;
            const double numeric = (up - down) / (2 * eps);
            const double analytic = p->grad[i];
            // Relative error, with a floor for entries whose gradient is ~0.
            const double rel = std::abs(analytic - numeric) /
                               std::max({std::abs(analytic), std::abs(numeric), 1e-6});
            worst = std::max(worst, rel);
            ++checked;
            QVERIFY2(rel < 1e-6, qPrintable(QString("%1[%2]: analytic %3, numeric %4, rel %5")
                                                .arg(name.c_str())
                                                .arg(i)
                                                .arg(analytic, 0, 'g', 12)
                                                .arg(numeric, 0, 'g', 12)
                                                .arg(rel)));
        }
    }
    QCOMPARE(model.namedParams().size(), std::size_t{2 + 2 * 12 + 2 + 1});
    qDebug() << "checked" << checked << "entries, worst relative error" << worst;
}

void TstExecModel::inputLayerShardsSumToTheFullEmbedding_data() {
    QTest::addColumn<int>("parts");
    QTest::newRow("2 shards") << 2;
    QTest::newRow("3 shards") << 3;
}

void TstExecModel::inputLayerShardsSumToTheFullEmbedding() {
    QFETCH(int, parts);
    const ModelShape shape = tinyShape();
    const auto rows = static_cast<std::size_t>(shape.rows());
    const auto width = static_cast<std::size_t>(shape.hidden);
    const exec::MarkovData data(static_cast<int>(shape.vocab), 9);
    const exec::TokenRows tokens =
        exec::splitTokens(sequences(data, shape, 0, 1), shape.micro_batch, shape.seq_len);
    const std::vector<double> dout = randomVector(rows * width, 3);

    exec::InputLayer<double> full(shape, {0, shape.vocab});
    full.init(7);
    QVERIFY(full.ownsPosition());
    std::vector<double> expected(rows * width);
    full.forward(tokens.inputs.data(), expected.data());
    full.backward(tokens.inputs.data(), dout.data());
    const exec::Param<double>& full_token = *full.params()[0];
    const exec::Param<double>& full_position = *full.params()[1];

    std::vector<double> sum(rows * width, 0.0), part(rows * width);
    int owners = 0;
    for (const VocabShard shard : evenShards(shape.vocab, parts)) {
        exec::InputLayer<double> layer(shape, shard);
        layer.init(7);
        layer.forward(tokens.inputs.data(), part.data());
        for (std::size_t i = 0; i < sum.size(); ++i) {
            sum[i] += part[i];
        }
        layer.backward(tokens.inputs.data(), dout.data());
        const exec::Param<double>& token = *layer.params()[0];
        const std::size_t offset = static_cast<std::size_t>(shard.begin) * width;
        QCOMPARE(token.value.size(), static_cast<std::size_t>(shard.size()) * width);
        QVERIFY(std::equal(token.value.begin(), token.value.end(),
                           full_token.value.begin() + static_cast<std::ptrdiff_t>(offset)));
        QVERIFY(maxAbsDiff(token.grad.data(), full_token.grad.data() + offset, token.grad.size()) <
                1e-12);
        if (layer.ownsPosition()) {
            ++owners;
            QCOMPARE(layer.params().size(), std::size_t{2});
            QVERIFY(layer.params()[1]->grad == full_position.grad);
        } else {
            QCOMPARE(layer.params().size(), std::size_t{1});
        }
    }
    QCOMPARE(owners, 1);
    QVERIFY(maxAbsDiff(sum.data(), expected.data(), sum.size()) < 1e-12);
}

void TstExecModel::outputLayerShardsMatchTheFullVocabulary_data() {
    QTest::addColumn<int>("parts");
    QTest::newRow("2 shards") << 2;
    QTest::newRow("3 shards") << 3;
}

void TstExecModel::outputLayerShardsMatchTheFullVocabulary() {
    QFETCH(int, parts);
    const ModelShape shape = tinyShape();
    const std::int64_t rows = shape.rows();
    const auto n = static_cast<std::size_t>(rows);
    const auto width = static_cast<std::size_t>(shape.hidden);
    const exec::MarkovData data(static_cast<int>(shape.vocab), 4);
    const exec::TokenRows tokens =
        exec::splitTokens(sequences(data, shape, 2, 1), shape.micro_batch, shape.seq_len);
    const std::vector<double> x = randomVector(n * width, 11);

    exec::OutputLayer<double> full(shape, {0, shape.vocab});
    full.init(13, 0.5);
    std::vector<double> dx_full(n * width);
    const double loss_full = full.lossAndBackward(x.data(), tokens.targets.data(), dx_full.data());
    QCOMPARE(full.loss(x.data(), tokens.targets.data()), loss_full);
    const std::vector<double>& dw_full = full.params()[0]->grad;

    const std::vector<VocabShard> shards = evenShards(shape.vocab, parts);
    std::vector<exec::OutputLayer<double>> layers;
    layers.reserve(shards.size());
    std::vector<double> global_max(n, -INFINITY), global_sum(n, 0.0), target(n, 0.0);
    std::vector<double> row_max(n), row_sum(n), part_target(n);
    const int mb = 3;
    // S on every shard, then the combine (what the all-reduce C does).
    for (const VocabShard shard : shards) {
        layers.emplace_back(shape, shard);
        layers.back().init(13, 0.5);
        layers.back().forwardStats(mb, x.data(), tokens.targets.data(), row_max.data(),
                                   row_sum.data(), part_target.data());
        kernels::cpu::onlineSoftmaxCombine(global_max.data(), global_sum.data(), row_max.data(),
                                           row_sum.data(), rows);
        for (std::size_t r = 0; r < n; ++r) {
            target[r] += part_target[r];
        }
    }
    std::vector<double> loss(n);
    kernels::cpu::crossEntropyLossFromStats(global_max.data(), global_sum.data(), target.data(),
                                            loss.data(), rows);
    double loss_sharded = 0;
    for (double l : loss) {
        loss_sharded += l;
    }
    loss_sharded /= static_cast<double>(n);
    QVERIFY2(std::abs(loss_sharded - loss_full) < 1e-10,
             qPrintable(QString("%1 vs %2").arg(loss_sharded).arg(loss_full)));

    // T on every shard; dX summed (the all-reduce C2).
    const std::vector<double> dloss(n, 1.0 / static_cast<double>(n));
    std::vector<double> dx_sum(n * width, 0.0), dx_part(n * width);
    for (std::size_t d = 0; d < shards.size(); ++d) {
        layers[d].backward(mb, global_max.data(), global_sum.data(), dloss.data(), dx_part.data());
        for (std::size_t i = 0; i < dx_sum.size(); ++i) {
            dx_sum[i] += dx_part[i];
        }
        const std::vector<double>& dw = layers[d].params()[0]->grad;
        QVERIFY(maxAbsDiff(dw.data(),
                           dw_full.data() + static_cast<std::size_t>(shards[d].begin) * width,
                           dw.size()) < 1e-10);
    }
    QVERIFY(maxAbsDiff(dx_sum.data(), dx_full.data(), dx_sum.size()) < 1e-10);
}

void TstExecModel::splitBackwardMatchesCombinedWithMicrobatchesInFlight() {
    const ModelShape shape = tinyShape();
    const auto n = static_cast<std::size_t>(shape.rows() * shape.hidden);
    exec::TransformerLayer<double> combined(shape), split(shape);
    combined.init(3, 0, 0.3);
    split.init(3, 0, 0.3);
    const std::vector<double> x0 = randomVector(n, 1), x1 = randomVector(n, 2);
    const std::vector<double> dy0 = randomVector(n, 3), dy1 = randomVector(n, 4);
    std::vector<double> y(n), dx_a(n), dx_b(n);

    combined.forward(0, x0.data(), y.data());
    combined.backward(0, dy0.data(), dx_a.data());
    combined.forward(1, x1.data(), y.data());
    combined.backward(1, dy1.data(), dx_a.data());

    // Both micro-batches in flight, B in reverse order, W deferred (zero-bubble style).
    split.forward(0, x0.data(), y.data());
    split.forward(1, x1.data(), y.data());
    QCOMPARE(split.recordsInFlight(), std::size_t{2});
    split.backwardInput(1, dy1.data(), dx_b.data());
    QVERIFY(maxAbsDiff(dx_a.data(), dx_b.data(), n) < 1e-12);
    split.backwardInput(0, dy0.data(), dx_b.data());
    for (const exec::Param<double>* p : split.params()) {
        QVERIFY2(std::all_of(p->grad.begin(), p->grad.end(), [](double g) { return g == 0.0; }),
                 p->name.c_str());
    }
    split.backwardWeight(0);
    split.backwardWeight(1);
    QCOMPARE(split.recordsInFlight(), std::size_t{0});
    const auto a = combined.params(), b = split.params();
    for (std::size_t t = 0; t < a.size(); ++t) {
        QVERIFY2(maxAbsDiff(a[t]->grad.data(), b[t]->grad.data(), a[t]->grad.size()) < 1e-12,
                 a[t]->name.c_str());
    }
}

void TstExecModel::memoryIsTrackedByCategory() {
    using trace::MemoryCategory;
    const ModelShape shape = tinyShape();
    exec::MemoryTracker tracker;
    {
        exec::TransformerLayer<float> layer(shape, &tracker);
        const std::int64_t h = shape.hidden, f = shape.ffn;
        const std::int64_t params = 4 * h + 3 * h * h + 3 * h + h * h + h + f * h + f + h * f + h;
        QCOMPARE(tracker.bytes(MemoryCategory::Weights), params * 4);
        QCOMPARE(tracker.bytes(MemoryCategory::Grads), params * 4);
        QCOMPARE(tracker.bytes(MemoryCategory::Optimizer), 2 * params * 4);
        const auto n = static_cast<std::size_t>(shape.rows() * shape.hidden);
        std::vector<float> x(n, 0.5f), y(n), dx(n);
        layer.forward(0, x.data(), y.data());
        // The record: x, ln1, qkv, attn, h, ln2 (8h per row), fc1 and act (2f), four LN
        // statistics per row and the attention probabilities (b·a·s²), in fp32.
        const std::int64_t rows = shape.rows();
        const std::int64_t probs =
            std::int64_t{shape.micro_batch} * shape.heads * shape.seq_len * shape.seq_len;
        QCOMPARE(tracker.bytes(MemoryCategory::Activations),
                 4 * (rows * (8 * h + 2 * f + 4) + probs));
        // A split backward: B keeps the linears' inputs (ln1, attn, ln2, act: 3h + f per row)
        // and the gradients W needs (the linears' outputs' 5h + f per row, the LN's 4h).
        layer.backwardInput(0, y.data(), dx.data());
        QCOMPARE(tracker.bytes(MemoryCategory::Activations),
                 4 * (rows * (3 * h + f) + rows * (5 * h + f) + 4 * h));
        layer.backwardWeight(0);
        QCOMPARE(tracker.bytes(MemoryCategory::Activations), std::int64_t{0});
        layer.forward(1, x.data(), y.data());
        layer.backward(1, y.data(), dx.data());
        QCOMPARE(tracker.bytes(MemoryCategory::Activations), std::int64_t{0});
    }
    QCOMPARE(tracker.total(), std::int64_t{0});
}

void TstExecModel::trainerLearnsTheMarkovChain() {
    ModelShape shape;
    shape.layers = 2;
    shape.hidden = 32;
    shape.ffn = 128;
    shape.heads = 4;
    shape.seq_len = 16;
    shape.vocab = 64;
    shape.micro_batch = 8;
    exec::ReferenceTrainer<float> trainer(shape, 2024, {.lr = 1e-2});
    const exec::MarkovData data(64, 77);
    std::vector<float> losses;
    for (int it = 0; it < 20; ++it) {
        losses.push_back(trainer.step(sequences(data, shape, it, 1)));
        QCOMPARE(trainer.lastLoss(), losses.back());
    }
    QCOMPARE(trainer.stepsTaken(), std::int64_t{20});
    QDebug dbg = qDebug();
    dbg << "losses:";
    for (float l : losses) {
        dbg << l;
    }
    double last5 = 0;
    for (std::size_t i = 15; i < 20; ++i) {
        last5 += losses[i] / 5.0;
    }
    qDebug() << "first" << losses.front() << "mean of last 5" << last5 << "log V" << std::log(64.0)
             << "entropy rate" << data.entropyRate();
    QVERIFY(std::abs(losses.front() - std::log(64.0)) < 0.2);  // starts near uniform
    QVERIFY(last5 < 0.9 * losses.front());
    QVERIFY(last5 < std::log(64.0));
}

void TstExecModel::floatAndDoubleAgree() {
    const ModelShape shape = tinyShape();
    const exec::MarkovData data(static_cast<int>(shape.vocab), 21);
    const auto tokens = sequences(data, shape, 0, 2);
    exec::ReferenceTrainer<float> f32(shape, 99, {.lr = 1e-3});
    exec::ReferenceTrainer<double> f64(shape, 99, {.lr = 1e-3});
    const double a = f32.step(tokens);
    const double b = f64.step(tokens);
    QVERIFY2(std::abs(a - b) <= 1e-5 * std::abs(b), qPrintable(QString("%1 vs %2").arg(a).arg(b)));
    // The gradients agree too, to fp32 accuracy (tol + |ref|·eps).
    const auto pf = f32.namedParams();
    const auto pd = f64.namedParams();
    QCOMPARE(pf.size(), pd.size());
    for (std::size_t t = 0; t < pf.size(); ++t) {
        for (std::size_t i = 0; i < pd[t].second->grad.size(); ++i) {
            const double ref = pd[t].second->grad[i];
            QVERIFY2(std::abs(pf[t].second->grad[i] - ref) <= 1e-6 + 1e-3 * std::abs(ref),
                     pd[t].first.c_str());
        }
    }
}

QTEST_APPLESS_MAIN(TstExecModel)
#include "tst_exec_model.moc"
