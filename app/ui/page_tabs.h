// The main window's tab widget: its tabs keep one height whether or not they can be closed.
// A closable tab (a trace or a comparison) is a few pixels taller than the fixed pages' tabs
// because of its close button, so the first one opened would move every page down.
#pragma once

#include <algorithm>

#include <QTabBar>
#include <QTabWidget>

namespace pipescope::app {

class PageTabBar final : public QTabBar {
  public:
    using QTabBar::QTabBar;
    // At least this tall: the height of a tab with its close button (read before the fixed
    // tabs lose theirs).
    void setMinimumTabHeight(int height) { minimum_tab_height_ = height; }

  protected:
    QSize tabSizeHint(int index) const override {
        QSize size = QTabBar::tabSizeHint(index);
        size.setHeight(std::max(size.height(), minimum_tab_height_));
        return size;
    }

  private:
    int minimum_tab_height_ = 0;
};

class PageTabs final : public QTabWidget {
  public:
    explicit PageTabs(QWidget* parent = nullptr) : QTabWidget(parent) {
        setTabBar(bar_ = new PageTabBar);
    }
    PageTabBar* pageTabBar() const { return bar_; }
    // A trace's or a comparison's title short enough that a few such tabs fit beside the
    // pages' own (about 36 characters; the tab's tooltip holds it whole). `mode` says which
    // end may go: a generated run name tells runs apart at its end (method, backend, time).
    QString fitTitle(const QString& title, Qt::TextElideMode mode) const {
        return fontMetrics().elidedText(title, mode, 36 * fontMetrics().averageCharWidth());
    }
    // The same for a title that starts by saying what the tab is ("Predicted vs measured: "):
    // that part stays whole and the name after it gives way, keeping at least 20 characters.
    // Elided as a whole from the left, the tab read like the run's own trace tab.
    QString fitTitle(const QString& kind, const QString& name, Qt::TextElideMode mode) const {
        const QFontMetrics metrics = fontMetrics();
        const int room = std::max(36 * metrics.averageCharWidth() - metrics.horizontalAdvance(kind),
                                  20 * metrics.averageCharWidth());
        return kind + metrics.elidedText(name, mode, room);
    }

  private:
    PageTabBar* bar_;
};

}  // namespace pipescope::app
