#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include <QCoreApplication>
#include <QFileInfo>
#include <QLocale>
#include <QMetaType>
#include <QRegularExpression>
#include <QStringList>

#include <pipescope/app/compare_model.h>
#include <pipescope/app/table_cells.h>
#include <pipescope/app/units.h>

namespace pipescope::app {

namespace {

// Column headers keep at most this many characters of a run's name.
constexpr qsizetype kHeaderChars = 40;

// Memory rows whose values are all under 1 GiB read in MiB: 0.05 against 0.04 GiB hides a 20%
// change, and a delta of 5 MiB shows as 0.00 GiB.
std::string displayUnit(const analysis::QuantityComparison& q) {
    if (q.unit == "tokens/s") {
        // The decimals the smallest rate needs, for the row's values and changes alike.
        double smallest = 0;
        for (const auto& v : q.values) {
            if (v && *v > 0 && (smallest == 0 || *v < smallest)) {
                smallest = *v;
            }
        }
        const int decimals = trace::rateDecimals(smallest);
        return decimals == 0 ? q.unit : q.unit + ":" + std::to_string(decimals);
    }
    if (q.unit != "bytes") {
        return q.unit;
    }
    double largest = 0;
    for (const auto& v : q.values) {
        largest = std::max(largest, v ? std::fabs(*v) : 0.0);
    }
    return memoryUnitFor(largest).bytes == kBytesPerMiB ? "bytes:MiB" : q.unit;
}

std::optional<double> at(const std::vector<std::optional<double>>& v, int i) {
    return i >= 0 && i < static_cast<int>(v.size()) ? v[static_cast<std::size_t>(i)] : std::nullopt;
}

analysis::Verdict verdictOf(const analysis::QuantityComparison& q, int run) {
    return run >= 0 && run < static_cast<int>(q.verdicts.size())
               ? q.verdicts[static_cast<std::size_t>(run)]
               : analysis::Verdict::Unknown;
}

// app/core links Qt Core only (architecture.md), so it cannot build a QColor; but where Qt Gui is
// loaded (a QGuiApplication runs, so views exist) QVariant turns the colour name into one, which
// the default delegate draws with. Elsewhere (tests, headless use) the name itself is returned.
QVariant colour(const char* name) {
    const QVariant text(QString::fromLatin1(name));
    const QCoreApplication* app = QCoreApplication::instance();
    if (app != nullptr && app->inherits("QGuiApplication")) {
        QVariant converted = text;
        if (converted.convert(QMetaType(QMetaType::QColor))) {
            return converted;
        }
    }
    return text;
}

// A change with its sign: "+" before a positive one, none before one that rounds to zero
// (a tiny negative change would read "-0.000 ms").
QString withSign(QString text) {
    static const QRegularExpression nonzero(QStringLiteral("[1-9]"));
    if (!text.contains(nonzero)) {
        return text.startsWith(QLatin1Char('-')) ? text.mid(1) : text;
    }
    return text.startsWith(QLatin1Char('-')) ? text : QStringLiteral("+") + text;
}

QString signedNumber(double v, int decimals) {
    return withSign(QString::number(v, 'f', decimals));
}

QString csvField(const QString& s) {
    if (!s.contains(QLatin1Char(',')) && !s.contains(QLatin1Char('"')) &&
        !s.contains(QLatin1Char('\n')) && !s.contains(QLatin1Char('\r'))) {
        return s;
    }
    QString quoted = s;
    quoted.replace(QStringLiteral("\""), QStringLiteral("\"\""));
    return QLatin1Char('"') + quoted + QLatin1Char('"');
}

QString csvNumber(const std::optional<double>& v) {
    return v ? QString::number(*v, 'g', 15) : QString();
}

}  // namespace

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

std::vector<QString> CompareModel::headerNames(const std::vector<QString>& names) {
    std::vector<QString> shown = names;
    const auto all_distinct = [](const std::vector<QString>& v) {
        std::vector<QString> sorted = v;
        std::sort(sorted.begin(), sorted.end());
        return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
    };
    if (names.size() >= 2) {
        // "file.db — run name": the file's name is made from the run's name and a time stamp,
        // so the run's names alone tell the runs apart when they differ (beside a prediction
        // named "calibrated", too).
        const QString dash = QStringLiteral(" \u2014 ");
        std::vector<QString> tails;
        for (const QString& n : names) {
            const qsizetype at = n.indexOf(dash);
            tails.push_back(at < 0 ? n : n.mid(at + dash.size()));
        }
        if (all_distinct(tails)) {
            shown = tails;
        }
        // What every name starts with (cut after a separator, so no word is split) says
        // nothing about which column is which: a pair run from one config differs only at
        // its end ("... · naive", "... · vocab-2").
        if (all_distinct(shown)) {
            qsizetype common = shown.front().size();
            for (const QString& n : shown) {
                qsizetype i = 0;
                while (i < common && i < n.size() && n[i] == shown.front()[i]) {
                    ++i;
                }
                common = i;
            }
            static const QString separators = QStringLiteral(" -_.,:;()/\u00b7\u2014");
            while (common > 0 && !separators.contains(shown.front()[common - 1])) {
                --common;
            }
            constexpr qsizetype kWorthCutting = 8;
            const bool leaves_all = std::all_of(shown.begin(), shown.end(), [&](const QString& n) {
                return !n.mid(common).trimmed().isEmpty();
            });
            if (common >= kWorthCutting && leaves_all) {
                for (QString& n : shown) {
                    n = QStringLiteral("\u2026") + n.mid(common).trimmed();
                }
            }
        }
    }
    // A long name keeps its start and its end (where the names of runs differ most often).
    for (QString& n : shown) {
        if (n.size() > kHeaderChars) {
            n = n.left(kHeaderChars / 2 - 1) + QStringLiteral("\u2026") + n.right(kHeaderChars / 2);
        }
    }
    return shown;
}

void CompareModel::setJudged(bool judged) {
    judged_ = judged;
    if (rowCount() > 0) {
        emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1),
                         {Qt::ForegroundRole, Qt::ToolTipRole});
    }
}

