// The chart export dialog: the file (its suffix picks PNG, SVG or PDF), the size in logical
// pixels and, for PNG, the resolution. The last choices are remembered.
#pragma once

#include <QDialog>
#include <QDialogButtonBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QLineEdit>
#include <QSpinBox>

#include "chart_export.h"

namespace pipescope::app {

class ExportDialog : public QDialog {
    Q_OBJECT

  public:
    // `default_height`: what suits the current tab (a stack of charts is taller). `stem`: the
    // file name the chart suggests ("Default-4-stages-explore"), in the last export's folder
    // with the last format, numbered so that it names no existing file.
    explicit ExportDialog(int default_height, const QString& stem = QStringLiteral("pipescope"),
                          QWidget* parent = nullptr);

    QString path() const { return path_->text().trimmed(); }
    ExportOptions options() const;
    void setPath(const QString& path) { path_->setText(path); }

    // Stores the choices for next time (called on accept).
    void remember() const;

    // Save asks before replacing a file typed in the path (Browse… has asked already).
    void accept() override;

  private:
    void browse();
    void update();

    QLineEdit* path_;
    QSpinBox* width_;
    QSpinBox* height_;
    QDoubleSpinBox* dpi_;
    QLabel* result_;
    QDialogButtonBox* buttons_;
    QString confirmed_;  // the path whose replacement the file dialog confirmed
};

}  // namespace pipescope::app
