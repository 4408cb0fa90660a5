// Reading valid configs: defaults, every key, the presets, overrides, compare variants and the
// toJson round trip. The ways a config can be wrong are in tst_config_errors.cpp.
#include <QDirIterator>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/ir.h>

#include "testsupport.h"

using namespace pipescope::schedule;

namespace {

const char* const kMinimal = R"({
  "model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000},
  "parallel": {"pipeline": 4, "microbatches": 8}
})";

// Every key set, none to its default.
const char* const kFull = R"({
  "name": "everything",
  "model": {"layers": 12, "hidden": 96, "ffn_hidden": 300, "heads": 6, "seq_len": 48,
            "vocab": 5000, "micro_batch": 2, "dtype": "fp16"},
  "parallel": {"pipeline": 2, "microbatches": 6, "schedule": "interleaved-1f1b",
               "virtual_stages": 3, "vocab": "redistributed", "first_stage_layers": 1,
               "last_stage_layers": null},
  "hardware": {"name": "H100", "peak_tflops": 989.5, "memory_gib": 80.5, "p2p_gbps": 400,
               "allreduce_gbps": 300, "latency_us": 0, "memory_gbps": 3350,
               "gemm_efficiency": 1},
  "costs": {"source": "calibrated:runs/a b.db",
            "per_stage_us": {"F": [1.5, 2], "B": [], "IB": [0, 0.25]},
            "p2p_us": 12.5, "collective_us": null,
            "collectives_us": {"output": 250, "input": null}},
  "run": {"iterations": 7, "warmup": 0, "seed": 18446744073709551615},
  "compare": [{"label": "naive", "set": {"parallel.vocab": "naive", "model.vocab": 256000,
                                         "parallel.first_stage_layers": null}}]
})";

Config parseOk(const std::string& json) {
    const ParseResult r = parseConfig(json);
    if (!r.ok()) {
        qFatal("expected a valid config: %s", r.errorText().c_str());
    }
    return *r.config;
}

QStringList presetFiles() {
    QStringList files;
    QDirIterator it(pipescope::test::sourcePath(QStringLiteral("resources/presets")),
                    {QStringLiteral("*.json")}, QDir::Files);
    while (it.hasNext()) {
        files << it.next();
    }
    files.sort();
    return files;
}

// Field by field, so that a difference names the field.
void compareConfigs(const Config& a, const Config& b) {
    QCOMPARE(a.name, b.name);
    QCOMPARE(a.model.layers, b.model.layers);
    QCOMPARE(a.model.hidden, b.model.hidden);
    QCOMPARE(a.model.ffn_hidden, b.model.ffn_hidden);
    QCOMPARE(a.model.heads, b.model.heads);
    QCOMPARE(a.model.seq_len, b.model.seq_len);
    QCOMPARE(a.model.vocab, b.model.vocab);
    QCOMPARE(a.model.micro_batch, b.model.micro_batch);
    QVERIFY(a.model.dtype == b.model.dtype);
    QCOMPARE(a.parallel.pipeline, b.parallel.pipeline);
    QCOMPARE(a.parallel.microbatches, b.parallel.microbatches);
    QVERIFY(a.parallel.schedule == b.parallel.schedule);
    QCOMPARE(a.parallel.virtual_stages, b.parallel.virtual_stages);
    QVERIFY(a.parallel.vocab == b.parallel.vocab);
    QVERIFY(a.parallel.first_stage_layers == b.parallel.first_stage_layers);
    QVERIFY(a.parallel.last_stage_layers == b.parallel.last_stage_layers);
    QCOMPARE(a.hardware.name, b.hardware.name);
    QCOMPARE(a.hardware.peak_tflops, b.hardware.peak_tflops);
    QCOMPARE(a.hardware.memory_gib, b.hardware.memory_gib);
    QCOMPARE(a.hardware.p2p_gbps, b.hardware.p2p_gbps);
    QCOMPARE(a.hardware.allreduce_gbps, b.hardware.allreduce_gbps);
    QCOMPARE(a.hardware.latency_us, b.hardware.latency_us);
    QCOMPARE(a.hardware.memory_gbps, b.hardware.memory_gbps);
    QCOMPARE(a.hardware.gemm_efficiency, b.hardware.gemm_efficiency);
    QVERIFY(a.costs.source == b.costs.source);
    QCOMPARE(a.costs.calibrated_path, b.costs.calibrated_path);
    for (const CostKey k : kAllCostKeys) {
        QVERIFY2(a.costs.table(k) == b.costs.table(k), toString(k).data());
    }
    QVERIFY(a.costs.p2p_us == b.costs.p2p_us);
    QVERIFY(a.costs.collective_us == b.costs.collective_us);
    QVERIFY(a.costs.collectives_us == b.costs.collectives_us);
    QCOMPARE(a.run.iterations, b.run.iterations);
    QCOMPARE(a.run.warmup, b.run.warmup);
    QCOMPARE(a.run.seed, b.run.seed);
    QCOMPARE(a.compare.size(), b.compare.size());
    for (std::size_t i = 0; i < a.compare.size(); ++i) {
        QCOMPARE(a.compare[i].label, b.compare[i].label);
        QCOMPARE(a.compare[i].overrides.size(), b.compare[i].overrides.size());
        for (std::size_t j = 0; j < a.compare[i].overrides.size(); ++j) {
            QCOMPARE(a.compare[i].overrides[j].path, b.compare[i].overrides[j].path);
            QCOMPARE(a.compare[i].overrides[j].value_json, b.compare[i].overrides[j].value_json);
        }
    }
}

}  // namespace

