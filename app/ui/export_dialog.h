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
    // `default_height`: what suits the current tab (a stack of charts is taller).
    explicit ExportDialog(int default_height, QWidget* parent = nullptr);

    QString path() const { return path_->text().trimmed(); }
    ExportOptions options() const;
    void setPath(const QString& path) { path_->setText(path); }

    // Stores the choices for next time (called on accept).
    void remember() const;

  private:
    void browse();
    void update();

    QLineEdit* path_;
    QSpinBox* width_;
    QSpinBox* height_;
    QDoubleSpinBox* dpi_;
    QLabel* result_;
    QDialogButtonBox* buttons_;
};

}  // namespace pipescope::app
