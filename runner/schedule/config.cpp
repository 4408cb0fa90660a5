#include <utility>

#include <pipescope/schedule/config.h>

namespace pipescope::schedule {
namespace {

// One table per enum keeps toString and fromString from drifting apart.
template <typename E, std::size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

constexpr NameTable<DType, 3> kDTypeNames = {{
    {DType::BF16, "bf16"},
    {DType::FP16, "fp16"},
    {DType::FP32, "fp32"},
}};

constexpr NameTable<ScheduleKind, 5> kScheduleNames = {{
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneF1B, "1f1b"},
    {ScheduleKind::Interleaved1F1B, "interleaved-1f1b"},
    {ScheduleKind::ZBH1, "zb-h1"},
    {ScheduleKind::VHalf, "v-half"},
}};

constexpr NameTable<VocabMethod, 5> kVocabNames = {{
    {VocabMethod::Naive, "naive"},
    {VocabMethod::Redistributed, "redistributed"},
    {VocabMethod::Interlaced, "interlaced"},
    {VocabMethod::Vocab1, "vocab-1"},
    {VocabMethod::Vocab2, "vocab-2"},
}};

constexpr NameTable<CostSource, 3> kCostSourceNames = {{
    {CostSource::Analytic, "analytic"},
    {CostSource::Table, "table"},
    {CostSource::Calibrated, "calibrated"},
}};

constexpr NameTable<CostKey, 9> kCostKeyNames = {{
    {CostKey::F, "F"},
    {CostKey::B, "B"},
    {CostKey::W, "W"},
    {CostKey::S, "S"},
    {CostKey::T, "T"},
    {CostKey::IF, "IF"},
    {CostKey::IB, "IB"},
    {CostKey::L, "L"},
    {CostKey::OPT, "OPT"},
}};

template <typename E, std::size_t N>
std::string_view nameOf(const NameTable<E, N>& table, E value) {
    for (const auto& [e, name] : table) {
        if (e == value) {
            return name;
        }
    }
    return "?";
}

template <typename E, std::size_t N>
std::optional<E> valueOf(const NameTable<E, N>& table, std::string_view name) {
    for (const auto& [e, n] : table) {
        if (n == name) {
            return e;
        }
    }
    return std::nullopt;
}

}  // namespace

std::string_view toString(DType v) {
    return nameOf(kDTypeNames, v);
}
std::string_view toString(ScheduleKind v) {
    return nameOf(kScheduleNames, v);
}
std::string_view toString(VocabMethod v) {
    return nameOf(kVocabNames, v);
}
std::string_view toString(CostSource v) {
    return nameOf(kCostSourceNames, v);
}
std::string_view toString(CostKey v) {
    return nameOf(kCostKeyNames, v);
}

std::optional<DType> dtypeFromString(std::string_view s) {
    return valueOf(kDTypeNames, s);
}
std::optional<ScheduleKind> scheduleFromString(std::string_view s) {
    return valueOf(kScheduleNames, s);
}
std::optional<VocabMethod> vocabMethodFromString(std::string_view s) {
    return valueOf(kVocabNames, s);
}
std::optional<CostKey> costKeyFromString(std::string_view s) {
    return valueOf(kCostKeyNames, s);
}

int dtypeBytes(DType d) {
    switch (d) {
        case DType::BF16:
        case DType::FP16:
            return 2;
        case DType::FP32:
            return 4;
    }
    return 4;
}

bool isShardedVocab(VocabMethod m) {
    return m == VocabMethod::Interlaced || m == VocabMethod::Vocab1 || m == VocabMethod::Vocab2;
}

}  // namespace pipescope::schedule
