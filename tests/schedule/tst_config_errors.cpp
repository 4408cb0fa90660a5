// Every way a config can be wrong, each with the exact message users see (docs/config.md), and
// where in the file the message points.
#include <QtTest>

#include <pipescope/schedule/config_parse.h>

#include "testsupport.h"

using namespace pipescope;
using namespace pipescope::schedule;

namespace {

// A small valid config; the rows below break it with overrides or replace it whole.
const char* const kBase = R"({
  "model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000},
  "parallel": {"pipeline": 4, "microbatches": 8}
})";

QString issuesText(const ParseResult& r) {
    QStringList lines;
    for (const ConfigIssue& i : r.issues) {
        lines << QString::fromStdString(i.text());
    }
    return lines.join(QLatin1Char('\n'));
}

std::vector<Override> overridesFrom(const QStringList& sets) {
    std::vector<Override> out;
    for (const QString& s : sets) {
        std::string error;
        const auto o = parseOverride(s.toStdString(), &error);
        if (!o) {
            qFatal("bad override in the test table: %s", error.c_str());
        }
        out.push_back(*o);
    }
    return out;
}

}  // namespace

class TstConfigErrors : public QObject {
    Q_OBJECT

  private slots:
    void baseIsValid();
    void invalidValues_data();
    void invalidValues();
    void numberHintsIgnoreTheLocale();
    void invalidDocuments_data();
    void invalidDocuments();
    void syntaxErrors_data();
    void syntaxErrors();
    void issuesPointAtKeysAndValues();
    void positionsSurviveDuplicatesAndBom();
    void allIssuesInDocumentOrder();
    void rulesWaitForValidFields();
    void variantIssuesNameTheVariant();
    void missingFileIsAnIssue();
    void longLinesKeepPositions();
    void manyIssuesAreCapped();
    void cappedIssuesKeepSuggestions();
};

void TstConfigErrors::baseIsValid() {
    const ParseResult r = parseConfig(kBase);
    QVERIFY2(r.ok(), r.errorText().c_str());
}