void CompareModel::setComparison(const analysis::RunComparison& comparison) {
    beginResetModel();
    cmp_ = comparison;
    std::vector<QString> names;
    for (int i = 0; i < runCount(); ++i) {
        names.push_back(runName(i));
    }
    header_names_ = headerNames(names);
    endResetModel();
}

int CompareModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() || runCount() == 0 ? 0 : static_cast<int>(cmp_.quantities.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
    return parent.isValid() || runCount() == 0 ? 0 : 1 + runCount() + 2 * (runCount() - 1);
}

CompareModel::ColumnInfo CompareModel::columnInfo(int column) const {
    if (column >= 1 && column <= runCount()) {
        return {ColumnKind::Value, column - 1};
    }
    if (column > runCount()) {
        const int k = column - runCount() - 1;
        return {k % 2 == 0 ? ColumnKind::Delta : ColumnKind::Relative, 1 + k / 2};
    }
    return {};
}

QString CompareModel::runName(int run) const {
    if (run < 0 || run >= runCount()) {
        return {};
    }
    const auto i = static_cast<std::size_t>(run);
    if (!cmp_.names[i].empty()) {
        return QString::fromStdString(cmp_.names[i]);
    }
    if (i < cmp_.paths.size() && !cmp_.paths[i].empty()) {
        return QFileInfo(QString::fromStdString(cmp_.paths[i])).fileName();
    }
    return tr("run %1").arg(run + 1);
}

