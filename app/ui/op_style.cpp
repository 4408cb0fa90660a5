#include "op_style.h"

#include <cmath>

#include <QFontMetricsF>
#include <QObject>
#include <QStringList>

#include <pipescope/app/time_axis.h>
#include <pipescope/app/units.h>

#include "text_tone.h"

namespace pipescope::app {

using trace::Lane;
using trace::OpKind;

std::optional<QFont> labelFontFor(const QFont& base, double band_px) {
    if (QFontMetricsF(base).height() < band_px) {
        return base;
    }
    constexpr int kSmallestPx = 7;
    QFont small = base;
    for (int px = static_cast<int>(std::floor(band_px)); px >= kSmallestPx; --px) {
        small.setPixelSize(px);
        if (QFontMetricsF(small).height() < band_px) {
            return small;
        }
    }
    return std::nullopt;
}

QColor opKindColor(OpKind kind) {
    switch (kind) {
        case OpKind::F:
            return QColor(0x42, 0x85, 0xf4);
        case OpKind::B:
            return QColor(0x34, 0xa8, 0x53);
        case OpKind::W:
            return QColor(0x00, 0x96, 0x88);
        case OpKind::IF:
            return QColor(0x9c, 0x6a, 0xde);
        case OpKind::IB:
            return QColor(0x6a, 0x3d, 0x9a);
        case OpKind::S:
            return QColor(0xf5, 0x9e, 0x0b);
        case OpKind::T:
            return QColor(0xe8, 0x59, 0x0c);
        case OpKind::L:
            return QColor(0x8d, 0x5b, 0x4c);
        case OpKind::SendF:
        case OpKind::SendB:
            return QColor(0x78, 0x90, 0x9c);
        case OpKind::RecvF:
        case OpKind::RecvB:
            return QColor(0xa7, 0xb6, 0xc2);
        case OpKind::Bcast:
            return QColor(0xd8, 0x1b, 0x60);
        case OpKind::AllReduce:
            return QColor(0xc6, 0x28, 0x28);
        case OpKind::Opt:
            return QColor(0x42, 0x42, 0x42);
    }
    return Qt::black;
}

QColor labelColorOn(const QColor& fill) {
    // Where white and black give the same contrast: (1.05 / (L + 0.05)) = ((L + 0.05) / 0.05).
    return relativeLuminance(fill) > 0.179 ? QColor(Qt::black) : QColor(Qt::white);
}

QString opKindDescription(OpKind kind) {
    const QString code = QString::fromUtf8(trace::toString(kind).data(),
                                           static_cast<qsizetype>(trace::toString(kind).size()));
    QString what;
    switch (kind) {
        case OpKind::F:
            what = QObject::tr("forward");
            break;
        case OpKind::B:
            what = QObject::tr("backward");
            break;
        case OpKind::W:
            what = QObject::tr("weight gradient");
            break;
        case OpKind::IF:
            what = QObject::tr("input layer forward");
            break;
        case OpKind::IB:
            what = QObject::tr("input layer backward");
            break;
        case OpKind::S:
            what = QObject::tr("output layer pass S");
            break;
        case OpKind::T:
            what = QObject::tr("output layer pass T");
            break;
        case OpKind::L:
            what = QObject::tr("loss");
            break;
        case OpKind::SendF:
            what = QObject::tr("send activation");
            break;
        case OpKind::RecvF:
            what = QObject::tr("receive activation");
            break;
        case OpKind::SendB:
            what = QObject::tr("send gradient");
            break;
        case OpKind::RecvB:
            what = QObject::tr("receive gradient");
            break;
        case OpKind::Bcast:
            what = QObject::tr("broadcast");
            break;
        case OpKind::AllReduce:
            what = QObject::tr("all-reduce");
            break;
        case OpKind::Opt:
            what = QObject::tr("optimizer step");
            break;
    }
    return QStringLiteral("%1 (%2)").arg(what, code);
}

QString opTooltip(const RunData& run, const trace::OpRecord& op) {
    QStringList lines;
    lines << QStringLiteral("<b>%1</b> — %2")
                 .arg(QString::fromStdString(opLabel(op)).toHtmlEscaped(),
                      opKindDescription(op.kind));
    lines << QObject::tr("rank %1 (stages %2), %3 lane")
                 .arg(op.rank)
                 .arg(QString::fromStdString(run.rankStages(op.rank)))
                 .arg(op.lane == Lane::Compute ? QObject::tr("compute")
                      : op.lane == Lane::Comm  ? QObject::tr("comm")
                                               : QObject::tr("gpu"));
    if (op.microbatch >= 0) {
        lines << QObject::tr("micro-batch %1%2")
                     .arg(op.microbatch)
                     .arg(op.chunk > 0 ? QObject::tr(", chunk %1").arg(op.chunk) : QString());
    }
    lines << QObject::tr("start %1, duration %2")
                 .arg(formatDuration(static_cast<double>(op.start_ns)),
                      formatDuration(static_cast<double>(op.duration())));
    if (op.bytes >= 0) {
        lines << QObject::tr("%1 MB moved").arg(static_cast<double>(op.bytes) / 1e6, 0, 'f', 2);
    }
    if (op.iteration > 0 || run.stats().iterations.size() > 1) {
        lines << QObject::tr("iteration %1, op %2 of the rank's list")
                     .arg(op.iteration)
                     .arg(op.op_index);
    } else {
        lines << QObject::tr("op %1 of the rank's list").arg(op.op_index);
    }
    return lines.join(QStringLiteral("<br>"));
}

}  // namespace pipescope::app
