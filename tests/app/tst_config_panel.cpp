// The config panel on its own: its undo history, what a restart keeps of it, the name line
// that carries the edits, and the fields that apply to one vocabulary method only.
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QRegularExpression>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/schedule/config_parse.h>

#include "config_panel.h"
#include "eliding_label.h"
#include "testsupport.h"

using namespace pipescope;

class TstConfigPanel : public QObject {
    Q_OBJECT

  private slots:
    void configHistoryUndoesAndRedoes();
    void configSurvivesARestart();
    void fieldsStayPutAsEditsPileUp();
    void stageLayersFollowTheMethod();
    void comparisonListNeverBlocksTheConfig();
    void fieldRangesAreTheValidators();
    void decimalFieldsReadAPoint();
};

// Undo and redo step through whole configs: an edit, a field stepped several times in a row, a
// preset loaded; undo after a refused edit returns to the last valid config.
void TstConfigPanel::configHistoryUndoesAndRedoes() {
    app::ConfigPanel panel;
    QSignalSpy changed(&panel, &app::ConfigPanel::configChanged);
    QVERIFY(panel.loadPreset(QStringLiteral("default.json")));
    QVERIFY(!panel.canUndo() && !panel.canRedo());
    const auto config = [&] { return *panel.config(); };
    QCOMPARE(config().parallel.microbatches, 8);

    QVERIFY(panel.setField("parallel.schedule", "zb-h1"));
    QVERIFY(panel.canUndo());
    // Three steps of one field in a row: one step of the history.
    for (int m : {9, 10, 11}) {
        QVERIFY(panel.setField("parallel.microbatches", m));
    }
    panel.undo();
    QCOMPARE(config().parallel.microbatches, 8);
    QVERIFY(config().parallel.schedule == schedule::ScheduleKind::ZBH1);
    panel.undo();
    QVERIFY(config().parallel.schedule == schedule::ScheduleKind::OneF1B);
    QVERIFY(!panel.canUndo() && panel.canRedo());
    const int before = static_cast<int>(changed.count());
    panel.undo();  // nothing left: no change
    QCOMPARE(changed.count(), before);
    panel.redo();
    panel.redo();
    QCOMPARE(config().parallel.microbatches, 11);
    QVERIFY(!panel.canRedo());

    // A refused edit (4 heads do not divide hidden 130): undo restores the last valid config,
    // redo brings the refused value back, and a new edit drops the redo.
    QVERIFY(panel.setField("model.hidden", 130));
    QVERIFY(!panel.issuesText().isEmpty());
    QVERIFY(panel.canUndo());
    panel.undo();
    QVERIFY(panel.issuesText().isEmpty());
    QCOMPARE(qobject_cast<QSpinBox*>(panel.field("model.hidden"))->value(), 128);
    panel.redo();
    QCOMPARE(qobject_cast<QSpinBox*>(panel.field("model.hidden"))->value(), 130);
    QVERIFY(!panel.issuesText().isEmpty());
    panel.undo();
    QCOMPARE(config().parallel.microbatches, 11);
    QVERIFY(panel.setField("model.layers", 16));
    QVERIFY(!panel.canRedo());

    // Loading a preset is a step: undo brings back the fields and the label.
    const QString label = panel.findChildren<QLabel*>().front()->text();
    QVERIFY(panel.loadPreset(QStringLiteral("small-2stage-naive.json")));
    QCOMPARE(config().parallel.pipeline, 2);
    panel.undo();
    QCOMPARE(config().parallel.pipeline, 4);
    QCOMPARE(config().model.layers, 16);
    QCOMPARE(panel.findChildren<QLabel*>().front()->text(), label);
    QCOMPARE(panel.findChild<QComboBox*>(QStringLiteral("presets"))->currentText(),
             QStringLiteral("default"));

    // A config from a file: an edit shows in its label at once, under the file's name.
    QTemporaryDir dir;
    const QString file = dir.filePath("mycfg.json");
    QFile::copy(QStringLiteral(":/presets/small-2stage-naive.json"), file);
    QFile(file).setPermissions(QFile::ReadOwner | QFile::WriteOwner);
    QVERIFY(panel.loadFile(file));
    const auto source = [&] { return panel.findChildren<QLabel*>().front()->text(); };
    QVERIFY2(source().endsWith("(mycfg.json)") && !source().contains("["), qPrintable(source()));
    QVERIFY(panel.setField("model.hidden", 256));
    QVERIFY2(source().contains("[model.hidden=256]") && source().endsWith("(mycfg.json)"),
             qPrintable(source()));
    panel.undo();
    QVERIFY2(!source().contains("["), qPrintable(source()));
}