class TstConfig : public QObject {
    Q_OBJECT

  private slots:
    void defaultsAreFilledIn();
    void readsEveryKey();
    void chunksPerSchedule_data();
    void chunksPerSchedule();
    void derivedNames_data();
    void derivedNames();
    void everyPresetParses();
    void paperPresetsMatchThePaper();
    void smallPresetsAreSmall();
    void defaultPresetComparesNaiveWithVocab2();
    void parseOverride_data();
    void parseOverride();
    void malformedOverrides_data();
    void malformedOverrides();
    void overridesApply();
    void scheduleOverridesLeaveVirtualStagesBehind();
    void roundTrip_data();
    void roundTrip();
    void toJsonWritesEveryKey();
    void variantsApply();
    void applyVariantReportsIssues();
};

void TstConfig::defaultsAreFilledIn() {
    const Config c = parseOk(kMinimal);
    QCOMPARE(c.name, std::string("8L h64 V1000 p4 m8 1f1b naive"));
    QCOMPARE(c.model.ffn_hidden, 256);
    QCOMPARE(c.model.micro_batch, 1);
    QVERIFY(c.model.dtype == DType::BF16);
    QVERIFY(c.parallel.schedule == ScheduleKind::OneF1B);
    QCOMPARE(c.parallel.virtual_stages, 1);
    QVERIFY(c.parallel.vocab == VocabMethod::Naive);
    QVERIFY(!c.parallel.first_stage_layers && !c.parallel.last_stage_layers);
    QCOMPARE(c.hardware.name, std::string("A100-SXM4-80GB"));
    QCOMPARE(c.hardware.peak_tflops, 312.0);
    QCOMPARE(c.hardware.memory_gib, 80.0);
    QCOMPARE(c.hardware.gemm_efficiency, 0.75);
    QVERIFY(c.costs.source == CostSource::Analytic);
    for (const CostKey k : kAllCostKeys) {
        QVERIFY(c.costs.table(k).empty());
    }
    QVERIFY(!c.costs.p2p_us && !c.costs.collective_us);
    QCOMPARE(c.run.iterations, 3);
    QCOMPARE(c.run.warmup, 1);
    QCOMPARE(c.run.seed, std::uint64_t{1234});
    QVERIFY(c.compare.empty());
}

