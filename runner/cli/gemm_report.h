// pipescope-run --gemm-report: the GEMMs a run made, per shape, next to a plain library GEMM of
// the same shape (OpenBLAS sgemm on the CPU backend, cuBLAS on the CUDA backend).
#pragma once

#include <ostream>

namespace pipescope::cli {

// Turns the recording on or off for the backend about to run.
void setGemmRecording(bool on, bool cuda);
// Writes the report of what was recorded; call after the run, its GEMMs launched. On the CUDA
// backend `shared_device` notes that ranks shared a GPU, so a GEMM's device time includes the
// other ranks' work running beside it.
void writeGemmReport(std::ostream& os, bool cuda, bool shared_device);

}  // namespace pipescope::cli