void TstConfigErrors::invalidValues_data() {
    QTest::addColumn<QStringList>("sets");
    QTest::addColumn<QString>("expected");
    const auto row = [](const char* name, QStringList sets, const char* expected) {
        QTest::newRow(name) << sets << QString::fromUtf8(expected);
    };
    // Types are strict: no strings for numbers, no floats for integers.
    row("layers string", {R"(model.layers="32")"}, R"(model.layers: must be an integer, got "32")");
    row("layers float", {"model.layers=8.0"},
        "model.layers: must be an integer, got 8.0 (a float; write the integer as 8)");
    row("vocab with an exponent", {"model.vocab=1e5"},
        "model.vocab: must be an integer, got 100000.0 (a float; write the integer as 100000)");
    row("layers fraction", {"model.layers=8.5"}, "model.layers: must be an integer, got 8.5");
    // A whole float out of range is told its range: the integer it means is refused as well.
    row("hidden float too large", {"model.hidden=1e10"},
        "model.hidden: must be at most 2147483647, got 10000000000.0");
    row("layers float far too large", {"model.layers=1e30"},
        "model.layers: must be at most 2147483647, got 1e+30");
    row("microbatches float negative", {"parallel.microbatches=-5e9"},
        "parallel.microbatches: must be at least 1, got -5000000000.0");
    row("microbatches float zero", {"parallel.microbatches=0.0"},
        "parallel.microbatches: must be at least 1, got 0.0");
    row("layers zero", {"model.layers=0"}, "model.layers: must be at least 1, got 0");
    row("hidden too large", {"model.hidden=3000000000"},
        "model.hidden: must be at most 2147483647, got 3000000000");
    row("vocab one", {"model.vocab=1"}, "model.vocab: must be at least 2, got 1");
    row("hidden too large for the default ffn", {"model.hidden=600000000"},
        "model.hidden: is too large for the default ffn_hidden (4 × hidden); give ffn_hidden");
    row("heads null", {"model.heads=null"}, "model.heads: must be an integer, got null");
    row("micro_batch array", {"model.micro_batch=[1]"},
        "model.micro_batch: must be an integer, got an array");
    row("dtype typo", {"model.dtype=bf8"},
        R"(model.dtype: unknown dtype "bf8"; expected one of bf16, fp16, fp32 (did you mean "bf16"?))");
    row("dtype number", {"model.dtype=16"}, "model.dtype: must be a string, got 16");
    row("model not an object", {"model=5"}, "model: must be an object, got 5");
    row("pipeline beyond the limit", {"parallel.pipeline=100001"},
        "parallel.pipeline: must be at most 100000, got 100001 (PipeScope simulates at most "
        "100000 pipeline stages)");
    row("microbatches zero", {"parallel.microbatches=0"},
        "parallel.microbatches: must be at least 1, got 0");
    row("schedule swapped letters", {"parallel.schedule=1fb1"},
        R"(parallel.schedule: unknown schedule "1fb1"; expected one of gpipe, 1f1b, interleaved-1f1b, zb-h1, v-half (did you mean "1f1b"?))");
    row("schedule unknown", {"parallel.schedule=zigzag"},
        R"(parallel.schedule: unknown schedule "zigzag"; expected one of gpipe, 1f1b, interleaved-1f1b, zb-h1, v-half)");
    row("schedule by its first word", {"parallel.schedule=interleaved"},
        R"(parallel.schedule: unknown schedule "interleaved"; expected one of gpipe, 1f1b, interleaved-1f1b, zb-h1, v-half (did you mean "interleaved-1f1b"?))");
    row("schedule spelled out", {"parallel.schedule=zero-bubble"},
        R"(parallel.schedule: unknown schedule "zero-bubble"; expected one of gpipe, 1f1b, interleaved-1f1b, zb-h1, v-half (did you mean "zb-h1"?))");
    row("vocab method ambiguous", {"parallel.vocab=vocab"},
        R"(parallel.vocab: unknown vocab method "vocab"; expected one of naive, redistributed, interlaced, vocab-1, vocab-2)");
    row("vocab method case", {"parallel.vocab=Vocab-2"},
        R"(parallel.vocab: unknown vocab method "Vocab-2"; expected one of naive, redistributed, interlaced, vocab-1, vocab-2 (did you mean "vocab-2"?))");
    row("virtual stages on 1f1b", {"parallel.virtual_stages=2"},
        R"(parallel.virtual_stages: only interleaved-1f1b takes virtual_stages; schedule "1f1b" has 1 chunk per rank, got 2)");
    row("virtual stages 1 on interleaved",
        {"parallel.schedule=interleaved-1f1b", "parallel.virtual_stages=1"},
        "parallel.virtual_stages: must be at least 2 for interleaved-1f1b, got 1");
    row("virtual stages 3 on v-half", {"parallel.schedule=v-half", "parallel.virtual_stages=3"},
        R"(parallel.virtual_stages: schedule "v-half" always has 2 chunks per rank, got 3; leave virtual_stages out)");
    row("first stage layers without redistributed", {"parallel.first_stage_layers=1"},
        R"(parallel.first_stage_layers: only used with parallel.vocab "redistributed", but parallel.vocab is "naive"; remove it or set it to null)");
    row("last stage layers negative",
        {"parallel.vocab=redistributed", "parallel.last_stage_layers=-1"},
        "parallel.last_stage_layers: must be at least 0, got -1");
    row("last stage layers string",
        {"parallel.vocab=redistributed", R"(parallel.last_stage_layers="2")"},
        R"(parallel.last_stage_layers: must be null or an integer, got "2")");
    row("hidden not divisible by heads", {"model.hidden=66"},
        "model.hidden: 66 is not divisible by model.heads (4); make hidden a multiple of heads");
    row("layers do not split", {"model.layers=10"},
        R"(model.layers: 10 layers do not split evenly over parallel.pipeline (4) stages; use a multiple of 4 layers (or parallel.vocab "redistributed"))");
    row("v-half layers do not split", {"parallel.schedule=v-half", "model.layers=12"},
        R"(model.layers: v-half needs an even split over 2 × parallel.pipeline (4) = 8 positions, but 12 layers do not divide by 8; use a multiple of 8 layers (or parallel.vocab "redistributed"))");
    row("interleaved layers do not split",
        {"parallel.schedule=interleaved-1f1b", "parallel.virtual_stages=3"},
        R"(model.layers: 8 layers do not split evenly over parallel.pipeline (4) × parallel.virtual_stages (3) = 12 model chunks; use a multiple of 12 layers (or parallel.vocab "redistributed"))");
    row("redistributed ends exceed layers",
        {"parallel.vocab=redistributed", "parallel.first_stage_layers=5",
         "parallel.last_stage_layers=5"},
        "parallel.last_stage_layers: first_stage_layers + last_stage_layers = 5 + 5 = 10 is "
        "more than model.layers (8); lower one of them");
    row("redistributed first exceeds layers",
        {"parallel.vocab=redistributed", "parallel.first_stage_layers=9"},
        "parallel.first_stage_layers: 9 is more than model.layers (8)");
    row("redistributed two positions must add up",
        {"parallel.vocab=redistributed", "parallel.pipeline=2", "parallel.first_stage_layers=3",
         "parallel.last_stage_layers=3"},
        "parallel.last_stage_layers: with 2 pipeline positions first_stage_layers + "
        "last_stage_layers must equal model.layers (8), got 3 + 3 = 6; set one of them to null "
        "to have it chosen");
    row("redistributed one position", {"parallel.vocab=redistributed", "parallel.pipeline=1"},
        "parallel.vocab: redistributed needs at least 2 pipeline positions, got "
        "parallel.pipeline = 1; use more stages or another method");
    row("redistributed leaves positions empty",
        {"parallel.vocab=redistributed", "parallel.pipeline=100"},
        "model.layers: 8 layers leave pipeline positions empty: redistributed gives each of the "
        "98 positions between the first and the last at least one layer; use at least 98 layers "
        "or fewer stages");
    row("redistributed ends leave the middle empty",
        {"parallel.vocab=redistributed", "parallel.first_stage_layers=4",
         "parallel.last_stage_layers=3"},
        "parallel.last_stage_layers: first_stage_layers + last_stage_layers = 4 + 3 = 7 leaves 1 "
        "of model.layers (8) for the 2 positions between, which need at least one each; lower "
        "one of them");
    row("redistributed first count leaves the middle empty",
        {"parallel.vocab=redistributed", "parallel.first_stage_layers=7"},
        "parallel.first_stage_layers: 7 of model.layers (8) leaves 1 for the 2 positions between "
        "the first and the last, which need at least one each; lower it");
    row("sharded vocab smaller than pipeline", {"parallel.vocab=vocab-2", "model.vocab=3"},
        R"(model.vocab: must be at least parallel.pipeline (4) with vocab "vocab-2", which gives every rank a shard of at least one row; got 3)");
    row("interleaved microbatches",
        {"parallel.schedule=interleaved-1f1b", "parallel.microbatches=6"},
        "parallel.microbatches: interleaved-1f1b needs a multiple of parallel.pipeline (4), got "
        "6; use 4 or 8");
    row("interleaved microbatches below pipeline",
        {"parallel.schedule=interleaved-1f1b", "parallel.microbatches=3"},
        "parallel.microbatches: interleaved-1f1b needs a multiple of parallel.pipeline (4), got "
        "3; use 4");
    row("v-half microbatches", {"parallel.schedule=v-half", "parallel.microbatches=2"},
        "parallel.microbatches: v-half needs at least parallel.pipeline (4) micro-batches, got 2");
    row("warmup not below iterations", {"run.iterations=3", "run.warmup=3"},
        "run.warmup: must be less than run.iterations (3), got 3; lower warmup or raise "
        "iterations");
    row("seed negative", {"run.seed=-1"}, "run.seed: must be a non-negative integer, got -1");
    row("seed float", {"run.seed=1.5"}, "run.seed: must be a non-negative integer, got 1.5");
    // AdamW's learning rate: 1e308 made every weight infinite in one step, and a rate too small
    // for fp32 changes nothing.
    row("learning rate absurd", {"run.learning_rate=1e308"},
        "run.learning_rate: must be in (0, 1], got 1e+308");
    row("learning rate above 1", {"run.learning_rate=1.5"},
        "run.learning_rate: must be in (0, 1], got 1.5");
    row("learning rate zero", {"run.learning_rate=0"},
        "run.learning_rate: must be in (0, 1], got 0");
    row("learning rate vanishing", {"run.learning_rate=1e-20"},
        "run.learning_rate: must be at least 1e-12, got 1e-20");
    row("learning rate string", {R"(run.learning_rate="0.001")"},
        R"(run.learning_rate: must be a number, got "0.001")");
    // A number JSON cannot hold becomes a string in an override; the message says why.
    row("number beyond a double", {"run.learning_rate=1e999"},
        R"(run.learning_rate: must be a number, got "1e999" (beyond the range of a number, about 1.8e308))");
    row("integer beyond a double", {"model.layers=-1e400"},
        R"(model.layers: must be an integer, got "-1e400" (beyond the range of a number, about 1.8e308))");
    row("infinity", {"hardware.latency_us=inf"},
        R"(hardware.latency_us: must be a number, got "inf" (JSON has no NaN or infinity))");
    row("NaN", {"model.layers=NaN"},
        R"(model.layers: must be an integer, got "NaN" (JSON has no NaN or infinity))");
    row("number with decimals beyond a double", {"hardware.p2p_gbps=2.5E+400"},
        R"(hardware.p2p_gbps: must be a number, got "2.5E+400" (beyond the range of a number, about 1.8e308))");
    row("number with many digits beyond a double", {"hardware.p2p_gbps=0.000123e313"},
        R"(hardware.p2p_gbps: must be a number, got "0.000123e313" (beyond the range of a number, about 1.8e308))");
    row("plus infinity", {"hardware.latency_us=+Infinity"},
        R"(hardware.latency_us: must be a number, got "+Infinity" (JSON has no NaN or infinity))");
    // Too small for a double is not beyond its range: JSON reads it as 0 unquoted.
    row("number quoted below a double", {R"(hardware.p2p_gbps="1e-999")"},
        R"(hardware.p2p_gbps: must be a number, got "1e-999")");
    row("number quoted below a double with digits", {R"(hardware.p2p_gbps="1234e-999")"},
        R"(hardware.p2p_gbps: must be a number, got "1234e-999")");
    row("decimal comma", {"hardware.p2p_gbps=1,5e999"},
        R"(hardware.p2p_gbps: must be a number, got "1,5e999")");
    row("peak zero", {"hardware.peak_tflops=0"},
        "hardware.peak_tflops: must be greater than 0, got 0");
    row("peak string", {R"(hardware.peak_tflops="fast")"},
        R"(hardware.peak_tflops: must be a number, got "fast")");
    row("gemm efficiency above one", {"hardware.gemm_efficiency=1.5"},
        "hardware.gemm_efficiency: must be in (0, 1], got 1.5");
    row("latency negative", {"hardware.latency_us=-1"},
        "hardware.latency_us: must be at least 0, got -1");
    // Sane limits: past them op times overflowed the trace clock or came out infinite.
    row("latency beyond the limit", {"hardware.latency_us=1e30"},
        "hardware.latency_us: must be at most 1e9, got 1e+30");
    row("gemm efficiency denormal", {"hardware.gemm_efficiency=5e-324"},
        "hardware.gemm_efficiency: must be at least 1e-6, got 5e-324");
    row("peak denormal", {"hardware.peak_tflops=5e-324"},
        "hardware.peak_tflops: must be at least 1e-6, got 5e-324");
    row("p2p bandwidth tiny", {"hardware.p2p_gbps=1e-300"},
        "hardware.p2p_gbps: must be at least 1e-6, got 1e-300");
    row("memory bandwidth denormal", {"hardware.memory_gbps=5e-324"},
        "hardware.memory_gbps: must be at least 1e-6, got 5e-324");
    row("allreduce bandwidth tiny", {"hardware.allreduce_gbps=1e-9"},
        "hardware.allreduce_gbps: must be at least 1e-6, got 1e-09");
    row("memory size tiny", {"hardware.memory_gib=1e-7"},
        "hardware.memory_gib: must be at least 1e-6, got 1e-07");
    // A capacity past an int64 of bytes read back as a negative memory_capacity_bytes.
    row("memory size huge", {"hardware.memory_gib=1e300"},
        "hardware.memory_gib: must be at most 1e9, got 1e+300");
    row("cost table entry huge", {"costs.per_stage_us.F=[1, 1e300, 1, 1]"},
        "costs.per_stage_us.F[1]: must be at most 1e9, got 1e+300");
    row("p2p time huge", {"costs.p2p_us=1e300"}, "costs.p2p_us: must be at most 1e9, got 1e+300");
    row("collective time huge", {"costs.collectives_us.output=1e10"},
        "costs.collectives_us.output: must be at most 1e9, got 10000000000.0");
    row("hardware name empty", {R"(hardware.name="")"}, "hardware.name: must not be empty");
    row("name not a string", {"name=5"}, "name: must be a string, got 5");
    row("name with a newline", {R"(name="two\nlines")"},
        "name: must be one line of printable text; it has the control character 0x0A at byte 4");
    row("hardware name with an escape", {R"(hardware.name="A100\u001b[31m")"},
        "hardware.name: must be one line of printable text; it has the control character 0x1B "
        "at byte 5");
    row("cost source typo", {"costs.source=tabel"},
        R"(costs.source: unknown cost source "tabel"; expected analytic, table or calibrated:PATH (did you mean "table"?))");
    row("calibrated without path", {"costs.source=calibrated:"},
        R"(costs.source: "calibrated" needs the run it takes its times from: write "calibrated:PATH", e.g. "calibrated:run.db")");
    row("cost table wrong length", {"costs.per_stage_us.F=[1, 2]"},
        "costs.per_stage_us.F: has 2 entries but parallel.pipeline is 4; give one entry per rank "
        "or none");
    row("cost table negative entry", {"costs.per_stage_us.B=[1, 2, -3, 4]"},
        "costs.per_stage_us.B[2]: must be at least 0, got -3");
    row("cost table not an array", {"costs.per_stage_us.W=5"},
        "costs.per_stage_us.W: must be an array of numbers, got 5");
    row("p2p string", {R"(costs.p2p_us="x")"},
        R"(costs.p2p_us: must be null or a number, got "x")");
    row("collective kind string", {R"(costs.collectives_us.output="x")"},
        R"(costs.collectives_us.output: must be null or a number, got "x")");
    row("unknown collective kind", {"costs.collectives_us.outptu=5"},
        R"(costs.collectives_us.outptu: unknown key (did you mean "costs.collectives_us.output"?))");
    row("override of unknown key", {"model.vocb=5"},
        R"(model.vocb: unknown key (did you mean "model.vocab"?))");
    // Megatron-LM's and Hugging Face's names for our keys.
    row("megatron name", {"model.hidden_size=64"},
        R"(model.hidden_size: unknown key (did you mean "model.hidden"?))");
    row("hugging face name", {"parallel.num_microbatches=8"},
        R"(parallel.num_microbatches: unknown key (did you mean "parallel.microbatches"?))");
    row("alias in the wrong object", {"parallel.hidden_size=64"},
        R"(parallel.hidden_size: unknown key)");
    row("override of unknown section", {"paralel.vocab=naive"},
        R"(paralel.vocab: unknown key (did you mean "parallel.vocab"?))");
    row("override below a value", {"model.layers.x=1"},
        R"(model.layers.x: unknown key ("model.layers" holds a value, not keys))");
    row("two independent issues", {"model.layers=0", "run.seed=-2"},
        "model.layers: must be at least 1, got 0\nrun.seed: must be a non-negative integer, got "
        "-2");
}

void TstConfigErrors::invalidValues() {
    QFETCH(QStringList, sets);
    QFETCH(QString, expected);
    const ParseResult r = parseConfig(kBase, overridesFrom(sets));
    QVERIFY(!r.ok());
    QCOMPARE(issuesText(r), expected);
}

// The hint for a number beyond a double reads the number as JSON writes it, whatever the C
// locale: in the app (which takes the user's locale) a German user's "1.5e999" had no hint and
// "1,5e999" had one.
void TstConfigErrors::numberHintsIgnoreTheLocale() {
    const test::CommaLocale comma;
    if (!comma.ok()) {
        QSKIP(test::kNoCommaLocale);
    }
    const auto issue = [](const char* set) {
        return issuesText(parseConfig(kBase, overridesFrom({QString::fromLatin1(set)})));
    };
    QCOMPARE(
        issue("hardware.p2p_gbps=1.5e999"),
        R"(hardware.p2p_gbps: must be a number, got "1.5e999" (beyond the range of a number, about 1.8e308))");
    QCOMPARE(issue("hardware.p2p_gbps=1,5e999"),
             R"(hardware.p2p_gbps: must be a number, got "1,5e999")");
}

void TstConfigErrors::invalidDocuments_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("expected");
    const char* const model =
        R"("model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000})";
    const char* const parallel = R"("parallel": {"pipeline": 4, "microbatches": 8})";
    const auto doc = [&](const char* extra) {
        return QStringLiteral("{%1, %2, %3}").arg(model, parallel, extra);
    };
    QTest::newRow("unknown key with suggestion")
        << QStringLiteral(
               R"({%1, "parallel": {"pipeline": 4, "microbatches": 8, "shedule": "1f1b"}})")
               .arg(model)
        << QStringLiteral(R"(parallel.shedule: unknown key (did you mean "schedule"?))");
    QTest::newRow("unknown top-level key") << QStringLiteral(R"({"modle": {}, %1})").arg(parallel)
                                           << QStringLiteral(
                                                  "model: required key is missing\n"
                                                  R"(modle: unknown key (did you mean "model"?))");
    QTest::newRow("unknown key without suggestion")
        << doc(R"("run": {"loops": 3})")
        << QStringLiteral(
               "run.loops: unknown key; expected one of iterations, warmup, seed, learning_rate");
    QTest::newRow("missing required key")
        << QStringLiteral(
               R"({"model": {"layers": 8, "hidden": 64, "heads": 4, "vocab": 1000}, %1})")
               .arg(parallel)
        << QStringLiteral("model.seq_len: required key is missing");
    QTest::newRow("not an object")
        << QStringLiteral("[1, 2]")
        << QStringLiteral("the config must be a JSON object, got an array");
    QTest::newRow("duplicate key")
        << QStringLiteral(R"({%1, %2, "run": {"seed": 1, "seed": 2}})").arg(model, parallel)
        << QStringLiteral("run.seed: duplicate key; it already appears at line 1, column 138");
    // Control characters in a key are escaped: the message stays one printable line.
    QTest::newRow("control character in a key")
        << doc(R"("run": {"seed\u0000": 1, "x\ny": 2})")
        << QStringLiteral(R"(run.seed\u0000: unknown key (did you mean "seed"?))"
                          "\n"
                          R"(run.x\u000ay: unknown key; expected one of iterations, warmup, seed, )"
                          "learning_rate");
    QTest::newRow("compare not an array")
        << doc(R"("compare": {"label": "x"})")
        << QStringLiteral("compare: must be an array of variants, got an object");
    QTest::newRow("variant without label")
        << doc(R"("compare": [{"set": {}}])")
        << QStringLiteral("compare[0].label: required key is missing");
    QTest::newRow("variant with unknown key")
        << doc(R"("compare": [{"label": "a", "sets": {}}])")
        << QStringLiteral(
               "compare[0].set: required key is missing\n"
               R"(compare[0].sets: unknown key (did you mean "set"?))");
    QTest::newRow("variant sets unknown key path")
        << doc(R"("compare": [{"label": "a", "set": {"parallel.vocb": "naive"}}])")
        << QStringLiteral(
               R"(compare[0].set.parallel.vocb: unknown key (did you mean "parallel.vocab"?))");
    QTest::newRow("variant with invalid value")
        << doc(R"("compare": [{"label": "a", "set": {"parallel.vocab": "vocab-3"}}])")
        << QStringLiteral(
               R"(compare[0].set.parallel.vocab: unknown vocab method "vocab-3"; expected one of naive, redistributed, interlaced, vocab-1, vocab-2)");
    QTest::newRow("variant breaks a rule elsewhere")
        << QStringLiteral(
               R"({"model": {"layers": 12, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000}, )"
               R"(%1, "compare": [{"label": "a", "set": {"parallel.schedule": "v-half"}}]})")
               .arg(parallel)
        << QString::fromUtf8(
               "compare[0]: makes the config invalid: model.layers: v-half needs an even split "
               "over 2 × parallel.pipeline (4) = 8 positions, but 12 layers do not divide by 8; "
               "use a multiple of 8 layers (or parallel.vocab \"redistributed\")");
    QTest::newRow("duplicate variant labels")
        << doc(R"("compare": [{"label": "a", "set": {}}, {"label": "a", "set": {}}])")
        << QStringLiteral(R"(compare[1].label: duplicate label "a" (also compare[0]))");
    QTest::newRow("variant sets compare")
        << doc(R"("compare": [{"label": "a", "set": {"compare": []}}])")
        << QStringLiteral(R"(compare[0].set.compare: a variant cannot set "compare")");
    // A label names a table row and a trace file: one line of printable text, not blank, short
    // enough for a file name. (A line break in it broke the table and failed every variant's
    // run with a message about its name.)
    QTest::newRow("variant label with a line break")
        << doc(R"("compare": [{"label": "a\nb", "set": {}}])")
        << QStringLiteral(
               "compare[0].label: must be one line of printable text; it has the "
               "control character 0x0A at byte 2");
    QTest::newRow("variant label blank")
        << doc(R"("compare": [{"label": "   ", "set": {}}])")
        << QStringLiteral("compare[0].label: must not be blank (it has only spaces)");
    QTest::newRow("variant label too long")
        << doc(qPrintable(QStringLiteral(R"("compare": [{"label": "%1", "set": {}}])")
                              .arg(QString(101, QLatin1Char('L')))))
        << QStringLiteral(
               "compare[0].label: must be at most 100 bytes long (it becomes part of "
               "the variant's trace file name), got 101");
    QTest::newRow("name blank") << doc(R"("name": "  ")")
                                << QStringLiteral("name: must not be blank (it has only spaces)");
}

