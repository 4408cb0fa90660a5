// A paint device for vector output whose own engine clips (QSvgGenerator of Qt before 6.7
// ignores clipping, so a zoomed chart would spill over its axes). Draw on a ClippingDevice made
// for the target; it forwards what lies inside the clip to `out`, a painter on the target.
#pragma once

#include <memory>

#include <QPaintDevice>

class QPainter;

namespace pipescope::app {

class ClippingEngine;

class ClippingDevice final : public QPaintDevice {
  public:
    ClippingDevice(const QPaintDevice& target, QPainter& out);
    ~ClippingDevice() override;
    ClippingDevice(const ClippingDevice&) = delete;
    ClippingDevice& operator=(const ClippingDevice&) = delete;

    QPaintEngine* paintEngine() const override;

  protected:
    int metric(PaintDeviceMetric metric) const override;

  private:
    const QPaintDevice& target_;
    std::unique_ptr<ClippingEngine> engine_;
};

}  // namespace pipescope::app
