// Rows the exports understand. A newer minor format may add kinds, lanes or sources that the
// op_named view (an inner join with the enum tables) leaves out; the exports leave them out too.
#pragma once

#include <pipescope/trace/types.h>

namespace pipescope::interop::detail {

using trace::collectiveName;
using trace::isKnownCategory;
using trace::isKnownOp;

}  // namespace pipescope::interop::detail
