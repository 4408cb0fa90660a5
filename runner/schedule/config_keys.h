// The key schema of the config format and the helpers that turn mistakes into readable issues:
// "did you mean", value descriptions, key-path checks and edits of the JSON document.
// Internal to pipescope_schedule.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <pipescope/schedule/config_parse.h>

#include "json_reader.h"

namespace pipescope::schedule::detail {

// Path of the object that describes one compare variant, for knownKeys().
inline constexpr std::string_view kVariantObject = "compare[]";

// Keys of an object of the format ("" top level, "model", "costs.per_stage_us", kVariantObject),
// in the order toJson writes them; nullptr when `object_path` is not an object of the format.
const std::vector<std::string_view>* knownKeys(std::string_view object_path);

// The closest candidate to `word`: a case-insensitive match, else the candidate that Megatron-LM
// or Hugging Face call `word` ("hidden_size" for "hidden"), else the nearest one within two
// edits (insertions, deletions, substitutions, swaps of neighbours) that is also fewer edits
// than the candidate is long, so that "X" does not suggest "F".
std::optional<std::string_view> closestMatch(std::string_view word,
                                             const std::vector<std::string_view>& candidates);

// " (did you mean "x"?)" or "".
std::string didYouMean(std::string_view word, const std::vector<std::string_view>& candidates);

// "a, b, c"
std::string joinNames(const std::vector<std::string_view>& names);

// The message for an unknown key in an object with these keys.
std::string unknownKeyMessage(std::string_view key, const std::vector<std::string_view>& known);

// nullopt when `path` ("model.vocab") names a key of the config format, else the reason, with a
// corrected path as "did you mean" where each wrong part has a close match.
std::optional<std::string> checkKeyPath(std::string_view path);

// How a value appears in a message: strings quoted (long ones shortened), numbers and literals
// as written, "an array", "an object".
std::string describeValue(const Json& value);

// Sets `path` in `doc`, creating the objects on the way. Fails (false, *error set) when a part of
// the path exists and is not an object.
bool setPath(Json& doc, std::string_view path, Json value, std::string* error);

// Drops the positions of `path` and everything under it (its value no longer comes from the
// source text).
void forgetPositions(PositionMap& positions, std::string_view path);

std::vector<std::string_view> splitPath(std::string_view path);

// Drops the keys of `doc` whose owner (ownerOf) the overrides moved to another value, unless an
// override names them too (and their positions, when given): a compare variant, --set or a sweep
// that switches parallel.vocab away from "redistributed" leaves first_stage_layers behind.
void dropKeysLeftBehind(Json& doc, const std::vector<Override>& overrides, PositionMap* positions);

}  // namespace pipescope::schedule::detail
