#include "json_reader.h"

#include <algorithm>
#include <cstdint>
#include <unordered_set>

namespace pipescope::schedule::detail {
namespace {

// Deep enough for any config, shallow enough that no later recursive walk can exhaust the stack.
constexpr int kMaxDepth = 200;

bool isSpace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool isStructural(char c) {
    return c == '{' || c == '}' || c == '[' || c == ']' || c == ',' || c == ':' || c == '"';
}

bool isDigit(char c) {
    return c >= '0' && c <= '9';
}

bool isLetter(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// Where each token of the text starts, separators (',' and ':') left out. On text that nlohmann
// accepted, the n-th offset is the token of the n-th SAX event, which is how positions are
// known without a second parser. On rejected text the split is loose but still useful for
// pointing at the token an error sits in.
std::vector<std::size_t> tokenStarts(std::string_view t) {
    std::vector<std::size_t> starts;
    std::size_t i = t.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;  // nlohmann skips a UTF-8 BOM
    while (i < t.size()) {
        const char c = t[i];
        if (isSpace(c) || c == ',' || c == ':') {
            ++i;
            continue;
        }
        starts.push_back(i);
        if (c == '"') {
            ++i;
            while (i < t.size() && t[i] != '"' && t[i] != '\n') {
                i += t[i] == '\\' ? 2 : 1;
            }
            i = std::min(i + 1, t.size());
        } else if (isStructural(c)) {
            ++i;
        } else {
            while (i < t.size() && !isSpace(t[i]) && !isStructural(t[i])) {
                ++i;
            }
        }
    }
    return starts;
}

class TextIndex {
  public:
    explicit TextIndex(std::string_view text) : text_(text) {
        line_starts_.push_back(0);
        for (std::size_t i = 0; i < text_.size(); ++i) {
            if (text_[i] == '\n') {
                line_starts_.push_back(i + 1);
            }
        }
    }

    // Line and column of a byte offset; columns count UTF-8 code points. Offsets asked for in
    // increasing order (as the parser goes) count on from the previous one, so that a long
    // minified line costs linear, not quadratic, time.
    TextPos posOf(std::size_t offset) {
        offset = std::min(offset, text_.size());
        const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
        const std::size_t line_start = *(it - 1);
        const int line = static_cast<int>(it - line_starts_.begin());
        std::size_t from = line_start;
        int column = 1;
        if (line == last_.line && offset >= last_offset_) {
            from = last_offset_;
            column = last_.column;
        }
        for (std::size_t i = from; i < offset; ++i) {
            if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
                ++column;
            }
        }
        last_ = {line, column};
        last_offset_ = offset;
        return last_;
    }

  private:
    std::string_view text_;
    std::vector<std::size_t> line_starts_;
    TextPos last_;  // the previous answer, and its offset
    std::size_t last_offset_ = 0;
};

// Builds the ordered_json tree from nlohmann's SAX events, keeping the first of duplicate keys
// (and reporting the others) and recording where each value stands.
class TreeBuilder {
  public:
    TreeBuilder(const std::vector<std::size_t>& starts, TextIndex& index, JsonReadResult& result)
        : starts_(starts), index_(index), result_(result) {}

    bool null() { return scalar(Json(nullptr)); }
    bool boolean(bool v) { return scalar(Json(v)); }
    bool number_integer(Json::number_integer_t v) { return scalar(Json(v)); }
    bool number_unsigned(Json::number_unsigned_t v) { return scalar(Json(v)); }
    bool number_float(Json::number_float_t v, const Json::string_t& /*text*/) {
        return scalar(Json(v));
    }
    bool string(Json::string_t& v) { return scalar(Json(std::move(v))); }
    bool binary(Json::binary_t& /*v*/) { return false; }  // never produced by JSON text

    bool start_object(std::size_t /*n*/) { return open(Json::object()); }
    bool start_array(std::size_t /*n*/) { return open(Json::array()); }
    bool end_object() { return close(); }
    bool end_array() { return close(); }

    bool key(Json::string_t& k) {
        const std::size_t at = nextToken();
        if (discard_depth_ > 0) {
            return true;
        }
        Frame& f = stack_.back();
        key_ = std::move(k);
        key_pos_ = index_.posOf(at);
        // ordered_json finds keys by a linear scan; the set keeps many keys linear in total.
        discard_next_ = !f.keys.insert(key_).second;
        if (discard_next_) {
            result_.duplicates.push_back({memberPath(f.path, key_), key_pos_});
        }
        return true;
    }

    bool parse_error(std::size_t byte, const std::string& /*last_token*/,
                     const nlohmann::detail::exception& ex) {
        nlohmann_error_ = ex.what();
        error_offset_ = byte > 0 ? byte - 1 : 0;
        return false;
    }

