// Simulator benchmark: generate + validate + simulate, the work the app repeats on every edit.
// Prints times for the authors' 8-stage config, a 32-stage 1024-micro-batch config, and how time
// grows with stages and micro-batches (it should grow with the number of ops).
//
//   sim_bench [--reps N] [--only-large]   (--only-large: just the 32-stage case, for profiling)
//   sim_bench --cancel                     how long a simulation goes on after its cancel flag
//                                          is set (the app sets it when an edit replaces the
//                                          config), at several points through its run
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <malloc.h>
#include <string>
#include <thread>
#include <vector>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/validate.h>
#include <pipescope/sim/cost_table.h>
#include <pipescope/sim/simulator.h>

using namespace pipescope;
using Clock = std::chrono::steady_clock;

namespace {

schedule::Config config(int p, int m, const std::string& vocab, const std::string& sched) {
    // The authors' model (32 layers, h 3072, s 2048, V 256k) with layers scaled to divide.
    const std::string text = R"({"model": {"layers": 32, "hidden": 3072, "ffn_hidden": 12288,
        "heads": 24, "seq_len": 2048, "vocab": 256000}, "parallel": {"pipeline": 8,
        "microbatches": 128}})";
    std::vector<schedule::Override> ov;
    std::string why;
    for (const std::string& kv :
         {"parallel.pipeline=" + std::to_string(p), "parallel.microbatches=" + std::to_string(m),
          "parallel.vocab=" + vocab, "parallel.schedule=" + sched,
          "model.layers=" + std::to_string(std::max(32, 4 * p))}) {
        ov.push_back(*schedule::parseOverride(kv, &why));
    }
    auto r = schedule::parseConfig(text, ov);
    if (!r.ok()) {
        std::fprintf(stderr, "%s\n", r.errorText().c_str());
        std::exit(1);
    }
    return *r.config;
}

struct Timing {
    double generate_ms = 0, simulate_ms = 0, total_ms = 0;
    std::size_t ops = 0;
};

double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

// Median over `reps` of each phase: generation, validation, then timing, memory and metrics.
Timing measure(const schedule::Config& c, int reps) {
    std::vector<Timing> all;
    for (int i = 0; i < reps; ++i) {
        Timing t;
        const auto t0 = Clock::now();
        const auto placement = schedule::computePlacement(c);
        const auto costs = sim::makeCostModel(c, placement);
        schedule::GenerateOptions go;
        go.costs = costs.get();
        auto g = schedule::generateSchedule(c, go);
        const auto t1 = Clock::now();
        if (!g.schedule) {
            std::fprintf(stderr, "%s\n", g.error.c_str());
            std::exit(1);
        }
        // Validation is the structural checks plus the deadlock check, which is the timing
        // itself: simulateSchedule does both when asked to validate.
        const auto t2 = Clock::now();
        t.ops = g.schedule->opCount();
        auto out = sim::simulateSchedule(c, std::move(*g.schedule), true);
        const auto t3 = Clock::now();
        if (!out.result) {
            std::fprintf(stderr, "%s\n", out.error.c_str());
            std::exit(1);
        }
        t.generate_ms = ms(t0, t1);
        t.simulate_ms = ms(t2, t3);
        t.total_ms = t.generate_ms + t.simulate_ms;
        all.push_back(t);
    }
    std::sort(all.begin(), all.end(),
              [](const Timing& a, const Timing& b) { return a.total_ms < b.total_ms; });
    return all[all.size() / 2];
}

void row(const char* label, const Timing& t) {
    std::printf("%-34s %9zu %9.2f %9.2f %9.2f %10.2f\n", label, t.ops, t.generate_ms, t.simulate_ms,
                t.total_ms, static_cast<double>(t.ops) / t.total_ms / 1e3);
}

