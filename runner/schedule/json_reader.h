// Reads JSON with nlohmann's parser (through its SAX interface) and remembers where each key and
// value stood in the source text, so that config issues can point at a line and column, and
// rewords nlohmann's syntax errors into plain advice. nlohmann 3.11 reports neither positions
// of values nor duplicate keys itself. Internal to pipescope_schedule.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pipescope::schedule::detail {

// ordered_json keeps document order, which is the order issues are reported in.
using Json = nlohmann::ordered_json;

// 1-based; column counts characters (UTF-8 code points), not bytes. 0 means unknown.
struct TextPos {
    int line = 0;
    int column = 0;
    bool known() const { return line > 0; }
};

struct NodePos {
    TextPos key;    // where the key (or, for array elements and the root, the value) starts
    TextPos value;  // where the value starts
};

// Key paths as the config format writes them: "parallel.vocab", "compare[1].set", "" (root).
using PositionMap = std::unordered_map<std::string, NodePos>;

struct JsonSyntaxError {
    TextPos pos;
    std::string message;  // "syntax error: expected ',' or '}' after an object member"
};

struct DuplicateKey {
    std::string path;
    TextPos pos;
};

struct JsonReadResult {
    Json value;
    PositionMap positions;
    std::vector<DuplicateKey> duplicates;  // later occurrences; the first one is kept
    std::optional<JsonSyntaxError> error;
};

JsonReadResult readJson(std::string_view text);

// Where an issue about `path` points: with `key` at the key (unknown, duplicate, missing below
// it), otherwise at the value; unknown when the path has no position.
TextPos issuePosition(const PositionMap& positions, const std::string& path, bool key);

std::string memberPath(std::string_view parent, std::string_view key);
std::string elementPath(std::string_view parent, std::size_t index);

}  // namespace pipescope::schedule::detail
