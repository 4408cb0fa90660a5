// Configs for schedule and simulator tests, built through the real parser.
#pragma once

#include <stdexcept>
#include <string>
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

}  // namespace pipescope::test
