#include "clipping_device.h"

#include <algorithm>
#include <cmath>

#include <QImage>
#include <QPaintEngine>
#include <QPainterPath>
#include <QPainterPathStroker>

namespace pipescope::app {

// QSvgGenerator of Qt before 6.7 ignores clipping, so a zoomed graph or timeline would spill over
// the axes into the margins. This engine clips on its own and hands the result to a painter on
// the generator: what lies inside the clip goes through as drawn (text stays text), what lies
// outside is dropped, and a shape cut by the clip is sent as the filled outline of its visible
// part (pixmaps and images are cropped).
class ClippingEngine final : public QPaintEngine {
  public:
    explicit ClippingEngine(QPainter& out) : QPaintEngine(QPaintEngine::AllFeatures), out_(out) {}

    bool begin(QPaintDevice* /*device*/) override { return true; }
    bool end() override { return true; }
    Type type() const override { return QPaintEngine::User; }

    void updateState(const QPaintEngineState& new_state) override {
        const QPaintEngine::DirtyFlags flags = new_state.state();
        if (flags & DirtyPen) {
            out_.setPen(new_state.pen());
        }
        if (flags & DirtyBrush) {
            out_.setBrush(new_state.brush());
        }
        if (flags & DirtyBrushOrigin) {
            out_.setBrushOrigin(new_state.brushOrigin());
        }
        if (flags & DirtyFont) {
            out_.setFont(new_state.font());
        }
        if (flags & DirtyBackground) {
            out_.setBackground(new_state.backgroundBrush());
        }
        if (flags & DirtyBackgroundMode) {
            out_.setBackgroundMode(new_state.backgroundMode());
        }
        if (flags & DirtyTransform) {
            out_.setTransform(new_state.transform());
        }
        if (flags & DirtyHints) {
            out_.setRenderHints(out_.renderHints(), false);
            out_.setRenderHints(new_state.renderHints(), true);
        }
        if (flags & DirtyCompositionMode) {
            out_.setCompositionMode(new_state.compositionMode());
        }
        if (flags & DirtyOpacity) {
            out_.setOpacity(new_state.opacity());
        }
        if (flags & (DirtyClipPath | DirtyClipRegion | DirtyClipEnabled | DirtyTransform)) {
            clip_dirty_ = true;
        }
    }

    using QPaintEngine::drawEllipse;
    using QPaintEngine::drawLines;
    using QPaintEngine::drawPoints;
    using QPaintEngine::drawPolygon;
    using QPaintEngine::drawRects;

    void drawPath(const QPainterPath& path) override {
        switch (fit(path.controlPointRect(), penMargin())) {
            case Fit::Inside:
                out_.drawPath(path);
                break;
            case Fit::Partial:
                drawCut(path, true);
                break;
            case Fit::Outside:
                break;
        }
    }

    void drawPolygon(const QPointF* points, int count, PolygonDrawMode mode) override {
        const QPolygonF polygon(QList<QPointF>(points, points + count));
        switch (fit(polygon.boundingRect(), penMargin())) {
            case Fit::Inside:
                if (mode == PolylineMode) {
                    out_.drawPolyline(polygon);
                } else {
                    out_.drawPolygon(polygon,
                                     mode == WindingMode ? Qt::WindingFill : Qt::OddEvenFill);
                }
                break;
            case Fit::Partial: {
                QPainterPath path;
                path.addPolygon(polygon);
                if (mode != PolylineMode) {
                    path.closeSubpath();
                    path.setFillRule(mode == WindingMode ? Qt::WindingFill : Qt::OddEvenFill);
                }
                drawCut(path, mode != PolylineMode);
                break;
            }
            case Fit::Outside:
                break;
        }
    }