// What closing keeps: the next start shows the same preset or file, the same edits marked as
// edits, and even values that do not yet make a valid config.
void TstConfigPanel::configSurvivesARestart() {
    const auto restarted = [](const app::ConfigPanel& before, app::ConfigPanel* after) {
        return after->restoreSession(before.sessionJson());
    };
    const auto preset = [](const app::ConfigPanel& p) {
        return p.findChild<QComboBox*>(QStringLiteral("presets"))->currentData().toString();
    };
    app::ConfigPanel first;
    QVERIFY(first.loadPreset(QStringLiteral("default.json")));
    {
        app::ConfigPanel next;
        QVERIFY(restarted(first, &next));
        QCOMPARE(preset(next), QString("default.json"));
        QCOMPARE(next.configJson(), first.configJson());
        QVERIFY(!next.config()->name.empty());
        QCOMPARE(next.config()->name, first.config()->name);
    }
    QVERIFY(first.setField("parallel.pipeline", 2));
    {
        app::ConfigPanel next;
        QVERIFY(restarted(first, &next));
        QCOMPARE(preset(next), QString("default.json"));  // the document is still the preset
        QCOMPARE(next.config()->parallel.pipeline, 2);
        QVERIFY2(next.config()->name.find("pipeline") != std::string::npos,
                 next.config()->name.c_str());  // an edit, named as one
        QCOMPARE(next.configJson(), first.configJson());
    }
    QVERIFY(first.setField("model.heads", 7));  // does not divide the hidden size
    QVERIFY(!first.issuesText().isEmpty());
    {
        app::ConfigPanel next;
        QVERIFY(restarted(first, &next));
        QCOMPARE(qobject_cast<QSpinBox*>(next.field("model.heads"))->value(), 7);
        QCOMPARE(next.issuesText(), first.issuesText());
        // The config the views show is the last valid one, with its edit, as before closing;
        // and undo goes back to it, then to the preset.
        QVERIFY(next.config());
        QCOMPARE(next.configJson(), first.configJson());
        QCOMPARE(next.config()->parallel.pipeline, 2);
        QVERIFY(next.canUndo());
        next.undo();
        QVERIFY(next.issuesText().isEmpty());
        QCOMPARE(qobject_cast<QSpinBox*>(next.field("model.heads"))->value(), 4);
        QCOMPARE(next.config()->parallel.pipeline, 2);
        QVERIFY(next.canUndo());
        next.undo();
        QCOMPARE(next.config()->parallel.pipeline, 4);
    }
    // A file's config comes back with its name under it, though the file is gone.
    QTemporaryDir dir;
    const QString path = dir.filePath("mine.json");
    {
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly));
        QFile small(test::sourcePath("resources/presets/small-2stage-vocab-2.json"));
        QVERIFY(small.open(QIODevice::ReadOnly));
        QJsonObject o = QJsonDocument::fromJson(small.readAll()).object();
        o["name"] = "mine";
        f.write(QJsonDocument(o).toJson());
    }
    QVERIFY(first.loadFile(path));
    QVERIFY(QFile::remove(path));
    {
        app::ConfigPanel next;
        QVERIFY(restarted(first, &next));
        QCOMPARE(preset(next), QString());
        QCOMPARE(next.config()->name, std::string("mine"));
        QCOMPARE(next.configJson(), first.configJson());
    }
    app::ConfigPanel fresh;
    QVERIFY(!fresh.restoreSession(QString()));
    QVERIFY(!fresh.restoreSession(QStringLiteral("not json")));
    // A session whose document is no config ({"model": 3}).
    const QString broken = QStringLiteral("{\"base\": \"{\\\"model\\\": 3}\"}");
    QVERIFY(!fresh.restoreSession(broken));
    QVERIFY(!fresh.config());  // nothing was loaded
}