QString CompareModel::formatValue(double value, const std::string& unit) {
    if (unit == "ns") {
        return QStringLiteral("%1 ms").arg(value / kNsPerMs, 0, 'f', 3);
    }
    if (unit == "bytes") {
        return QStringLiteral("%1 GiB").arg(value / kBytesPerGiB, 0, 'f', 2);
    }
    if (unit == "bytes:MiB") {
        return QStringLiteral("%1 MiB").arg(value / kBytesPerMiB, 0, 'f', 1);
    }
    if (unit == "ratio") {
        return QStringLiteral("%1%").arg(value * 100, 0, 'f', 1);
    }
    if (unit.rfind("tokens/s", 0) == 0) {  // "tokens/s:2": with two decimals
        const int decimals = unit.size() > 9 ? std::atoi(unit.c_str() + 9) : 0;
        return QLocale(QLocale::English).toString(value, 'f', decimals) +
               QStringLiteral(" tokens/s");
    }
    if (unit == "factor") {
        return QString::number(value, 'f', 3);  // an imbalance, max / mean, as in the summary
    }
    return QString::number(value, 'g', 6) + QLatin1Char(' ') + QString::fromStdString(unit);
}

QString CompareModel::formatDelta(double delta, const std::string& unit) {
    if (unit == "ratio") {
        // A change of a percentage is in percentage points, so it is not read as a relative one.
        return signedNumber(delta * 100, 1) + QStringLiteral(" pp");
    }
    return withSign(formatValue(delta, unit));
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) {
        return {};
    }
    const auto& q = cmp_.quantities[static_cast<std::size_t>(index.row())];
    const ColumnInfo col = columnInfo(index.column());
    std::optional<double> number;
    switch (col.kind) {
        case ColumnKind::Label:
            break;
        case ColumnKind::Value:
            number = at(q.values, col.run);
            break;
        case ColumnKind::Delta:
            number = at(q.delta, col.run);
            break;
        case ColumnKind::Relative:
            number = at(q.relative, col.run);
            break;
    }
    const analysis::Verdict verdict = verdictOf(q, col.run);
    const bool is_change = col.kind == ColumnKind::Delta || col.kind == ColumnKind::Relative;
    switch (role) {
        case Qt::DisplayRole:
            if (col.kind == ColumnKind::Label) {
                return QString::fromStdString(q.label);
            }
            if (!number) {
                return missingCell();
            }
            switch (col.kind) {
                case ColumnKind::Delta:
                    return formatDelta(*number, displayUnit(q));
                case ColumnKind::Relative:
                    return signedNumber(*number * 100, 1) + QLatin1Char('%');
                default:
                    return formatValue(*number, displayUnit(q));
            }
        case ValueRole:
            if (col.kind == ColumnKind::Label) {
                return QString::fromStdString(q.label);
            }
            return number ? QVariant(*number) : QVariant();
        case VerdictRole:
            return col.kind == ColumnKind::Label ? QVariant() : QVariant(static_cast<int>(verdict));
        case Qt::ForegroundRole:
            if (!judged_) {
                return {};
            }
            if (is_change && verdict == analysis::Verdict::Better) {
                return colour(kBetterColor);
            }
            if (is_change && verdict == analysis::Verdict::Worse) {
                return colour(kWorseColor);
            }
            return {};
        case Qt::TextAlignmentRole:
            return static_cast<int>(col.kind == ColumnKind::Label
                                        ? Qt::AlignLeft | Qt::AlignVCenter
                                        : Qt::AlignRight | Qt::AlignVCenter);
        case Qt::ToolTipRole: {
            const QString better =
                q.better == analysis::Better::Neither
                    ? tr("neither way is better for one rank: methods move work and memory "
                         "between ranks; the max peak and the imbalances say which spread is "
                         "better")
                    : tr("%1 is better").arg(QString::fromLatin1(analysis::toString(q.better)));
            if (col.kind == ColumnKind::Label) {
                return tr("%1 (%2)").arg(QString::fromStdString(q.label), better);
            }
            if (col.kind == ColumnKind::Value) {
                return col.run == 0 ? tr("%1, the baseline").arg(runName(col.run))
                                    : runName(col.run);
            }
            if (!judged_) {
                const auto delta = at(q.delta, col.run);
                if (!delta) {
                    return tr("no comparison: %1 or %2 has no value")
                        .arg(runName(col.run), runName(0));
                }
                return tr("%1's error against %2: %3")
                    .arg(runName(col.run), runName(0),
                         *delta > 0   ? tr("above it")
                         : *delta < 0 ? tr("below it")
                                      : tr("the same"));
            }
            switch (verdict) {
                case analysis::Verdict::Same:
                    if (q.better == analysis::Better::Neither) {
                        return tr("same (%1) as %2").arg(better, runName(0));
                    }
                    [[fallthrough]];
                case analysis::Verdict::Better:
                case analysis::Verdict::Worse:
                    return tr("%1 (%2) than %3")
                        .arg(QString::fromLatin1(analysis::toString(verdict)), better, runName(0));
                case analysis::Verdict::Changed:
                    return tr("changed (%1) from %2").arg(better, runName(0));
                default:
                    return tr("no comparison: %1 or %2 has no value")
                        .arg(runName(col.run), runName(0));
            }
        }
        default:
            return {};
    }
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) {
        return QAbstractTableModel::headerData(section, orientation, role);
    }
    const ColumnInfo col = columnInfo(section);
    const QString name = runName(col.run);
    switch (role) {
        case Qt::DisplayRole: {
            // A trace's name ("file.db — its config's name") can be a hundred characters, and
            // the columns are as wide as their headers: headerNames() keeps what tells the runs
            // apart, the whole name is in the tooltip.
            const auto i = static_cast<std::size_t>(col.run);
            const QString shown = i < header_names_.size() ? header_names_[i] : name;
            switch (col.kind) {
                case ColumnKind::Label:
                    return tr("quantity");
                case ColumnKind::Value:
                    return shown;
                case ColumnKind::Delta:
                    return tr("\u0394 %1").arg(shown);
                case ColumnKind::Relative:
                    return tr("\u0394% %1").arg(shown);
            }
            return {};
        }
        case Qt::ToolTipRole: {
            const auto i = static_cast<std::size_t>(std::max(col.run, 0));
            const QString path =
                i < cmp_.paths.size() ? QString::fromStdString(cmp_.paths[i]) : QString();
            switch (col.kind) {
                case ColumnKind::Label:
                    return tr("What is compared");
                case ColumnKind::Value: {
                    const QString what = path.isEmpty() ? name : name + QLatin1Char('\n') + path;
                    return col.run == 0 ? tr("%1\n(the baseline)").arg(what) : what;
                }
                case ColumnKind::Delta:
                    return tr("%1 minus %2").arg(name, runName(0));
                case ColumnKind::Relative:
                    return tr("(%1 minus %2) / %2, in %").arg(name, runName(0));
            }
            return {};
        }
        case Qt::TextAlignmentRole:
            return static_cast<int>(col.kind == ColumnKind::Label
                                        ? Qt::AlignLeft | Qt::AlignVCenter
                                        : Qt::AlignRight | Qt::AlignVCenter);
        default:
            return {};
    }
}

