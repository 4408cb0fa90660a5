// The text of the NVTX range the CUDA backend opens around each op: the op's label, then which
// op of the run it is, "F3.c1 [r0 i2 #17]" (rank 0, iteration 2, index 17 in the rank's list).
// Nsight Systems shows the label; `pipescope-trace import-nsys` reads the bracket to tie the
// device work Nsight recorded inside the range to the op's row in the run's trace.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pipescope::trace {

struct NvtxOpRef {
    int rank = 0;
    int iteration = 0;
    int op_index = 0;
    std::string_view label;  // the text before the bracket
};

std::string nvtxOpText(std::string_view label, int rank, int iteration, int op_index);
// The op a range's text names; nullopt for any other text (ranges of other code).
std::optional<NvtxOpRef> parseNvtxOpText(std::string_view text);
// Whether `label` is what the runner calls an op of this kind and micro-batch (-1: none): the
// kind's name, then the micro-batch, as in "F3.c1", "SEND_F3>2", "ALLREDUCE(C1,3)", "OPT". A run
// of another config has other ops at the same places, so its ranges do not fit.
bool nvtxLabelFits(std::string_view label, std::string_view kind, int microbatch);

}  // namespace pipescope::trace
