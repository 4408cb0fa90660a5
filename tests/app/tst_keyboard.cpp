// The main window for a user who works from the keyboard: no two actions share a shortcut, every
// menu item and every control of a page has a mnemonic of its own (not one the menu bar holds),
// every control says what it does, and Tab walks each page and dialog in the order it shows.

#include <map>
#include <set>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDialogButtonBox>
#include <QDockWidget>
#include <QFormLayout>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QTabBar>
#include <QTemporaryDir>
#include <QToolTip>
#include <QtTest>

#include "config_panel.h"
#include "export_dialog.h"
#include "focus_ring.h"
#include "main_window.h"
#include "sweep_view.h"
#include "testsupport.h"

using namespace pipescope;

namespace {

// Explore, Compare methods, Sweep and Run.
constexpr int kFixedTabs = 4;

QString describe(const QObject* o) {
    QString text;
    if (const auto* a = qobject_cast<const QAction*>(o)) {
        text = a->text();
    } else if (const auto* b = qobject_cast<const QAbstractButton*>(o)) {
        text = b->text();
    } else if (const auto* l = qobject_cast<const QLabel*>(o)) {
        text = l->text();
    } else if (const auto* g = qobject_cast<const QGroupBox*>(o)) {
        text = g->title();
    }
    return QStringLiteral("%1 \"%2\"")
        .arg(QString::fromLatin1(o->metaObject()->className()),
             text.isEmpty() ? o->objectName() : text);
}

// The letter Alt takes a widget to, if its text has one.
QString mnemonicOf(const QWidget* w) {
    QString text;
    if (const auto* b = qobject_cast<const QAbstractButton*>(w)) {
        text = b->text();
    } else if (const auto* l = qobject_cast<const QLabel*>(w); l && l->buddy()) {
        text = l->text();
    } else if (const auto* g = qobject_cast<const QGroupBox*>(w); g && g->isCheckable()) {
        text = g->title();
    }
    return QKeySequence::mnemonic(text).toString();
}

// Whether `w` and its ancestors up to `top` are shown (its page may be hidden behind another).
bool shownUnder(const QWidget* w, const QWidget* top) {
    for (; w && w != top; w = w->parentWidget()) {
        if (w->isHidden()) {
            return false;
        }
    }
    return w == top;
}

}  // namespace

class TstKeyboard : public QObject {
    Q_OBJECT

  private slots:
    void initTestCase();
    void shortcutsAreUnique();
    void pageMnemonicsAreTheirOwn();
    void controlsSayWhatTheyDo();
    void recentFilesHaveMnemonics();
    void tabShowsTheFieldItReaches();
    void tabWalksEachPageInOrder();
    void exportDialogTakesTabEscEnter();
    void sweepKeepsTheFocusOnItsPage();
    void presetListHasALetterOfItsOwn();
    void pageButtonsPressOnTheirLetter();
    void sweepChartReadsByKeys();

  private:
    std::unique_ptr<app::MainWindow> window_;
};

void TstKeyboard::initTestCase() {
    QCoreApplication::setOrganizationName("PipeScopeTest");
    QCoreApplication::setApplicationName("tst_keyboard");
    QSettings().clear();
    window_ = std::make_unique<app::MainWindow>(false);
    window_->resize(1280, 800);
    window_->show();
    QVERIFY(QTest::qWaitForWindowExposed(window_.get()));
    QTRY_VERIFY_WITH_TIMEOUT(window_->configPanel()->config().has_value(), 10000);
}

