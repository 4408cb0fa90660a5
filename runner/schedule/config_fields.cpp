#include "config_fields.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

namespace pipescope::schedule::detail {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

std::string parentPath(const std::string& path) {
    const auto dot = path.rfind('.');
    return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

// Whether `number`, a decimal that from_chars read whole but found beyond a double, is too large
// (1e999) rather than too small (1e-999): the power of ten of its leading digit is not negative
// (the largest double is about 1.8e308, the smallest about 4.9e-324).
bool beyondLargest(std::string_view number) {
    const auto e = number.find_first_of("eE");
    const std::string_view mantissa = number.substr(0, e);
    long long exponent = 0;
    if (e != std::string_view::npos) {
        std::string_view x = number.substr(e + 1);
        x.remove_prefix(!x.empty() && x.front() == '+' ? 1 : 0);
        const auto r = std::from_chars(x.data(), x.data() + x.size(), exponent);
        if (r.ec != std::errc() || exponent > 100000 || exponent < -100000) {
            return x.empty() || x.front() != '-';
        }
    }
    const auto first = mantissa.find_first_of("123456789");
    if (first == std::string_view::npos) {
        return false;
    }
    const auto point = std::min(mantissa.find('.'), mantissa.size());
    const long long power = first < point ? static_cast<long long>(point - first) - 1
                                          : -static_cast<long long>(first - point);
    return power + exponent >= 0;
}

// A string where a number belongs that reads as one JSON cannot hold: --set
// run.learning_rate=1e999 or "inf" becomes a string (config.md, "Overrides"), and "got
// \"1e999\"" alone does not say why. Read with from_chars, as JSON writes numbers: strtod
// follows the C locale, which the app takes from the user (in German it read "1,5e999" as such
// a number and not "1.5e999").
std::string numberLikeHint(const Json& v) {
    if (!v.is_string()) {
        return {};
    }
    std::string_view text = v.get_ref<const std::string&>();
    if (text.empty() || text.front() == ' ' || text.size() > 400) {
        return {};
    }
    text.remove_prefix(text.front() == '+' && text.size() > 1 && text[1] != '-' ? 1 : 0);
    double d = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
    if (end != text.data() + text.size() ||
        (ec == std::errc() ? std::isfinite(d) : !beyondLargest(text))) {
        return {};
    }
    const bool digits = std::isdigit(static_cast<unsigned char>(text.back())) != 0;
    return digits ? " (beyond the range of a number, about 1.8e308)"
                  : " (JSON has no NaN or infinity)";
}

}  // namespace

std::optional<std::string> lineProblem(const std::string& text) {
    if (text.empty()) {
        return "must not be empty";
    }
    if (text.find_first_not_of(' ') == std::string::npos) {
        return "must not be blank (it has only spaces)";
    }
    // Names go to terminals, titles and file names in one line: a newline or an escape would
    // break the line or reach the terminal as a command.
    const auto at = std::find_if(text.begin(), text.end(), [](char c) {
        const auto u = static_cast<unsigned char>(c);
        return u < 0x20 || u == 0x7F;
    });
    if (at == text.end()) {
        return std::nullopt;
    }
    char code[8];
    std::snprintf(code, sizeof code, "0x%02X", static_cast<unsigned char>(*at));
    return std::string("must be one line of printable text; it has the control character ") + code +
           " at byte " + std::to_string(at - text.begin() + 1);
}

void FieldReader::report(const std::string& path, std::string message, bool at_key) {
    issues_->push_back(ConfigIssue{path, std::move(message), 0, 0});
    const TextPos pos = issuePosition(positions_, path, at_key);
    issues_->back().line = pos.line;
    issues_->back().column = pos.column;
}

void FieldReader::reportMissing(const std::string& path) {
    const std::string parent = parentPath(path);
    const TextPos pos = issuePosition(positions_, parent, !parent.empty());
    issues_->push_back(ConfigIssue{path, "required key is missing", pos.line, pos.column});
}

void FieldReader::checkUnknownKeys(const Section& s, const std::vector<std::string_view>& known) {
    for (const auto& item : s.json->items()) {
        const std::string& key = item.key();
        if (std::find(known.begin(), known.end(), key) == known.end()) {
            report(memberPath(s.path, key), unknownKeyMessage(key, known), true);
        }
    }
}

Section FieldReader::section(const Section& parent, std::string_view key, bool required) {
    Section s;
    s.path = memberPath(parent.path, key);
    if (!parent.usable || parent.json == nullptr) {
        s.usable = parent.usable && !required;
        return s;
    }
    const auto it = parent.json->find(key);
    if (it == parent.json->end()) {
        if (required) {
            reportMissing(s.path);
        }
        s.usable = !required;
        return s;
    }
    if (!it->is_object()) {
        report(s.path, "must be an object, got " + describeValue(*it), false);
        return s;
    }
    s.json = &*it;
    s.usable = true;
    checkUnknownKeys(s, *knownKeys(s.path));
    return s;
}

const Json* FieldReader::member(const Section& s, std::string_view key) const {
    if (s.json == nullptr) {
        return nullptr;
    }
    const auto it = s.json->find(key);
    return it == s.json->end() ? nullptr : &*it;
}

std::optional<std::int64_t> FieldReader::checkInt(const std::string& path, const Json& v,
                                                  std::int64_t min, std::int64_t max,
                                                  std::string_view what) {
    if (!v.is_number_integer()) {
        std::string hint;
        // 1e5 or 8.0 is a float in JSON: say how to write the integer it means, unless that
        // integer would be refused too (1e10 layers): then the range is what to fix.
        const double d = v.is_number_float() ? v.get<double>() : 0.0;
        if (v.is_number_float() && std::isfinite(d) && std::trunc(d) == d) {
            if (d < static_cast<double>(min)) {
                report(path, "must be at least " + std::to_string(min) + ", got " + v.dump(),
                       false);
                return std::nullopt;
            }
            if (d > static_cast<double>(max)) {
                report(path, "must be at most " + std::to_string(max) + ", got " + v.dump(), false);
                return std::nullopt;
            }
            if (std::abs(d) < 1e15) {
                hint = " (a float; write the integer as " +
                       std::to_string(static_cast<std::int64_t>(d)) + ")";
            }
        }
        report(
            path,
            "must be " + std::string(what) + ", got " + describeValue(v) + hint + numberLikeHint(v),
            false);
        return std::nullopt;
    }
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(max)) {
        report(path, "must be at most " + std::to_string(max) + ", got " + v.dump(), false);
        return std::nullopt;
    }
    const auto i = v.get<std::int64_t>();
    if (i < min) {
        report(path, "must be at least " + std::to_string(min) + ", got " + v.dump(), false);
        return std::nullopt;
    }
    if (i > max) {
        report(path, "must be at most " + std::to_string(max) + ", got " + v.dump(), false);
        return std::nullopt;
    }
    return i;
}

