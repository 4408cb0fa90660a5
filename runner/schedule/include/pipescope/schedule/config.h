// The run configuration shared by the app, the simulator and the runner (architecture.md,
// "The config"). Plain values; parsing and validation live in config_parse.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pipescope::schedule {

enum class DType { BF16, FP16, FP32 };
enum class ScheduleKind { GPipe, OneF1B, Interleaved1F1B, ZBH1, VHalf };
enum class VocabMethod { Naive, Redistributed, Interlaced, Vocab1, Vocab2 };
enum class CostSource { Analytic, Table, Calibrated };

// Compute op kinds that a cost table can give per stage (costs.per_stage_us keys).
enum class CostKey { F, B, W, S, T, IF, IB, L, OPT };
inline constexpr std::array<CostKey, 9> kAllCostKeys = {CostKey::F,  CostKey::B, CostKey::W,
                                                        CostKey::S,  CostKey::T, CostKey::IF,
                                                        CostKey::IB, CostKey::L, CostKey::OPT};

std::string_view toString(DType v);
std::string_view toString(ScheduleKind v);
std::string_view toString(VocabMethod v);
std::string_view toString(CostSource v);
std::string_view toString(CostKey v);
std::optional<DType> dtypeFromString(std::string_view s);
std::optional<ScheduleKind> scheduleFromString(std::string_view s);
std::optional<VocabMethod> vocabMethodFromString(std::string_view s);
std::optional<CostKey> costKeyFromString(std::string_view s);

// Bytes per element of a model dtype.
int dtypeBytes(DType d);
// True for the methods that shard both vocabulary tables over all pipeline ranks.
bool isShardedVocab(VocabMethod m);

struct ModelConfig {
    int layers = 0;
    int hidden = 0;
    int ffn_hidden = 0;  // 4 * hidden when the config leaves it out
    int heads = 0;
    int seq_len = 0;
    std::int64_t vocab = 0;
    int micro_batch = 1;
    DType dtype = DType::BF16;
    // Fused attention (FlashAttention, Megatron's default) keeps no s x s score matrices for the
    // backward; without it each layer keeps the scores, softmax and dropout mask.
    bool flash_attention = true;
};

struct ParallelConfig {
    int pipeline = 1;
    int microbatches = 1;
    ScheduleKind schedule = ScheduleKind::OneF1B;
    // Model chunks per rank: the config's value for interleaved-1f1b, 2 for v-half, else 1.
    int virtual_stages = 1;
    VocabMethod vocab = VocabMethod::Naive;
    // Transformer layers of the first / last pipeline position under "redistributed";
    // empty means "choose to balance".
    std::optional<int> first_stage_layers;
    std::optional<int> last_stage_layers;
};

struct HardwareConfig {
    std::string name = "A100-SXM4-80GB";
    double peak_tflops = 312.0;     // dense bf16/fp16 tensor-core peak
    double memory_gib = 80.0;       // device memory capacity
    double p2p_gbps = 150.0;        // point-to-point bandwidth between neighbouring ranks, GB/s
    double allreduce_gbps = 100.0;  // bus bandwidth of collectives, GB/s
    double latency_us = 10.0;       // per-message latency
    double memory_gbps = 2039.0;    // device memory bandwidth (memory-bound ops), GB/s
    double gemm_efficiency = 0.75;  // achieved fraction of peak on large GEMMs
};

// The most pipeline stages a config may have (docs/config.md).
inline constexpr int kMaxPipeline = 100000;

// The number of Collective values (ir.h), kept here so that the config does not depend on the IR.
inline constexpr std::size_t kCollectiveKinds = 6;

struct CostsConfig {
    CostSource source = CostSource::Analytic;
    std::string calibrated_path;  // the RUN.db of "calibrated:RUN.db"
    // Per-stage microseconds for one micro-batch, indexed [CostKey][rank]; an empty vector
    // means "not given" (analytic fallback).
    std::array<std::vector<double>, kAllCostKeys.size()> per_stage_us;
    std::optional<double> p2p_us;
    std::optional<double> collective_us;
    // Per collective kind (indexed by Collective, see ir.h; entry 0 unused): where given, it
    // takes precedence over collective_us for that kind. Calibration fills it: the barrier C of
    // vocab-2 costs more than the input all-reduce.
    std::array<std::optional<double>, kCollectiveKinds> collectives_us{};

    const std::vector<double>& table(CostKey k) const {
        return per_stage_us[static_cast<std::size_t>(k)];
    }
};

struct RunConfig {
    int iterations = 3;
    int warmup = 1;
    std::uint64_t seed = 1234;
    double learning_rate = 1e-3;  // AdamW's, for the real backends
};

// One override of a config key, as `pipescope-run --set` and sweeps give it:
// path "model.vocab", value as JSON text "256000" (a bare word is taken as a string).
struct Override {
    std::string path;
    std::string value_json;
};

// A named set of overrides; the optional top-level "compare" list of a config holds these so
// that one preset can describe "naive versus vocab-2" (docs/config.md).
struct Variant {
    std::string label;
    std::vector<Override> overrides;
};

struct Config {
    std::string name;
    ModelConfig model;
    ParallelConfig parallel;
    HardwareConfig hardware;
    CostsConfig costs;
    RunConfig run;
    std::vector<Variant> compare;
};

}  // namespace pipescope::schedule