// A key pressed anywhere in the window does one thing: two actions (or an action and a button)
// on one key left Qt to pick one, or neither ("ambiguous shortcut"). A shortcut bound to one
// widget (a table's Ctrl+C) must not hide a window-wide one either. Every menu item has a
// mnemonic that no other item of its menu has.
void TstKeyboard::shortcutsAreUnique() {
    std::map<QString, QStringList> window_wide;
    std::map<QString, QStringList> widget_bound;
    for (const QAction* a : window_->findChildren<QAction*>()) {
        for (const QKeySequence& k : a->shortcuts()) {
            const bool wide = a->shortcutContext() == Qt::WindowShortcut ||
                              a->shortcutContext() == Qt::ApplicationShortcut;
            (wide ? window_wide : widget_bound)[k.toString()] << describe(a);
        }
    }
    for (const QAbstractButton* b : window_->findChildren<QAbstractButton*>()) {
        // A button's mnemonic is its shortcut too: pageMnemonicsAreTheirOwn checks those.
        if (!b->shortcut().isEmpty() && b->shortcut() != QKeySequence::mnemonic(b->text())) {
            window_wide[b->shortcut().toString()] << describe(b);
        }
    }
    QVERIFY(window_wide.size() > 20);
    for (const auto& [key, owners] : window_wide) {
        QVERIFY2(owners.size() == 1, qPrintable(key + ": " + owners.join(", ")));
    }
    for (const auto& [key, owners] : widget_bound) {
        QVERIFY2(!window_wide.count(key), qPrintable(key + ": " + owners.join(", ") + " hides " +
                                                     window_wide[key].join(", ")));
    }

    QSet<QString> titles;
    for (QAction* top : window_->menuBar()->actions()) {
        const QString title = QKeySequence::mnemonic(top->text()).toString();
        QVERIFY2(!title.isEmpty() && !titles.contains(title), qPrintable(describe(top)));
        titles << title;
        QSet<QString> letters;
        for (const QAction* a : top->menu()->actions()) {
            if (a->isSeparator()) {
                continue;
            }
            const QString letter = QKeySequence::mnemonic(a->text()).toString();
            QVERIFY2(!letter.isEmpty(), qPrintable(describe(a) + " has no mnemonic"));
            QVERIFY2(!letters.contains(letter),
                     qPrintable(describe(a) + ": " + letter + " twice in " + top->text()));
            letters << letter;
        }
    }
}

// On each page, Alt and a letter goes to one control: a letter two controls of a page share only
// moves the focus between them (a button is not pressed), and one the menu bar has (Alt+F, E, V,
// T, H) no longer opens its menu there. The config panel's fields, beside every page, may share
// a letter (docs/app.md), but not with the menu bar.
void TstKeyboard::pageMnemonicsAreTheirOwn() {
    QSet<QString> menus;
    for (QAction* top : window_->menuBar()->actions()) {
        menus << QKeySequence::mnemonic(top->text()).toString();
    }
    int fields = 0;
    for (const QLabel* label : window_->configPanel()->findChildren<QLabel*>()) {
        if (label->buddy()) {
            ++fields;
            const QString letter = mnemonicOf(label);
            QVERIFY2(!letter.isEmpty(), qPrintable(describe(label) + " has no mnemonic"));
            QVERIFY2(!menus.contains(letter),
                     qPrintable(describe(label) + " takes the menu bar's " + letter));
        }
    }
    QVERIFY(fields >= 20);
    int seen = 0;
    for (int i = 0; i < kFixedTabs; ++i) {
        window_->tabs()->setCurrentIndex(i);
        QWidget* page = window_->tabs()->widget(i);
        std::map<QString, QStringList> owners;
        for (QWidget* w : page->findChildren<QWidget*>()) {
            const QString letter = mnemonicOf(w);
            if (!letter.isEmpty() && shownUnder(w, page)) {
                owners[letter] << describe(w);
            }
        }
        seen += static_cast<int>(owners.size());
        for (const auto& [letter, list] : owners) {
            QVERIFY2(!menus.contains(letter),
                     qPrintable(window_->tabs()->tabText(i) + ": " + list.join(", ") +
                                " take the menu bar's " + letter));
            QVERIFY2(list.size() == 1, qPrintable(window_->tabs()->tabText(i) + ": " + letter +
                                                  " on " + list.join(", ")));
        }
    }
    QVERIFY(seen > 10);
    window_->tabs()->setCurrentIndex(0);
}

