// The tables under the charts (per rank, per op kind, deltas): compact rows, columns sized to
// their contents, no row numbers; a table of figures sorts by the numbers, not their text.
// Ctrl+C (and the context menu) copies the selected cells, or the whole table when none are
// selected, as tab-separated text with the column headers, which spreadsheets paste as cells.
#pragma once

#include <functional>
#include <initializer_list>
#include <vector>

#include <QAbstractItemModel>
#include <QString>
#include <QTabWidget>
#include <QTableView>

#include <pipescope/trace/types.h>

namespace pipescope::app {

// The cells of `table` in the rows and columns its selection spans (every row and shown column
// when nothing is selected or `whole`), as shown and in the shown order, tab-separated, one line
// per row, the header line first.
QString figureText(const QTableView& table, bool whole = false);

// A table showing `model` as is (`model` may be a proxy).
QTableView* makeFigureTable(QAbstractItemModel* model);
// A table showing `model` sorted by `sort_role` once a header is clicked (the model's own order
// until then).
QTableView* makeSortableFigureTable(QAbstractItemModel* model, int sort_role);
// The op kinds of the rows of `table` that have a selected cell, read from its first column
// (an Op kinds table: OpKindModel or CompareOpKindModel, sorted or not).
std::vector<trace::OpKind> selectedKinds(const QTableView& table);

// Selects the rows of `table` whose kind (first column) is one of `kinds`, and no others: the
// focus kept across a model reset (a new simulation of an edited config).
void selectKinds(QTableView& table, const std::vector<trace::OpKind>& kinds);

// The op kinds in focus of an Op kinds table on a tab page: those of its selected rows while the
// page is shown, none otherwise (a faded timeline with its reason out of sight would puzzle).
// Tells `notify` whenever they may have changed: a selection, a page switch, a model reset.
class KindFocus : public QObject {
  public:
    using Notify = std::function<void(const std::vector<trace::OpKind>&)>;
    // Owned by `tabs`.
    KindFocus(QTabWidget* tabs, QTableView* table, Notify notify);

    std::vector<trace::OpKind> kinds() const;
    // Runs `reset` (a reset of the table's model, which drops the selection) and selects the
    // rows of the same kinds again, so the focus outlives a new simulation of an edited config.
    void resetKeeping(const std::function<void()>& reset);

  private:
    QTabWidget* tabs_;
    QTableView* table_;
    Notify notify_;
};

// Tabs in document mode holding `pages`, each with its title and tooltip.
struct FigurePage {
    QTableView* table;
    QString title;
    QString tooltip;
};
QTabWidget* makeFigureTabs(std::initializer_list<FigurePage> pages);

}  // namespace pipescope::app
