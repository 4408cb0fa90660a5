// The tables under the charts (per rank, per op kind, deltas): compact rows, columns sized to
// their contents, no row numbers; a table of figures sorts by the numbers, not their text.
#pragma once

#include <initializer_list>

#include <QAbstractItemModel>
#include <QString>
#include <QTabWidget>
#include <QTableView>

namespace pipescope::app {

// A table showing `model` as is (`model` may be a proxy).
QTableView* makeFigureTable(QAbstractItemModel* model);
// A table showing `model` sorted by `sort_role` once a header is clicked (the model's own order
// until then).
QTableView* makeSortableFigureTable(QAbstractItemModel* model, int sort_role);
// Tabs in document mode holding `pages`, each with its title and tooltip.
struct FigurePage {
    QTableView* table;
    QString title;
    QString tooltip;
};
QTabWidget* makeFigureTabs(std::initializer_list<FigurePage> pages);

}  // namespace pipescope::app