// Every control of the config panel and the pages says in its tooltip what it does, and a config
// field names the key it sets, its range and its unit.
void TstKeyboard::controlsSayWhatTheyDo() {
    QStringList silent;
    const auto check = [&](QWidget* top) {
        for (QWidget* w : top->findChildren<QWidget*>()) {
            const bool control = qobject_cast<QAbstractButton*>(w) ||
                                 qobject_cast<QAbstractSpinBox*>(w) ||
                                 qobject_cast<QComboBox*>(w) ||
                                 (qobject_cast<QLineEdit*>(w) &&
                                  !qobject_cast<QAbstractSpinBox*>(w->parentWidget()) &&
                                  !qobject_cast<QComboBox*>(w->parentWidget()));
            if (!control || !shownUnder(w, top) || qobject_cast<QTabBar*>(w->parentWidget())) {
                continue;
            }
            if (w->toolTip().isEmpty() && w->statusTip().isEmpty()) {
                silent << describe(w);
            }
        }
    };
    check(window_->configPanel());
    for (int i = 0; i < kFixedTabs; ++i) {
        window_->tabs()->setCurrentIndex(i);
        check(window_->tabs()->widget(i));
    }
    window_->tabs()->setCurrentIndex(0);
    QVERIFY2(silent.isEmpty(), qPrintable(silent.join(", ")));

    // A config field's tooltip ends with the key it sets and, for a number, its range; one
    // whose label has a unit ("Memory (GiB)", "P2P GB/s") says it in words as well.
    const QRegularExpression key(R"(\((model|parallel|hardware|costs)\.[a-z0-9_]+[;)])");
    const QRegularExpression unit(R"(\(([^)]+)\)$|(\S+/s)$)");
    int fields = 0;
    for (const QLabel* label : window_->configPanel()->findChildren<QLabel*>()) {
        const QWidget* field = label->buddy();
        if (!field || field->objectName() == "presets") {  // a list of configs, not a key
            continue;
        }
        ++fields;
        const QString tip = field->toolTip();
        QVERIFY2(key.match(tip).hasMatch(), qPrintable(label->text() + ": " + tip));
        if (qobject_cast<const QAbstractSpinBox*>(field)) {
            QVERIFY2(tip.contains(" to "), qPrintable(label->text() + ": " + tip));
        }
        const auto m = unit.match(QString(label->text()).remove('&'));
        if (m.hasMatch()) {
            const QString u = m.captured(1).isEmpty() ? m.captured(2) : m.captured(1);
            QVERIFY2(tip.contains("in " + u), qPrintable(label->text() + ": " + tip));
        }
    }
    QVERIFY(fields >= 20);
}

// File > Open recent: each entry numbered (Alt+1, ...), its path as it is, an "&" included.
void TstKeyboard::recentFilesHaveMnemonics() {
    QTemporaryDir dir;
    const QString odd = dir.filePath("naive & vocab-2.db");
    const QString plain = dir.filePath("run.db");
    for (const QString& p : {odd, plain}) {
        QFile f(p);
        QVERIFY(f.open(QIODevice::WriteOnly));
    }
    QSettings().setValue("recentFiles", QStringList{odd, plain});
    QMenu* recent = nullptr;
    for (QMenu* m : window_->menuBar()->findChildren<QMenu*>()) {
        if (m->title() == app::MainWindow::tr("Open &recent")) {
            recent = m;
        }
    }
    QVERIFY(recent);
    emit recent->aboutToShow();
    const QList<QAction*> entries = recent->actions();
    QCOMPARE(entries.size(), 2);
    QCOMPARE(QKeySequence::mnemonic(entries[0]->text()).toString(), QStringLiteral("Alt+1"));
    QCOMPARE(QKeySequence::mnemonic(entries[1]->text()).toString(), QStringLiteral("Alt+2"));
    QVERIFY2(entries[0]->text().contains("naive && vocab-2.db"), qPrintable(entries[0]->text()));
    QSettings().remove("recentFiles");
}

// Tab into the config panel from outside it (the preset list above, the pages after it) shows
// the field it lands on, wherever the panel was scrolled: typing went to a field out of sight.
void TstKeyboard::tabShowsTheFieldItReaches() {
    const QSize was = window_->size();
    window_->resize(1280, 640);  // the panel's fields scroll
    app::ConfigPanel* panel = window_->configPanel();
    auto* scroll = panel->findChild<QScrollArea*>();
    QVERIFY(scroll);
    QScrollBar* bar = scroll->verticalScrollBar();
    QTRY_VERIFY(bar->maximum() > 100);
    const auto inView = [scroll](const QWidget* w) {
        const QRect r(w->mapTo(scroll->viewport(), QPoint(0, 0)), w->size());
        return scroll->viewport()->rect().contains(r);
    };
    QWidget* first = panel->field("model.layers");
    QWidget* last = panel->field("costs.source");

    bar->setValue(bar->maximum());
    QVERIFY(!inView(first));
    auto* presets = panel->findChild<QComboBox*>("presets");
    presets->setFocus();
    QTRY_VERIFY(presets->hasFocus());
    QTest::keyClick(presets, Qt::Key_Tab);
    QTRY_VERIFY(first->hasFocus());
    QVERIFY2(inView(first), qPrintable(QString::number(bar->value())));

    bar->setValue(0);
    QVERIFY(!inView(last));
    QWidget* pages = window_->tabs()->tabBar();
    pages->setFocus();
    QTRY_VERIFY(pages->hasFocus());
    QTest::keyClick(pages, Qt::Key_Backtab);
    QTRY_VERIFY(last->hasFocus());
    QVERIFY2(inView(last), qPrintable(QString::number(bar->value())));
    window_->resize(was);
}

