// The main window for a user who works from the keyboard: no two actions share a shortcut, every
// menu item and every control of a page has a mnemonic of its own (not one the menu bar holds),
// every control says what it does, and Tab walks each page and dialog in the order it shows.

#include <map>
#include <set>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QDockWidget>
#include <QGroupBox>
#include <QLabel>
#include <QLineEdit>
#include <QMenu>
#include <QMenuBar>
#include <QRegularExpression>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QTabBar>
#include <QTemporaryDir>
#include <QtTest>

#include "config_panel.h"
#include "main_window.h"
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
        if (!field) {
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

QTEST_MAIN(TstKeyboard)
#include "tst_keyboard.moc"