void TstConfigErrors::invalidDocuments() {
    QFETCH(QString, json);
    QFETCH(QString, expected);
    const ParseResult r = parseConfig(json.toStdString());
    QVERIFY(!r.ok());
    QCOMPARE(issuesText(r), expected);
}

void TstConfigErrors::syntaxErrors_data() {
    QTest::addColumn<QByteArray>("json");
    QTest::addColumn<QString>("expected");
    const auto row = [](const char* name, const QByteArray& json, const char* expected) {
        QTest::newRow(name) << json << QString::fromUtf8(expected);
    };
    row("missing comma", R"({"a": 1 "b": 2})",
        "1:9: syntax error: expected ',' or '}' after an object member");
    row("trailing comma in object", "{\n  \"model\": {\n    \"layers\": 32,\n  }\n}",
        "4:3: syntax error: trailing comma before '}'; remove it");
    row("trailing comma in array", "[1, 2,]",
        "1:7: syntax error: trailing comma before ']'; remove it");
    // A stray comma is named where it is, not on the value before it (1:6, '123', before).
    row("two commas in an object", R"({"a":123,,})",
        "1:10: syntax error: two commas in a row; remove one");
    row("two commas in an array", "[\"F3\", ,\"RECV_B2<1\"]",
        "1:8: syntax error: two commas in a row; remove one");
    row("comma after a brace", R"({,"a": 1})",
        "1:2: syntax error: a comma right after '{'; remove it");
    row("empty", "", "1:1: syntax error: the document is empty");
    row("only spaces", "  \n  ", "2:3: syntax error: the document is empty");
    row("bare word", R"({"a": vocab-2})",
        "1:7: syntax error: expected a value, got 'vocab-2'; strings need double quotes and the "
        "literals are true, false and null");
    row("single quotes", "{'a': 1}",
        "1:2: syntax error: keys must be in double quotes, not single quotes");
    row("leading zero", R"({"a": 01})",
        "1:7: syntax error: invalid number: no leading zeros allowed");
    row("dot without digits", R"({"a": 1.})",
        "1:9: syntax error: invalid number: expected a digit after '.'");
    row("plus sign", R"({"a": +1})", "1:7: syntax error: numbers must not start with '+'");
    row("bad escape", R"({"a": "x\q"})",
        R"(1:9: syntax error: invalid escape '\q' in a string (write '\\' for a backslash))");
    row("unterminated string", R"({"a": "abc)", "1:7: syntax error: unterminated string");
    row("line break in string", "{\"a\": \"ab\ncd\"}",
        R"(1:10: syntax error: unterminated string (a line break inside a string must be written as \n))");
    row("content after the value", R"({"a": 1} x)",
        "1:10: syntax error: unexpected 'x' after the end of the JSON value (only one value is "
        "allowed)");
    row("missing colon", R"({"a" 1})",
        R"(1:6: syntax error: expected ':' after the key "a", got '1')");
    row("number out of range", R"({"a": 1e999})",
        "1:7: syntax error: number 1e999 is out of range");
    // Values in syntax errors are shortened like values elsewhere, and stop at a line break.
    row("huge number", "{\"a\": 4" + QByteArray(5'000'000, '0') + "}",
        "1:7: syntax error: number 4000000000000000000000000000000000000... is out of range");
    row("number out of range before a line break", "{\"a\": 1e400\n, \"b\": 2}",
        "1:7: syntax error: number 1e400 is out of range");
    // Minified: the comma after the number is not part of it.
    row("number out of range before a comma", R"({"a": 1e999, "b": 2})",
        "1:7: syntax error: number 1e999 is out of range");
    // A file saved as UTF-16 says so, rather than showing its byte-order mark as two characters.
    row("utf-16", QByteArray("\xff\xfe{\0}\0", 6),
        "1:1: the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it "
        "as UTF-8");
    row("utf-16 big-endian", QByteArray("\xfe\xff\0{\0}", 6),
        "1:1: the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it "
        "as UTF-8");
    row("long key without colon", "{\"" + QByteArray(100, 'k') + "\" 1}",
        "1:105: syntax error: expected ':' after the key "
        "\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...\", got '1'");
    row("comment", "// c\n{}", "1:1: syntax error: comments are not allowed in JSON");
    row("end inside an object", R"({"a": 1)",
        "1:8: syntax error: expected ',' or '}' after an object member");
    row("columns count characters", "{\"\xc3\xa9\": 1 \"b\": 2}",
        "1:9: syntax error: expected ',' or '}' after an object member");
    row("second line", "{\"a\": [1,\n  2 3]}",
        "2:5: syntax error: expected ',' or ']' after an array element");
    row("invalid utf-8", "{\"a\": \"\xff\"}", "1:8: syntax error: invalid UTF-8 in a string");
    row("unpaired surrogate", R"({"a": "\ud800"})",
        R"(1:8: syntax error: invalid \u escape in a string: unpaired surrogate)");
    row("too deep", QByteArray(300, '['), "1:201: syntax error: nesting deeper than 200 levels");
    row("bare key", "{a: 1}", "1:2: syntax error: expected a key in double quotes, got 'a'");
    row("cut-short literal", R"({"a": tru})",
        "1:7: syntax error: expected a value, got 'tru'; strings need double quotes and the "
        "literals are true, false and null");
    row("single-quoted value", R"({"a": 'x'})",
        "1:7: syntax error: strings must be in double quotes, not single quotes");
    row("minus alone", R"({"a": -})",
        "1:8: syntax error: invalid number: expected a digit after '-'");
    row("exponent without digits", R"({"a": 1e})",
        "1:9: syntax error: invalid number: expected a digit in the exponent");
    row("short unicode escape", R"({"a": "\u12"})",
        R"(1:8: syntax error: invalid \u escape in a string: expected four hex digits)");
    row("tab in string", "{\"a\": \"x\ty\"}",
        "1:9: syntax error: control character inside a string; write it as an escape such as \\t");
    row("second value", "{} {}",
        "1:4: syntax error: unexpected '{' after the end of the JSON value (only one value is "
        "allowed)");
}