namespace {

// The controls Tab visits from `from`, in order, until it comes back there (at most `limit`).
QList<QWidget*> tabWalk(QWidget* from, int limit = 200) {
    from->setFocus(Qt::TabFocusReason);
    QList<QWidget*> walk;
    for (int i = 0; i < limit; ++i) {
        QWidget* f = QApplication::focusWidget();
        QTest::keyClick(f, Qt::Key_Tab);
        f = QApplication::focusWidget();
        if (!f || f == from) {
            break;
        }
        walk << f;
    }
    return walk;
}

}  // namespace

// Tab goes through the config fields as the form lists them, then the page tabs and each page's
// controls top to bottom, left to right within a row, and back to the first: no control is
// skipped, and none holds the focus.
void TstKeyboard::tabWalksEachPageInOrder() {
    app::ConfigPanel* panel = window_->configPanel();
    auto* presets = panel->findChild<QComboBox*>("presets");
    QList<QWidget*> fields;
    for (const QFormLayout* form : panel->findChildren<QFormLayout*>()) {
        for (int row = 0; row < form->rowCount(); ++row) {
            QLayoutItem* item = form->itemAt(row, QFormLayout::FieldRole);
            if (item && item->widget() && item->widget()->isEnabled()) {
                fields << item->widget();
            }
        }
    }
    QVERIFY(fields.size() >= 15);
    for (int i = 0; i < kFixedTabs; ++i) {
        window_->tabs()->setCurrentIndex(i);
        QWidget* page = window_->tabs()->widget(i);
        const QList<QWidget*> walk = tabWalk(presets);
        const QString name = window_->tabs()->tabText(i);
        QVERIFY2(walk.size() > fields.size() + 1, qPrintable(name));
        QCOMPARE(walk.mid(0, fields.size()), fields);
        QCOMPARE(walk.at(fields.size()), window_->tabs()->tabBar());
        // The page's part, in reading order.
        const QList<QWidget*> rest = walk.mid(fields.size() + 1);
        for (int k = 1; k < rest.size(); ++k) {
            const QRect a(rest[k - 1]->mapTo(page, QPoint(0, 0)), rest[k - 1]->size());
            const QRect b(rest[k]->mapTo(page, QPoint(0, 0)), rest[k]->size());
            const bool same_row = b.top() < a.bottom() && a.top() < b.bottom();
            QVERIFY2(
                same_row ? b.left() >= a.right() - 2 : b.top() >= a.top(),
                qPrintable(name + ": " + describe(rest[k - 1]) + " then " + describe(rest[k])));
        }
        // Every control of the page that takes the focus is on the way.
        for (QWidget* w : page->findChildren<QWidget*>()) {
            if ((w->focusPolicy() & Qt::TabFocus) && w->isEnabled() && shownUnder(w, page) &&
                !w->focusProxy() && !qobject_cast<QAbstractSpinBox*>(w->parentWidget()) &&
                !qobject_cast<QComboBox*>(w->parentWidget()) && w->isVisibleTo(page) &&
                !qobject_cast<QTabBar*>(w->parentWidget())) {
                QVERIFY2(rest.contains(w), qPrintable(name + ": " + describe(w) + " not reached"));
            }
        }
    }
    window_->tabs()->setCurrentIndex(0);
}

