// Pieces of JSON text for the exports and reports: string literals and numbers written exactly and
// the same way on every machine (no locale, no floating-point rounding of times).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pipescope::trace {

// Appends the JSON string literal of `text` (quotes included). Control characters are escaped
// and invalid UTF-8 becomes U+FFFD, so any input yields valid JSON.
void appendJsonString(std::string* out, std::string_view text);

// Appends nanoseconds as microseconds with exactly three decimals: 12345 -> "12.345".
void appendMicros(std::string* out, std::int64_t ns);

void appendInt(std::string* out, std::int64_t v);

// Shortest text that reads back as the same double; "null" for NaN and infinities.
void appendDouble(std::string* out, double v);

}  // namespace pipescope::trace