Field<int> FieldReader::readInt(const Section& s, std::string_view key, int min,
                                std::optional<int> fallback) {
    if (!s.usable) {
        return {};
    }
    const std::string path = memberPath(s.path, key);
    const Json* v = member(s, key);
    if (v == nullptr) {
        if (!fallback) {
            reportMissing(path);
            return {};
        }
        return ok(*fallback, false);
    }
    const auto i = checkInt(path, *v, min, kIntMax, "an integer");
    return i ? ok(static_cast<int>(*i), true) : Field<int>{};
}

Field<std::optional<int>> FieldReader::readNullableInt(const Section& s, std::string_view key,
                                                       int min) {
    if (!s.usable) {
        return {};
    }
    const Json* v = member(s, key);
    if (v == nullptr || v->is_null()) {
        return ok(std::optional<int>(), false);
    }
    const auto i = checkInt(memberPath(s.path, key), *v, min, kIntMax, "null or an integer");
    return i ? ok(std::optional<int>(static_cast<int>(*i)), true) : Field<std::optional<int>>{};
}

bool FieldReader::checkNumber(const std::string& path, const Json& v, Bound bound,
                              std::string_view what, const Sane& sane) {
    if (!v.is_number()) {
        report(path,
               "must be " + std::string(what) + ", got " + describeValue(v) + numberLikeHint(v),
               false);
        return false;
    }
    const double d = v.get<double>();
    if (bound == Bound::Positive && !(d > 0)) {
        report(path, "must be greater than 0, got " + v.dump(), false);
        return false;
    }
    if (bound == Bound::NonNegative && !(d >= 0)) {
        report(path, "must be at least 0, got " + v.dump(), false);
        return false;
    }
    if (bound == Bound::Fraction && !(d > 0 && d <= 1)) {
        report(path, "must be in (0, 1], got " + v.dump(), false);
        return false;
    }
    if (sane.least_text != nullptr && d < sane.least) {
        report(path, "must be at least " + std::string(sane.least_text) + ", got " + v.dump(),
               false);
        return false;
    }
    if (sane.most_text != nullptr && d > sane.most) {
        report(path, "must be at most " + std::string(sane.most_text) + ", got " + v.dump(), false);
        return false;
    }
    return true;
}

Field<double> FieldReader::readNumber(const Section& s, std::string_view key, Bound bound,
                                      double fallback, const Sane& sane) {
    if (!s.usable) {
        return {};
    }
    const Json* v = member(s, key);
    if (v == nullptr) {
        return ok(fallback, false);
    }
    if (!checkNumber(memberPath(s.path, key), *v, bound, "a number", sane)) {
        return {};
    }
    return ok(v->get<double>(), true);
}

Field<std::optional<double>> FieldReader::readNullableNumber(const Section& s, std::string_view key,
                                                             const Sane& sane) {
    if (!s.usable) {
        return {};
    }
    const Json* v = member(s, key);
    if (v == nullptr || v->is_null()) {
        return ok(std::optional<double>(), false);
    }
    if (!checkNumber(memberPath(s.path, key), *v, Bound::NonNegative, "null or a number", sane)) {
        return {};
    }
    return ok(std::optional<double>(v->get<double>()), true);
}

Field<std::string> FieldReader::readString(const Section& s, std::string_view key,
                                           std::string fallback) {
    if (!s.usable) {
        return {};
    }
    const std::string path = memberPath(s.path, key);
    const Json* v = member(s, key);
    if (v == nullptr) {
        return ok(std::move(fallback), false);
    }
    if (!v->is_string()) {
        report(path, "must be a string, got " + describeValue(*v), false);
        return {};
    }
    const std::string& text = v->get_ref<const std::string&>();
    if (const auto problem = lineProblem(text)) {
        report(path, *problem, false);
        return {};
    }
    return ok(text, true);
}

Field<bool> FieldReader::readBool(const Section& s, std::string_view key, bool fallback) {
    if (!s.usable) {
        return {};
    }
    const Json* v = member(s, key);
    if (v == nullptr) {
        return ok(fallback, false);
    }
    if (!v->is_boolean()) {
        report(memberPath(s.path, key), "must be true or false, got " + describeValue(*v), false);
        return {};
    }
    return ok(v->get<bool>(), true);
}

}  // namespace pipescope::schedule::detail