QString CompareModel::toCsv() const {
    const QString eol = QStringLiteral("\r\n");  // RFC 4180, as interop's CSV export
    QStringList header{QStringLiteral("key"), QStringLiteral("quantity"), QStringLiteral("unit"),
                       QStringLiteral("better")};
    for (int r = 0; r < runCount(); ++r) {
        header << runName(r);
    }
    for (int r = 1; r < runCount(); ++r) {
        header << QStringLiteral("delta ") + runName(r) << QStringLiteral("relative ") + runName(r)
               << QStringLiteral("verdict ") + runName(r);
    }
    QString out;
    for (QString& h : header) {
        h = csvField(h);
    }
    out += header.join(QLatin1Char(',')) + eol;
    for (const auto& q : cmp_.quantities) {
        QStringList row{csvField(QString::fromStdString(q.key)),
                        csvField(QString::fromStdString(q.label)),
                        csvField(QString::fromStdString(q.unit)),
                        QString::fromLatin1(analysis::toString(q.better))};
        for (int r = 0; r < runCount(); ++r) {
            row << csvNumber(at(q.values, r));
        }
        for (int r = 1; r < runCount(); ++r) {
            row << csvNumber(at(q.delta, r)) << csvNumber(at(q.relative, r))
                << QString::fromLatin1(analysis::toString(verdictOf(q, r)));
        }
        out += row.join(QLatin1Char(',')) + eol;
    }
    return out;
}

}  // namespace pipescope::app
