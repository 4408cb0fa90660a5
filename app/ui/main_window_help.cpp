// The main window's help: the keyboard shortcuts, read from the menus so the list cannot miss
// one.
#include <QDialog>
#include <QDialogButtonBox>
#include <QMenu>
#include <QMenuBar>
#include <QScreen>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "main_window.h"

namespace pipescope::app {

std::vector<std::pair<QAction*, QAction*>> MainWindow::menuShortcuts() const {
    std::vector<std::pair<QAction*, QAction*>> out;
    for (QAction* top : menuBar()->actions()) {
        for (QAction* a : top->menu() ? top->menu()->actions() : QList<QAction*>{}) {
            if (!a->shortcuts().isEmpty()) {
                out.emplace_back(top, a);
            }
        }
    }
    return out;
}

void MainWindow::showShortcuts() {
    // The menus' shortcuts as the menus have them, so the list cannot miss one.
    QString menus;
    for (const auto& [menu, a] : menuShortcuts()) {
        QStringList keys;
        for (const QKeySequence& k : a->shortcuts()) {
            keys << k.toString(QKeySequence::NativeText).toHtmlEscaped();
        }
        menus += QStringLiteral("<tr><td><b>%1</b></td><td>%2 (%3)</td></tr>")
                     .arg(keys.join(QStringLiteral(" / ")),
                          a->text().remove(QLatin1Char('&')).remove(QStringLiteral("…")),
                          menu->text().remove(QLatin1Char('&')));
    }
    const QString text =
        tr("<p>In a chart (Tab to it, or click it; a frame shows it has the keys):</p><table>"
           "<tr><td><b>W / S</b> (+ / −)</td><td>zoom in / out</td></tr>"
           "<tr><td><b>A / D</b> (← / →)</td><td>pan left / right</td></tr>"
           "<tr><td><b>F</b></td><td>fit the selected op or range</td></tr>"
           "<tr><td><b>0</b> (Home)</td><td>fit the whole run</td></tr>"
           "<tr><td><b>] / [</b></td><td>select the next / previous op of the lane (the first: "
           "the op in the middle of the view on the first rank)</td></tr>"
           "<tr><td><b>↓ / ↑</b></td><td>select the op at the same time on the next / "
           "previous rank</td></tr>"
           "<tr><td><b>Esc</b></td><td>clear the selection</td></tr>"
           "<tr><td><b>wheel</b></td><td>zoom around the pointer</td></tr>"
           "<tr><td><b>drag</b></td><td>select a time range and show its statistics</td></tr>"
           "<tr><td><b>click</b></td><td>select an op, outline what it waits for and "
           "highlight its micro-batch on every rank</td></tr>"
           "<tr><td><b>M</b></td><td>highlight the selected op's micro-batch, or not</td></tr>"
           "<tr><td><b>C</b></td><td>highlight the critical path of the selected op's "
           "iteration (or the one in view) and say what it is spent on</td></tr>"
           "<tr><td><b>Ctrl+C</b></td><td>in a table: copy the selected cells (or the whole "
           "table) with their headers, for a spreadsheet</td></tr>"
           "<tr><td><b>Ctrl+Enter</b></td><td>on the Sweep page: run the sweep</td></tr>"
           "</table><p>Anywhere in the window (Ctrl+Z in a field with text typed in it undoes "
           "the typing first):</p><table>%1</table>")
            .arg(menus);
    // A dialog that scrolls: at 200% scaling the list is taller than a laptop's screen, and a
    // message box would put its button below it.
    QDialog dialog(this);
    dialog.setWindowTitle(tr("Keyboard shortcuts"));
    auto* layout = new QVBoxLayout(&dialog);
    auto* browser = new QTextBrowser;
    browser->setObjectName(QStringLiteral("shortcuts"));
    browser->setHtml(text);
    browser->setFrameShape(QFrame::NoFrame);
    layout->addWidget(browser, 1);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
    connect(buttons, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
    layout->addWidget(buttons);
    // As tall as the list, up to most of the screen; then it scrolls.
    browser->document()->setTextWidth(560);
    const QRect screen = this->screen()->availableGeometry();
    const int height = static_cast<int>(browser->document()->size().height()) + 80;
    dialog.resize(std::min(620, screen.width() * 9 / 10),
                  std::min(height, screen.height() * 4 / 5));
    dialog.exec();
}

}  // namespace pipescope::app
