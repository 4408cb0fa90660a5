// Reading typed values out of the JSON document, with one issue per bad value (docs/config.md
// lists the messages). Internal to pipescope_schedule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pipescope/schedule/config_parse.h>

#include "config_keys.h"
#include "json_reader.h"

namespace pipescope::schedule::detail {

// A value read from the document. `valid` is false when an issue was reported for it (or for the
// section holding it); rules that combine fields run only on valid ones.
template <typename T>
struct Field {
    bool valid = false;
    bool given = false;  // false: `value` is the default
    T value{};
};

template <typename T>
Field<T> ok(T value, bool given) {
    return Field<T>{true, given, std::move(value)};
}

// An object of the format as found in the document.
struct Section {
    const Json* json = nullptr;  // nullptr when absent
    bool usable = false;         // a valid object, or absent where defaults apply
    std::string path;
};

enum class Bound { Positive, NonNegative, Fraction };

// Limits past which a number, though of the right sign, cannot describe real hardware or an op
// and would make times overflow or vanish (denormals); `text` is how messages write them.
struct Sane {
    double least = 0;
    double most = 0;
    const char* least_text = nullptr;  // nullptr: no lower limit beyond the Bound
    const char* most_text = nullptr;
};
inline constexpr Sane kAnyNumber{};
// Rates and sizes of hardware: at least 1e-6 of their unit (TFLOP/s, GiB, GB/s). No upper
// limit: a huge rate makes an op free, which tests and what-if studies use.
inline constexpr Sane kHardwareRate{1e-6, 0, "1e-6", nullptr};
// memory_gib: a capacity, not a rate. It becomes a byte count in an int64 (the summary's
// memory_capacity_bytes, the fits test); 1e300 GiB overflowed it into a negative capacity. 1e9 GiB
// (an exbibyte) stays far inside it.
inline constexpr Sane kMemoryGib{1e-6, 1e9, "1e-6", "1e9"};
// gemm_efficiency: a fraction, but not a vanishing one.
inline constexpr Sane kEfficiency{1e-6, 1, "1e-6", nullptr};
// run.learning_rate: AdamW's step size, at most 1 (each step then moves a weight by about 1,
// fifty times the initial weights' spread; 1e308 made every weight infinite in one step) and
// at least 1e-12 (below it no fp32 weight changes at all).
inline constexpr Sane kLearningRate{1e-12, 1, "1e-12", nullptr};
// Times in microseconds (latency, cost tables): at most 1e9 µs, about 17 minutes.
inline constexpr Sane kMicroseconds{0, 1e9, nullptr, "1e9"};

// Why `text` cannot be a name or label (empty, only spaces, a control character), or nullopt.
std::optional<std::string> lineProblem(const std::string& text);

class FieldReader {
  public:
    FieldReader(const PositionMap& positions, std::vector<ConfigIssue>* issues)
        : positions_(positions), issues_(issues) {}

    void report(const std::string& path, std::string message, bool at_key);
    // A missing key is reported where its object's key stands (the document start for the top).
    void reportMissing(const std::string& path);
    void checkUnknownKeys(const Section& s, const std::vector<std::string_view>& known);
    // The object `key` of `parent`, checked for unknown keys; reports it when it is missing and
    // `required`, or when it is not an object.
    Section section(const Section& parent, std::string_view key, bool required);
    // The value of `key`, or nullptr when it is absent (or its section is).
    const Json* member(const Section& s, std::string_view key) const;

    // Checks an integer against [min, max]; reports and returns nullopt otherwise. `what` is the
    // expected type in words ("an integer", "null or an integer").
    std::optional<std::int64_t> checkInt(const std::string& path, const Json& v, std::int64_t min,
                                         std::int64_t max, std::string_view what);
    bool checkNumber(const std::string& path, const Json& v, Bound bound, std::string_view what,
                     const Sane& sane = kAnyNumber);

    // A missing key takes `fallback`; without one it is required.
    Field<int> readInt(const Section& s, std::string_view key, int min,
                       std::optional<int> fallback);
    Field<std::optional<int>> readNullableInt(const Section& s, std::string_view key, int min);
    Field<double> readNumber(const Section& s, std::string_view key, Bound bound, double fallback,
                             const Sane& sane = kAnyNumber);
    Field<std::optional<double>> readNullableNumber(const Section& s, std::string_view key,
                                                    const Sane& sane = kAnyNumber);
    Field<std::string> readString(const Section& s, std::string_view key, std::string fallback);
    Field<bool> readBool(const Section& s, std::string_view key, bool fallback);

    // A string naming one of `names`; `noun` goes into the message ("unknown schedule ...").
    template <typename E, typename Parse>
    Field<E> readEnum(const Section& s, std::string_view key, std::string_view noun,
                      const std::vector<std::string_view>& names, Parse parse, E fallback) {
        if (!s.usable) {
            return {};
        }
        const std::string path = memberPath(s.path, key);
        const Json* v = member(s, key);
        if (v == nullptr) {
            return ok(fallback, false);
        }
        if (!v->is_string()) {
            report(path, "must be a string, got " + describeValue(*v), false);
            return {};
        }
        const auto& text = v->template get_ref<const std::string&>();
        if (const auto e = parse(text)) {
            return ok(*e, true);
        }
        report(path,
               "unknown " + std::string(noun) + " " + describeValue(*v) + "; expected one of " +
                   joinNames(names) + didYouMean(text, names),
               false);
        return {};
    }

    const PositionMap& positions() const { return positions_; }
    std::vector<ConfigIssue>& issues() { return *issues_; }

  private:
    const PositionMap& positions_;
    std::vector<ConfigIssue>* issues_;
};

}  // namespace pipescope::schedule::detail
