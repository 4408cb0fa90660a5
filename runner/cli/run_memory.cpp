#include "run_memory.h"

#include <fstream>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <pipescope/sim/simulator.h>

namespace pipescope::cli {

std::int64_t availableMemory() {
    std::ifstream f("/proc/meminfo");
    std::string key;
    std::int64_t kib = 0;
    std::string unit;
    while (f >> key >> kib >> unit) {
        if (key == "MemAvailable:") {
            return kib * 1024;
        }
    }
    return 0;
}

// A training step frees its activations at the end of each iteration and allocates them again in
// the next. glibc would hand the freed heap back to the kernel and the next iteration would fault
// every page in again (measured: 3 ms of a 28 ms iteration on the small 2-stage preset, in the
// ops that first reach a new high-water mark). Like the caching allocators of the frameworks, the
// runner keeps what it has allocated: no trimming, and blocks up to 32 MiB from the heap rather
// than from mmap.
void keepFreedMemory() {
#if defined(__GLIBC__)
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
#endif
}

// The memory the CPU backend will hold per rank: the simulator's memory model of this config
// with every tensor in fp32, which is what the CPU kernels use.
std::optional<std::vector<std::int64_t>> estimateMemory(const schedule::Config& config,
                                                        const schedule::Schedule& schedule,
                                                        std::string* error) {
    schedule::Config fp32 = config;
    fp32.model.dtype = schedule::DType::FP32;
    sim::SimOptions so;
    so.schedule = &schedule;
    so.iterations = 1;  // the memory of one iteration; a real run's clock is not simulated
    auto out = sim::simulate(fp32, so);
    if (!out.result) {
        *error = out.error;
        return std::nullopt;
    }
    std::vector<std::int64_t> peaks;
    for (const auto& m : out.result->memory) {
        peaks.push_back(m.peak_bytes);
    }
    return peaks;
}

}  // namespace pipescope::cli