    const std::string& nlohmannError() const { return nlohmann_error_; }
    std::size_t errorOffset() const { return error_offset_; }
    bool tooDeep() const { return too_deep_; }
    std::size_t lastTokenOffset() const { return last_token_; }

  private:
    struct Frame {
        Json* value;
        std::string path;
        std::unordered_set<std::string> keys;  // of an object, to find duplicates
    };

    std::size_t nextToken() {
        last_token_ = next_ < starts_.size() ? starts_[next_] : last_token_;
        ++next_;
        return last_token_;
    }

    // Puts a new value where the parser stands and returns it, or nullptr when it is dropped.
    Json* place(Json&& v, std::size_t at, std::string* path) {
        if (discard_depth_ > 0 || discard_next_) {
            discard_next_ = false;
            return nullptr;
        }
        const TextPos here = index_.posOf(at);
        Json* slot = nullptr;
        TextPos key_pos = here;
        if (stack_.empty()) {
            result_.value = std::move(v);
            slot = &result_.value;
            path->clear();
        } else if (Frame& f = stack_.back(); f.value->is_array()) {
            *path = elementPath(f.path, f.value->size());
            f.value->push_back(std::move(v));
            slot = &f.value->back();
        } else {
            *path = memberPath(f.path, key_);
            key_pos = key_pos_;
            // The key is new (duplicates are dropped above): append without ordered_map's scan.
            auto& members = f.value->get_ref<Json::object_t&>();
            members.emplace_back(key_, std::move(v));
            slot = &members.back().second;
        }
        result_.positions[*path] = NodePos{key_pos, here};
        return slot;
    }

    bool scalar(Json&& v) {
        std::string path;
        place(std::move(v), nextToken(), &path);
        return true;
    }

    bool open(Json&& v) {
        const std::size_t at = nextToken();
        if (++depth_ > kMaxDepth) {
            too_deep_ = true;
            return false;
        }
        if (discard_depth_ > 0 || discard_next_) {
            discard_next_ = false;
            ++discard_depth_;
            return true;
        }
        std::string path;
        Json* slot = place(std::move(v), at, &path);
        // The parent does not change while this value is open, so the pointer stays valid.
        stack_.push_back({slot, std::move(path), {}});
        return true;
    }

    bool close() {
        nextToken();
        --depth_;
        if (discard_depth_ > 0) {
            --discard_depth_;
        } else {
            stack_.pop_back();
        }
        return true;
    }

