#include "json_reader.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace pipescope::schedule::detail {
namespace {

// Deep enough for any config, shallow enough that recursion cannot exhaust the stack.
constexpr int kMaxDepth = 200;

bool isDigit(char c) {
    return c >= '0' && c <= '9';
}

bool isWordChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || isDigit(c) || c == '_' || c == '-' ||
           c == '.' || c == '+';
}

void appendUtf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

// Length of the valid UTF-8 sequence starting at s[0], or 0 when it is not valid.
std::size_t utf8SequenceLength(std::string_view s) {
    const auto b0 = static_cast<unsigned char>(s[0]);
    std::size_t n = 0;
    std::uint32_t min_cp = 0;
    std::uint32_t cp = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        n = 2;
        min_cp = 0x80;
        cp = b0 & 0x1Fu;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        n = 3;
        min_cp = 0x800;
        cp = b0 & 0x0Fu;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        n = 4;
        min_cp = 0x10000;
        cp = b0 & 0x07u;
    } else {
        return 0;
    }
    if (s.size() < n) {
        return 0;
    }
    for (std::size_t i = 1; i < n; ++i) {
        const auto b = static_cast<unsigned char>(s[i]);
        if ((b & 0xC0) != 0x80) {
            return 0;
        }
        cp = (cp << 6) | (b & 0x3Fu);
    }
    if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return 0;
    }
    return n;
}