void TstConfigErrors::syntaxErrors() {
    QFETCH(QByteArray, json);
    QFETCH(QString, expected);
    const ParseResult r = parseConfig(std::string_view(json.constData(), json.size()), "cfg.json");
    QCOMPARE(r.issues.size(), std::size_t{1});
    QCOMPARE(r.issues.front().path, std::string());
    QCOMPARE(QString::fromStdString(r.errorText()), QStringLiteral("cfg.json:") + expected);
}

void TstConfigErrors::issuesPointAtKeysAndValues() {
    const std::string json = R"({
  "model": {
    "layers": 8, "hidden": 66, "heads": 4, "seq_len": 32, "vocab": 1000,
    "dtyp": "bf16"
  },
  "parallel": {
    "pipeline": 4,
    "microbatches": 0
  }
})";
    const ParseResult r = parseConfig(json, "presets/x.json");
    QCOMPARE(
        QString::fromStdString(r.errorText()),
        QStringLiteral("presets/x.json:3:28: model.hidden: 66 is not divisible by model.heads "
                       "(4); make hidden a multiple of heads\n"
                       R"(presets/x.json:4:5: model.dtyp: unknown key (did you mean "dtype"?))"
                       "\n"
                       "presets/x.json:8:21: parallel.microbatches: must be at least 1, got 0"));
    QCOMPARE(r.issues[2].line, 8);
    QCOMPARE(r.issues[2].column, 21);

    // A missing key points at the object that lacks it.
    std::string without_heads = json;
    without_heads.replace(without_heads.find(R"("heads": 4, )"), 12, "");
    const ParseResult missing = parseConfig(without_heads, "x.json");
    QVERIFY(!missing.ok());
    QCOMPARE(QString::fromStdString(missing.issues.front().text("x.json")),
             QStringLiteral("x.json:2:3: model.heads: required key is missing"));

    // A value set by an override has no place in the file, so its issue has none either.
    const ParseResult overridden =
        parseConfig(json, {Override{"parallel.microbatches", "-1"}}, "x.json");
    QCOMPARE(QString::fromStdString(overridden.issues.back().text("x.json")),
             QStringLiteral("x.json: parallel.microbatches: must be at least 1, got -1"));
}

