#include "text_tone.h"

#include <algorithm>
#include <cmath>

#include <QWidget>

namespace pipescope::app {

namespace {

// `a` with `share` of `b` mixed in.
QColor blend(const QColor& a, const QColor& b, double share) {
    return QColor::fromRgbF(static_cast<float>(a.redF() * (1 - share) + b.redF() * share),
                            static_cast<float>(a.greenF() * (1 - share) + b.greenF() * share),
                            static_cast<float>(a.blueF() * (1 - share) + b.blueF() * share));
}

}  // namespace

double relativeLuminance(const QColor& color) {
    const auto linear = [](double v) {
        return v <= 0.03928 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * linear(color.redF()) + 0.7152 * linear(color.greenF()) +
           0.0722 * linear(color.blueF());
}

double contrastRatio(const QColor& a, const QColor& b) {
    const double la = relativeLuminance(a);
    const double lb = relativeLuminance(b);
    return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

bool isDark(const QPalette& palette) {
    return palette.color(QPalette::Window).lightness() < 128;
}

QColor toneColor(Tone tone, const QPalette& palette) {
    const bool dark = isDark(palette);
    switch (tone) {
        case Tone::Error:
            return dark ? QColor(0xff, 0x8a, 0x80) : QColor(0xc6, 0x28, 0x28);
        case Tone::Warning:
            return dark ? QColor(0xff, 0xcc, 0x80) : QColor(0x8a, 0x5a, 0x00);
        case Tone::Good:
            return dark ? QColor(0x81, 0xc9, 0x95) : QColor(0x17, 0x6d, 0x30);
        case Tone::Muted:
            return blend(palette.color(QPalette::WindowText), palette.color(QPalette::Window),
                         0.35);
    }
    return palette.color(QPalette::WindowText);
}

void setTone(QWidget* widget, Tone tone) {
    QPalette palette = widget->palette();
    const QColor color = toneColor(tone, palette);
    palette.setColor(QPalette::WindowText, color);
    palette.setColor(QPalette::Text, color);
    widget->setPalette(palette);
}

void clearTone(QWidget* widget) {
    QPalette palette = widget->palette();
    const QPalette inherited =
        widget->parentWidget() ? widget->parentWidget()->palette() : QPalette();
    palette.setColor(QPalette::WindowText, inherited.color(QPalette::WindowText));
    palette.setColor(QPalette::Text, inherited.color(QPalette::Text));
    widget->setPalette(palette);
}

void markInvalid(QWidget* field, bool invalid) {
    if (field->property("invalid").toBool() == invalid) {
        return;
    }
    field->setProperty("invalid", invalid);
    const QPalette inherited =
        field->parentWidget() ? field->parentWidget()->palette() : QPalette();
    QPalette palette = field->palette();
    for (const QPalette::ColorRole role : {QPalette::Base, QPalette::Button}) {
        const QColor plain = inherited.color(role);
        palette.setColor(role,
                         invalid ? blend(plain, toneColor(Tone::Error, inherited), 0.3) : plain);
    }
    field->setPalette(palette);
}

}  // namespace pipescope::app
