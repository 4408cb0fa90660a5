#include "figure_tables.h"

#include <QHeaderView>
#include <QSortFilterProxyModel>

namespace pipescope::app {

QTableView* makeFigureTable(QAbstractItemModel* model) {
    auto* table = new QTableView;
    table->setModel(model);
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