    const std::vector<std::size_t>& starts_;
    TextIndex& index_;
    JsonReadResult& result_;
    std::vector<Frame> stack_;
    std::size_t next_ = 0;
    std::size_t last_token_ = 0;
    std::string key_;
    TextPos key_pos_;
    bool discard_next_ = false;
    int discard_depth_ = 0;
    int depth_ = 0;
    bool too_deep_ = false;
    std::string nlohmann_error_;
    std::size_t error_offset_ = 0;
};

bool has(std::string_view haystack, std::string_view needle) {
    return haystack.find(needle) != std::string_view::npos;
}

// A token as shown in a message: at most 24 characters, in single quotes.
std::string quoteToken(std::string_view text, std::size_t at) {
    if (at >= text.size()) {
        return "the end of the document";
    }
    std::size_t end = at + 1;
    if (!isStructural(text[at])) {
        while (end < text.size() && !isSpace(text[end]) && !isStructural(text[end]) &&
               end - at < 24) {
            ++end;
        }
    }
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
        ++end;  // never cut a UTF-8 sequence
    }
    return "'" + std::string(text.substr(at, end - at)) + "'";
}

// Source text as a message shows it: up to the first space, at most 40 characters (then
// "..."), so that a 5 MB number or a key followed by a line break stays a short, one-line
// message. Control characters are escaped by ConfigIssue::text.
std::string shortText(std::string_view t) {
    constexpr std::size_t kMax = 40;
    const auto space = std::find_if(t.begin(), t.end(), isSpace);
    t = t.substr(0, static_cast<std::size_t>(space - t.begin()));
    if (t.size() <= kMax) {
        return std::string(t);
    }
    std::size_t cut = kMax - 3;
    while (cut > 0 && (static_cast<unsigned char>(t[cut]) & 0xC0) == 0x80) {
        --cut;  // never cut a UTF-8 sequence
    }
    return std::string(t.substr(0, cut)) + "...";
}

struct Explained {
    std::size_t offset;
    std::string message;
};

// What is wrong with a number token, in the words of the JSON grammar, or "" when it is fine.
std::string numberProblem(std::string_view tok) {
    std::size_t i = 0;
    if (tok[i] == '-') {
        ++i;
    }
    if (i >= tok.size() || !isDigit(tok[i])) {
        return "invalid number: expected a digit after '-'";
    }
    if (tok[i] == '0' && i + 1 < tok.size() && isDigit(tok[i + 1])) {
        return "invalid number: no leading zeros allowed";
    }
    while (i < tok.size() && isDigit(tok[i])) {
        ++i;
    }
    if (i < tok.size() && tok[i] == '.') {
        ++i;
        if (i >= tok.size() || !isDigit(tok[i])) {
            return "invalid number: expected a digit after '.'";
        }
        while (i < tok.size() && isDigit(tok[i])) {
            ++i;
        }
    }
    if (i < tok.size() && (tok[i] == 'e' || tok[i] == 'E')) {
        ++i;
        if (i < tok.size() && (tok[i] == '+' || tok[i] == '-')) {
            ++i;
        }
        if (i >= tok.size() || !isDigit(tok[i])) {
            return "invalid number: expected a digit in the exponent";
        }
    }
    return {};
}

// Turns nlohmann's report of a syntax error into a message a config author can act on: the
// usual slips (single quotes, trailing commas, comments, bare words) are named as such, and the
// position moves to the start of the offending token where that is where the fix goes.
Explained explain(std::string_view text, const std::vector<std::size_t>& starts,
                  std::size_t error_offset, const std::string& what) {
    // nlohmann: "[json.exception.parse_error.101] parse error at line 1, column 9: syntax error
    // while parsing object - unexpected string literal; expected '}'"
    std::string detail = what;
    if (const auto colon = detail.find(": "); colon != std::string::npos) {
        detail = detail.substr(colon + 2);
    }
    const auto first = std::find_if(text.begin(), text.end(), [](char c) { return !isSpace(c); });
    if (first == text.end()) {
        return {text.size(), "the document is empty"};
    }
    // The token the error sits in: the last one starting at or before the error. A literal cut
    // short ("tru}") fails on the character after it, which starts a token of its own.
    auto it = std::upper_bound(starts.begin(), starts.end(), error_offset);
    if (has(detail, "invalid literal") && it - starts.begin() >= 2 &&
        isStructural(text[*(it - 1)])) {
        --it;
    }
    // At the end of the text the error is the end itself, unless a token was cut short there.
    const bool cut_short = has(detail, " - invalid ");
    const std::size_t at = it == starts.begin() || (error_offset >= text.size() && !cut_short)
                               ? error_offset
                               : *(it - 1);
    const std::size_t tok_end =
        it == starts.end() ? text.size() : std::min<std::size_t>(*it, text.size());
    const std::string_view tok = text.substr(at, tok_end - at);
    const char c = at < text.size() ? text[at] : '\0';

    std::size_t before = at;
    while (before > 0 && isSpace(text[before - 1])) {
        --before;
    }
    const char prev = before > 0 ? text[before - 1] : '\0';

    if (has(detail, "; expected end of input")) {
        return {at, "unexpected " + quoteToken(text, at) +
                        " after the end of the JSON value (only one value is allowed)"};
    }
    if (c == '/') {
        return {at, "comments are not allowed in JSON"};
    }
    if (c == '\'') {
        return {at, has(detail, "object key") ? "keys must be in double quotes, not single quotes"
                                              : "strings must be in double quotes, not single "
                                                "quotes"};
    }
    if (c == '+') {
        return {at, "numbers must not start with '+'"};
    }
    // A stray comma: the error sits on it, but the token before it would be blamed.
    if (error_offset < text.size() && text[error_offset] == ',') {
        std::size_t p = error_offset;
        while (p > 0 && isSpace(text[p - 1])) {
            --p;
        }
        const char before_comma = p > 0 ? text[p - 1] : '\0';
        if (before_comma == ',') {
            return {error_offset, "two commas in a row; remove one"};
        }
        if (before_comma == '[' || before_comma == '{') {
            return {error_offset,
                    std::string("a comma right after '") + before_comma + "'; remove it"};
        }
    }
    if ((c == '}' || c == ']') && prev == ',') {
        return {at, std::string("trailing comma before '") + c + "'; remove it"};
    }
    if (has(detail, "number overflow")) {
        // The token runs on to the next one's start: leave out the ',' or ':' after the number.
        return {at,
                "number " + shortText(tok.substr(0, tok.find_first_of(",:"))) + " is out of range"};
    }
    if (c == '"' && has(detail, "invalid string")) {
        if (has(detail, "missing closing quote")) {
            return {at, "unterminated string"};
        }
        if (has(detail, "(LF)")) {
            return {error_offset,
                    "unterminated string (a line break inside a string must be "
                    "written as \\n)"};
        }
        if (has(detail, "control character")) {
            return {error_offset,
                    "control character inside a string; write it as an escape such as \\t"};
        }
        if (has(detail, "UTF-8")) {
            return {error_offset, "invalid UTF-8 in a string"};
        }
        // Escapes: point at the backslash that starts the bad one.
        std::size_t bs = std::min(error_offset, text.size() - 1);
        while (bs > at && text[bs] != '\\') {
            --bs;
        }
        if (has(detail, "surrogate")) {
            return {bs, "invalid \\u escape in a string: unpaired surrogate"};
        }
        if (has(detail, "4 hex digits")) {
            return {bs, "invalid \\u escape in a string: expected four hex digits"};
        }
        if (has(detail, "after backslash") && bs + 1 < text.size()) {
            return {bs, "invalid escape '\\" + std::string(1, text[bs + 1]) +
                            "' in a string (write '\\\\' for a backslash)"};
        }
    }
    if (has(detail, "invalid number")) {
        // nlohmann stops at the character where a digit was due.
        const char* what_missing = has(detail, "after '-'")   ? "after '-'"
                                   : has(detail, "after '.'") ? "after '.'"
                                                              : "in the exponent";
        return {error_offset, std::string("invalid number: expected a digit ") + what_missing};
    }
    if (c == '-' || isDigit(c)) {
        if (const std::string problem = numberProblem(tok); !problem.empty()) {
            return {at, problem};
        }
    }
    if (has(detail, "object separator") && it != starts.begin() && it - 1 != starts.begin()) {
        const std::size_t key_at = *(it - 2);
        std::string_view key = text.substr(key_at, at - key_at);
        while (!key.empty() && (isSpace(key.back()) || key.back() == '"')) {
            key.remove_suffix(1);
        }
        key.remove_prefix(key.empty() ? 0 : 1);
        return {at, "expected ':' after the key \"" + shortText(key) + "\", got " +
                        quoteToken(text, at)};
    }
    if (has(detail, "object key")) {
        return {at, "expected a key in double quotes, got " + quoteToken(text, at)};
    }
    if (has(detail, "while parsing object -")) {
        return {at, "expected ',' or '}' after an object member"};
    }
    if (has(detail, "while parsing array -")) {
        return {at, "expected ',' or ']' after an array element"};
    }
    if (isLetter(c)) {
        return {at, "expected a value, got " + quoteToken(text, at) +
                        "; strings need double quotes and the literals are true, false and null"};
    }
    if (has(detail, "while parsing value")) {
        return {at, "expected a value, got " + quoteToken(text, at)};
    }
    // Anything else: nlohmann's own words, without its prefix.
    // nlohmann quotes the last token it read, which may be megabytes long.
    const std::string prefix = "syntax error ";
    if (detail.rfind(prefix, 0) == 0) {
        detail = detail.substr(prefix.size());
    }
    if (const auto last = detail.find("; last read: '"); last != std::string::npos) {
        const std::size_t from = last + 14;
        const std::size_t to = detail.find('\'', from);
        detail = detail.substr(0, from) +
                 shortText(std::string_view(detail).substr(
                     from, to == std::string::npos ? std::string::npos : to - from)) +
                 (to == std::string::npos ? std::string("'") : detail.substr(to));
    }
    return {error_offset, detail};
}

}  // namespace