// Positions come from the token order of the text: a skipped duplicate subtree, a byte-order
// mark and array elements must not shift the ones after them.
void TstConfigErrors::positionsSurviveDuplicatesAndBom() {
    const std::string json =
        "\xEF\xBB\xBF{\n"
        R"(  "run": {"seed": 1},)"
        "\n"
        R"(  "run": {"seed": {"x": [1, {"y": "}"}]}},)"
        "\n"
        R"(  "model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000},)"
        "\n"
        R"(  "parallel": {"pipeline": 4, "microbatches": 0},)"
        "\n"
        R"(  "compare": [{"label": "a", "set": {}}, {"label": "a", "set": {}}])"
        "\n"
        "}";
    const ParseResult r = parseConfig(json, "x.json");
    QCOMPARE(
        QString::fromStdString(r.errorText()),
        QStringLiteral("x.json:3:3: run: duplicate key; it already appears at line 2, column 3\n"
                       "x.json:5:47: parallel.microbatches: must be at least 1, got 0\n"
                       R"(x.json:6:52: compare[1].label: duplicate label "a" (also compare[0]))"));
}

void TstConfigErrors::allIssuesInDocumentOrder() {
    const std::string json = R"({
  "run": {"seed": -1},
  "model": {"layers": 0, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000},
  "parallel": {"pipeline": 4, "microbatches": 8, "schedule": "x"},
  "hardware": {"peak_tflops": 0}
})";
    const ParseResult r = parseConfig(json);
    QStringList paths;
    for (const ConfigIssue& i : r.issues) {
        paths << QString::fromStdString(i.path);
    }
    QCOMPARE(paths, QStringList(
                        {"run.seed", "model.layers", "parallel.schedule", "hardware.peak_tflops"}));
}

