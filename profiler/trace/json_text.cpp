#include "pipescope/trace/json_text.h"

#include <charconv>
#include <cmath>

namespace pipescope::trace {

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one.
std::size_t utf8Length(std::string_view s, std::size_t i) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        n = 2;
        cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        cp = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        cp = b0 & 0x07u;
    } else {
        return 0;
    }
    if (i + n > s.size()) {
        return 0;
    }
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0u) != 0x80u) {
            return 0;
        }
        cp = (cp << 6) | (b & 0x3Fu);
    }
    const bool overlong = (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    return overlong || surrogate || cp > 0x10FFFF ? 0 : n;
}

}  // namespace

void appendJsonString(std::string* out, std::string_view text) {
    static const char* const kHex = "0123456789abcdef";
    *out += '"';
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80) {
            const std::size_t n = utf8Length(text, i);
            if (n == 0) {
                *out += "\\ufffd";
                ++i;
            } else {
                out->append(text.substr(i, n));
                i += n;
            }
            continue;
        }
        switch (c) {
            case '"':
                *out += "\\\"";
                break;
            case '\\':
                *out += "\\\\";
                break;
            case '\n':
                *out += "\\n";
                break;
            case '\r':
                *out += "\\r";
                break;
            case '\t':
                *out += "\\t";
                break;
            default:
                if (c < 0x20 || c == 0x7F) {
                    *out += "\\u00";
                    *out += kHex[c >> 4];
                    *out += kHex[c & 0xF];
                } else {
                    *out += static_cast<char>(c);
                }
        }
        ++i;
    }
    *out += '"';
}

void appendMicros(std::string* out, std::int64_t ns) {
    // Unsigned arithmetic: the magnitude of INT64_MIN does not fit in an int64.
    const bool negative = ns < 0;
    const std::uint64_t mag =
        negative ? ~static_cast<std::uint64_t>(ns) + 1u : static_cast<std::uint64_t>(ns);
    if (negative) {
        *out += '-';
    }
    *out += std::to_string(mag / 1000u);
    const auto frac = static_cast<unsigned>(mag % 1000u);
    *out += '.';
    *out += static_cast<char>('0' + frac / 100u);
    *out += static_cast<char>('0' + frac / 10u % 10u);
    *out += static_cast<char>('0' + frac % 10u);
}

void appendInt(std::string* out, std::int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, r.ptr);
}

void appendDouble(std::string* out, double v) {
    if (!std::isfinite(v)) {
        *out += "null";
        return;
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out->append(buf, r.ptr);
}

}  // namespace pipescope::trace