    void drawRects(const QRectF* rects, int count) override {
        const double margin = penMargin();
        QList<QRectF> inside;
        for (int i = 0; i < count; ++i) {
            switch (fit(rects[i], margin)) {
                case Fit::Inside:
                    inside.push_back(rects[i]);
                    break;
                case Fit::Partial: {
                    QPainterPath path;
                    path.addRect(rects[i]);
                    drawCut(path, true);
                    break;
                }
                case Fit::Outside:
                    break;
            }
        }
        if (!inside.isEmpty()) {
            out_.drawRects(inside.constData(), static_cast<int>(inside.size()));
        }
    }

    void drawLines(const QLineF* lines, int count) override {
        const double margin = penMargin();
        QList<QLineF> inside;
        for (int i = 0; i < count; ++i) {
            switch (fit(QRectF(lines[i].p1(), lines[i].p2()).normalized(), margin)) {
                case Fit::Inside:
                    inside.push_back(lines[i]);
                    break;
                case Fit::Partial: {
                    QPainterPath path(lines[i].p1());
                    path.lineTo(lines[i].p2());
                    drawCut(path, false);
                    break;
                }
                case Fit::Outside:
                    break;
            }
        }
        if (!inside.isEmpty()) {
            out_.drawLines(inside.constData(), static_cast<int>(inside.size()));
        }
    }

    void drawEllipse(const QRectF& rect) override {
        QPainterPath path;
        path.addEllipse(rect);
        drawPath(path);
    }

    void drawPoints(const QPointF* points, int count) override {
        const double margin = penMargin();
        QList<QPointF> kept;
        for (int i = 0; i < count; ++i) {
            if (fit(QRectF(points[i], QSizeF(0, 0)), margin) != Fit::Outside) {
                kept.push_back(points[i]);
            }
        }
        if (!kept.isEmpty()) {
            out_.drawPoints(kept.constData(), static_cast<int>(kept.size()));
        }
    }

    void drawTextItem(const QPointF& p, const QTextItem& item) override {
        const QRectF bounds(p.x(), p.y() - item.ascent(), item.width(),
                            item.ascent() + item.descent());
        // Glyphs rarely reach the edges of their line box, and a label's clip is often exactly
        // that box: text whose box is cut only at its rim goes through whole, as text.
        const double rim = 0.25 * std::min(bounds.width(), bounds.height());
        switch (fit(bounds, -rim)) {
            case Fit::Inside:
                out_.drawText(p, item.text());
                break;
            case Fit::Partial: {
                QPainterPath path;
                path.addText(p, item.font(), item.text());
                out_.fillPath(path.intersected(clip_), out_.pen().brush());
                break;
            }
            case Fit::Outside:
                break;
        }
    }

    void drawPixmap(const QRectF& r, const QPixmap& pixmap, const QRectF& sr) override {
        QRectF target = r;
        QRectF source = sr;
        if (crop(target, source)) {
            out_.drawPixmap(target, pixmap, source);
        }
    }

    void drawImage(const QRectF& r, const QImage& image, const QRectF& sr,
                   Qt::ImageConversionFlags flags) override {
        QRectF target = r;
        QRectF source = sr;
        if (crop(target, source)) {
            out_.drawImage(target, image, source, flags);
        }
    }

  private:
    enum class Fit { Inside, Partial, Outside };

    void updateClip() {
        if (!clip_dirty_) {
            return;
        }
        clip_dirty_ = false;
        const QPainter* p = painter();
        clipping_ = p != nullptr && p->hasClipping();
        clip_ = clipping_ ? p->clipPath() : QPainterPath();
        clip_rect_ = clip_.boundingRect();
        QPainterPath rect;
        rect.addRect(clip_rect_);
        clip_is_rect_ = clipping_ && clip_ == rect;
    }

    // Where bounds, grown by margin on each side, lie relative to the clip.
    Fit fit(const QRectF& bounds, double margin) {
        updateClip();
        if (!clipping_) {
            return Fit::Inside;
        }
        const QRectF grown = bounds.adjusted(-margin, -margin, margin, margin);
        if (clip_is_rect_) {
            if (clip_rect_.contains(grown)) {
                return Fit::Inside;
            }
            return clip_rect_.intersects(grown) ? Fit::Partial : Fit::Outside;
        }
        if (clip_.contains(grown)) {
            return Fit::Inside;
        }
        return clip_.intersects(grown) ? Fit::Partial : Fit::Outside;
    }

