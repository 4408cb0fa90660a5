#include <pipescope/app/compare_model.h>

namespace pipescope::app {

// Columns: label | value of run 0 .. n-1 | (delta, delta %) for runs 1 .. n-1.

CompareModel::CompareModel(QObject* parent) : QAbstractTableModel(parent) {}

void CompareModel::setComparison(const analysis::RunComparison& comparison) {
    beginResetModel();
    cmp_ = comparison;
    endResetModel();
}

int CompareModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(cmp_.quantities.size());
}

int CompareModel::columnCount(const QModelIndex& parent) const {
    if (parent.isValid() || runs() == 0) {
        return 0;
    }
    return 1 + runs() + 2 * (runs() - 1);
}

QString CompareModel::formatValue(double v, const std::string& unit) {
    if (unit == "ns") {
        return QStringLiteral("%1 ms").arg(v / 1e6, 0, 'f', 3);
    }
    if (unit == "bytes") {
        return QStringLiteral("%1 GiB").arg(v / (1024.0 * 1024.0 * 1024.0), 0, 'f', 3);
    }
    if (unit == "ratio") {
        return QStringLiteral("%1%").arg(v * 100, 0, 'f', 2);
    }
    if (unit == "tokens/s") {
        return QStringLiteral("%1 tokens/s").arg(v, 0, 'f', 0);
    }
    return QString::number(v, 'g', 6);
}

QVariant CompareModel::data(const QModelIndex& index, int role) const {
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= columnCount()) {
        return {};
    }
    const auto& q = cmp_.quantities[static_cast<std::size_t>(index.row())];
    const int c = index.column();
    int run = -1;
    enum { Label, Value, Delta, Relative } kind = Label;
    if (c >= 1 && c <= runs()) {
        kind = Value;
        run = c - 1;
    } else if (c > runs()) {
        const int k = c - runs() - 1;
        run = 1 + k / 2;
        kind = k % 2 == 0 ? Delta : Relative;
    }
    const auto at = [](const std::vector<std::optional<double>>& v, int i) {
        return i >= 0 && i < static_cast<int>(v.size()) ? v[static_cast<std::size_t>(i)]
                                                        : std::nullopt;
    };
    std::optional<double> number;
    if (kind == Value) {
        number = at(q.values, run);
    } else if (kind == Delta) {
        number = at(q.delta, run);
    } else if (kind == Relative) {
        number = at(q.relative, run);
    }
    const analysis::Verdict verdict = run >= 0 && run < static_cast<int>(q.verdicts.size())
                                          ? q.verdicts[static_cast<std::size_t>(run)]
                                          : analysis::Verdict::Unknown;
    switch (role) {
        case Qt::DisplayRole:
            if (kind == Label) {
                return QString::fromStdString(q.label);
            }
            if (!number) {
                return QStringLiteral("\u2014");
            }
            if (kind == Relative) {
                return QStringLiteral("%1%2%")
                    .arg(*number > 0 ? "+" : "")
                    .arg(*number * 100, 0, 'f', 1);
            }
            if (kind == Delta) {
                return (*number > 0 ? QStringLiteral("+") : QString()) +
                       formatValue(*number, q.unit);
            }
            return formatValue(*number, q.unit);
        case ValueRole:
            return number ? QVariant(*number) : QVariant();
        case VerdictRole:
            if (kind == Delta || kind == Relative) {
                return static_cast<int>(verdict);
            }
            return {};
        case Qt::TextAlignmentRole:
            return kind == Label ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                                 : QVariant(Qt::AlignRight | Qt::AlignVCenter);
        case Qt::ToolTipRole:
            if (kind == Delta || kind == Relative) {
                return tr("%1 against %2 (%3 is better)")
                    .arg(QString::fromUtf8(analysis::toString(verdict)),
                         QString::fromStdString(cmp_.names.front()),
                         QString::fromUtf8(analysis::toString(q.better)));
            }
            return {};
        default:
            return {};
    }
}

QVariant CompareModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || role != Qt::DisplayRole || section < 0 ||
        section >= columnCount()) {
        return QAbstractTableModel::headerData(section, orientation, role);
    }
    if (section == 0) {
        return tr("quantity");
    }
    if (section <= runs()) {
        return QString::fromStdString(cmp_.names[static_cast<std::size_t>(section - 1)]);
    }
    const int k = section - runs() - 1;
    const QString name = QString::fromStdString(cmp_.names[static_cast<std::size_t>(1 + k / 2)]);
    return k % 2 == 0 ? tr("Δ %1").arg(name) : tr("Δ% %1").arg(name);
}

}  // namespace pipescope::app