class Reader {
  public:
    explicit Reader(std::string_view text) : text_(text) {
        line_starts_.push_back(0);
        for (std::size_t i = 0; i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                line_starts_.push_back(i + 1);
            }
        }
    }

    JsonReadResult run() {
        skipSpace();
        if (at_ == text_.size()) {
            fail(at_, "the document is empty");
        } else if (parseValue(result_.value, "", 0, true, {})) {
            skipSpace();
            if (at_ < text_.size()) {
                fail(at_, "unexpected " + describeHere() +
                              " after the end of the JSON value (only one value is allowed)");
            }
        }
        if (result_.error) {
            result_.value = Json();
            result_.positions.clear();
            result_.duplicates.clear();
        }
        return std::move(result_);
    }

  private:
    TextPos posOf(std::size_t offset) const {
        const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
        const std::size_t line_start = *(it - 1);
        int column = 1;
        for (std::size_t i = line_start; i < offset && i < text_.size(); ++i) {
            if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
                ++column;
            }
        }
        return {static_cast<int>(it - line_starts_.begin()), column};
    }

    bool fail(std::size_t offset, const std::string& message) {
        if (!result_.error) {
            result_.error = JsonSyntaxError{posOf(offset), "syntax error: " + message};
        }
        return false;
    }

    bool atEnd() const { return at_ >= text_.size(); }

    void skipSpace() {
        while (!atEnd() && (text_[at_] == ' ' || text_[at_] == '\t' || text_[at_] == '\n' ||
                            text_[at_] == '\r')) {
            ++at_;
        }
    }

    // What stands at the read position, for messages: "'}'", "'True'", "the end of the document".
    std::string describeHere() const {
        if (atEnd()) {
            return "the end of the document";
        }
        if (isWordChar(text_[at_])) {
            std::size_t end = at_;
            while (end < text_.size() && isWordChar(text_[end]) && end - at_ < 24) {
                ++end;
            }
            return "'" + std::string(text_.substr(at_, end - at_)) + "'";
        }
        const std::size_t n = std::max<std::size_t>(1, utf8SequenceLength(text_.substr(at_)));
        return "'" + std::string(text_.substr(at_, n)) + "'";
    }

    bool expectedValue() {
        if (!atEnd()) {
            const char c = text_[at_];
            if (c == '/') {
                return fail(at_, "comments are not allowed in JSON");
            }
            if (c == '\'') {
                return fail(at_, "strings must be in double quotes, not single quotes");
            }
            if (c == '+') {
                return fail(at_, "numbers must not start with '+'");
            }
            if (isWordChar(c)) {
                return fail(at_, "expected a value, got " + describeHere() +
                                     "; strings need double quotes and the literals are true, "
                                     "false and null");
            }
        }
        return fail(at_, "expected a value, got " + describeHere());
    }

    bool parseValue(Json& out, const std::string& path, int depth, bool record, TextPos key_pos) {
        if (atEnd()) {
            return expectedValue();
        }
        if (record) {
            const TextPos here = posOf(at_);
            result_.positions[path] = NodePos{key_pos.known() ? key_pos : here, here};
        }
        const char c = text_[at_];
        if (c == '{' || c == '[') {
            if (depth >= kMaxDepth) {
                return fail(at_, "nesting deeper than " + std::to_string(kMaxDepth) + " levels");
            }
            return c == '{' ? parseObject(out, path, depth + 1, record)
                            : parseArray(out, path, depth + 1, record);
        }
        if (c == '"') {
            std::string s;
            if (!parseString(s)) {
                return false;
            }
            out = std::move(s);
            return true;
        }
        if (c == '-' || isDigit(c)) {
            return parseNumber(out);
        }
        for (const auto& [word, value] : {std::pair<std::string_view, Json>{"true", Json(true)},
                                          {"false", Json(false)},
                                          {"null", Json(nullptr)}}) {
            if (text_.substr(at_, word.size()) == word &&
                (at_ + word.size() >= text_.size() || !isWordChar(text_[at_ + word.size()]))) {
                at_ += word.size();
                out = value;
                return true;
            }
        }
        return expectedValue();
    }

    bool parseObject(Json& out, const std::string& path, int depth, bool record) {
        out = Json::object();
        ++at_;  // '{'
        skipSpace();
        if (!atEnd() && text_[at_] == '}') {
            ++at_;
            return true;
        }
        while (true) {
            if (atEnd() || text_[at_] != '"') {
                if (!atEnd() && text_[at_] == '}') {
                    return fail(at_, "trailing comma before '}'; remove it");
                }
                if (!atEnd() && text_[at_] == '\'') {
                    return fail(at_, "keys must be in double quotes, not single quotes");
                }
                return fail(at_, "expected a key in double quotes, got " + describeHere());
            }
            const TextPos key_pos = posOf(at_);
            std::string key;
            if (!parseString(key)) {
                return false;
            }
            skipSpace();
            if (atEnd() || text_[at_] != ':') {
                return fail(at_,
                            "expected ':' after the key \"" + key + "\", got " + describeHere());
            }
            ++at_;
            skipSpace();
            const std::string child = memberPath(path, key);
            const bool duplicate = out.contains(key);
            if (duplicate && record) {
                result_.duplicates.push_back({child, key_pos});
            }
            Json value;
            if (!parseValue(value, child, depth, record && !duplicate, key_pos)) {
                return false;
            }
            if (!duplicate) {
                out[key] = std::move(value);
            }
            skipSpace();
            if (!atEnd() && text_[at_] == ',') {
                ++at_;
                skipSpace();
                continue;
            }
            if (!atEnd() && text_[at_] == '}') {
                ++at_;
                return true;
            }
            return fail(at_, "expected ',' or '}' after an object member");
        }
    }

    bool parseArray(Json& out, const std::string& path, int depth, bool record) {
        out = Json::array();
        ++at_;  // '['
        skipSpace();
        if (!atEnd() && text_[at_] == ']') {
            ++at_;
            return true;
        }
        while (true) {
            if (!atEnd() && text_[at_] == ']') {
                return fail(at_, "trailing comma before ']'; remove it");
            }
            Json value;
            if (!parseValue(value, elementPath(path, out.size()), depth, record, {})) {
                return false;
            }
            out.push_back(std::move(value));
            skipSpace();
            if (!atEnd() && text_[at_] == ',') {
                ++at_;
                skipSpace();
                continue;
            }
            if (!atEnd() && text_[at_] == ']') {
                ++at_;
                return true;
            }
            return fail(at_, "expected ',' or ']' after an array element");
        }
    }

    bool parseHex4(std::size_t from, std::uint32_t& cp) {
        if (from + 4 > text_.size()) {
            return false;
        }
        cp = 0;
        for (std::size_t i = from; i < from + 4; ++i) {
            const char c = text_[i];
            cp <<= 4;
            if (isDigit(c)) {
                cp |= static_cast<std::uint32_t>(c - '0');
            } else if (c >= 'a' && c <= 'f') {
                cp |= static_cast<std::uint32_t>(c - 'a' + 10);
            } else if (c >= 'A' && c <= 'F') {
                cp |= static_cast<std::uint32_t>(c - 'A' + 10);
            } else {
                return false;
            }
        }
        return true;
    }

    bool parseEscape(std::string& out) {
        const std::size_t start = at_;  // at the backslash
        if (at_ + 1 >= text_.size()) {
            return fail(start, "unterminated string");
        }
        const char e = text_[at_ + 1];
        at_ += 2;
        switch (e) {
            case '"':
                out += '"';
                return true;
            case '\\':
                out += '\\';
                return true;
            case '/':
                out += '/';
                return true;
            case 'b':
                out += '\b';
                return true;
            case 'f':
                out += '\f';
                return true;
            case 'n':
                out += '\n';
                return true;
            case 'r':
                out += '\r';
                return true;
            case 't':
                out += '\t';
                return true;
            case 'u':
                break;
            default:
                return fail(start, "invalid escape '\\" + std::string(1, e) +
                                       "' in a string (write '\\\\' for a backslash)");
        }
        std::uint32_t cp = 0;
        if (!parseHex4(at_, cp)) {
            return fail(start, "invalid \\u escape in a string: expected four hex digits");
        }
        at_ += 4;
        if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return fail(start, "invalid \\u escape in a string: unpaired surrogate");
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            std::uint32_t low = 0;
            if (text_.substr(at_, 2) != "\\u" || !parseHex4(at_ + 2, low) || low < 0xDC00 ||
                low > 0xDFFF) {
                return fail(start, "invalid \\u escape in a string: unpaired surrogate");
            }
            at_ += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        }
        appendUtf8(out, cp);
        return true;
    }

    bool parseString(std::string& out) {
        const std::size_t open = at_;
        ++at_;  // '"'
        while (true) {
            if (atEnd()) {
                return fail(open, "unterminated string");
            }
            const char c = text_[at_];
            const auto u = static_cast<unsigned char>(c);
            if (c == '"') {
                ++at_;
                return true;
            }
            if (c == '\\') {
                if (!parseEscape(out)) {
                    return false;
                }
            } else if (u < 0x20) {
                return fail(at_, c == '\n' ? "unterminated string (a line break inside a string "
                                             "must be written as \\n)"
                                           : "control character inside a string; write it as an "
                                             "escape such as \\t");
            } else if (u < 0x80) {
                out += c;
                ++at_;
            } else {
                const std::size_t n = utf8SequenceLength(text_.substr(at_));
                if (n == 0) {
                    return fail(at_, "invalid UTF-8 in a string");
                }
                out.append(text_.substr(at_, n));
                at_ += n;
            }
        }
    }

    bool parseNumber(Json& out) {
        const std::size_t start = at_;
        std::size_t i = at_;
        if (text_[i] == '-') {
            ++i;
        }
        if (i >= text_.size() || !isDigit(text_[i])) {
            return fail(start, "invalid number: expected a digit after '-'");
        }
        if (text_[i] == '0' && i + 1 < text_.size() && isDigit(text_[i + 1])) {
            return fail(start, "invalid number: no leading zeros allowed");
        }
        while (i < text_.size() && isDigit(text_[i])) {
            ++i;
        }
        bool integral = true;
        if (i < text_.size() && text_[i] == '.') {
            integral = false;
            ++i;
            if (i >= text_.size() || !isDigit(text_[i])) {
                return fail(i, "invalid number: expected a digit after '.'");
            }
            while (i < text_.size() && isDigit(text_[i])) {
                ++i;
            }
        }
        if (i < text_.size() && (text_[i] == 'e' || text_[i] == 'E')) {
            integral = false;
            ++i;
            if (i < text_.size() && (text_[i] == '+' || text_[i] == '-')) {
                ++i;
            }
            if (i >= text_.size() || !isDigit(text_[i])) {
                return fail(i, "invalid number: expected a digit in the exponent");
            }
            while (i < text_.size() && isDigit(text_[i])) {
                ++i;
            }
        }
        const char* first = text_.data() + start;
        const char* last = text_.data() + i;
        at_ = i;
        if (integral) {
            std::int64_t v = 0;
            if (std::from_chars(first, last, v).ec == std::errc()) {
                out = v;
                return true;
            }
            std::uint64_t u = 0;
            if (text_[start] != '-' && std::from_chars(first, last, u).ec == std::errc()) {
                out = u;
                return true;
            }
        }
        // from_chars ignores the locale, unlike strtod under a Qt app's setlocale().
        double d = 0;
        if (std::from_chars(first, last, d).ec != std::errc()) {
            return fail(start, "number " + std::string(first, last) + " is out of range");
        }
        out = d;
        return true;
    }

    std::string_view text_;
    std::size_t at_ = 0;
    std::vector<std::size_t> line_starts_;
    JsonReadResult result_;
};

}  // namespace

JsonReadResult readJson(std::string_view text) {
    return Reader(text).run();
}

TextPos issuePosition(const PositionMap& positions, const std::string& path, bool key) {
    const auto it = positions.find(path);
    if (it == positions.end()) {
        return {};
    }
    return key ? it->second.key : it->second.value;
}

std::string memberPath(std::string_view parent, std::string_view key) {
    if (parent.empty()) {
        return std::string(key);
    }
    std::string p(parent);
    p += '.';
    p += key;
    return p;
}

std::string elementPath(std::string_view parent, std::size_t index) {
    return std::string(parent) + "[" + std::to_string(index) + "]";
}

}  // namespace pipescope::schedule::detail
