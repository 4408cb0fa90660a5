// Parsing, validation and serialisation of the JSON config (docs/config.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pipescope/schedule/config.h>

namespace pipescope::schedule {

// One problem with a config. `path` is the key path ("parallel.microbatches"; "" for the whole
// document); line/column point into the source text where known (1-based, 0 = unknown).
struct ConfigIssue {
    std::string path;
    std::string message;
    int line = 0;
    int column = 0;

    // "parallel.microbatches: must be at least 1, got 0"
    std::string text() const;
    // "presets/x.json:12:5: parallel.microbatches: must be at least 1, got 0"
    std::string text(std::string_view source_name) const;
};

struct ParseResult {
    std::optional<Config> config;  // set only when there are no issues
    // Every problem found, in document order; past 100, the first 100, those after them that
    // make a "did you mean" suggestion (up to 100), and one issue (path "") that says how many
    // more there are.
    std::vector<ConfigIssue> issues;
    std::string source_name;  // file name or "<config>"

    bool ok() const { return config.has_value(); }
    // All issues, one per line, each prefixed with the source name.
    std::string errorText() const;
};

// Parses and validates a config given as JSON text. Never throws.
ParseResult parseConfig(std::string_view json_text, std::string_view source_name = "<config>");

// As parseConfig, after applying overrides to the JSON document (an override's path may name a
// key the document leaves out; an unknown path is an issue that names it). An override that moves
// a key to another value drops the keys that belong to its old value (ownerOf) unless it names
// them too, so that a sweep, a compare variant or a method comparison works from any config.
ParseResult parseConfig(std::string_view json_text, const std::vector<Override>& overrides,
                        std::string_view source_name = "<config>");

// Reads a file and parses it; a missing or unreadable file is an issue that names the file. A name
// the file chose describes the file's contents, so the overrides that change them (all but name,
// run.* and compare) are added to it: "Small 4-stage [parallel.schedule=zb-h1]". A name derived
// from the contents (the file has none) already describes the result.
ParseResult loadConfigFile(const std::string& path, const std::vector<Override>& overrides = {});

// The key and value a key applies to alone: parallel.virtual_stages to parallel.schedule
// "interleaved-1f1b", parallel.first_stage_layers and last_stage_layers to parallel.vocab
// "redistributed". nullopt for every other key.
struct KeyOwner {
    std::string_view path;
    std::string_view value;
};
std::optional<KeyOwner> ownerOf(std::string_view path);

// nullopt when `path` ("model.vocab") names a key of the config format, else why not
// ("unknown key (did you mean \"model.hidden\"?)"), as --set reports it.
std::optional<std::string> configKeyProblem(std::string_view path);

// The one candidate closest to `word` (a case slip, one or two letters wrong, missing, extra or
// swapped), as the config's "did you mean" suggestions pick it; nullopt when none is that close
// or two are equally close. For the command lines' unknown options.
std::optional<std::string_view> closestName(std::string_view word,
                                            const std::vector<std::string_view>& candidates);

// Parses "model.vocab=256000" into an Override; nullopt (and *error set) when malformed.
std::optional<Override> parseOverride(std::string_view assignment, std::string* error);

// The config as JSON that parseConfig reads back into an equal Config (all keys written, but
// virtual_stages only for interleaved-1f1b: the other schedules imply theirs).
std::string toJson(const Config& config, int indent = 2);

// The name of `edited`, `base` with some keys changed (the app's settings): base's name with the
// changed keys appended, as --set appends them ("Default [model.vocab=262144,
// parallel.schedule=v-half]"; run.* left out); edited's own name where it has another (a name
// derived from the values, or one the user gave).
std::string editedName(const Config& base, const Config& edited);

// The applied form of a compare variant: the config with that variant's overrides, validated.
ParseResult applyVariant(const Config& base, const Variant& variant);

}  // namespace pipescope::schedule