// The export dialog: Tab in the order shown, Esc cancels, Enter saves (its default button).
void TstKeyboard::exportDialogTakesTabEscEnter() {
    QTemporaryDir dir;
    const auto open = [&] {
        auto dialog =
            std::make_unique<app::ExportDialog>(600, QStringLiteral("chart"), window_.get());
        dialog->setPath(dir.filePath("chart.png"));
        dialog->show();
        dialog->activateWindow();
        return dialog;
    };
    auto dialog = open();
    QVERIFY(QTest::qWaitForWindowActive(dialog.get()));
    auto* path = dialog->findChild<QLineEdit*>();
    QTRY_VERIFY(path->hasFocus());
    const QList<QWidget*> walk = tabWalk(path, 20);
    QStringList names;
    for (QWidget* w : walk) {
        names << describe(w);
    }
    auto* buttons = dialog->findChild<QDialogButtonBox*>();
    const QList<QWidget*> expected = {dialog->findChild<QPushButton*>(),  // Browse…
                                      dialog->findChildren<QAbstractSpinBox*>().at(0),
                                      dialog->findChildren<QAbstractSpinBox*>().at(1),
                                      dialog->findChildren<QAbstractSpinBox*>().at(2),
                                      buttons->button(QDialogButtonBox::Save),
                                      buttons->button(QDialogButtonBox::Cancel)};
    QVERIFY2(walk.size() == expected.size(), qPrintable(names.join(", ")));
    for (int i = 0; i < walk.size(); ++i) {
        QVERIFY2(walk[i] == expected[i] || walk[i]->focusProxy() == expected[i] ||
                     walk[i]->parentWidget() == expected[i],
                 qPrintable(names.join(", ")));
    }
    QTest::keyClick(path, Qt::Key_Escape);
    QCOMPARE(dialog->result(), int(QDialog::Rejected));
    QVERIFY(!dialog->isVisible());

    dialog = open();
    QVERIFY(QTest::qWaitForWindowActive(dialog.get()));
    QWidget* height = dialog->findChildren<QAbstractSpinBox*>().at(1);  // Enter in a field
    height->setFocus();
    QTest::keyClick(height, Qt::Key_Return);
    QCOMPARE(dialog->result(), int(QDialog::Accepted));
}

// Run sweep pressed from the keyboard turns grey: the focus goes to Cancel, and back to Run
// when the sweep ends, not on past the page to the preset list (where Down loaded a preset).
void TstKeyboard::sweepKeepsTheFocusOnItsPage() {
    window_->tabs()->setCurrentIndex(2);
    app::SweepView* sweep = window_->sweep();
    QPushButton* run = nullptr;
    for (QPushButton* b : sweep->findChildren<QPushButton*>()) {
        run = b->text() == app::SweepView::tr("Run sweep") ? b : run;
    }
    QVERIFY(run);
    for (QLineEdit* e : sweep->findChildren<QLineEdit*>()) {
        if (!qobject_cast<QComboBox*>(e->parentWidget())) {
            e->setText("32000, 64000");
        }
    }
    QSignalSpy finished(sweep, &app::SweepView::finished);
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    run->setFocus();
    QTRY_VERIFY(run->hasFocus());
    QTest::keyClick(run, Qt::Key_Space);
    QVERIFY2(sweep->isAncestorOf(QApplication::focusWidget()),
             qPrintable(describe(QApplication::focusWidget())));
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QVERIFY2(QApplication::focusWidget() == run, qPrintable(describe(QApplication::focusWidget())));
    window_->tabs()->setCurrentIndex(0);
}

// The preset list is named (for a screen reader too) by a label whose letter nothing else in
// the window has, so Alt and the letter reaches it from any page.
void TstKeyboard::presetListHasALetterOfItsOwn() {
    auto* presets = window_->configPanel()->findChild<QComboBox*>("presets");
    QVERIFY(!presets->accessibleName().isEmpty());
    const QLabel* label = nullptr;
    for (const QLabel* l : window_->configPanel()->findChildren<QLabel*>()) {
        label = l->buddy() == presets ? l : label;
    }
    QVERIFY(label);
    const QString letter = mnemonicOf(label);
    QVERIFY2(!letter.isEmpty(), qPrintable(describe(label)));
    QStringList sharers;
    for (QAction* top : window_->menuBar()->actions()) {
        if (QKeySequence::mnemonic(top->text()).toString() == letter) {
            sharers << describe(top);
        }
    }
    for (const QWidget* w : window_->findChildren<QWidget*>()) {
        if (w != label && mnemonicOf(w) == letter) {
            sharers << describe(w);
        }
    }
    QVERIFY2(sharers.isEmpty(), qPrintable(letter + " is also " + sharers.join(", ")));

    for (int i = 0; i < kFixedTabs; ++i) {
        window_->tabs()->setCurrentIndex(i);
        window_->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(window_.get()));
        QWidget* from = window_->configPanel()->field("model.layers");
        from->setFocus();
        QTRY_VERIFY(from->hasFocus());
        const QKeyCombination key = QKeySequence::mnemonic(label->text())[0];
        QTest::keyClick(from, key.key(), key.keyboardModifiers());
        QVERIFY2(presets->hasFocus(), qPrintable(describe(QApplication::focusWidget())));
    }
    window_->tabs()->setCurrentIndex(0);
}

