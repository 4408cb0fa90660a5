#include "background_progress.h"

#include <QTimer>

namespace pipescope::app {

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
    // The worker only writes numbers; the dialog's own timer brings them to the screen.
    auto* timer = new QTimer(dialog);
    QObject::connect(timer, &QTimer::timeout, dialog,
                     [dialog, progress] { dialog->setValue(progress->permille.load()); });
    timer->start(100);
    return dialog;
}

}  // namespace pipescope::app
