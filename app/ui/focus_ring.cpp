#include "focus_ring.h"

#include <QAbstractItemView>
#include <QApplication>
#include <QEvent>
#include <QFocusEvent>
#include <QPainter>
#include <QPlainTextEdit>
#include <QScrollArea>
#include <QTextEdit>

namespace pipescope::app {

namespace {

constexpr int kWidth = 2;  // as the charts' focus frame

// A frame over its parent's edge: masked to the frame itself, so it neither covers nor
// repaints the parent's contents, and transparent for the mouse.
class FocusRing final : public QWidget {
  public:
    explicit FocusRing(QWidget* area) : QWidget(area) {
        setObjectName(QStringLiteral("pipescope_focus_ring"));
        setAttribute(Qt::WA_TransparentForMouseEvents);
        setAttribute(Qt::WA_NoSystemBackground);
        setFocusPolicy(Qt::NoFocus);
        area->installEventFilter(this);
        follow();
    }

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        if (watched == parent() && event->type() == QEvent::Resize) {
            follow();
        }
        return false;
    }
    void paintEvent(QPaintEvent*) override {
        QPainter painter(this);
        painter.setPen(QPen(palette().color(QPalette::Highlight), kWidth));
        painter.drawRect(
            QRectF(rect()).adjusted(kWidth / 2.0, kWidth / 2.0, -kWidth / 2.0, -kWidth / 2.0));
    }

  private:
    void follow() {
        const QRect r = parentWidget()->rect();
        setGeometry(r);
        setMask(QRegion(QRect(QPoint(0, 0), r.size())) -
                QRegion(QRect(QPoint(0, 0), r.size()).adjusted(kWidth, kWidth, -kWidth, -kWidth)));
        raise();
    }
};

// The item view or text edit that `w` is, or whose viewport it is, or a widget that asks for
// the ring (the sweep chart: property pipescope_focus_ring); null for others and for popups (a
// combo box's list).
QWidget* framedArea(QObject* object) {
    auto* w = qobject_cast<QWidget*>(object);
    if (!w || (w->window() && w->window()->windowType() == Qt::Popup)) {
        return nullptr;
    }
    if (w->property("pipescope_focus_ring").toBool()) {
        return w;
    }
    auto* area = qobject_cast<QAbstractScrollArea*>(w);
    if (!area) {
        area = qobject_cast<QAbstractScrollArea*>(w->parentWidget());
        if (!area || area->viewport() != w) {
            return nullptr;
        }
    }
    if (qobject_cast<QAbstractItemView*>(area) || qobject_cast<QPlainTextEdit*>(area) ||
        qobject_cast<QTextEdit*>(area)) {
        return area;
    }
    return nullptr;
}

// A field that Tab or a mnemonic moved to inside a scroll area (the config panel's), scrolled
// into view: QScrollArea does so only when Tab moves within it, so Tab from the preset list or
// the pages landed on a field scrolled out of sight, and typing changed a value unseen.
void bringIntoView(QWidget* w, Qt::FocusReason reason) {
    if (!w || (reason != Qt::TabFocusReason && reason != Qt::BacktabFocusReason &&
               reason != Qt::ShortcutFocusReason)) {
        return;
    }
    for (QWidget* p = w->parentWidget(); p; p = p->parentWidget()) {
        if (auto* scroll = qobject_cast<QScrollArea*>(p);
            scroll && scroll->widget() && scroll->widget()->isAncestorOf(w)) {
            scroll->ensureWidgetVisible(w);
        }
    }
}

class FocusRingFilter final : public QObject {
  public:
    using QObject::QObject;

  protected:
    bool eventFilter(QObject* watched, QEvent* event) override {
        if (event->type() != QEvent::FocusIn && event->type() != QEvent::FocusOut) {
            return false;
        }
        if (event->type() == QEvent::FocusIn) {
            bringIntoView(qobject_cast<QWidget*>(watched),
                          static_cast<QFocusEvent*>(event)->reason());
        }
        QWidget* area = framedArea(watched);
        if (!area) {
            return false;
        }
        auto* scroll = qobject_cast<QAbstractScrollArea*>(area);
        QWidget* ring = focusRingOf(area);
        if (event->type() == QEvent::FocusIn) {
            if (!ring) {
                ring = new FocusRing(area);
            }
            ring->raise();
            ring->show();
        } else if (ring && !area->hasFocus() && !(scroll && scroll->viewport()->hasFocus())) {
            ring->hide();
        }
        return false;
    }
};

}  // namespace

void installFocusRings() {
    // By name: the filter class has no meta-object of its own for findChild to tell it by.
    static const QString kName = QStringLiteral("pipescope_focus_ring_filter");
    auto* app = qApp;
    if (!app || app->findChild<QObject*>(kName, Qt::FindDirectChildrenOnly)) {
        return;
    }
    auto* filter = new FocusRingFilter(app);
    filter->setObjectName(kName);
    app->installEventFilter(filter);
}

QWidget* focusRingOf(const QWidget* area) {
    QWidget* ring = area->findChild<QWidget*>(QStringLiteral("pipescope_focus_ring"),
                                              Qt::FindDirectChildrenOnly);
    return ring;
}

}  // namespace pipescope::app
