// The order the authors' runtime runs interlaced vocabulary handling with 1F1B in (private to
// generation; docs/schedules.md, "interlaced with 1F1B").
#pragma once

#include <optional>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::schedule::detail {

// Every rank runs the same sequence of synchronous vocabulary steps (embedding forwards, one
// output-layer step per micro-batch, embedding backwards) and between two output-layer steps
// one forward and one backward: forward first on ranks p - 2, p - 4, ..., backward first on
// ranks p - 1, p - 3, ..., after a warm-up of 1.5p - r forwards. Nothing when the placement is not
// one chunk per rank in rank order; the caller validates the result.
std::optional<Schedule> interlacedOneF1B(const Config& config, const Placement& placement);

}  // namespace pipescope::schedule::detail
