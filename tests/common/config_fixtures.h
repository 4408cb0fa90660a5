// Configs for schedule and simulator tests, built through the real parser.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <pipescope/schedule/config_parse.h>

namespace pipescope::test {

// A small model with the given pipeline; `extra` is a list of "key=value" overrides.
inline schedule::Config makeConfig(int pipeline, int microbatches, const std::string& sched,
                                   const std::string& vocab,
                                   const std::vector<std::string>& extra = {}) {
    const std::string text = R"({
      "model": {"layers": 16, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 128000},
      "parallel": {"pipeline": 1, "microbatches": 1}
    })";
    std::vector<schedule::Override> ov;
    std::string why;
    auto add = [&](const std::string& kv) {
        auto o = schedule::parseOverride(kv, &why);
        if (!o) {
            throw std::runtime_error(why);
        }
        ov.push_back(*o);
    };
    add("parallel.pipeline=" + std::to_string(pipeline));
    add("parallel.microbatches=" + std::to_string(microbatches));
    add("parallel.schedule=" + sched);
    add("parallel.vocab=" + vocab);
    // Layers that divide over every placement the tests use (v-half needs 2p positions,
    // interleaved 2p with two chunks).
    add("model.layers=" + std::to_string(4 * pipeline));
    for (const auto& e : extra) {
        add(e);
    }
    auto r = schedule::parseConfig(text, ov, "<test>");
    if (!r.ok()) {
        throw std::runtime_error(r.errorText());
    }
    return *r.config;
}

// The tiny GPT the execution tests train: 8 layers (divisible by p · chunks for every schedule),
// 2 heads, V = 50 (not a multiple of 4, so the last vocabulary shard is shorter), fp32, seed 77.
// nullopt when the config validator refuses the combination.
inline std::optional<schedule::Config> tinyTrainingConfig(int p, const std::string& sched,
                                                          const std::string& vocab, int hidden = 16,
                                                          int seq_len = 8, int microbatches = 4,
                                                          int iterations = 1) {
    const std::string json =
        R"({"name": "tiny", "model": {"layers": 8, "hidden": )" + std::to_string(hidden) +
        R"(, "heads": 2, "seq_len": )" + std::to_string(seq_len) +
        R"(, "vocab": 50, "micro_batch": 2, "dtype": "fp32"},
      "parallel": {"pipeline": )" +
        std::to_string(p) + R"(, "microbatches": )" + std::to_string(microbatches) +
        R"(, "schedule": ")" + sched + R"(", "vocab": ")" + vocab + R"("},
      "run": {"iterations": )" +
        std::to_string(iterations) + R"(, "warmup": 0, "seed": 77}})";
    auto parsed = schedule::parseConfig(json, "tiny");
    if (!parsed.ok()) {
        return std::nullopt;
    }
    return *parsed.config;
}

// Every schedule with every vocabulary method the generator makes for it: (schedule, method).
inline std::vector<std::pair<std::string, std::string>> scheduleMethodPairs() {
    std::vector<std::pair<std::string, std::string>> out;
    for (const char* sched : {"1f1b", "gpipe", "zb-h1", "v-half", "interleaved-1f1b"}) {
        for (const char* v : {"naive", "redistributed", "interlaced", "vocab-1", "vocab-2"}) {
            if (std::string(sched) != "interleaved-1f1b" || std::string(v) != "vocab-1") {
                out.emplace_back(sched, v);
            }
        }
    }
    return out;
}

}  // namespace pipescope::test
