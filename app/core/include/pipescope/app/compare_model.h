// A run comparison (analysis::compareRuns) as a table: one row per quantity; columns: the
// quantity, the value of each run, then for each run after the first (the baseline) its change
// against the baseline, absolute and in %. Changes are coloured by their verdict (ForegroundRole:
// better green, worse red) and say why in their tooltip.
#pragma once

#include <string>
#include <vector>

#include <QAbstractTableModel>

#include <pipescope/analysis/compare.h>

namespace pipescope::app {

class CompareModel : public QAbstractTableModel {
    Q_OBJECT

  public:
    // The raw number of a cell as a double in the analysis' unit (ns, bytes, 0..1 ratio,
    // tokens/s; a delta % cell holds the relative change, 0.1 = +10%); invalid where "—" shows;
    // the label text on label cells.
    static constexpr int ValueRole = Qt::UserRole + 1;
    static constexpr int SortRole = ValueRole;
    // analysis::Verdict of a run's value and change cells as an int; invalid on label cells.
    static constexpr int VerdictRole = Qt::UserRole + 2;

    enum class ColumnKind { Label, Value, Delta, Relative };
    struct ColumnInfo {
        ColumnKind kind = ColumnKind::Label;
        int run = -1;  // index into RunComparison::names; -1 for the label column
    };

    // Colours of ForegroundRole (a QColor where Qt Gui is loaded, else this "#rrggbb" string).
    static constexpr const char* kBetterColor = "#1a7f37";
    static constexpr const char* kWorseColor = "#c62828";

    explicit CompareModel(QObject* parent = nullptr);

    // Replaces what the model shows (a model reset).
    void setComparison(const analysis::RunComparison& comparison);
    // Whether a change is judged better or worse (the default): not where the runs after the
    // baseline are predictions of it, whose changes are their errors. Unjudged changes have no
    // colour and their tooltips say above or below.
    void setJudged(bool judged);
    bool judged() const { return judged_; }
    const analysis::RunComparison& comparison() const { return cmp_; }

    int runCount() const { return static_cast<int>(cmp_.names.size()); }
    ColumnInfo columnInfo(int column) const;
    // The name of a run for people: its name, else its file's name, else "run N".
    QString runName(int run) const;
    // Column headers for runs named `names`: runs named "file.db — run name" go by their run
    // names when that leaves every header different; then without the start every name shares (at
    // least 8 characters, cut after a separator, "…" in its place) when what is left still tells
    // them apart; then at most 40 characters, the first and last 20.
    static std::vector<QString> headerNames(const std::vector<QString>& names);

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation,
                        int role = Qt::DisplayRole) const override;

    // A value in its unit for people: ns as ms, bytes as GiB (unit "bytes") or MiB ("bytes:MiB",
    // what the table uses for a row whose values are all under 1 GiB), ratios as %, tokens/s
    // ("tokens/s:2" with two decimals, for a row whose smallest rate is under 10).
    static QString formatValue(double value, const std::string& unit);
    // A change with its sign: "+1.250 ms", "-0.50 GiB"; a ratio's change in percentage points.
    static QString formatDelta(double delta, const std::string& unit);

    // The table as CSV (RFC 4180) with raw numbers in the analysis' units, for spreadsheets:
    // key, quantity, unit, better, the runs' values, then per non-baseline run its delta,
    // relative delta and verdict. Missing values are empty fields.
    QString toCsv() const;

  private:
    analysis::RunComparison cmp_;
    std::vector<QString> header_names_;
    bool judged_ = true;
};

}  // namespace pipescope::app
