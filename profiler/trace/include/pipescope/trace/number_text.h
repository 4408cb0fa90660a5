// Numbers as text with a decimal point whatever the C locale says. The app takes the user's
// locale (QCoreApplication calls setlocale), where printf's "%.2f" writes "4,00" in German and
// French: a chart's capacity label read "80,00 GiB" beside ticks and peaks in "80.00".
#pragma once

#include <charconv>
#include <string>

namespace pipescope::trace {

// As printf("%.*g", digits, v) in the C locale: "1.5e+308", "0.125".
inline std::string significantText(double v, int digits) {
    char text[64];
    const auto r = std::to_chars(text, text + sizeof text, v, std::chars_format::general, digits);
    return std::string(text, r.ptr);
}

// As printf("%.*f", decimals, v) in the C locale: "44.6", "182.500".
inline std::string fixedText(double v, int decimals) {
    char text[400];  // the largest double has 309 digits before the point
    const auto r = std::to_chars(text, text + sizeof text, v, std::chars_format::fixed, decimals);
    return r.ec == std::errc() ? std::string(text, r.ptr) : significantText(v, 17);
}

}  // namespace pipescope::trace
