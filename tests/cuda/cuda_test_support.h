// Helpers of the plain-program CUDA tests (they run on GPU hosts without Qt): a checklist that
// prints each check and counts failures, and one run of a config through the interpreter on the
// CPU backend or on the CUDA backend with the given devices.
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/cuda/cuda_rank_backend.h>
#include <pipescope/exec/pipeline_executor.h>

namespace pipescope::test {

inline int g_failures = 0;

inline void expect(bool ok, const std::string& what) {
    std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
    g_failures += ok ? 0 : 1;
}

// Three iterations of `c` on `s`; on the CUDA backend when `devices` is given (ranks placed
// round-robin on them), else on the CPU backend.
inline exec::ExecResult runThreeIterations(const schedule::Config& c, const schedule::Schedule& s,
                                           std::optional<std::vector<int>> devices,
                                           bool nccl = false,
                                           cuda::LaneSync sync = cuda::LaneSync::Op) {
    exec::ExecOptions eo;
    eo.iterations = 3;
    eo.seed = c.run.seed;
    // A tiny config's three iterations take well under a second on a GPU: a receive that waits
    // 20 s is a hang, reported as this case's failure while the time limit of the call
    // (bench/gpu-check.sh) still leaves the other cases to run.
    eo.timeout = std::chrono::milliseconds(20000);
    if (devices) {
        cuda::CudaBackendOptions co;
        co.seed = eo.seed;
        co.init_stddev = eo.init_stddev;
        co.memory_fraction = 0.2;
        co.devices = *devices;
        co.nccl = nccl;
        co.lane_sync = sync;
        co.timeout = eo.timeout;
        eo.backend = cuda::cudaBackendFactory(co);
    }
    exec::PipelineExecutor ex(c, s, eo);
    return ex.run();
}

}  // namespace pipescope::test
