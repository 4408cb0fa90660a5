#include "config_panel.h"

#include <algorithm>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QFormLayout>
#include <QGroupBox>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLocale>
#include <QScrollArea>
#include <QVBoxLayout>

#include <pipescope/schedule/config_parse.h>

#include "eliding_label.h"
#include "text_tone.h"

namespace pipescope::app {

namespace {

std::string quoted(const QString& s) {
    return "\"" + s.toStdString() + "\"";
}

// A number field that reads a point as the decimal point, as the config file and the rest of the
// app write numbers, and takes a comma for one too. In the system's locale a German user's
// "312.5" TFLOP/s became 3125 (the point groups thousands there) and an English user's "0,85"
// became 85, without a word.
void usePlainNumbers(QAbstractSpinBox* spin) {
    QLocale plain = QLocale::c();
    plain.setNumberOptions(QLocale::OmitGroupSeparator | QLocale::RejectGroupSeparator);
    spin->setLocale(plain);
}

class DecimalSpinBox : public QDoubleSpinBox {
  public:
    DecimalSpinBox() { usePlainNumbers(this); }

  protected:
    QValidator::State validate(QString& input, int& pos) const override {
        input.replace(QLatin1Char(','), QLatin1Char('.'));
        return QDoubleSpinBox::validate(input, pos);
    }
};

// A whole-number field in the digits the config file and the rest of the app use: in the
// system's locale an Egyptian user's fields read "٣٢٧٦٨" beside the decimal fields' "312.5".
QSpinBox* plainIntSpinBox() {
    auto* spin = new QSpinBox;
    usePlainNumbers(spin);
    return spin;
}

// The config of `base_json` with `overrides`. The file's "compare" list is checked against the
// settings too, but the panel neither shows nor edits it: where only its variants fail (a
// preset's naive and vocab-2 with the 12 layers a v-half redistributed config takes), the config
// goes on without the list, and `note` says so.
schedule::ParseResult parseBesideItsList(const std::string& base_json,
                                         const std::vector<schedule::Override>& overrides,
                                         const std::string& source_name, QString* note) {
    note->clear();
    auto parsed = schedule::parseConfig(base_json, overrides, source_name);
    if (parsed.ok() || !std::all_of(parsed.issues.begin(), parsed.issues.end(),
                                    [](const schedule::ConfigIssue& issue) {
                                        return issue.path.rfind("compare", 0) == 0;
                                    })) {
        return parsed;
    }
    QJsonObject doc = QJsonDocument::fromJson(QByteArray::fromStdString(base_json)).object();
    doc.remove(QStringLiteral("compare"));
    auto without = schedule::parseConfig(
        QJsonDocument(doc).toJson(QJsonDocument::Compact).toStdString(), overrides, source_name);
    if (!without.ok()) {
        return parsed;
    }
    QStringList why;
    for (const auto& issue : parsed.issues) {
        why << QString::fromStdString(issue.text());
    }
    *note = QObject::tr(
                "The file's comparison list (\"compare\") does not hold with these "
                "settings and is left out; runs and exports go without it:\n%1")
                .arg(why.join(QLatin1Char('\n')));
    return without;
}

}  // namespace

ConfigPanel::ConfigPanel(QWidget* parent) : QWidget(parent) {
    auto* outer = new QVBoxLayout(this);
    outer->setContentsMargins(4, 4, 4, 4);
    presets_ = new QComboBox;
    presets_->setObjectName(QStringLiteral("presets"));
    presets_->setToolTip(
        tr("Built-in configs: the authors' 8-GPU setups, small CPU models and "
           "the default comparison"));
    presets_->addItem(tr("Choose a preset…"), QString());
    const QStringList names =
        QDir(QStringLiteral(":/presets")).entryList({QStringLiteral("*.json")}, QDir::Files);
    for (const QString& n : names) {
        presets_->addItem(QFileInfo(n).completeBaseName(), n);
    }
    // Two lines at most, so that the fields under it stay put while edits lengthen the name
    // (the whole name is in the tooltip).
    source_ = new ElidingLabel(2, this);  // the panel's first label, as before the one below
    setTone(source_, Tone::Muted);
    // Alt+X: the fields and the pages hold most other letters ("Preset" has none left).
    auto* presets_label = new QLabel(tr("E&xamples:"));
    presets_label->setBuddy(presets_);
    presets_->setAccessibleName(tr("Presets"));
    // Above the list, not beside it: beside it, it widened the panel and narrowed the pages.
    outer->addWidget(presets_label);
    outer->addWidget(presets_);
    outer->addWidget(source_);

    auto* scroll = new QScrollArea;
    scroll->setWidgetResizable(true);
    scroll->setFrameShape(QFrame::NoFrame);
    scroll->setFocusPolicy(Qt::NoFocus);  // a frameless container: Tab goes to its fields
    auto* inner = new QWidget;
    auto* layout = new QVBoxLayout(inner);
    layout->setContentsMargins(0, 0, 0, 0);
    scroll->setWidget(inner);
    outer->addWidget(scroll, 1);

    const auto group = [&](const QString& title) {
        auto* box = new QGroupBox(title);
        auto* form = new QFormLayout(box);
        form->setFieldGrowthPolicy(QFormLayout::AllNonFixedFieldsGrow);
        layout->addWidget(box);
        return form;
    };
    using C = schedule::Config;
    QFormLayout* model = group(tr("Model"));
    addInt(model, "model.layers", tr("&Layers"), 1, 100000, tr("Transformer layers"),
           [](const C& c) { return c.model.layers; });
    addInt(model, "model.hidden", tr("Hidde&n size"), 1, 1 << 20, tr("Hidden size h"),
           [](const C& c) { return c.model.hidden; });
    addInt(model, "model.ffn_hidden", tr("FFN si&ze"), 1, 1 << 22, tr("Feed-forward size f"),
           [](const C& c) { return c.model.ffn_hidden; });
    addInt(model, "model.heads", tr("Hea&ds"), 1, 65536, tr("Attention heads; must divide hidden"),
           [](const C& c) { return c.model.heads; });
    addInt(model, "model.seq_len", tr("Se&quence length"), 1, 1 << 24,
           tr("Sequence length s, in tokens"), [](const C& c) { return c.model.seq_len; });
    addInt(model, "model.vocab", tr("Voc&abulary"), 2, 2000000000, tr("Vocabulary size V"),
           [](const C& c) { return static_cast<int>(c.model.vocab); });
    addInt(model, "model.micro_batch", tr("Micro-&batch"), 1, 65536,
           tr("Sequences per micro-batch b"), [](const C& c) { return c.model.micro_batch; });
    addChoice(model, "model.dtype", tr("Data t&ype"),
              {QStringLiteral("bf16"), QStringLiteral("fp16"), QStringLiteral("fp32")},
              tr("Weight and activation type"),
              [](const C& c) { return std::string(toString(c.model.dtype)); });

    QFormLayout* par = group(tr("Pipeline"));
    addChoice(par, "parallel.schedule", tr("&Schedule"),
              {QStringLiteral("gpipe"), QStringLiteral("1f1b"), QStringLiteral("interleaved-1f1b"),
               QStringLiteral("zb-h1"), QStringLiteral("v-half")},
              tr("Base pipeline schedule"),
              [](const C& c) { return std::string(toString(c.parallel.schedule)); });
    addChoice(par, "parallel.vocab", tr("V&ocabulary"),
              {QStringLiteral("naive"), QStringLiteral("redistributed"),
               QStringLiteral("interlaced"), QStringLiteral("vocab-1"), QStringLiteral("vocab-2")},
              tr("How the input and output layers are placed (vocabulary-parallelism.md)"),
              [](const C& c) { return std::string(toString(c.parallel.vocab)); });
    addInt(par, "parallel.pipeline", tr("Sta&ges"), 1, 4096, tr("Pipeline ranks p"),
           [](const C& c) { return c.parallel.pipeline; });
    // Greyed out under every other schedule (ownerOf); 2, interleaved's default, until then.
    addInt(par, "parallel.virtual_stages", tr("Chun&ks per rank"), 2, 64,
           tr("Interleaved 1F1B only: model chunks per rank v (virtual stages); layers must "
              "divide into p × v chunks"),
           [](const C& c) {
               return c.parallel.schedule == schedule::ScheduleKind::Interleaved1F1B
                          ? c.parallel.virtual_stages
                          : 2;
           });
    addInt(par, "parallel.microbatches", tr("M&icro-batches"), 1, 1 << 20,
           tr("Micro-batches per iteration m"), [](const C& c) { return c.parallel.microbatches; });
    addOptionalInt(par, "parallel.first_stage_layers", tr("Fi&rst stage layers"),
                   tr("Redistributed only: layers on the first stage (auto balances the costs)"),
                   [](const C& c) { return c.parallel.first_stage_layers; });
    addOptionalInt(par, "parallel.last_stage_layers", tr("Last stage layer&s"),
                   tr("Redistributed only: layers on the last stage (auto balances the costs)"),
                   [](const C& c) { return c.parallel.last_stage_layers; });

    QFormLayout* hw = group(tr("Hardware"));
    addDouble(hw, "hardware.peak_tflops", tr("&Peak TFLOP/s"), 0.001, 1e6, 3,
              tr("Dense peak per rank, in TFLOP/s; MFU is taken against it"),
              [](const C& c) { return c.hardware.peak_tflops; });
    addDouble(hw, "hardware.memory_gib", tr("&Memory (GiB)"), 0.01, 1e6, 2,
              tr("Device memory per rank, in GiB"),
              [](const C& c) { return c.hardware.memory_gib; });
    addDouble(hw, "hardware.gemm_efficiency", tr("GEMM effic&iency"), 0.01, 1, 3,
              tr("Achieved fraction of peak on large GEMMs (analytic costs)"),
              [](const C& c) { return c.hardware.gemm_efficiency; });
    addDouble(hw, "hardware.p2p_gbps", tr("P&2P GB/s"), 0.1, 1e6, 1,
              tr("Point-to-point bandwidth between neighbouring ranks, in GB/s"),
              [](const C& c) { return c.hardware.p2p_gbps; });
    addDouble(hw, "hardware.allreduce_gbps", tr("Co&llective GB/s"), 0.1, 1e6, 1,
              tr("Bus bandwidth of collectives, in GB/s"),
              [](const C& c) { return c.hardware.allreduce_gbps; });
    addDouble(hw, "hardware.latency_us", tr("Latenc&y (µs)"), 0, 1e6, 1,
              tr("Per-message latency, in µs"), [](const C& c) { return c.hardware.latency_us; });

    QFormLayout* costs = group(tr("Costs"));
    addChoice(costs, "costs.source", tr("&Cost source"),
              {QStringLiteral("analytic"), QStringLiteral("table")},
              tr("analytic: FLOPs and bytes against the hardware; table: the config's measured "
                 "per-stage times"),
              [](const C& c) {
                  return c.costs.source == schedule::CostSource::Table ? std::string("table")
                                                                       : std::string("analytic");
              });
    layout->addStretch(1);

    issues_ = new QLabel;
    issues_->setWordWrap(true);
    issues_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    setTone(issues_, Tone::Error);
    outer->addWidget(issues_);

    connect(presets_, &QComboBox::activated, this, [this](int index) {
        const QString name = presets_->itemData(index).toString();
        if (!name.isEmpty()) {
            loadPreset(name);
        }
    });
}

void ConfigPanel::addInt(QFormLayout* form, const QString& key, const QString& label, int min,
                         int max, const QString& tip,
                         std::function<int(const schedule::Config&)> get) {
    auto* spin = plainIntSpinBox();
    spin->setRange(min, max);
    spin->setKeyboardTracking(true);
    // The range in the tooltip: a value typed outside it is not taken (the field keeps its own
    // when left), and the tooltip says why.
    spin->setToolTip(tip + QStringLiteral(" (%1; %2 to %3)").arg(key).arg(min).arg(max));
    form->addRow(label, spin);
    fields_[key] = {spin, [spin] { return std::to_string(spin->value()); },
                    [spin, get](const schedule::Config& c) { spin->setValue(get(c)); },
                    [spin](const std::string& json) { spin->setValue(std::stoi(json)); },
                    spin->toolTip()};
    connect(spin, &QSpinBox::valueChanged, this, [this] { reparse(); });
}

void ConfigPanel::addDouble(QFormLayout* form, const QString& key, const QString& label, double min,
                            double max, int decimals, const QString& tip,
                            std::function<double(const schedule::Config&)> get) {
    auto* spin = new DecimalSpinBox;
    spin->setDecimals(decimals);
    spin->setRange(min, max);
    // The range as the field holds it: it rounds its bounds to its decimals (0.001 with one
    // decimal became 0.0, which the validator refuses), so a minimum must be one it can show.
    Q_ASSERT(spin->minimum() == min && spin->maximum() == max);
    spin->setToolTip(tip + QStringLiteral(" (%1; %2 to %3)")
                               .arg(key, spin->locale().toString(spin->minimum(), 'f', decimals),
                                    spin->locale().toString(spin->maximum(), 'f', decimals)));
    form->addRow(label, spin);
    fields_[key] = {spin, [spin] { return QString::number(spin->value(), 'g', 12).toStdString(); },
                    [spin, get](const schedule::Config& c) { spin->setValue(get(c)); },
                    [spin](const std::string& json) {
                        spin->setValue(QString::fromStdString(json).toDouble());
                    },
                    spin->toolTip()};
    connect(spin, &QDoubleSpinBox::valueChanged, this, [this] { reparse(); });
}

void ConfigPanel::addChoice(QFormLayout* form, const QString& key, const QString& label,
                            const QStringList& items, const QString& tip,
                            std::function<std::string(const schedule::Config&)> get) {
    auto* combo = new QComboBox;
    combo->addItems(items);
    combo->setToolTip(tip + QStringLiteral(" (%1)").arg(key));
    form->addRow(label, combo);
    fields_[key] = {
        combo, [combo] { return quoted(combo->currentText()); },
        [combo, get](const schedule::Config& c) {
            combo->setCurrentText(QString::fromStdString(get(c)));
        },
        [combo](const std::string& json) {  // "1f1b" with its quotes
            combo->setCurrentText(QString::fromStdString(json.substr(1, json.size() - 2)));
        },
        combo->toolTip()};
    connect(combo, &QComboBox::currentIndexChanged, this, [this] { reparse(); });
}

void ConfigPanel::addOptionalInt(QFormLayout* form, const QString& key, const QString& label,
                                 const QString& tip,
                                 std::function<std::optional<int>(const schedule::Config&)> get) {
    auto* spin = plainIntSpinBox();
    spin->setRange(-1, 100000);
    spin->setSpecialValueText(tr("auto"));
    spin->setToolTip(tip + tr(" (%1; auto, or 0 to %2)").arg(key).arg(spin->maximum()));
    form->addRow(label, spin);
    fields_[key] = {
        spin,
        [spin] { return spin->value() < 0 ? std::string("null") : std::to_string(spin->value()); },
        [spin, get](const schedule::Config& c) { spin->setValue(get(c).value_or(-1)); },
        [spin](const std::string& json) { spin->setValue(json == "null" ? -1 : std::stoi(json)); },
        spin->toolTip()};
    connect(spin, &QSpinBox::valueChanged, this, [this] { reparse(); });
}

void ConfigPanel::assignFields(const schedule::Config& c) {
    assigning_ = true;
    for (auto& [key, f] : fields_) {
        f.assign(c);
    }
    assigning_ = false;
}

void ConfigPanel::showName(const QString& name) {
    source_->setText(file_name_.isEmpty() ? name : tr("%1\n(%2)").arg(name, file_name_));
}

bool ConfigPanel::loadJson(const QString& json, const QString& source_name) {
    return load(json, source_name, QString(), 0);
}

bool ConfigPanel::load(const QString& json, const QString& source_name, const QString& file_name,
                       int preset_index) {
    const auto parsed = schedule::parseConfig(json.toStdString(), source_name.toStdString());
    if (!parsed.ok()) {
        setTone(issues_, Tone::Error);
        issues_->setText(QString::fromStdString(parsed.errorText()));
        emit configInvalid(issues_->text());
        return false;
    }
    base_json_ = json.toStdString();
    base_config_ = parsed.config;
    source_name_ = source_name;
    file_name_ = file_name;
    // A file of the user's: the preset list no longer names what is loaded, the label does.
    showName(QString::fromStdString(parsed.config->name));
    source_->setToolTip(file_name.isEmpty() ? QString()
                                            : QFileInfo(source_name).absoluteFilePath());
    presets_->setCurrentIndex(preset_index);
    assignFields(*parsed.config);
    reparse();
    return true;
}

bool ConfigPanel::loadPath(const QString& path, const QString& file_name, int preset_index) {
    QFile f(path);
    QString error;
    QByteArray bytes;
    if (!f.open(QIODevice::ReadOnly)) {
        error = tr("%1: cannot read the file: %2").arg(path, f.errorString());
    } else if (bytes = f.read(64 * 1024 * 1024 + 1); bytes.size() > 64 * 1024 * 1024) {
        error = tr("%1: a config over 64 MiB is not a config").arg(path);
    }
    if (!error.isEmpty()) {
        setTone(issues_, Tone::Error);
        issues_->setText(error);
        emit configInvalid(issues_->text());
        return false;
    }
    return load(QString::fromUtf8(bytes), path, file_name, preset_index);
}

bool ConfigPanel::loadFile(const QString& path) {
    return loadPath(path,
                    path.startsWith(QLatin1Char(':')) ? QString() : QFileInfo(path).fileName(), 0);
}

bool ConfigPanel::loadPreset(const QString& resource_name) {
    return loadPath(QStringLiteral(":/presets/") + resource_name, QString(),
                    std::max(0, presets_->findData(resource_name)));
}

void ConfigPanel::reparse() {
    if (assigning_ || base_json_.empty()) {
        return;
    }
    // A key that applies to one value of another alone (the stage layer counts to redistributed)
    // is greyed out and left out under any other value (the config then drops the file's), and
    // keeps its value for a switch back.
    std::vector<schedule::Override> overrides;
    for (const auto& [key, f] : fields_) {
        bool applies = true;
        if (const auto owner = schedule::ownerOf(key.toStdString())) {
            const auto it = fields_.find(
                QString::fromUtf8(owner->path.data(), static_cast<int>(owner->path.size())));
            applies =
                it == fields_.end() || it->second.json() == "\"" + std::string(owner->value) + "\"";
        }
        f.widget->setEnabled(applies);
        if (applies) {
            overrides.push_back({key.toStdString(), f.json()});
        }
    }
    QString list_note;
    const schedule::ParseResult parsed =
        parseBesideItsList(base_json_, overrides, source_name_.toStdString(), &list_note);
    for (auto& [key, f] : fields_) {
        markInvalid(f.widget, false);
        f.widget->setToolTip(f.tooltip);
    }
    setTone(issues_, parsed.ok() && !list_note.isEmpty() ? Tone::Warning : Tone::Error);
    if (!parsed.ok()) {
        QStringList lines;
        for (const auto& issue : parsed.issues) {
            const QString key = QString::fromStdString(issue.path);
            lines << QString::fromStdString(issue.text());
            auto it = fields_.find(key);
            if (it != fields_.end()) {
                markInvalid(it->second.widget, true);
                it->second.widget->setToolTip(QString::fromStdString(issue.message) +
                                              QStringLiteral("\n\n") + it->second.tooltip);
            }
        }
        issues_->setText(lines.join(QStringLiteral("\n")));
        config_valid_ = false;
        emit configInvalid(issues_->text());
        emit historyChanged();
        return;
    }
    issues_->setText(list_note);
    config_ = parsed.config;
    // The loaded config's name says what was loaded; the edits join it, so that runs and
    // exports made from an edited config are not named after the one it came from.
    if (base_config_) {
        config_->name = schedule::editedName(*base_config_, *config_);
        showName(QString::fromStdString(config_->name));  // an edited file's label says so
    }
    config_valid_ = true;
    commit();
    emit configChanged(*config_);
}

QString ConfigPanel::configJson() const {
    return config_ ? QString::fromStdString(schedule::toJson(*config_)) : QString();
}

QStringList ConfigPanel::fieldKeys() const {
    QStringList keys;
    for (const auto& [key, f] : fields_) {
        keys << key;
    }
    return keys;
}

QWidget* ConfigPanel::field(const QString& key) const {
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : it->second.widget;
}

bool ConfigPanel::keepsOwnUndo(const QWidget* widget) const {
    for (const auto& [key, f] : fields_) {
        if (widget == f.widget || f.widget->isAncestorOf(widget)) {
            return last_changed_.size() == 1 && last_changed_.front() == key;
        }
    }
    return true;
}

bool ConfigPanel::setField(const QString& key, const QVariant& value) {
    QWidget* w = field(key);
    if (auto* spin = qobject_cast<QSpinBox*>(w)) {
        bool ok = false;
        const int v = value.toInt(&ok);
        if (!ok || v < spin->minimum() || v > spin->maximum()) {
            return false;
        }
        spin->setValue(v);
        return true;
    }
    if (auto* spin = qobject_cast<QDoubleSpinBox*>(w)) {
        bool ok = false;
        const double v = value.toDouble(&ok);
        if (!ok) {
            return false;
        }
        spin->setValue(v);
        return true;
    }
    if (auto* combo = qobject_cast<QComboBox*>(w)) {
        const int index = combo->findText(value.toString());
        if (index < 0) {
            return false;
        }
        combo->setCurrentIndex(index);
        return true;
    }
    return false;
}

}  // namespace pipescope::app