// The config's name carries every edit; the line that shows it keeps its two lines, so the
// fields under it do not move while edits pile up (a click aimed at one landed on another).
void TstConfigPanel::fieldsStayPutAsEditsPileUp() {
    app::ConfigPanel panel;
    panel.resize(300, 800);
    QVERIFY(panel.loadPreset(QStringLiteral("default.json")));
    // Laid out as shown, without taking the focus from the main window the other tests use.
    panel.setAttribute(Qt::WA_DontShowOnScreen);
    panel.show();
    QWidget* layers = panel.field("model.layers");
    const int y = layers->mapTo(&panel, QPoint()).y();
    for (const auto& [key, value] :
         std::vector<std::pair<QString, QVariant>>{{"model.vocab", 65536},
                                                   {"model.seq_len", 128},
                                                   {"parallel.microbatches", 16},
                                                   {"model.hidden", 256},
                                                   {"model.ffn_hidden", 1024},
                                                   {"hardware.peak_tflops", 0.5}}) {
        QVERIFY(panel.setField(key, value));
        QCoreApplication::processEvents();
        QCOMPARE(layers->mapTo(&panel, QPoint()).y(), y);
    }
    auto* name = panel.findChild<app::ElidingLabel*>();
    QVERIFY(name);
    QVERIFY2(name->text().contains(QStringLiteral("hardware.peak_tflops=0.5")),
             qPrintable(name->text()));  // the whole name, for the tooltip and for runs
    QVERIFY(name->elided());
}

// The authors' redistributed preset fixes the last stage's layers. Switching the method away
// greys those fields out and leaves them out (no error), switching back brings their value back.
void TstConfigPanel::stageLayersFollowTheMethod() {
    app::ConfigPanel panel;
    QVERIFY(
        panel.loadFile(test::sourcePath("resources/presets/paper-s2048-v256k-redistributed.json")));
    QVERIFY(panel.config() && panel.config()->parallel.last_stage_layers == 0);
    // The preset list does not claim a file loaded from disk.
    const auto* presets = panel.findChild<QComboBox*>(QStringLiteral("presets"));
    QVERIFY(presets && presets->currentIndex() == 0);
    QWidget* last = panel.field("parallel.last_stage_layers");
    QVERIFY(last->isEnabled());
    QVERIFY(panel.setField("parallel.vocab", "vocab-2"));
    QVERIFY2(panel.issuesText().isEmpty(), qPrintable(panel.issuesText()));
    QVERIFY(panel.config()->parallel.vocab == schedule::VocabMethod::Vocab2);
    QVERIFY(!panel.config()->parallel.last_stage_layers);
    QVERIFY(!last->isEnabled());
    QVERIFY(panel.setField("parallel.vocab", "redistributed"));
    QVERIFY2(panel.issuesText().isEmpty(), qPrintable(panel.issuesText()));
    QVERIFY(last->isEnabled());
    QCOMPARE(panel.config()->parallel.last_stage_layers, std::optional<int>(0));

    // Chunks per rank belong to interleaved 1F1B: greyed out elsewhere, set there.
    QWidget* chunks = panel.field("parallel.virtual_stages");
    QVERIFY(chunks && !chunks->isEnabled());
    QVERIFY(panel.setField("parallel.schedule", "interleaved-1f1b"));
    QVERIFY(chunks->isEnabled());
    QVERIFY(panel.setField("parallel.virtual_stages", 4));
    QVERIFY2(panel.issuesText().isEmpty(), qPrintable(panel.issuesText()));
    QCOMPARE(panel.config()->parallel.virtual_stages, 4);
    QVERIFY(panel.setField("parallel.schedule", "1f1b"));
    QVERIFY2(panel.issuesText().isEmpty(), qPrintable(panel.issuesText()));
    QCOMPARE(panel.config()->parallel.virtual_stages, 1);
    QVERIFY(!chunks->isEnabled());
}