void TstConfigErrors::rulesWaitForValidFields() {
    // Each case breaks a field that a rule needs; only the field's own issue must appear.
    const std::vector<std::pair<std::vector<Override>, std::string>> cases = {
        {{{"model.hidden", R"("66")"}, {"model.heads", "5"}}, "model.hidden"},
        {{{"parallel.pipeline", "0"},
          {"parallel.schedule", R"("v-half")"},
          {"costs.per_stage_us.F", "[1, 2]"}},
         "parallel.pipeline"},
        {{{"parallel.schedule", R"("oops")"}, {"parallel.virtual_stages", "5"}},
         "parallel.schedule"},
        {{{"parallel.vocab", R"("vocab3")"}, {"parallel.first_stage_layers", "3"}},
         "parallel.vocab"},
        {{{"run.iterations", "0"}, {"run.warmup", "5"}}, "run.iterations"},
    };
    for (const auto& [overrides, path] : cases) {
        const ParseResult r = parseConfig(kBase, overrides);
        QCOMPARE(r.issues.size(), std::size_t{1});
        QCOMPARE(r.issues.front().path, path);
    }
}

void TstConfigErrors::variantIssuesNameTheVariant() {
    const std::string json = R"({
  "model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, "vocab": 1000},
  "parallel": {"pipeline": 4, "microbatches": 8},
  "compare": [
    {"label": "ok", "set": {"parallel.vocab": "vocab-1"}},
    {"label": "bad", "set": {"model.vocab": 2, "parallel.vocab": "vocab-2"}}
  ]
})";
    const ParseResult r = parseConfig(json, "c.json");
    QCOMPARE(QString::fromStdString(r.errorText()),
             QStringLiteral(R"(c.json:6:45: compare[1].set.model.vocab: must be at least )"
                            R"(parallel.pipeline (4) with vocab "vocab-2", which gives every rank )"
                            "a shard of at least one row; got 2"));
}