void TstConfig::readsEveryKey() {
    const Config c = parseOk(kFull);
    QCOMPARE(c.name, std::string("everything"));
    QCOMPARE(c.model.layers, 12);
    QCOMPARE(c.model.hidden, 96);
    QCOMPARE(c.model.ffn_hidden, 300);
    QCOMPARE(c.model.heads, 6);
    QCOMPARE(c.model.seq_len, 48);
    QCOMPARE(c.model.vocab, std::int64_t{5000});
    QCOMPARE(c.model.micro_batch, 2);
    QVERIFY(c.model.dtype == DType::FP16);
    QCOMPARE(c.parallel.pipeline, 2);
    QCOMPARE(c.parallel.microbatches, 6);
    QVERIFY(c.parallel.schedule == ScheduleKind::Interleaved1F1B);
    QCOMPARE(c.parallel.virtual_stages, 3);
    QVERIFY(c.parallel.vocab == VocabMethod::Redistributed);
    QCOMPARE(c.parallel.first_stage_layers, std::optional<int>(1));
    QVERIFY(!c.parallel.last_stage_layers);
    QCOMPARE(c.hardware.name, std::string("H100"));
    QCOMPARE(c.hardware.peak_tflops, 989.5);
    QCOMPARE(c.hardware.memory_gib, 80.5);
    QCOMPARE(c.hardware.p2p_gbps, 400.0);
    QCOMPARE(c.hardware.allreduce_gbps, 300.0);
    QCOMPARE(c.hardware.latency_us, 0.0);
    QCOMPARE(c.hardware.memory_gbps, 3350.0);
    QCOMPARE(c.hardware.gemm_efficiency, 1.0);
    QVERIFY(c.costs.source == CostSource::Calibrated);
    QCOMPARE(c.costs.calibrated_path, std::string("runs/a b.db"));
    QCOMPARE(c.costs.table(CostKey::F), std::vector<double>({1.5, 2.0}));
    QVERIFY(c.costs.table(CostKey::B).empty());
    QCOMPARE(c.costs.table(CostKey::IB), std::vector<double>({0.0, 0.25}));
    QCOMPARE(c.costs.p2p_us, std::optional<double>(12.5));
    QVERIFY(!c.costs.collective_us);
    QCOMPARE(c.costs.collectives_us[static_cast<std::size_t>(Collective::OutputAllReduce)],
             std::optional<double>(250));
    QVERIFY(!c.costs.collectives_us[static_cast<std::size_t>(Collective::InputAllReduce)]);
    QVERIFY(!c.costs.collectives_us[static_cast<std::size_t>(Collective::OutputBcast)]);
    QCOMPARE(c.run.iterations, 7);
    QCOMPARE(c.run.warmup, 0);
    QCOMPARE(c.run.seed, std::uint64_t{18446744073709551615u});
    QCOMPARE(c.compare.size(), std::size_t{1});
    QCOMPARE(c.compare[0].label, std::string("naive"));
    QCOMPARE(c.compare[0].overrides.size(), std::size_t{3});
    QCOMPARE(c.compare[0].overrides[0].path, std::string("parallel.vocab"));
    QCOMPARE(c.compare[0].overrides[0].value_json, std::string(R"("naive")"));
    QCOMPARE(c.compare[0].overrides[1].path, std::string("model.vocab"));
    QCOMPARE(c.compare[0].overrides[1].value_json, std::string("256000"));
    QCOMPARE(c.compare[0].overrides[2].value_json, std::string("null"));
}

void TstConfig::chunksPerSchedule_data() {
    QTest::addColumn<QString>("schedule");
    QTest::addColumn<int>("given");  // 0: leave virtual_stages out
    QTest::addColumn<int>("expected");
    QTest::newRow("gpipe") << "gpipe" << 0 << 1;
    QTest::newRow("1f1b given 1") << "1f1b" << 1 << 1;
    QTest::newRow("zb-h1") << "zb-h1" << 0 << 1;
    QTest::newRow("interleaved default") << "interleaved-1f1b" << 0 << 2;
    QTest::newRow("interleaved 4") << "interleaved-1f1b" << 4 << 4;
    QTest::newRow("v-half") << "v-half" << 0 << 2;
    QTest::newRow("v-half given 2") << "v-half" << 2 << 2;
}

void TstConfig::chunksPerSchedule() {
    QFETCH(QString, schedule);
    QFETCH(int, given);
    QFETCH(int, expected);
    std::vector<Override> sets = {{"parallel.schedule", "\"" + schedule.toStdString() + "\""},
                                  {"model.layers", "32"}};
    if (given > 0) {
        sets.push_back({"parallel.virtual_stages", std::to_string(given)});
    }
    const ParseResult r = parseConfig(kMinimal, sets);
    QVERIFY2(r.ok(), r.errorText().c_str());
    QCOMPARE(r.config->parallel.virtual_stages, expected);
}

void TstConfig::derivedNames_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("name");
    QTest::newRow("defaults") << QStringList() << "8L h64 V1000 p4 m8 1f1b naive";
    QTest::newRow("vocab-2") << QStringList{"parallel.vocab=vocab-2", "model.vocab=256000"}
                             << "8L h64 V256000 p4 m8 1f1b vocab-2";
    QTest::newRow("interleaved") << QStringList{"parallel.schedule=interleaved-1f1b",
                                                "parallel.virtual_stages=2"}
                                 << "8L h64 V1000 p4 m8 interleaved-1f1b v2 naive";
}

void TstConfig::derivedNames() {
    QFETCH(QStringList, sets);
    QFETCH(QString, name);
    std::vector<Override> overrides;
    for (const QString& s : sets) {
        overrides.push_back(*pipescope::schedule::parseOverride(s.toStdString(), nullptr));
    }
    const ParseResult r = parseConfig(kMinimal, overrides);
    QVERIFY2(r.ok(), r.errorText().c_str());
    QCOMPARE(QString::fromStdString(r.config->name), name);
}