// The default preset carries a comparison list (naive, vocab-2) the panel does not show. Before,
// its variants were checked against every edit and refused valid configs: redistributed with 1
// first stage layer ("only used with redistributed" for each variant), and a v-half config of 12
// layers (which only redistributed can split). The first now holds with the list; the second
// goes on without it, and says so.
void TstConfigPanel::comparisonListNeverBlocksTheConfig() {
    app::ConfigPanel panel;
    QVERIFY(panel.loadFile(test::sourcePath("resources/presets/default.json")));
    QVERIFY(panel.config() && panel.config()->compare.size() == 2);
    // A value typed outside a field's range is not taken; its tooltip says the range.
    QVERIFY2(panel.field("parallel.pipeline")->toolTip().endsWith("(parallel.pipeline; 1 to 4096)"),
             qPrintable(panel.field("parallel.pipeline")->toolTip()));
    QVERIFY(panel.setField("parallel.vocab", "redistributed"));
    QVERIFY(panel.setField("parallel.first_stage_layers", 1));
    QVERIFY2(panel.issuesText().isEmpty(), qPrintable(panel.issuesText()));
    QCOMPARE(panel.config()->parallel.first_stage_layers, std::optional<int>(1));
    QCOMPARE(panel.config()->compare.size(), std::size_t{2});

    QVERIFY(panel.setField("parallel.schedule", "v-half"));
    QVERIFY(panel.setField("model.layers", 12));
    QVERIFY(panel.isValid());
    QVERIFY(panel.config()->parallel.schedule == schedule::ScheduleKind::VHalf);
    QCOMPARE(panel.config()->model.layers, 12);
    QVERIFY(panel.config()->compare.empty());
    QVERIFY2(panel.issuesText().contains(QStringLiteral("comparison list")) &&
                 panel.issuesText().contains(QStringLiteral("compare[0]")),
             qPrintable(panel.issuesText()));
    // A setting the config itself refuses is still refused.
    QVERIFY(panel.setField("parallel.vocab", "naive"));
    QVERIFY(!panel.isValid());
    QVERIFY2(panel.issuesText().contains(QStringLiteral("model.layers")),
             qPrintable(panel.issuesText()));
    // And the list comes back where it holds again.
    QVERIFY(panel.setField("model.layers", 8));
    QVERIFY(panel.isValid());
    QCOMPARE(panel.config()->compare.size(), std::size_t{2});
    QVERIFY2(panel.issuesText().isEmpty(), qPrintable(panel.issuesText()));
}

