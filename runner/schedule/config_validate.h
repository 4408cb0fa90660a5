// Validation of a parsed JSON document against the config format (docs/config.md).
// Internal to pipescope_schedule.
#pragma once

#include <string>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/config_parse.h>

#include "json_reader.h"

namespace pipescope::schedule::detail {

struct Validation {
    Config config;                    // complete only when `issues` is empty
    std::vector<ConfigIssue> issues;  // in the order found; parseConfig sorts them
};

// Checks every key of `doc` and builds the Config. `positions` locates issues (an empty map
// gives issues without a line). Variants of "compare" are checked only when `allow_compare`;
// a variant's own document is validated with it false.
Validation validateDocument(const Json& doc, const PositionMap& positions, bool allow_compare);

// Checks the "compare" list of `doc` and builds its variants; each variant is applied to `doc`
// (without "compare") and validated, and what goes wrong is reported under "compare[i]".
// Issues equal to one of `base_issues` are left out: they belong to the base, not the variant.
void validateCompare(const Json& doc, const PositionMap& positions,
                     const std::vector<ConfigIssue>& base_issues, std::vector<Variant>* variants,
                     std::vector<ConfigIssue>* issues);

// "32L h3072 V256000 p8 m128 1f1b vocab-2", the name of a config that gives none.
std::string deriveName(const Config& config);

}  // namespace pipescope::schedule::detail