void TstConfig::everyPresetParses() {
    const QStringList files = presetFiles();
    // 40 paper setups, the small CPU presets and default.json.
    QVERIFY2(files.size() >= 50, qPrintable(QString::number(files.size())));
    for (const QString& file : files) {
        const ParseResult r = loadConfigFile(file.toStdString());
        QVERIFY2(r.ok(), r.errorText().c_str());
        QVERIFY(!r.config->name.empty());
        for (const Variant& v : r.config->compare) {
            const ParseResult applied = applyVariant(*r.config, v);
            QVERIFY2(applied.ok(), applied.errorText().c_str());
        }
    }
}

void TstConfig::paperPresetsMatchThePaper() {
    const QRegularExpression pattern(QStringLiteral(
        R"(paper-s(\d+)-v(\d+)k-(naive|redistributed|interlaced|vocab-1|vocab-2)\.json$)"));
    // The authors' last-stage layer counts for redistributed (vocabulary-parallelism.md, 2).
    const std::map<std::int64_t, int> last_stage = {
        {256000, 0}, {128000, 2}, {64000, 3}, {32000, 4}};
    int count = 0;
    for (const QString& file : presetFiles()) {
        const auto m = pattern.match(file);
        if (!m.hasMatch()) {
            continue;
        }
        ++count;
        const ParseResult r = loadConfigFile(file.toStdString());
        QVERIFY2(r.ok(), r.errorText().c_str());
        const Config& c = *r.config;
        const int seq = m.captured(1).toInt();
        const std::int64_t vocab = m.captured(2).toLongLong() * 1000;
        const std::string method = m.captured(3).toStdString();
        QVERIFY(seq == 2048 || seq == 4096);
        QCOMPARE(c.model.seq_len, seq);
        QCOMPARE(c.model.vocab, vocab);
        QCOMPARE(std::string(toString(c.parallel.vocab)), method);
        QCOMPARE(c.model.layers, 32);
        QCOMPARE(c.model.hidden, 3072);
        QCOMPARE(c.model.heads, 24);
        QCOMPARE(c.model.ffn_hidden, 12288);
        QCOMPARE(c.model.micro_batch, 1);
        QVERIFY(c.model.dtype == DType::BF16);
        QCOMPARE(c.parallel.pipeline, 8);
        QCOMPARE(c.parallel.microbatches, 128);
        QVERIFY(c.parallel.schedule == ScheduleKind::OneF1B);
        QCOMPARE(c.hardware.name, std::string("A100-SXM4-80GB"));
        QCOMPARE(c.hardware.peak_tflops, 312.0);
        QCOMPARE(c.hardware.memory_gib, 80.0);
        QVERIFY(!c.parallel.first_stage_layers);
        if (c.parallel.vocab == VocabMethod::Redistributed) {
            QCOMPARE(c.parallel.last_stage_layers, std::optional<int>(last_stage.at(vocab)));
        } else {
            QVERIFY(!c.parallel.last_stage_layers);
        }
        const QString name = QStringLiteral("Paper 4B, s=%1, V=%2k, %3 (8×A100)")
                                 .arg(seq)
                                 .arg(vocab / 1000)
                                 .arg(QString::fromStdString(method));
        QCOMPARE(QString::fromStdString(c.name), name);
    }
    QCOMPARE(count, 40);
}

void TstConfig::smallPresetsAreSmall() {
    int count = 0;
    for (const QString& file : presetFiles()) {
        if (!QFileInfo(file).fileName().startsWith(QLatin1String("small-"))) {
            continue;
        }
        ++count;
        const ParseResult r = loadConfigFile(file.toStdString());
        QVERIFY2(r.ok(), r.errorText().c_str());
        const Config& c = *r.config;
        QVERIFY(c.model.layers == 4 || c.model.layers == 8);
        QVERIFY(c.model.hidden >= 64 && c.model.hidden <= 128);
        QCOMPARE(c.model.heads, 4);
        QVERIFY(c.model.seq_len >= 32 && c.model.seq_len <= 64);
        QVERIFY(c.model.vocab >= 2048 && c.model.vocab <= 8192);
        QVERIFY(c.model.micro_batch >= 1 && c.model.micro_batch <= 2);
        QVERIFY(c.parallel.pipeline == 2 || c.parallel.pipeline == 4);
        QCOMPARE(c.parallel.microbatches, 8);
        QCOMPARE(c.run.iterations, 20);
        QCOMPARE(c.run.warmup, 1);
        QVERIFY(c.model.dtype == DType::FP32);
        const auto v = c.parallel.vocab;
        QVERIFY(v == VocabMethod::Naive || v == VocabMethod::Vocab1 || v == VocabMethod::Vocab2);
        QVERIFY(QFileInfo(file).fileName().contains(QString::fromUtf8(toString(v).data())));
    }
    QVERIFY(count >= 6);
}

