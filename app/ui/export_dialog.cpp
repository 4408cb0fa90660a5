#include "export_dialog.h"

#include <initializer_list>

#include <QDialogButtonBox>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLineEdit>
#include <QMessageBox>
#include <QPushButton>
#include <QSettings>

#include <pipescope/app/runner_process.h>

#include "text_tone.h"

namespace pipescope::app {

namespace {

// The limits chart_export enforces, so the dialog never offers what the export refuses.
constexpr double kMaxMegapixels = static_cast<double>(kExportMaxPngPixels) / 1e6;

}  // namespace

ExportDialog::ExportDialog(int default_height, const QString& stem, QWidget* parent)
    : QDialog(parent) {
    setWindowTitle(tr("Export chart"));
    QSettings settings;
    auto* form = new QFormLayout;

    path_ = new QLineEdit;
    const QString dir = settings.value(QStringLiteral("export/dir"), QDir::homePath()).toString();
    const QString suffix = settings.value(QStringLiteral("export/suffix"), "png").toString();
    // A new name each time: two exports in a row never silently share a file.
    path_->setText(uniquePath(QDir(dir), safeFileStem(stem), {QLatin1Char('.') + suffix}));
    path_->setToolTip(tr("The file's suffix picks the format: .png, .svg or .pdf"));
    path_->setMinimumWidth(420);  // a folder and a name, readable without scrolling
    auto* browse = new QPushButton(tr("&Browse…"));
    browse->setToolTip(tr("Choose the file in a file dialog"));
    auto* file_row = new QHBoxLayout;
    file_row->addWidget(path_, 1);
    file_row->addWidget(browse);
    auto* file_label = new QLabel(tr("&File:"));
    file_label->setBuddy(path_);  // a row of two widgets has no buddy of its own
    form->addRow(file_label, file_row);

    width_ = new QSpinBox;
    width_->setRange(kExportMinSide, kExportMaxSide);
    width_->setSuffix(tr(" px"));
    width_->setValue(settings.value(QStringLiteral("export/width"), 1600).toInt());
    width_->setToolTip(
        tr("Logical pixels (96 per inch), %1 to %2").arg(kExportMinSide).arg(kExportMaxSide));
    form->addRow(tr("&Width:"), width_);

    height_ = new QSpinBox;
    height_->setRange(kExportMinSide, kExportMaxSide);
    height_->setSuffix(tr(" px"));
    height_->setValue(default_height);
    height_->setToolTip(width_->toolTip());
    form->addRow(tr("&Height:"), height_);

    dpi_ = new QDoubleSpinBox;
    dpi_->setRange(kExportMinDpi, kExportMaxDpi);
    dpi_->setDecimals(0);
    dpi_->setValue(settings.value(QStringLiteral("export/dpi"), 192).toDouble());
    dpi_->setToolTip(
        tr("PNG only: 96 is screen size, 192 twice the pixels, 300 or 600 for "
           "print. SVG and PDF are vector drawings."));
    form->addRow(tr("&Resolution (dpi):"), dpi_);

    result_ = new QLabel;
    result_->setWordWrap(true);
    form->addRow(result_);

    buttons_ = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel);
    auto* layout = new QVBoxLayout(this);
    layout->addLayout(form);
    layout->addWidget(buttons_);

    connect(browse, &QPushButton::clicked, this, &ExportDialog::browse);
    connect(buttons_, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons_, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(path_, &QLineEdit::textChanged, this, &ExportDialog::update);
    connect(width_, &QSpinBox::valueChanged, this, &ExportDialog::update);
    connect(height_, &QSpinBox::valueChanged, this, &ExportDialog::update);
    connect(dpi_, &QDoubleSpinBox::valueChanged, this, &ExportDialog::update);
    // What is typed, before it is a value: a size under the minimum is no value yet, and the
    // spin boxes say nothing of it (their textChanged waits for a value).
    for (QAbstractSpinBox* box : std::initializer_list<QAbstractSpinBox*>{width_, height_, dpi_}) {
        connect(box->findChild<QLineEdit*>(), &QLineEdit::textChanged, this, &ExportDialog::update);
    }
    update();
}

ExportOptions ExportDialog::options() const {
    ExportOptions o;
    o.width = width_->value();
    o.height = height_->value();
    o.dpi = dpi_->value();
    return o;
}

void ExportDialog::remember() const {
    QSettings settings;
    const QFileInfo info(path());
    settings.setValue(QStringLiteral("export/dir"), info.absolutePath());
    settings.setValue(QStringLiteral("export/suffix"), info.suffix().toLower());
    settings.setValue(QStringLiteral("export/width"), width_->value());
    settings.setValue(QStringLiteral("export/dpi"), dpi_->value());
}

void ExportDialog::browse() {
    const QString chosen =
        QFileDialog::getSaveFileName(this, tr("Export chart"), path(), exportFileFilter());
    if (!chosen.isEmpty()) {
        path_->setText(chosen);
        confirmed_ = chosen;
    }
}

void ExportDialog::accept() {
    const QString target = path();
    if (QFileInfo::exists(target) && target != confirmed_ &&
        QMessageBox::question(this, windowTitle(),
                              tr("%1 already exists. Replace it?").arg(target)) !=
            QMessageBox::Yes) {
        return;
    }
    QDialog::accept();
}

// What the file will be, or why it cannot be written; Save is off while it cannot.
void ExportDialog::update() {
    const auto format = formatForPath(path());
    QString text;
    bool ok = format.has_value();
    dpi_->setEnabled(format == ExportFormat::Png);
    if (!format) {
        text =
            tr("Unknown file type \"%1\": use .png, .svg or .pdf.").arg(QFileInfo(path()).suffix());
    } else if (!width_->hasAcceptableInput() || !height_->hasAcceptableInput()) {
        // Typed under the minimum (10 px): Save would have put the last value back and written
        // the file at a size the dialog no longer showed.
        ok = false;
        text = tr("The width and height are %1 to %2 px.").arg(kExportMinSide).arg(kExportMaxSide);
    } else if (*format == ExportFormat::Png && !dpi_->hasAcceptableInput()) {
        ok = false;
        text = tr("The resolution is %1 to %2 dpi.").arg(kExportMinDpi).arg(kExportMaxDpi);
    } else if (*format == ExportFormat::Png) {
        const double scale = dpi_->value() / 96.0;
        const double w = width_->value() * scale;
        const double h = height_->value() * scale;
        const double mp = w * h / 1e6;
        ok = mp <= kMaxMegapixels;
        text = ok ? tr("PNG of %1 × %2 pixels (%3 MP) at %4 dpi.")
                        .arg(qRound(w))
                        .arg(qRound(h))
                        .arg(mp, 0, 'f', 1)
                        .arg(dpi_->value())
                  : tr("%1 × %2 pixels is %3 MP, over the %4 MP limit: lower the size or the "
                       "resolution.")
                        .arg(qRound(w))
                        .arg(qRound(h))
                        .arg(mp, 0, 'f', 0)
                        .arg(kMaxMegapixels);
    } else {
        text =
            tr("%1 vector drawing of %2 × %3 px; text stays text.")
                .arg(*format == ExportFormat::Svg ? QStringLiteral("SVG") : QStringLiteral("PDF"))
                .arg(width_->value())
                .arg(height_->value());
    }
    result_->setText(text);
    if (ok) {
        clearTone(result_);
    } else {
        setTone(result_, Tone::Error);
    }
    buttons_->button(QDialogButtonBox::Save)->setEnabled(ok);
}

}  // namespace pipescope::app
