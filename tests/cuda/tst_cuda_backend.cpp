// The CUDA backend against the CPU backend: the same config, the same seed, the same schedule,
// run by the interpreter on each; the losses of three iterations (so after two AdamW steps)
// must agree. A plain program (exit 0 pass, 1 fail, 77 skip without a device), so it runs on a
// GPU host without Qt.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/cuda/cuda_rank_backend.h>
#include <pipescope/exec/pipeline_executor.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>

#include "cuda_test_support.h"

namespace ps = pipescope;

namespace {

// The CPU backend's equality cases use 1e-5 against a reference with a different summation
// order; here both sides differ in order everywhere (cuBLAS, block reductions, atomics) and the
// difference grows over two optimizer steps.
constexpr double kTolerance = 1e-4;

std::optional<ps::schedule::Config> config(int p, const std::string& sched,
                                           const std::string& vocab) {
    const std::string json = R"({
      "name": "tiny",
      "model": {"layers": 8, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 50,
                "micro_batch": 2, "dtype": "fp32"},
      "parallel": {"pipeline": )" +
                             std::to_string(p) + R"(, "microbatches": 4, "schedule": ")" + sched +
                             R"(", "vocab": ")" + vocab + R"("},
      "run": {"iterations": 3, "warmup": 0, "seed": 77}
    })";
    auto parsed = ps::schedule::parseConfig(json, "tiny");
    if (!parsed.ok()) {
        return std::nullopt;
    }
    return *parsed.config;
}

}  // namespace

int main() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        std::printf("SKIP: no CUDA device here: %s\n",
                    e != cudaSuccess ? cudaGetErrorName(e) : "the driver reports 0 devices");
        return 77;
    }
    int failures = 0, cases = 0;
    for (int p : {1, 2, 4}) {
        for (const char* sched : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "v-half"}) {
            for (const char* vocab :
                 {"naive", "redistributed", "interlaced", "vocab-1", "vocab-2"}) {
                const auto c = config(p, sched, vocab);
                if (!c) {
                    continue;  // a combination the config validator refuses
                }
                const auto gen = ps::schedule::generateSchedule(*c);
                if (!gen.schedule) {
                    continue;
                }
                ++cases;
                const auto cpu = ps::test::runThreeIterations(*c, *gen.schedule, std::nullopt);
                // Every rank on one GPU: point-to-point messages by device copies, collectives
                // staged through host memory.
                const auto gpu =
                    ps::test::runThreeIterations(*c, *gen.schedule, std::vector<int>{0});
                std::string problem;
                if (gpu.status != ps::exec::ExecResult::Status::Complete) {
                    problem = "the CUDA run failed: " + gpu.message;
                } else if (cpu.status != ps::exec::ExecResult::Status::Complete) {
                    problem = "the CPU run failed: " + cpu.message;
                } else if (gpu.losses.size() != cpu.losses.size()) {
                    problem = "a different number of iterations";
                } else {
                    for (std::size_t i = 0; i < cpu.losses.size(); ++i) {
                        const double err = std::abs(gpu.losses[i] - cpu.losses[i]);
                        if (!(err <= kTolerance * std::abs(cpu.losses[i]))) {
                            problem = "iteration " + std::to_string(i) + ": loss " +
                                      std::to_string(gpu.losses[i]) + " on CUDA, " +
                                      std::to_string(cpu.losses[i]) + " on the CPU";
                            break;
                        }
                    }
                }
                std::printf("%s p%d %s %s%s%s\n", problem.empty() ? "ok  " : "FAIL", p, sched,
                            vocab, problem.empty() ? "" : ": ", problem.c_str());
                failures += problem.empty() ? 0 : 1;
            }
        }
    }
    std::printf("%d cases, %d failed\n", cases, failures);
    return failures == 0 && cases > 0 ? 0 : 1;
}