void TstConfig::defaultPresetComparesNaiveWithVocab2() {
    const ParseResult r =
        loadConfigFile(pipescope::test::sourcePath(QStringLiteral("resources/presets/default.json"))
                           .toStdString());
    QVERIFY2(r.ok(), r.errorText().c_str());
    const Config& c = *r.config;
    QVERIFY(c.parallel.vocab == VocabMethod::Vocab2);
    QCOMPARE(c.parallel.pipeline, 4);
    QCOMPARE(c.compare.size(), std::size_t{2});
    QCOMPARE(c.compare[0].label, std::string("naive"));
    QCOMPARE(c.compare[1].label, std::string("vocab-2"));
    const ParseResult naive = applyVariant(c, c.compare[0]);
    QVERIFY2(naive.ok(), naive.errorText().c_str());
    QVERIFY(naive.config->parallel.vocab == VocabMethod::Naive);
    QVERIFY(naive.config->compare.empty());
    QCOMPARE(naive.config->name, c.name + " [naive]");
    const ParseResult vocab2 = applyVariant(c, c.compare[1]);
    QVERIFY2(vocab2.ok(), vocab2.errorText().c_str());
    QVERIFY(vocab2.config->parallel.vocab == VocabMethod::Vocab2);
}

void TstConfig::parseOverride_data() {
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("path");
    QTest::addColumn<QString>("value_json");
    QTest::newRow("number") << "model.vocab=256000"
                            << "model.vocab"
                            << "256000";
    QTest::newRow("bare word") << "parallel.vocab=vocab-2"
                               << "parallel.vocab"
                               << "\"vocab-2\"";
    QTest::newRow("quoted string") << R"(name="a b")"
                                   << "name"
                                   << R"("a b")";
    QTest::newRow("spaces trimmed") << "  name =  My run  "
                                    << "name"
                                    << R"("My run")";
    QTest::newRow("null") << "parallel.last_stage_layers=null"
                          << "parallel.last_stage_layers"
                          << "null";
    QTest::newRow("array") << "costs.per_stage_us.F=[1, 2.5]"
                           << "costs.per_stage_us.F"
                           << "[1, 2.5]";
    QTest::newRow("equals in value") << "name=a=b"
                                     << "name"
                                     << R"("a=b")";
    QTest::newRow("empty value") << "hardware.name="
                                 << "hardware.name"
                                 << R"("")";
    QTest::newRow("broken json is a string") << "name=[1,"
                                             << "name"
                                             << R"("[1,")";
}

void TstConfig::parseOverride() {
    QFETCH(QString, assignment);
    QFETCH(QString, path);
    QFETCH(QString, value_json);
    std::string error;
    const auto o = pipescope::schedule::parseOverride(assignment.toStdString(), &error);
    QVERIFY2(o.has_value(), error.c_str());
    QCOMPARE(QString::fromStdString(o->path), path);
    QCOMPARE(QString::fromStdString(o->value_json), value_json);
}

void TstConfig::malformedOverrides_data() {
    QTest::addColumn<QString>("assignment");
    QTest::addColumn<QString>("error");
    QTest::newRow("no equals")
        << "model.vocab"
        << R"(expected KEY=VALUE (e.g. model.vocab=256000), got "model.vocab")";
    QTest::newRow("no key") << "=5"
                            << R"(missing the key before '=' in "=5")";
}

void TstConfig::malformedOverrides() {
    QFETCH(QString, assignment);
    QFETCH(QString, error);
    std::string message;
    QVERIFY(!pipescope::schedule::parseOverride(assignment.toStdString(), &message));
    QCOMPARE(QString::fromStdString(message), error);
}

void TstConfig::overridesApply() {
    const std::vector<Override> sets = {{"model.vocab", "256000"},
                                        {"parallel.vocab", "vocab-2"},   // bare word
                                        {"hardware.name", R"("H100")"},  // creates the section
                                        {"model", R"({"layers": 4, "hidden": 32, "heads": 2,
                                                      "seq_len": 8, "vocab": 64})"},
                                        {"model.vocab", "128"}};
    const ParseResult r = parseConfig(kMinimal, sets);
    QVERIFY2(r.ok(), r.errorText().c_str());
    // Later overrides win: the whole model was replaced, then its vocab set again.
    QCOMPARE(r.config->model.layers, 4);
    QCOMPARE(r.config->model.vocab, std::int64_t{128});
    QVERIFY(r.config->parallel.vocab == VocabMethod::Vocab2);
    QCOMPARE(r.config->hardware.name, std::string("H100"));

    const std::string path = pipescope::test::sourcePath(
                                 QStringLiteral("resources/presets/paper-s2048-v256k-naive.json"))
                                 .toStdString();
    const ParseResult file = loadConfigFile(path, {{"parallel.vocab", "vocab-1"}});
    QVERIFY2(file.ok(), file.errorText().c_str());
    QVERIFY(file.config->parallel.vocab == VocabMethod::Vocab1);
    QCOMPARE(file.source_name, path);
    // The file's own name says naive: the run's name adds what the command line changed (but
    // not how long it runs), unless the command line names it.
    QCOMPARE(file.config->name,
             std::string("Paper 4B, s=2048, V=256k, naive (8×A100) [parallel.vocab=vocab-1]"));
    const auto set = [](const char* kv) {
        return *pipescope::schedule::parseOverride(kv, nullptr);
    };
    const ParseResult two = loadConfigFile(
        path, {set("parallel.schedule=zb-h1"), set("run.iterations=3"), set("hardware.name=H100")});
    QVERIFY2(two.ok(), two.errorText().c_str());
    QCOMPARE(two.config->name, std::string("Paper 4B, s=2048, V=256k, naive (8×A100) "
                                           "[parallel.schedule=zb-h1, hardware.name=H100]"));
    const ParseResult named = loadConfigFile(path, {set("parallel.vocab=vocab-2"), set("name=x")});
    QVERIFY2(named.ok(), named.errorText().c_str());
    QCOMPARE(named.config->name, std::string("x"));
    // A file with no name gets one derived from what it holds, overrides included.
    QTemporaryDir dir;
    const QString unnamed = dir.filePath("unnamed.json");
    QFile out(unnamed);
    QVERIFY(out.open(QIODevice::WriteOnly) && out.write(kMinimal) > 0);
    out.close();
    const ParseResult derived = loadConfigFile(unnamed.toStdString(), {set("model.vocab=2000")});
    QVERIFY2(derived.ok(), derived.errorText().c_str());
    QVERIFY2(derived.config->name.find('[') == std::string::npos &&
                 derived.config->name.find("2000") != std::string::npos,
             derived.config->name.c_str());
}

