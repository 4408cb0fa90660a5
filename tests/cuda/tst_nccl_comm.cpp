// NCCL between ranks on distinct GPUs (runner/cuda/nccl_comm.h). Without GPUs: when NCCL is
// chosen and why not (one rank, ranks sharing a GPU). With two GPUs or more: every valid 2-rank
// schedule × method on NCCL gives the CPU backend's losses. A plain program (0 pass, 1 fail, 77
// skip), so it runs on a GPU host without Qt.
#include <cmath>
#include <cstdio>
#include <cuda_runtime.h>
#include <optional>
#include <string>

#include <pipescope/cuda/cuda_rank_backend.h>
#include <pipescope/cuda/nccl_comm.h>
#include <pipescope/exec/pipeline_executor.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>

#include "cuda_test_support.h"

namespace ps = pipescope;
using ps::test::expect;
using ps::test::g_failures;

namespace {

std::optional<ps::schedule::Config> config(const std::string& sched, const std::string& vocab) {
    const std::string json = R"({
      "name": "nccl",
      "model": {"layers": 8, "hidden": 32, "heads": 2, "seq_len": 16, "vocab": 50,
                "micro_batch": 2, "dtype": "fp32"},
      "parallel": {"pipeline": 2, "microbatches": 4, "schedule": ")" +
                             sched + R"(", "vocab": ")" + vocab + R"("},
      "run": {"iterations": 3, "warmup": 0, "seed": 77}
    })";
    auto parsed = ps::schedule::parseConfig(json, "nccl");
    return parsed.ok() ? parsed.config : std::nullopt;
}

}  // namespace

int main() {
    // Line by line into the log, which keeps what was printed when a time limit stops the test.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    const auto c = config("1f1b", "vocab-2");
    const auto gen = ps::schedule::generateSchedule(*c);
    if (!gen.schedule) {
        std::printf("FAIL the test's schedule\n");
        return 1;
    }
    const auto& s = *gen.schedule;
    const std::string shared = ps::cuda::NcclWorld::problem(s, {0, 0});
    const std::string distinct = ps::cuda::NcclWorld::problem(s, {0, 1});
#if PIPESCOPE_TEST_HAVE_NCCL
    expect(shared.find("share a GPU") != std::string::npos,
           "two ranks on one GPU cannot take NCCL: " + shared);
    expect(distinct.empty(), "two ranks on two GPUs take NCCL" +
                                 (distinct.empty() ? std::string() : ": " + distinct));
    ps::cuda::CudaBackendOptions one;
    one.devices = {0};
    one.nccl = true;
    expect(ps::cuda::describeCommunication(one, s).find("device-to-device copies") == 0,
           "describeCommunication says so: " + ps::cuda::describeCommunication(one, s));

#else
    expect(shared == "this build has no NCCL" && distinct == shared, "without NCCL: " + shared);
#endif

    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
        std::printf(
            "SKIP the NCCL runs: they need two GPUs (NCCL takes one rank per GPU); %d "
            "here\n",
            count);
        std::printf("%d failed\n", g_failures);
        return g_failures == 0 ? 77 : 1;
    }
#if !PIPESCOPE_TEST_HAVE_NCCL
    // The runs below would take the staged path and pass without NCCL having run.
    std::printf("SKIP the NCCL runs: this build has no NCCL\n");
    std::printf("%d failed\n", g_failures);
    return g_failures == 0 ? 77 : 1;
#endif
    int runs = 0;
    for (const char* sched : {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1", "v-half"}) {
        for (const char* vocab : {"naive", "redistributed", "interlaced", "vocab-1", "vocab-2"}) {
            const auto cc = config(sched, vocab);
            if (!cc) {
                continue;
            }
            const auto g = ps::schedule::generateSchedule(*cc);
            if (!g.schedule) {
                continue;
            }
            // A schedule NCCL refuses would run staged through host memory: a pass that says
            // nothing of NCCL.
            const std::string refused = ps::cuda::NcclWorld::problem(*g.schedule, {0, 1});
            if (!refused.empty()) {
                expect(false, std::string(sched) + " " + vocab + " takes NCCL: " + refused);
                continue;
            }
            ++runs;
            const auto cpu = ps::test::runThreeIterations(*cc, *g.schedule, std::nullopt);
            const auto gpu =
                ps::test::runThreeIterations(*cc, *g.schedule, std::vector<int>{0, 1}, true);
            bool same = cpu.status == ps::exec::ExecResult::Status::Complete &&
                        gpu.status == ps::exec::ExecResult::Status::Complete &&
                        cpu.losses.size() == gpu.losses.size();
            for (std::size_t i = 0; same && i < cpu.losses.size(); ++i) {
                same = std::abs(cpu.losses[i] - gpu.losses[i]) <= 1e-4 * std::abs(cpu.losses[i]);
            }
            expect(same, std::string(sched) + " " + vocab + " on NCCL" +
                             (gpu.message.empty() ? "" : ": " + gpu.message));
        }
    }
    expect(runs > 0, std::to_string(runs) + " schedule × method runs on NCCL");
    std::printf("%d failed\n", g_failures);
    return g_failures == 0 ? 0 : 1;
}
