// A small JSON value with ordered keys, for the reports (a few hundred values at most), printed
// deterministically: keys in insertion order, doubles in their shortest exact form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pipescope::analysis::detail {

class Json {
  public:
    using Array = std::vector<Json>;
    using Object = std::vector<std::pair<std::string, Json>>;

    Json() = default;  // null
    Json(bool v) : v_(v) {}
    Json(int v) : v_(static_cast<std::int64_t>(v)) {}
    Json(std::int64_t v) : v_(v) {}
    Json(double v) : v_(v) {}
    Json(const char* v) : v_(std::string(v)) {}
    Json(std::string v) : v_(std::move(v)) {}
    Json(std::string_view v) : v_(std::string(v)) {}
    template <class T>
    Json(const std::optional<T>& v) {
        if (v) {
            *this = Json(*v);
        }
    }
    static Json array() { return Json(Array{}); }
    static Json object() { return Json(Object{}); }

    // For objects: appends a key (keys keep their order). For arrays: appends a value.
    Json& set(std::string key, Json value);
    Json& push(Json value);

    // Pretty-printed with two-space indentation and a final newline.
    std::string dump() const;

  private:
    explicit Json(Array a) : v_(std::move(a)) {}
    explicit Json(Object o) : v_(std::move(o)) {}
    void dumpTo(std::string* out, int indent) const;

    std::variant<std::monostate, bool, std::int64_t, double, std::string, Array, Object> v_;
};

// An array of the numbers in `values` (iteration lists).
Json intArray(const std::vector<int>& values);

// JSON string literal for `text`, quotes included; invalid UTF-8 becomes U+FFFD so the output is
// always valid JSON.
std::string jsonQuote(std::string_view text);
// Shortest text that reads back as the same double; "null" for NaN and infinities.
std::string jsonNumber(double v);

}  // namespace pipescope::analysis::detail