// virtual_stages belongs to interleaved-1f1b: a sweep or variant over the schedule, from a config
// written out again (toJson, as the app's sweeps do) or from an interleaved file, must not trip on
// it. Naming it with the schedule still gets it checked.
void TstConfig::scheduleOverridesLeaveVirtualStagesBehind() {
    const auto set = [](const char* kv) {
        return *pipescope::schedule::parseOverride(kv, nullptr);
    };
    QCOMPARE(ownerOf("parallel.virtual_stages")->path, std::string_view("parallel.schedule"));
    QCOMPARE(ownerOf("parallel.last_stage_layers")->value, std::string_view("redistributed"));
    QVERIFY(!ownerOf("model.vocab"));
    const ParseResult base = parseConfig(kMinimal);
    QVERIFY2(base.ok(), base.errorText().c_str());
    for (const char* sched : {"v-half", "interleaved-1f1b", "zb-h1", "gpipe"}) {
        const std::string kv = std::string("parallel.schedule=") + sched;
        const ParseResult r = parseConfig(toJson(*base.config), {set(kv.c_str())});
        QVERIFY2(r.ok(), (kv + ": " + r.errorText()).c_str());
        QCOMPARE(
            r.config->parallel.virtual_stages,
            std::string(sched) == "v-half" || std::string(sched) == "interleaved-1f1b" ? 2 : 1);
        // And back, from the written-out result.
        const ParseResult back = parseConfig(toJson(*r.config), {set("parallel.schedule=1f1b")});
        QVERIFY2(back.ok(), (kv + " and back: " + back.errorText()).c_str());
        QCOMPARE(back.config->parallel.virtual_stages, 1);
        // A compare variant over the schedule, too.
        Variant v;
        v.label = sched;
        v.overrides = {set(kv.c_str())};
        const ParseResult variant = applyVariant(*base.config, v);
        QVERIFY2(variant.ok(), (kv + " as a variant: " + variant.errorText()).c_str());
    }
    const std::string interleaved = R"({
      "model": {"layers": 12, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000},
      "parallel": {"pipeline": 2, "microbatches": 4, "schedule": "interleaved-1f1b",
                   "virtual_stages": 3}
    })";
    const ParseResult three = parseConfig(interleaved);
    QVERIFY2(three.ok(), three.errorText().c_str());
    QCOMPARE(three.config->parallel.virtual_stages, 3);
    const ParseResult plain = parseConfig(interleaved, {set("parallel.schedule=1f1b")});
    QVERIFY2(plain.ok(), plain.errorText().c_str());
    QCOMPARE(plain.config->parallel.virtual_stages, 1);
    // The same for the redistributed method's layer counts: the authors' preset fixes the last
    // stage's, and comparing methods from it must work.
    const std::string redistributed =
        pipescope::test::sourcePath(
            QStringLiteral("resources/presets/paper-s2048-v256k-redistributed.json"))
            .toStdString();
    for (const char* method : {"naive", "interlaced", "vocab-1", "vocab-2"}) {
        const std::string kv = std::string("parallel.vocab=") + method;
        const ParseResult r = loadConfigFile(redistributed, {set(kv.c_str())});
        QVERIFY2(r.ok(), (kv + ": " + r.errorText()).c_str());
        QVERIFY(!r.config->parallel.last_stage_layers && !r.config->parallel.first_stage_layers);
    }
    const ParseResult layers = loadConfigFile(
        redistributed, {set("parallel.vocab=naive"), set("parallel.last_stage_layers=2")});
    QVERIFY(!layers.ok());
    QVERIFY2(layers.errorText().find("only used with parallel.vocab") != std::string::npos,
             layers.errorText().c_str());
    const ParseResult named =
        parseConfig(interleaved, {set("parallel.schedule=1f1b"), set("parallel.virtual_stages=3")});
    QVERIFY(!named.ok());
    QVERIFY2(
        named.errorText().find("only interleaved-1f1b takes virtual_stages") != std::string::npos,
        named.errorText().c_str());
}