// Sets the flag at 10%, 30%, 50%, 70% and 90% of a full simulation's time and prints how long
// simulate() takes to return after that, the wait an edit adds on top of its own simulation.
void cancelLatency(const char* label, const schedule::Config& c) {
    const auto f0 = Clock::now();
    const auto full = sim::simulate(c);
    const double full_ms = ms(f0, Clock::now());
    if (!full.result) {
        std::fprintf(stderr, "%s\n", full.error.c_str());
        std::exit(1);
    }
    std::printf("%-34s %9zu %9.0f", label, full.result->schedule.opCount(), full_ms);
    double worst = 0;
    for (double at : {0.1, 0.3, 0.5, 0.7, 0.9}) {
        std::atomic<bool> flag{false};
        sim::SimOptions options;
        options.cancel = &flag;
        bool cancelled = false;
        std::thread worker([&] { cancelled = sim::simulate(c, options).cancelled; });
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(at * full_ms));
        const auto set = Clock::now();
        flag = true;
        worker.join();
        const double after = ms(set, Clock::now());
        worst = std::max(worst, after);
        std::printf(" %8.0f%s", after, cancelled ? "" : "*");
    }
    std::printf(" %8.0f\n", worst);
}

}  // namespace

int main(int argc, char** argv) {
    // Keep freed memory in the heap between repetitions, as a long-running app's allocator
    // would, instead of returning it to the kernel and paying page faults again.
    if (std::getenv("SIM_BENCH_DEFAULT_MALLOC") == nullptr) {
        mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest glibc accepts
        mallopt(M_TRIM_THRESHOLD, 1 << 30);
    }
    int reps = 7;
    bool only_large = false;
    bool cancel = false;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--reps" && i + 1 < argc) {
            reps = std::max(1, std::atoi(argv[++i]));
        } else if (std::string(argv[i]) == "--only-large") {
            only_large = true;
        } else if (std::string(argv[i]) == "--cancel") {
            cancel = true;
        } else {
            std::fprintf(stderr, "usage: sim_bench [--reps N] [--only-large | --cancel]\n");
            return 2;
        }
    }
    if (cancel) {
        std::printf(
            "ms from the cancel flag to simulate()'s return, with the flag set at a share "
            "of the full run (* = it finished instead)\n");
        std::printf("%-34s %9s %9s %8s %8s %8s %8s %8s %8s\n", "config", "ops", "full ms", "10%",
                    "30%", "50%", "70%", "90%", "worst");
        cancelLatency("32 stages, m=1024, 1f1b vocab-2", config(32, 1024, "vocab-2", "1f1b"));
        cancelLatency("64 stages, m=4096, 1f1b vocab-2", config(64, 4096, "vocab-2", "1f1b"));
        cancelLatency("64 stages, m=1024, v-half interl.",
                      config(64, 1024, "interlaced", "v-half"));
        cancelLatency("64 stages, m=1024, zb-h1 naive", config(64, 1024, "naive", "zb-h1"));
        return 0;
    }
    std::printf("%-34s %9s %9s %9s %9s %10s\n", "config", "ops", "gen ms", "check+sim", "total ms",
                "Mops/s");
    if (only_large) {
        row("32 stages, m=1024, vocab-2", measure(config(32, 1024, "vocab-2", "1f1b"), reps));
        return 0;
    }
    row("paper 8 stages, m=128, vocab-2", measure(config(8, 128, "vocab-2", "1f1b"), reps));
    row("paper 8 stages, m=128, naive", measure(config(8, 128, "naive", "1f1b"), reps));
    row("paper 8 stages, m=128, v-half vocab-2",
        measure(config(8, 128, "vocab-2", "v-half"), reps));
    row("32 stages, m=1024, vocab-2",
        measure(config(32, 1024, "vocab-2", "1f1b"), std::max(1, reps / 2)));
    std::printf("\nscaling with stages (m = 256, vocab-2)\n");
    for (int p : {8, 16, 32, 64}) {
        char label[64];
        std::snprintf(label, sizeof label, "p=%d", p);
        row(label, measure(config(p, 256, "vocab-2", "1f1b"), std::max(1, reps / 2)));
    }
    std::printf("\nscaling with micro-batches (p = 8, vocab-2)\n");
    for (int m : {64, 256, 1024, 4096}) {
        char label[64];
        std::snprintf(label, sizeof label, "m=%d", m);
        row(label, measure(config(8, m, "vocab-2", "1f1b"), std::max(1, reps / 2)));
    }
    return 0;
}