// Alt and a button's letter presses it while its page is shown, even where a config field has
// the letter too (Alt+R Run and First stage layers, Alt+C Cancel and Cost source, Alt+M Compare
// and Memory): once that only moved the focus between the two. Each button is enabled for the
// check (Cancel is only during a run) and pressed with its signals blocked.
void TstKeyboard::pageButtonsPressOnTheirLetter() {
    QSet<QString> fields;
    for (const QLabel* label : window_->configPanel()->findChildren<QLabel*>()) {
        fields << mnemonicOf(label);
    }
    int pressed = 0;
    int shared = 0;
    for (int i = 0; i < kFixedTabs; ++i) {
        window_->tabs()->setCurrentIndex(i);
        window_->activateWindow();
        QVERIFY(QTest::qWaitForWindowActive(window_.get()));
        QWidget* page = window_->tabs()->widget(i);
        for (QAbstractButton* b : page->findChildren<QAbstractButton*>()) {
            const QKeySequence letter = QKeySequence::mnemonic(b->text());
            if (letter.isEmpty() || !shownUnder(b, page)) {
                continue;
            }
            const bool enabled = b->isEnabled();
            b->setEnabled(true);
            b->blockSignals(true);
            QWidget* from = window_->configPanel()->field("model.layers");
            from->setFocus();
            QTRY_VERIFY(from->hasFocus());
            QTest::keyClick(from, letter[0].key(), letter[0].keyboardModifiers());
            const bool down = b->isDown();
            QTRY_VERIFY(!b->isDown());
            b->blockSignals(false);
            b->setEnabled(enabled);
            QVERIFY2(down, qPrintable(window_->tabs()->tabText(i) + ": " + letter.toString() +
                                      " did not press " + describe(b) + ", focus on " +
                                      describe(QApplication::focusWidget())));
            ++pressed;
            shared += fields.contains(letter.toString()) ? 1 : 0;
        }
    }
    QVERIFY(pressed >= 10);
    QVERIFY(shared >= 5);
    window_->tabs()->setCurrentIndex(0);
}

// The sweep chart's points, which the mouse reads by hovering, read from the keyboard too: Tab
// reaches the chart (its frame shows), Left and Right step through the values left to right,
// Home and End go to the ends, and every method's figures at the value show in a tooltip and
// the chart's accessible description.
void TstKeyboard::sweepChartReadsByKeys() {
    window_->tabs()->setCurrentIndex(2);
    app::SweepView* sweep = window_->sweep();
    for (QLineEdit* e : sweep->findChildren<QLineEdit*>()) {
        if (!qobject_cast<QComboBox*>(e->parentWidget())) {
            e->setText("64000, 32000, 128000");
        }
    }
    QSignalSpy finished(sweep, &app::SweepView::finished);
    sweep->run();
    QTRY_COMPARE_WITH_TIMEOUT(finished.count(), 1, 30000);
    QCustomPlot* plot = sweep->plot();
    QVERIFY(plot->focusPolicy() & Qt::TabFocus);
    window_->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(window_.get()));
    plot->setFocus(Qt::TabFocusReason);
    QTRY_VERIFY(plot->hasFocus());
    QVERIFY(app::focusRingOf(plot) && app::focusRingOf(plot)->isVisible());
    const auto reads = [&](const char* value) {
        const QString text = plot->accessibleDescription();
        const QString at = QStringLiteral(" = %1\n").arg(value);
        // One entry per method, each at the value.
        return text.count(at) == 5 && text.count(" = ") == 5 && QToolTip::text() == text;
    };
    QTest::keyClick(plot, Qt::Key_Right);  // the first value from the left
    QVERIFY2(reads("32000"), qPrintable(plot->accessibleDescription()));
    QTest::keyClick(plot, Qt::Key_Right);
    QVERIFY2(reads("64000"), qPrintable(plot->accessibleDescription()));
    QTest::keyClick(plot, Qt::Key_End);
    QVERIFY2(reads("128000"), qPrintable(plot->accessibleDescription()));
    QTest::keyClick(plot, Qt::Key_Right);  // stays at the last
    QVERIFY2(reads("128000"), qPrintable(plot->accessibleDescription()));
    QTest::keyClick(plot, Qt::Key_Home);
    QVERIFY2(reads("32000"), qPrintable(plot->accessibleDescription()));
    QVERIFY(plot->accessibleDescription().contains("MFU "));
    QToolTip::hideText();
    window_->tabs()->setCurrentIndex(0);
}

QTEST_MAIN(TstKeyboard)
#include "tst_keyboard.moc"