void TstConfig::roundTrip_data() {
    QTest::addColumn<QString>("file");  // a preset, or "" for kFull
    QTest::newRow("every key") << QString();
    for (const QString& f : presetFiles()) {
        QTest::newRow(qPrintable(QFileInfo(f).fileName())) << f;
    }
}

void TstConfig::roundTrip() {
    QFETCH(QString, file);
    const ParseResult first =
        file.isEmpty() ? parseConfig(kFull) : loadConfigFile(file.toStdString());
    QVERIFY2(first.ok(), first.errorText().c_str());
    const std::string json = toJson(*first.config);
    const ParseResult second = parseConfig(json);
    QVERIFY2(second.ok(), (second.errorText() + "\n" + json).c_str());
    compareConfigs(*first.config, *second.config);
    if (QTest::currentTestFailed()) {
        return;
    }
    QCOMPARE(toJson(*second.config), json);
    QCOMPARE(toJson(*second.config, -1).find('\n'), std::string::npos);
}

void TstConfig::toJsonWritesEveryKey() {
    // Read back with Qt's JSON parser: an independent check of what toJson writes.
    const QJsonObject o =
        QJsonDocument::fromJson(QByteArray::fromStdString(toJson(parseOk(kMinimal)))).object();
    const auto keys = [](const QJsonObject& obj) {
        QStringList k = obj.keys();
        k.sort();
        return k;
    };
    const auto sorted = [](QStringList l) {
        l.sort();
        return l;
    };
    QCOMPARE(keys(o), sorted({"name", "model", "parallel", "hardware", "costs", "run", "compare"}));
    QCOMPARE(keys(o["model"].toObject()),
             sorted({"layers", "hidden", "ffn_hidden", "heads", "seq_len", "vocab", "micro_batch",
                     "dtype", "flash_attention"}));
    // virtual_stages only for interleaved-1f1b, the one schedule that takes it.
    QCOMPARE(keys(o["parallel"].toObject()),
             sorted({"pipeline", "microbatches", "schedule", "vocab", "first_stage_layers",
                     "last_stage_layers"}));
    const QJsonObject interleaved =
        QJsonDocument::fromJson(
            QByteArray::fromStdString(
                toJson(*parseConfig(kMinimal, {{"parallel.schedule", "interleaved-1f1b"}}).config)))
            .object();
    QCOMPARE(interleaved["parallel"].toObject()["virtual_stages"].toInt(), 2);
    QCOMPARE(keys(o["hardware"].toObject()),
             sorted({"name", "peak_tflops", "memory_gib", "p2p_gbps", "allreduce_gbps",
                     "latency_us", "memory_gbps", "gemm_efficiency"}));
    QCOMPARE(keys(o["costs"].toObject()),
             sorted({"source", "per_stage_us", "p2p_us", "collective_us", "collectives_us"}));
    QCOMPARE(keys(o["costs"].toObject()["collectives_us"].toObject()),
             sorted({"input", "input_grad", "output_bcast", "output", "output_grad"}));
    QCOMPARE(keys(o["costs"].toObject()["per_stage_us"].toObject()),
             sorted({"F", "B", "W", "S", "T", "IF", "IB", "L", "OPT"}));
    QCOMPARE(keys(o["run"].toObject()), sorted({"iterations", "warmup", "seed", "learning_rate"}));
    QCOMPARE(o["parallel"].toObject()["schedule"].toString(), QStringLiteral("1f1b"));
    QVERIFY(o["parallel"].toObject()["last_stage_layers"].isNull());
    QCOMPARE(o["costs"].toObject()["source"].toString(), QStringLiteral("analytic"));
}

