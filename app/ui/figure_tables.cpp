#include "figure_tables.h"

#include <algorithm>
#include <set>

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QHeaderView>
#include <QSortFilterProxyModel>

namespace pipescope::app {

QString figureText(const QTableView& table, bool whole) {
    const QAbstractItemModel& model = *table.model();
    std::set<int> rows;
    std::set<int> columns;
    if (!whole && table.selectionModel() != nullptr) {
        for (const QModelIndex& index : table.selectionModel()->selectedIndexes()) {
            rows.insert(index.row());
            columns.insert(index.column());
        }
    }
    if (rows.empty()) {
        for (int r = 0; r < model.rowCount(); ++r) {
            rows.insert(r);
        }
        for (int c = 0; c < model.columnCount(); ++c) {
            columns.insert(c);
        }
    }
    std::erase_if(columns, [&](int c) { return table.isColumnHidden(c); });
    // Tabs and line breaks inside a cell would shift the cells after it.
    const auto clean = [](QString text) {
        return text.replace(QLatin1Char('\t'), QLatin1Char(' '))
            .replace(QLatin1Char('\n'), QLatin1Char(' '));
    };
    QStringList lines;
    QStringList header;
    for (const int c : columns) {
        header << clean(model.headerData(c, Qt::Horizontal).toString());
    }
    lines << header.join(QLatin1Char('\t'));
    for (const int r : rows) {
        QStringList cells;
        for (const int c : columns) {
            cells << clean(model.index(r, c).data().toString());
        }
        lines << cells.join(QLatin1Char('\t'));
    }
    return lines.join(QLatin1Char('\n')) + QLatin1Char('\n');
}

QTableView* makeFigureTable(QAbstractItemModel* model) {
    auto* table = new QTableView;
    table->setModel(model);
    auto* copy = new QAction(QObject::tr("&Copy"), table);
    copy->setShortcut(QKeySequence::Copy);
    copy->setShortcutContext(Qt::WidgetShortcut);
    copy->setToolTip(
        QObject::tr("Copy the selected cells (all of them when none are selected) with their "
                    "headers, tab-separated"));
    QObject::connect(copy, &QAction::triggered, table,
                     [table] { QApplication::clipboard()->setText(figureText(*table)); });
    auto* copy_all = new QAction(QObject::tr("Copy the &whole table"), table);
    QObject::connect(copy_all, &QAction::triggered, table,
                     [table] { QApplication::clipboard()->setText(figureText(*table, true)); });
    table->addAction(copy);
    table->addAction(copy_all);
    table->setContextMenuPolicy(Qt::ActionsContextMenu);
    // Tab moves on to the next control (arrow keys walk the cells), not through every cell.
    table->setTabKeyNavigation(false);
    table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
    table->verticalHeader()->setVisible(false);
    // Compact rows: the tables share the height with the charts.
    table->verticalHeader()->setDefaultSectionSize(table->fontMetrics().height() + 6);
    return table;
}

QTableView* makeSortableFigureTable(QAbstractItemModel* model, int sort_role) {
    auto* sorted = new QSortFilterProxyModel(model);
    sorted->setSourceModel(model);
    sorted->setSortRole(sort_role);
    QTableView* table = makeFigureTable(sorted);
    table->setSortingEnabled(true);
    table->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
    return table;
}

std::vector<trace::OpKind> selectedKinds(const QTableView& table) {
    std::vector<trace::OpKind> kinds;
    if (table.selectionModel() == nullptr) {
        return kinds;
    }
    std::set<int> rows;
    for (const QModelIndex& index : table.selectionModel()->selectedIndexes()) {
        rows.insert(index.row());
    }
    for (const int row : rows) {
        const QString name = table.model()->index(row, 0).data().toString();
        if (const auto kind = trace::opKindFromString(name.toStdString())) {
            if (std::find(kinds.begin(), kinds.end(), *kind) == kinds.end()) {
                kinds.push_back(*kind);
            }
        }
    }
    return kinds;
}

void selectKinds(QTableView& table, const std::vector<trace::OpKind>& kinds) {
    QItemSelection rows;
    const QAbstractItemModel& model = *table.model();
    for (int r = 0; r < model.rowCount(); ++r) {
        const auto kind =
            trace::opKindFromString(model.index(r, 0).data().toString().toStdString());
        if (kind && std::find(kinds.begin(), kinds.end(), *kind) != kinds.end()) {
            rows.select(model.index(r, 0), model.index(r, model.columnCount() - 1));
        }
    }
    table.selectionModel()->select(rows, QItemSelectionModel::ClearAndSelect);
}

KindFocus::KindFocus(QTabWidget* tabs, QTableView* table, Notify notify)
    : QObject(tabs), tabs_(tabs), table_(table), notify_(std::move(notify)) {
    connect(table_->selectionModel(), &QItemSelectionModel::selectionChanged, this,
            [this] { notify_(kinds()); });
    connect(tabs_, &QTabWidget::currentChanged, this, [this] { notify_(kinds()); });
}

std::vector<trace::OpKind> KindFocus::kinds() const {
    return tabs_->currentWidget() == table_ ? selectedKinds(*table_) : std::vector<trace::OpKind>{};
}

void KindFocus::resetKeeping(const std::function<void()>& reset) {
    const std::vector<trace::OpKind> kept = selectedKinds(*table_);
    reset();
    selectKinds(*table_, kept);
    notify_(kinds());  // also when the selection, empty before and after, sent no signal
}

QTabWidget* makeFigureTabs(std::initializer_list<FigurePage> pages) {
    auto* tabs = new QTabWidget;
    tabs->setDocumentMode(true);
    for (const FigurePage& page : pages) {
        const int i = tabs->addTab(page.table, page.title);
        tabs->setTabToolTip(i, page.tooltip);
    }
    return tabs;
}

}  // namespace pipescope::app