void TstConfigErrors::missingFileIsAnIssue() {
    const ParseResult missing = loadConfigFile("/nonexistent/pipescope/x.json");
    QVERIFY(!missing.ok());
    QCOMPARE(QString::fromStdString(missing.errorText()),
             QStringLiteral("/nonexistent/pipescope/x.json: no such file"));
    const std::string dir = pipescope::test::sourcePath(QStringLiteral("resources")).toStdString();
    const ParseResult directory = loadConfigFile(dir);
    QCOMPARE(QString::fromStdString(directory.errorText()),
             QString::fromStdString(dir) + QStringLiteral(": is a directory, not a config file"));
}

// A minified file is one long line. Positions on it must cost linear time in total: before, each
// value's column was counted from the line start (hours for this one, past the test timeout).
void TstConfigErrors::longLinesKeepPositions() {
    std::string name;
    for (int i = 0; i < 4'000'000; ++i) {
        name += "\xc3\xa9";  // two bytes, one character: columns count characters
    }
    std::string json = R"({"name": ")" + name +
                       R"(", "model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, )"
                       R"("vocab": 1000}, "parallel": {"pipeline": 4, "microbatches": 8}, )"
                       R"("costs": {"per_stage_us": {"F": [)";
    for (int i = 0; i < 100'000; ++i) {
        json += i == 0 ? "1" : ", 1";
    }
    json += R"(]}, "p2p_uss": 1}})";
    const ParseResult r = parseConfig(json, "x.json");
    QCOMPARE(r.issues.size(), std::size_t{2});
    const auto column = [&](const std::string& token) {
        return static_cast<int>(json.find(token) - name.size() / 2) + 1;
    };
    QCOMPARE(QString::fromStdString(r.issues[0].text()),
             QStringLiteral("costs.per_stage_us.F: has 100000 entries but parallel.pipeline is 4; "
                            "give one entry per rank or none"));
    QCOMPARE(r.issues[0].line, 1);
    QCOMPARE(r.issues[0].column, column("[1, 1"));
    QCOMPARE(r.issues[1].path, std::string("costs.p2p_uss"));
    QCOMPARE(r.issues[1].column, column(R"("p2p_uss")"));
}