// Every number field holds only values the validator takes for its key, at both ends of its
// range, and its tooltip states the range the field really has (a spin box rounds its bounds
// to its decimals: P2P GB/s took 0.001 as 0.0, offered 0.0 and the validator refused it).
void TstConfigPanel::fieldRangesAreTheValidators() {
    app::ConfigPanel panel;
    QVERIFY(panel.loadPreset(QStringLiteral("default.json")));
    // The validator's messages for a value out of its key's own range, not for a rule that
    // joins two keys ("must be at least parallel.pipeline (4)").
    const QRegularExpression range(
        R"re(^must be (at least [0-9]|at most [0-9]|greater than 0|in \())re");
    const QRegularExpression stated(R"(([-0-9.,]+) to ([-0-9.,]+)\)$)");
    const auto refusal = [&](const QString& key) {
        for (const QString& line : panel.issuesText().split('\n')) {
            if (line.startsWith(key + ": ") && range.match(line.mid(key.size() + 2)).hasMatch()) {
                return line;
            }
        }
        return QString();
    };
    int checked = 0;
    for (const QString& key : panel.fieldKeys()) {
        auto* spin = qobject_cast<QAbstractSpinBox*>(panel.field(key));
        if (!spin) {
            continue;
        }
        // A key that applies under one value of another (Chunks per rank, the stage layers):
        // give that one its value, so that the key goes to the validator.
        if (const auto owner = schedule::ownerOf(key.toStdString())) {
            QVERIFY(panel.setField(QString::fromStdString(std::string(owner->path)),
                                   QString::fromStdString(std::string(owner->value))));
        }
        QVERIFY2(panel.field(key)->isEnabled(), qPrintable(key));
        auto* whole = qobject_cast<QSpinBox*>(spin);
        auto* real = qobject_cast<QDoubleSpinBox*>(spin);
        QVERIFY(whole || real);
        const double low = whole ? whole->minimum() : real->minimum();
        const double high = whole ? whole->maximum() : real->maximum();
        const QVariant before = whole ? QVariant(whole->value()) : QVariant(real->value());
        for (const double v : {low, high}) {
            whole ? whole->setValue(static_cast<int>(v)) : real->setValue(v);
            QVERIFY2(refusal(key).isEmpty(),
                     qPrintable(QStringLiteral("%1 = %2 offered, refused: %3")
                                    .arg(key)
                                    .arg(v)
                                    .arg(refusal(key))));
        }
        whole ? whole->setValue(before.toInt()) : real->setValue(before.toDouble());
        // "auto" (null) stands for the lowest value of an optional count; the tooltip's range
        // starts past it.
        const double shown_low = spin->specialValueText().isEmpty() ? low : low + 1;
        const auto m = stated.match(spin->toolTip());
        QVERIFY2(m.hasMatch(), qPrintable(key + ": " + spin->toolTip()));
        QCOMPARE(spin->locale().toDouble(m.captured(1)), shown_low);
        QCOMPARE(spin->locale().toDouble(m.captured(2)), high);
        ++checked;
    }
    QVERIFY(checked >= 15);
}

// The number fields read "312.5" as the config file writes it, and "312,5" as the same, whatever
// the system's locale: under German settings "312.5" TFLOP/s became 3125 (the point groups
// thousands there), and under English ones "0,85" became 85, without a word.
void TstConfigPanel::decimalFieldsReadAPoint() {
    struct KeepDefault {
        QLocale before;
        ~KeepDefault() { QLocale::setDefault(before); }
    } keep;
    for (const QLocale& locale : {QLocale(QLocale::German, QLocale::Germany),
                                  QLocale(QLocale::English, QLocale::UnitedStates)}) {
        QLocale::setDefault(locale);  // what widgets made from now on take
        app::ConfigPanel panel;
        QVERIFY(panel.loadPreset(QStringLiteral("default.json")));
        panel.show();
        auto* peak = qobject_cast<QDoubleSpinBox*>(panel.field("hardware.peak_tflops"));
        QVERIFY(peak);
        for (const char* typed : {"312.5", "312,5", "0.5"}) {
            peak->selectAll();
            QTest::keyClicks(peak, QString::fromLatin1(typed));
            QTest::keyClick(peak, Qt::Key_Enter);
            const double want = QString::fromLatin1(typed).replace(',', '.').toDouble();
            QVERIFY2(peak->value() == want,
                     qPrintable(QStringLiteral("%1: typed %2, the field holds %3")
                                    .arg(locale.name(), QString::fromLatin1(typed), peak->text())));
            QCOMPARE(panel.config()->hardware.peak_tflops, want);
        }
        QVERIFY(panel.configJson().contains(QStringLiteral("\"peak_tflops\": 0.5")));
    }
    // Whole numbers too: under Egyptian settings the fields showed Arabic-Indic digits.
    QLocale::setDefault(QLocale(QLocale::Arabic, QLocale::Egypt));
    app::ConfigPanel panel;
    QVERIFY(panel.loadPreset(QStringLiteral("default.json")));
    for (const char* key : {"model.vocab", "parallel.microbatches"}) {
        auto* spin = qobject_cast<QSpinBox*>(panel.field(key));
        QVERIFY2(spin, key);
        QCOMPARE(spin->text(), QString::number(spin->value()));
    }
}

QTEST_MAIN(TstConfigPanel)
#include "tst_config_panel.moc"