JsonReadResult readJson(std::string_view text) {
    // nlohmann reads UTF-8 only; a file saved as UTF-16 (Windows editors, PowerShell's '>')
    // would fail on its first byte with a message that shows two unreadable characters.
    if (text.substr(0, 2) == "\xFF\xFE" || text.substr(0, 2) == "\xFE\xFF") {
        JsonReadResult result;
        result.error =
            JsonSyntaxError{TextPos{1, 1},
                            "the file is UTF-16 (it starts with a UTF-16 byte-order mark); save it "
                            "as UTF-8"};
        return result;
    }
    const std::vector<std::size_t> starts = tokenStarts(text);
    TextIndex index(text);
    JsonReadResult result;
    TreeBuilder builder(starts, index, result);
    const bool ok = Json::sax_parse(text, &builder);
    if (!ok) {
        result.value = Json();
        result.positions.clear();
        result.duplicates.clear();
        if (builder.tooDeep()) {
            result.error = JsonSyntaxError{
                index.posOf(builder.lastTokenOffset()),
                "syntax error: nesting deeper than " + std::to_string(kMaxDepth) + " levels"};
        } else {
            const Explained e =
                explain(text, starts, builder.errorOffset(), builder.nlohmannError());
            result.error = JsonSyntaxError{index.posOf(e.offset), "syntax error: " + e.message};
        }
    }
    return result;
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
