#include "background_progress.h"

#include <QFileInfo>
#include <QProgressBar>
#include <QTimer>

namespace pipescope::app {

std::shared_ptr<BackgroundProgress> traceWritingProgress(double writing_from,
                                                         const QString& output) {
    auto progress = std::make_shared<BackgroundProgress>();
    progress->uncancellable_from = static_cast<int>(writing_from * 1000) + 1;
    progress->final_text = QProgressDialog::tr("Writing %1: its indexes and summary levels…")
                               .arg(QFileInfo(output).fileName());
    return progress;
}

QPointer<QProgressDialog> showBackgroundProgress(
    QWidget* parent, const QString& text, const std::shared_ptr<BackgroundProgress>& progress) {
    QPointer<QProgressDialog> dialog =
        new QProgressDialog(text, QProgressDialog::tr("Cancel"), 0, 1000, parent);
    dialog->setMinimumDuration(300);
    dialog->setWindowModality(Qt::WindowModal);
    dialog->setAutoReset(false);
    dialog->setValue(0);
    QObject::connect(dialog, &QProgressDialog::canceled, dialog,
                     [progress] { progress->cancelled = true; });
    // A window closed while the work runs takes the dialog with it: the work stops too, rather
    // than keep the program alive with nobody to show its result to.
    if (parent != nullptr) {
        QObject::connect(parent, &QObject::destroyed,
                         [weak = std::weak_ptr<BackgroundProgress>(progress)] {
                             if (const auto p = weak.lock()) {
                                 p->cancelled = true;
                             }
                         });
    }
    // The worker only writes numbers; the dialog's own timer brings them to the screen. It sets
    // the bar, not the dialog's value: QProgressDialog::setValue on a shown modal dialog
    // processes events, and among them can be the worker's finished signal, whose handler
    // deletes the dialog while setValue still runs on it.
    auto* bar = dialog->findChild<QProgressBar*>();
    auto* timer = new QTimer(dialog);
    QObject::connect(
        timer, &QTimer::timeout, dialog, [dialog, bar, progress, final_shown = false]() mutable {
            const int done = progress->permille.load();
            if (done >= progress->uncancellable_from && !progress->cancelled && !final_shown) {
                final_shown = true;
                dialog->setCancelButton(nullptr);  // shown no more once it cannot stop the work
                if (!progress->final_text.isEmpty()) {
                    dialog->setLabelText(progress->final_text);
                }
            }
            bar->setValue(done);
        });
    timer->start(100);
    return dialog;
}

void closeBackgroundProgress(const QPointer<QProgressDialog>& dialog) {
    // The callers run on their worker's finished signal, never inside the dialog's own code:
    // its timer sets the bar, which processes no events.
    delete dialog.data();
}

}  // namespace pipescope::app