    // The pen's width in logical units (a cosmetic pen is that many device pixels wide).
    double penWidth() const {
        const QPen pen = out_.pen();
        double width = pen.widthF();
        if (pen.isCosmetic()) {
            const double scale = std::sqrt(std::abs(out_.transform().determinant()));
            width = std::max(width, 1.0) / (scale > 0 ? scale : 1.0);
        }
        return width;
    }

    // How far a stroke can reach beyond a shape's control points (joins and caps included).
    double penMargin() const {
        if (out_.pen().style() == Qt::NoPen) {
            return 0.5;
        }
        return penWidth() * std::max(2.0, out_.pen().miterLimit()) + 1.0;
    }

    // A shape that the clip cuts: the visible parts of its fill and of its stroke's outline.
    void drawCut(const QPainterPath& shape, bool fill) {
        if (fill && out_.brush().style() != Qt::NoBrush) {
            out_.fillPath(shape.intersected(clip_), out_.brush());
        }
        const QPen pen = out_.pen();
        if (pen.style() != Qt::NoPen) {
            QPainterPathStroker stroker(pen);
            stroker.setWidth(std::max(penWidth(), 1e-3));
            QPainterPath outline = stroker.createStroke(shape);
            outline.setFillRule(Qt::WindingFill);
            out_.fillPath(outline.intersected(clip_), pen.brush());
        }
    }

    // Crops a pixmap's target rectangle and its source alike to a rectangular clip; false when
    // nothing is left. Other clips let the whole pixmap through.
    bool crop(QRectF& target, QRectF& source) {
        const Fit where = fit(target, 0);
        if (where == Fit::Outside) {
            return false;
        }
        if (where == Fit::Inside || !clip_is_rect_ || target.isEmpty()) {
            return true;
        }
        const QRectF visible = target.intersected(clip_rect_);
        const double sx = source.width() / target.width();
        const double sy = source.height() / target.height();
        source = QRectF(source.x() + (visible.x() - target.x()) * sx,
                        source.y() + (visible.y() - target.y()) * sy, visible.width() * sx,
                        visible.height() * sy);
        target = visible;
        return !target.isEmpty();
    }

    QPainter& out_;
    bool clip_dirty_ = true;
    bool clipping_ = false;
    bool clip_is_rect_ = false;
    QPainterPath clip_;
    QRectF clip_rect_;
};

ClippingDevice::ClippingDevice(const QPaintDevice& target, QPainter& out)
    : target_(target), engine_(std::make_unique<ClippingEngine>(out)) {}

ClippingDevice::~ClippingDevice() = default;

QPaintEngine* ClippingDevice::paintEngine() const {
    return engine_.get();
}

int ClippingDevice::metric(PaintDeviceMetric metric) const {
    switch (metric) {
        case PdmWidth:
            return target_.width();
        case PdmHeight:
            return target_.height();
        case PdmWidthMM:
            return target_.widthMM();
        case PdmHeightMM:
            return target_.heightMM();
        case PdmNumColors:
            return target_.colorCount();
        case PdmDepth:
            return target_.depth();
        case PdmDpiX:
            return target_.logicalDpiX();
        case PdmDpiY:
            return target_.logicalDpiY();
        case PdmPhysicalDpiX:
            return target_.physicalDpiX();
        case PdmPhysicalDpiY:
            return target_.physicalDpiY();
        case PdmDevicePixelRatio:
            return static_cast<int>(std::lround(target_.devicePixelRatio()));
        case PdmDevicePixelRatioScaled:
            return static_cast<int>(
                std::lround(target_.devicePixelRatio() * devicePixelRatioFScale()));
    }
    return QPaintDevice::metric(metric);
}

}  // namespace pipescope::app