void TstConfig::variantsApply() {
    const Config base = parseOk(kFull);
    const ParseResult naive = applyVariant(base, base.compare[0]);
    QVERIFY2(naive.ok(), naive.errorText().c_str());
    QVERIFY(naive.config->parallel.vocab == VocabMethod::Naive);
    QCOMPARE(naive.config->model.vocab, std::int64_t{256000});
    QCOMPARE(naive.config->name, std::string("everything [naive]"));
    // Keys the variant leaves alone keep the base's values.
    QCOMPARE(naive.config->model.ffn_hidden, 300);
    QCOMPARE(naive.config->costs.calibrated_path, std::string("runs/a b.db"));
    QCOMPARE(naive.config->parallel.virtual_stages, 3);
    QVERIFY(!naive.config->parallel.first_stage_layers);
    // A variant that leaves redistributed drops the base's layer counts without being told; one
    // that sets them anyway is told they do not apply.
    const ParseResult dropped =
        applyVariant(base, Variant{"x", {{"parallel.vocab", R"("naive")"}}});
    QVERIFY2(dropped.ok(), dropped.errorText().c_str());
    QVERIFY(!dropped.config->parallel.first_stage_layers);
    const ParseResult kept = applyVariant(
        base,
        Variant{"x", {{"parallel.vocab", R"("naive")"}, {"parallel.first_stage_layers", "2"}}});
    QCOMPARE(QString::fromStdString(kept.errorText()),
             QStringLiteral(R"(compare variant "x": parallel.first_stage_layers: only used with )"
                            R"(parallel.vocab "redistributed", but parallel.vocab is "naive"; )"
                            "remove it or set it to null"));
    // So does the check of the file's compare list: a redistributed config with layer counts
    // whose variants switch the method is valid without "first_stage_layers": null in each (the
    // app's default preset, switched to redistributed with 1 first stage layer, was refused).
    std::string listed = kFull;
    const std::string explicit_null = R"(,
                                         "parallel.first_stage_layers": null)";
    const auto at = listed.find(explicit_null);
    QVERIFY(at != std::string::npos);
    listed.erase(at, explicit_null.size());
    const ParseResult from_file = parseConfig(listed);
    QVERIFY2(from_file.ok(), from_file.errorText().c_str());
    QVERIFY(from_file.config->parallel.first_stage_layers);

    // A derived name is derived again, since it describes what the variant changes.
    const Config minimal = parseOk(kMinimal);
    const ParseResult v2 =
        applyVariant(minimal, Variant{"vocab-2", {{"parallel.vocab", R"("vocab-2")"}}});
    QVERIFY2(v2.ok(), v2.errorText().c_str());
    QCOMPARE(v2.config->name, std::string("8L h64 V1000 p4 m8 1f1b vocab-2"));
    const ParseResult named = applyVariant(minimal, Variant{"x", {{"name", R"("mine")"}}});
    QVERIFY2(named.ok(), named.errorText().c_str());
    QCOMPARE(named.config->name, std::string("mine"));
}

void TstConfig::applyVariantReportsIssues() {
    const Config base = parseOk(kMinimal);
    const ParseResult r =
        applyVariant(base, Variant{"bad", {{"model.vocab", "1"}, {"parallel.vocb", R"("naive")"}}});
    QVERIFY(!r.ok());
    QCOMPARE(QString::fromStdString(r.errorText()),
             QStringLiteral(R"(compare variant "bad": parallel.vocb: unknown key (did you mean )"
                            R"("parallel.vocab"?))"
                            "\n"
                            R"(compare variant "bad": model.vocab: must be at least 2, got 1)"));
}

QTEST_GUILESS_MAIN(TstConfig)
#include "tst_config.moc"
