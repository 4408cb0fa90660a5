#include "json_value.h"

#include <charconv>
#include <cmath>

namespace pipescope::analysis::detail {

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

std::string jsonQuote(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    out += '"';
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c >= 0x80) {
            const std::size_t n = utf8Length(text, i);
            if (n == 0) {
                out += "\\ufffd";
                ++i;
            } else {
                out.append(text.substr(i, n));
                i += n;
            }
            continue;
        }
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20 || c == 0x7F) {
                    static const char* const kHex = "0123456789abcdef";
                    out += "\\u00";
                    out += kHex[c >> 4];
                    out += kHex[c & 0xF];
                } else {
                    out += static_cast<char>(c);
                }
        }
        ++i;
    }
    out += '"';
    return out;
}

std::string jsonNumber(double v) {
    if (!std::isfinite(v)) {
        return "null";
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
}

Json& Json::set(std::string key, Json value) {
    if (!std::holds_alternative<Object>(v_)) {
        v_ = Object{};
    }
    std::get<Object>(v_).emplace_back(std::move(key), std::move(value));
    return *this;
}

Json& Json::push(Json value) {
    if (!std::holds_alternative<Array>(v_)) {
        v_ = Array{};
    }
    std::get<Array>(v_).push_back(std::move(value));
    return *this;
}

std::string Json::dump() const {
    std::string out;
    dumpTo(&out, 0);
    out += '\n';
    return out;
}

void Json::dumpTo(std::string* out, int indent) const {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    const std::string close_pad(static_cast<std::size_t>(indent), ' ');
    if (std::holds_alternative<std::monostate>(v_)) {
        *out += "null";
    } else if (const bool* b = std::get_if<bool>(&v_)) {
        *out += *b ? "true" : "false";
    } else if (const std::int64_t* i = std::get_if<std::int64_t>(&v_)) {
        *out += std::to_string(*i);
    } else if (const double* d = std::get_if<double>(&v_)) {
        *out += jsonNumber(*d);
    } else if (const std::string* s = std::get_if<std::string>(&v_)) {
        *out += jsonQuote(*s);
    } else if (const Array* a = std::get_if<Array>(&v_)) {
        // Arrays of plain numbers stay on one line: per-iteration series read better that way.
        bool flat = true;
        for (const Json& e : *a) {
            flat = flat && !std::holds_alternative<Array>(e.v_) &&
                   !std::holds_alternative<Object>(e.v_);
        }
        *out += '[';
        for (std::size_t k = 0; k < a->size(); ++k) {
            *out += k ? (flat ? ", " : ",\n") : (flat ? "" : "\n");
            if (!flat) {
                *out += pad;
            }
            (*a)[k].dumpTo(out, indent + 2);
        }
        if (!flat && !a->empty()) {
            *out += '\n' + close_pad;
        }
        *out += ']';
    } else if (const Object* o = std::get_if<Object>(&v_)) {
        *out += '{';
        for (std::size_t k = 0; k < o->size(); ++k) {
            *out += k ? ",\n" : "\n";
            *out += pad + jsonQuote((*o)[k].first) + ": ";
            (*o)[k].second.dumpTo(out, indent + 2);
        }
        if (!o->empty()) {
            *out += '\n' + close_pad;
        }
        *out += '}';
    }
}

}  // namespace pipescope::analysis::detail