// Thousands of unknown keys (a generated file, a wrong file) list the first 100 and say how many
// more there are, rather than thousands of lines.
void TstConfigErrors::manyIssuesAreCapped() {
    std::string json = R"({"model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, )"
                       R"("vocab": 1000)";
    for (int i = 0; i < 100'000; ++i) {
        json += ", \"k" + std::to_string(i) + "\": 1";
    }
    json += R"(}, "parallel": {"pipeline": 4, "microbatches": 0}})";
    const ParseResult r = parseConfig(json, "x.json");
    QCOMPARE(r.issues.size(), std::size_t{101});
    QCOMPARE(QString::fromStdString(r.issues[99].text()),
             QStringLiteral("model.k99: unknown key; expected one of layers, hidden, ffn_hidden, "
                            "heads, seq_len, vocab, micro_batch, dtype, flash_attention"));
    QCOMPARE(QString::fromStdString(r.issues[100].text("x.json")),
             QStringLiteral("x.json: and 99901 more issues (only the first 100 are listed)"));
}

// A misspelt key past the cap is still listed, with its suggestion, whether it comes first or
// last in the file; the cap's line counts only what it left out.
void TstConfigErrors::cappedIssuesKeepSuggestions() {
    const auto config = [](bool misspelt_first) {
        std::string model = R"("model": {"layers": 8, "hidden": 64, "heads": 4, "seq_len": 32, )"
                            R"("vocab": 1000)";
        for (int i = 0; i < 149; ++i) {
            model += ", \"k" + std::to_string(i) + "\": 1";
        }
        model += "}";
        const std::string parallel =
            R"("parallel": {"pipeline": 4, "microbatches": 8, "shedule": "1f1b"})";
        return "{" + (misspelt_first ? parallel + ", " + model : model + ", " + parallel) + "}";
    };
    const QString suggestion = QStringLiteral("unknown key (did you mean \"schedule\"?)");
    // Last: the 100 unknown keys k0 ... k99, the suggestion, then the count of the 49 others.
    ParseResult r = parseConfig(config(false), "x.json");
    QCOMPARE(r.issues.size(), std::size_t{102});
    QCOMPARE(r.issues[99].path, std::string("model.k99"));
    QCOMPARE(r.issues[100].path, std::string("parallel.shedule"));
    QCOMPARE(QString::fromStdString(r.issues[100].message), suggestion);
    QCOMPARE(QString::fromStdString(r.issues[101].text("x.json")),
             QStringLiteral("x.json: and 49 more issues (only the first 100 are listed, and the 1 "
                            "after them with a \"did you mean\" suggestion)"));
    // First: it is among the first 100, and the cap leaves out 50.
    r = parseConfig(config(true), "x.json");
    QCOMPARE(r.issues.size(), std::size_t{101});
    QCOMPARE(r.issues[0].path, std::string("parallel.shedule"));
    QCOMPARE(QString::fromStdString(r.issues[0].message), suggestion);
    QCOMPARE(QString::fromStdString(r.issues[100].text("x.json")),
             QStringLiteral("x.json: and 50 more issues (only the first 100 are listed)"));
}

QTEST_GUILESS_MAIN(TstConfigErrors)
#include "tst_config_errors.moc"
