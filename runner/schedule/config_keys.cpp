#include "config_keys.h"

#include <algorithm>
#include <array>
#include <utility>

namespace pipescope::schedule::detail {
namespace {

struct ObjectKeys {
    std::string_view path;
    std::vector<std::string_view> keys;
};

const std::vector<ObjectKeys>& schema() {
    static const std::vector<ObjectKeys> objects = {
        {"", {"name", "model", "parallel", "hardware", "costs", "run", "compare"}},
        {"model",
         {"layers", "hidden", "ffn_hidden", "heads", "seq_len", "vocab", "micro_batch", "dtype",
          "flash_attention"}},
        {"parallel",
         {"pipeline", "microbatches", "schedule", "virtual_stages", "vocab", "first_stage_layers",
          "last_stage_layers"}},
        {"hardware",
         {"name", "peak_tflops", "memory_gib", "p2p_gbps", "allreduce_gbps", "latency_us",
          "memory_gbps", "gemm_efficiency"}},
        {"costs", {"source", "per_stage_us", "p2p_us", "collective_us", "collectives_us"}},
        {"costs.collectives_us", {"input", "input_grad", "output_bcast", "output", "output_grad"}},
        {"costs.per_stage_us", {"F", "B", "W", "S", "T", "IF", "IB", "L", "OPT"}},
        {"run", {"iterations", "warmup", "seed", "learning_rate"}},
        {kVariantObject, {"label", "set"}},
    };
    return objects;
}

char lower(char c) {
    return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                              [](char x, char y) { return lower(x) == lower(y); });
}

// Optimal string alignment distance (Levenshtein plus swaps of neighbours), case-insensitive:
// "1fb1" is one swap from "1f1b".
std::size_t editDistance(std::string_view a, std::string_view b) {
    const std::size_t n = a.size();
    const std::size_t m = b.size();
    std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1, 0));
    for (std::size_t i = 0; i <= n; ++i) {
        d[i][0] = i;
    }
    for (std::size_t j = 0; j <= m; ++j) {
        d[0][j] = j;
    }
    for (std::size_t i = 1; i <= n; ++i) {
        for (std::size_t j = 1; j <= m; ++j) {
            const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
                lower(a[i - 2]) == lower(b[j - 1])) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[n][m];
}

// The names Megatron-LM's arguments and Hugging Face configs give our keys: users arriving from
// those write them first.
std::optional<std::string_view> knownAlias(std::string_view word) {
    static constexpr std::array<std::pair<std::string_view, std::string_view>, 17> kAliases = {{
        {"num_layers", "layers"},
        {"num_hidden_layers", "layers"},
        {"hidden_size", "hidden"},
        {"ffn_hidden_size", "ffn_hidden"},
        {"intermediate_size", "ffn_hidden"},
        {"num_attention_heads", "heads"},
        {"seq_length", "seq_len"},
        {"sequence_length", "seq_len"},
        {"vocab_size", "vocab"},
        {"padded_vocab_size", "vocab"},
        {"micro_batch_size", "micro_batch"},
        {"pipeline_model_parallel_size", "pipeline"},
        {"pipeline_parallel_size", "pipeline"},
        {"num_microbatches", "microbatches"},
        {"virtual_pipeline_model_parallel_size", "virtual_stages"},
        {"lr", "learning_rate"},
        {"train_iters", "iterations"},
    }};
    for (const auto& [alias, key] : kAliases) {
        if (equalsIgnoringCase(word, alias)) {
            return key;
        }
    }
    return std::nullopt;
}

}  // namespace

const std::vector<std::string_view>* knownKeys(std::string_view object_path) {
    for (const auto& object : schema()) {
        if (object.path == object_path) {
            return &object.keys;
        }
    }
    return nullptr;
}

std::optional<std::string_view> closestMatch(std::string_view word,
                                             const std::vector<std::string_view>& candidates) {
    for (const auto c : candidates) {
        if (equalsIgnoringCase(word, c)) {
            return c;
        }
    }
    if (const auto alias = knownAlias(word);
        alias && std::find(candidates.begin(), candidates.end(), *alias) != candidates.end()) {
        return alias;
    }
    // A word much longer than every candidate cannot be within two edits; skip the quadratic
    // distance table for pasted garbage.
    if (word.size() > 64) {
        return std::nullopt;
    }
    // The one candidate closest within two edits; two equally close ones make no suggestion.
    std::optional<std::string_view> best;
    std::size_t best_distance = 3;
    bool tied = false;
    for (const auto c : candidates) {
        const std::size_t dist = editDistance(word, c);
        if (dist < best_distance && dist < c.size()) {
            best = c;
            best_distance = dist;
            tied = false;
        } else if (best && dist == best_distance) {
            tied = true;
        }
    }
    if (best) {
        return tied ? std::nullopt : best;
    }
    // A short name for one candidate: its first part ("interleaved" for "interleaved-1f1b",
    // "zb" for "zb-h1"), or the initials of a spelled-out name ("zero-bubble" for "zb-h1").
    std::string initials;
    for (std::size_t i = 0; i < word.size(); ++i) {
        if (i == 0 || word[i - 1] == '-' || word[i - 1] == '_' || word[i - 1] == ' ') {
            initials += word[i];
        }
    }
    std::optional<std::string_view> unique;
    for (const auto c : candidates) {
        const std::string_view head = c.substr(0, c.find('-'));
        if (head.size() == c.size()) {
            continue;
        }
        if (equalsIgnoringCase(word, head) ||
            (initials.size() > 1 && equalsIgnoringCase(initials, head))) {
            if (unique) {
                return std::nullopt;  // "vocab" could be vocab-1 or vocab-2
            }
            unique = c;
        }
    }
    return unique;
}

