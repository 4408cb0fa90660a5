// ConfigPanel's memory: the session it saves and restores across starts, and undo / redo of
// edits (a field stepped again within a moment joins the step before).
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>

#include <pipescope/schedule/config_parse.h>

#include "config_panel.h"

namespace pipescope::app {

QString ConfigPanel::sessionJson() const {
    QJsonObject values;
    for (const auto& [key, f] : fields_) {
        values.insert(key, QString::fromStdString(f.json()));
    }
    QJsonObject o{
        {QStringLiteral("base"), QString::fromStdString(base_json_)},
        {QStringLiteral("source"), source_name_},
        {QStringLiteral("file"), file_name_},
        {QStringLiteral("preset"), presets_->currentData().toString()},
        {QStringLiteral("values"), values},
    };
    // Fields the validator refuses: the last valid config's values too, so that the next start
    // shows what the views showed (and can undo to it), not the document without the edits.
    if (!config_valid_ && committed_ && committed_->base_json == base_json_) {
        QJsonObject valid;
        for (const auto& [key, value] : committed_->values) {
            valid.insert(key, QString::fromStdString(value));
        }
        o.insert(QStringLiteral("valid_values"), valid);
    }
    return QString::fromUtf8(QJsonDocument(o).toJson(QJsonDocument::Compact));
}

bool ConfigPanel::restoreSession(const QString& json) {
    const QJsonObject o = QJsonDocument::fromJson(json.toUtf8()).object();
    const QString base = o.value(QStringLiteral("base")).toString();
    if (base.isEmpty() ||
        !schedule::parseConfig(base.toStdString(), std::string("last session's config")).ok()) {
        return false;
    }
    // The preset list names the document only while it is still that preset's text.
    const QString preset = o.value(QStringLiteral("preset")).toString();
    QFile resource(QStringLiteral(":/presets/") + preset);
    const bool same_preset = !preset.isEmpty() && resource.open(QIODevice::ReadOnly) &&
                             QString::fromUtf8(resource.readAll()) == base;
    if (!load(base, o.value(QStringLiteral("source")).toString(),
              o.value(QStringLiteral("file")).toString(),
              same_preset ? std::max(0, presets_->findData(preset)) : 0)) {
        return false;
    }
    const auto apply = [&](const QJsonObject& values) {
        assigning_ = true;
        for (auto& [key, f] : fields_) {
            if (const auto v = values.value(key); v.isString()) {
                try {
                    f.restore(v.toString().toStdString());
                } catch (const std::exception&) {
                    // A value this version cannot read keeps the document's.
                }
            }
        }
        assigning_ = false;
        reparse();
    };
    // The edits as steps: the document, then the last valid config (when the fields were left
    // invalid), then the fields as they were left.
    if (const QJsonValue valid = o.value(QStringLiteral("valid_values")); valid.isObject()) {
        apply(valid.toObject());
    }
    apply(o.value(QStringLiteral("values")).toObject());
    return true;
}

ConfigPanel::State ConfigPanel::snapshot() const {
    State s;
    s.base_json = base_json_;
    s.source_name = source_name_;
    s.file_name = file_name_;
    s.label = source_->text();
    s.label_tip = source_->toolTip();
    s.preset_index = presets_->currentIndex();
    for (const auto& [key, f] : fields_) {
        s.values[key] = f.json();
    }
    return s;
}

void ConfigPanel::restore(const State& s) {
    restoring_ = true;
    assigning_ = true;
    if (s.base_json != base_json_) {
        base_config_ = schedule::parseConfig(s.base_json, s.source_name.toStdString()).config;
    }
    base_json_ = s.base_json;
    source_name_ = s.source_name;
    file_name_ = s.file_name;
    source_->setText(s.label);
    source_->setToolTip(s.label_tip);
    presets_->setCurrentIndex(s.preset_index);
    for (auto& [key, f] : fields_) {
        if (const auto it = s.values.find(key); it != s.values.end()) {
            f.restore(it->second);
        }
    }
    assigning_ = false;
    reparse();
    restoring_ = false;
}

void ConfigPanel::commit() {
    State now = snapshot();
    if (!committed_) {
        committed_ = std::move(now);
        return;
    }
    if (now == *committed_) {
        return;
    }
    // One field stepped several times in a row (a spin box's arrows, typing digits) is one
    // step of the history.
    QStringList changed;
    for (const auto& [key, value] : now.values) {
        const auto it = committed_->values.find(key);
        if (it == committed_->values.end() || it->second != value) {
            changed << key;
        }
    }
    const bool same_document =
        now.base_json == committed_->base_json && now.source_name == committed_->source_name;
    const bool coalesce = !restoring_ && same_document && changed.size() == 1 &&
                          changed == last_changed_ && since_commit_.isValid() &&
                          since_commit_.elapsed() < 1500 && !undo_.empty();
    if (!restoring_) {
        if (!coalesce) {
            undo_.push_back(*committed_);
            if (undo_.size() > kHistoryLimit) {
                undo_.erase(undo_.begin());
            }
        }
        redo_.clear();
        last_changed_ = same_document ? changed : QStringList();
        since_commit_.start();
    }
    committed_ = std::move(now);
    emit historyChanged();
}

bool ConfigPanel::canUndo() const {
    return !undo_.empty() || (committed_ && !config_valid_);
}

bool ConfigPanel::canRedo() const {
    return !redo_.empty();
}

void ConfigPanel::undo() {
    if (!committed_) {
        return;
    }
    if (!config_valid_) {
        // An edit the validator refused: back to the last valid config, the edit kept for redo.
        redo_.push_back(snapshot());
        restore(*committed_);
    } else if (!undo_.empty()) {
        State target = std::move(undo_.back());
        undo_.pop_back();
        redo_.push_back(*committed_);
        restore(target);
    }
    last_changed_.clear();
    emit historyChanged();
}

void ConfigPanel::redo() {
    if (redo_.empty()) {
        return;
    }
    State target = std::move(redo_.back());
    redo_.pop_back();
    const std::optional<State> before = config_valid_ ? committed_ : std::nullopt;
    restore(target);
    // Redoing a refused edit leaves the last valid config where it was: undo returns to it
    // without a step of its own.
    if (before && config_valid_) {
        undo_.push_back(*before);
    }
    last_changed_.clear();
    emit historyChanged();
}

}  // namespace pipescope::app
