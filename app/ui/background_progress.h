// Progress of work on another thread: the worker writes how far it is and reads whether the user
// cancelled; a window-modal dialog on the GUI thread shows it (after 300 ms, so quick work shows
// nothing) with a Cancel button that stops the work itself, not just the wait.
#pragma once

#include <atomic>
#include <memory>

#include <QPointer>
#include <QProgressDialog>
#include <QString>

namespace pipescope::app {

struct BackgroundProgress {
    std::atomic<bool> cancelled{false};
    std::atomic<int> permille{0};
    // From this far on (0..1000) the work can no longer stop: the dialog drops its Cancel button
    // and shows `final_text` instead. Set both before the work starts.
    int uncancellable_from = 1001;
    QString final_text;
    // For the worker: records `done` (0..1); false once the user cancelled.
    bool report(double done) {
        permille = static_cast<int>(done * 1000);
        return !cancelled;
    }
};

// The progress of a job that builds the trace `output` (a merge, an import): cancellable until
// `writing_from` (0..1, the interop library's k*WritingFrom), from where the output's indexes are
// written and the dialog says so.
std::shared_ptr<BackgroundProgress> traceWritingProgress(double writing_from,
                                                         const QString& output);

// The dialog for `progress`, showing `text`; close it with closeBackgroundProgress when the work
// is done.
QPointer<QProgressDialog> showBackgroundProgress(
    QWidget* parent, const QString& text, const std::shared_ptr<BackgroundProgress>& progress);

// Removes the dialog at once, before anything that follows opens a message box: a dialog left for
// deleteLater would still be shown by its timers inside that box's event loop, over it.
void closeBackgroundProgress(const QPointer<QProgressDialog>& dialog);

}  // namespace pipescope::app
