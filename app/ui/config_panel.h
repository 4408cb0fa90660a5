// The config panel: presets, model, pipeline, hardware and cost source. Every edit re-parses
// the config (the loaded document plus the panel's values as overrides) with the same
// validator as pipescope-run; a field the validator complains about is marked with its message
// and the views keep the last valid config.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>
#include <QWidget>

#include <pipescope/schedule/config.h>

namespace pipescope::app {

class ConfigPanel : public QWidget {
    Q_OBJECT

  public:
    explicit ConfigPanel(QWidget* parent = nullptr);

    // Loads a config document (a preset or a file); the fields take its values. On a parse
    // error the fields keep their values and the error is shown; returns false.
    bool loadJson(const QString& json, const QString& source_name);
    bool loadFile(const QString& path);
    bool loadPreset(const QString& resource_name);  // "default.json"

    // What closing keeps for the next start: the loaded document with its source, file and
    // preset, and the fields' values, valid or not (a JSON object). restoreSession() shows it
    // again as it was, edits marked as edits; false, changing nothing, when it cannot be used.
    QString sessionJson() const;
    bool restoreSession(const QString& json);

    // The last valid config (the current one unless isValid() is false).
    const std::optional<schedule::Config>& config() const { return config_; }
    // Whether the fields as they stand make a valid config.
    bool isValid() const { return config_valid_; }
    // The current config as a JSON document (to save or hand to pipescope-run).
    QString configJson() const;
    QString issuesText() const { return issues_->text(); }

    // Sets one field by key path ("parallel.microbatches") as a user would; false if the panel
    // has no such field or the value does not fit it.
    bool setField(const QString& key, const QVariant& value);
    QWidget* field(const QString& key) const;
    QStringList fieldKeys() const;  // the keys the fields set, sorted
    // Whether Ctrl+Z in `widget` (a field, or a part of one) should undo its own typing: true
    // for a widget that is no field of the panel, and for the field the last step of the history
    // changed. A field edited before another keeps no typing of its own to undo, so that its
    // undo never makes a config that never was (its old text beside the later edits).
    bool keepsOwnUndo(const QWidget* widget) const;

    // The history of valid configs: every edit, preset and file loaded is a step (a field
    // stepped again within 1.5 s is the same step). Undo after an edit the validator refused
    // goes back to the last valid config.
    bool canUndo() const;
    bool canRedo() const;
    void undo();
    void redo();

  signals:
    void configChanged(const pipescope::schedule::Config& config);
    void configInvalid(const QString& message);
    // canUndo or canRedo may have changed.
    void historyChanged();

  private:
    struct Field {
        QWidget* widget = nullptr;
        std::function<std::string()> json;                    // the value as JSON text
        std::function<void(const schedule::Config&)> assign;  // from a parsed config
        std::function<void(const std::string&)> restore;      // from json()'s text
        QString tooltip;
    };
    // What the panel shows: the document, its label and the fields' values.
    struct State {
        std::string base_json;
        QString source_name;
        QString file_name;  // the loaded file's name, shown under the config's; "" for a preset
        QString label;
        QString label_tip;
        int preset_index = 0;
        std::map<QString, std::string> values;
        bool operator==(const State&) const = default;
    };
    static constexpr std::size_t kHistoryLimit = 200;

    // The label: the config's name, and the file it came from under it.
    void showName(const QString& name);
    bool load(const QString& json, const QString& source_name, const QString& file_name,
              int preset_index);
    // Reads `path` (at most 64 MiB) and loads it; a read error is shown like a parse error.
    bool loadPath(const QString& path, const QString& file_name, int preset_index);
    State snapshot() const;
    void restore(const State& state);
    // Records a valid config that differs from the last one.
    void commit();
    void addInt(QFormLayout* form, const QString& key, const QString& label, int min, int max,
                const QString& tip, std::function<int(const schedule::Config&)> get);
    void addDouble(QFormLayout* form, const QString& key, const QString& label, double min,
                   double max, int decimals, const QString& tip,
                   std::function<double(const schedule::Config&)> get);
    void addChoice(QFormLayout* form, const QString& key, const QString& label,
                   const QStringList& items, const QString& tip,
                   std::function<std::string(const schedule::Config&)> get);
    void addOptionalInt(QFormLayout* form, const QString& key, const QString& label,
                        const QString& tip,
                        std::function<std::optional<int>(const schedule::Config&)> get);
    void assignFields(const schedule::Config& c);
    void reparse();

    std::map<QString, Field> fields_;
    QComboBox* presets_;
    QLabel* source_;
    QLabel* issues_;
    std::string base_json_;
    // base_json_ as loaded, without the fields' values: what an edited config's name is told
    // apart from (schedule::editedName).
    std::optional<schedule::Config> base_config_;
    QString source_name_;
    QString file_name_;  // State::file_name
    std::optional<schedule::Config> config_;
    bool config_valid_ = false;  // the fields as they stand parse (config_ may be older)
    bool assigning_ = false;
    bool restoring_ = false;
    std::optional<State> committed_;  // the last valid state
    std::vector<State> undo_;
    std::vector<State> redo_;
    QStringList last_changed_;  // the field(s) the last step changed
    QElapsedTimer since_commit_;
};

}  // namespace pipescope::app