std::string didYouMean(std::string_view word, const std::vector<std::string_view>& candidates) {
    const auto match = closestMatch(word, candidates);
    if (!match) {
        return {};
    }
    return " (did you mean \"" + std::string(*match) + "\"?)";
}

std::string joinNames(const std::vector<std::string_view>& names) {
    std::string out;
    for (const auto n : names) {
        if (!out.empty()) {
            out += ", ";
        }
        out += n;
    }
    return out;
}

std::string unknownKeyMessage(std::string_view key, const std::vector<std::string_view>& known) {
    const std::string hint = didYouMean(key, known);
    if (!hint.empty()) {
        return "unknown key" + hint;
    }
    return "unknown key; expected one of " + joinNames(known);
}

std::vector<std::string_view> splitPath(std::string_view path) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = path.find('.', start);
        if (dot == std::string_view::npos) {
            parts.push_back(path.substr(start));
            return parts;
        }
        parts.push_back(path.substr(start, dot - start));
        start = dot + 1;
    }
}

std::optional<std::string> checkKeyPath(std::string_view path) {
    std::string object;
    std::string corrected;
    bool all_correctable = true;
    bool changed = false;
    for (const auto part : splitPath(path)) {
        const auto* keys = knownKeys(object);
        if (keys == nullptr) {
            // A key under a plain value ("model.layers.x"): nothing sensible to suggest.
            return "unknown key (\"" + object + "\" holds a value, not keys)";
        }
        std::string_view fixed = part;
        if (std::find(keys->begin(), keys->end(), part) == keys->end()) {
            const auto match = closestMatch(part, *keys);
            if (!match) {
                all_correctable = false;
                break;
            }
            fixed = *match;
            changed = true;
        }
        object = memberPath(object, fixed);
        corrected = object;
    }
    if (!changed && all_correctable) {
        return std::nullopt;
    }
    if (all_correctable) {
        return "unknown key (did you mean \"" + corrected + "\"?)";
    }
    return std::string("unknown key");
}

std::string describeValue(const Json& value) {
    if (value.is_array()) {
        return "an array";
    }
    if (value.is_object()) {
        return "an object";
    }
    if (value.is_string()) {
        const auto& s = value.get_ref<const std::string&>();
        constexpr std::size_t kMax = 40;
        if (s.size() > kMax) {
            std::size_t cut = kMax - 3;
            // Cut on a character boundary so the message stays valid UTF-8.
            while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) {
                --cut;
            }
            return Json(s.substr(0, cut) + "...")
                .dump(-1, ' ', false, Json::error_handler_t::replace);
        }
    }
    return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool setPath(Json& doc, std::string_view path, Json value, std::string* error) {
    const auto fail = [error](std::string message) {
        if (error != nullptr) {
            *error = std::move(message);
        }
        return false;
    };
    if (!doc.is_object()) {
        return fail("cannot set it: the config is " + describeValue(doc) + ", not an object");
    }
    const auto parts = splitPath(path);
    Json* node = &doc;
    std::string walked;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        walked = memberPath(walked, parts[i]);
        const std::string key(parts[i]);
        if (!node->contains(key)) {
            (*node)[key] = Json::object();
        }
        Json& child = (*node)[key];
        if (!child.is_object()) {
            return fail("cannot set it: \"" + walked + "\" is " + describeValue(child) +
                        ", not an object");
        }
        node = &child;
    }
    (*node)[std::string(parts.back())] = std::move(value);
    return true;
}

void forgetPositions(PositionMap& positions, std::string_view path) {
    for (auto it = positions.begin(); it != positions.end();) {
        const std::string_view p = it->first;
        const bool under =
            p == path || (p.size() > path.size() && p.substr(0, path.size()) == path &&
                          (p[path.size()] == '.' || p[path.size()] == '['));
        it = under ? positions.erase(it) : std::next(it);
    }
}

void dropKeysLeftBehind(Json& doc, const std::vector<Override>& overrides, PositionMap* positions) {
    const auto names = [&](std::string_view path) {
        return std::any_of(overrides.begin(), overrides.end(),
                           [&](const Override& o) { return o.path == path; });
    };
    if (!doc.is_object() || !doc.contains("parallel") || !doc["parallel"].is_object()) {
        return;
    }
    Json& parallel = doc["parallel"];
    for (const char* key : {"virtual_stages", "first_stage_layers", "last_stage_layers"}) {
        const std::string path = std::string("parallel.") + key;
        const auto owner = ownerOf(path);
        if (!owner || !names(owner->path) || names(path)) {
            continue;
        }
        const auto value =
            parallel.find(std::string(owner->path.substr(owner->path.find('.') + 1)));
        if (value != parallel.end() && value->is_string() &&
            value->get<std::string>() != owner->value) {
            parallel.erase(key);
            if (positions != nullptr) {
                forgetPositions(*positions, path);
            }
        }
    }
}

}  // namespace pipescope::schedule::detail
