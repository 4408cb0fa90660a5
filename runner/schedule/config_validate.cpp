#include "config_validate.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>

#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/ir.h>

#include "config_fields.h"
#include "config_keys.h"

namespace pipescope::schedule::detail {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

const std::vector<std::string_view> kDTypeNames = {"bf16", "fp16", "fp32"};
const std::vector<std::string_view> kScheduleNames = {"gpipe", "1f1b", "interleaved-1f1b", "zb-h1",
                                                      "v-half"};
const std::vector<std::string_view> kVocabNames = {"naive", "redistributed", "interlaced",
                                                   "vocab-1", "vocab-2"};
const std::vector<std::string_view> kSourceNames = {"analytic", "table", "calibrated"};

class Validator : private FieldReader {
  public:
    Validator(const Json& doc, const PositionMap& positions, bool allow_compare)
        : FieldReader(positions, &out_.issues), doc_(doc), allow_compare_(allow_compare) {}

    Validation run() {
        if (!doc_.is_object()) {
            report("", "the config must be a JSON object, got " + describeValue(doc_), false);
            return std::move(out_);
        }
        root_ = Section{&doc_, true, ""};
        checkUnknownKeys(root_, *knownKeys(""));
        readTopLevel();
        readModel();
        readParallel();
        readHardware();
        readCosts();
        readRun();
        checkModelRules();
        checkParallelRules();
        checkCostsRules();
        if (run_warmup_.valid && run_iterations_.valid &&
            run_warmup_.value >= run_iterations_.value) {
            report("run.warmup",
                   "must be less than run.iterations (" + std::to_string(run_iterations_.value) +
                       "), got " + std::to_string(run_warmup_.value) +
                       "; lower warmup or raise iterations",
                   false);
        }
        if (allow_compare_ && doc_.contains("compare")) {
            const std::vector<ConfigIssue> base_issues = out_.issues;
            validateCompare(doc_, positions(), base_issues, &out_.config.compare, &out_.issues);
        }
        if (out_.issues.empty()) {
            out_.config.name = name_.given ? name_.value : deriveName(out_.config);
        }
        return std::move(out_);
    }

  private:
    void readTopLevel() {
        name_ = readString(root_, "name", "");
        if (const Json* v = member(root_, "compare"); v != nullptr && !allow_compare_) {
            report("compare", "a variant cannot hold its own \"compare\" list", true);
        }
    }

    void readModel() {
        const Section s = section(root_, "model", true);
        model_layers_ = readInt(s, "layers", 1, std::nullopt);
        model_hidden_ = readInt(s, "hidden", 1, std::nullopt);
        const bool default_fits = model_hidden_.valid && model_hidden_.value <= kIntMax / 4;
        model_ffn_ = readInt(s, "ffn_hidden", 1, default_fits ? 4 * model_hidden_.value : 0);
        if (!model_ffn_.given && !default_fits) {
            // The default needs a valid hidden whose 4 × hidden fits an int.
            model_ffn_.valid = false;
            if (model_hidden_.valid) {
                report("model.hidden",
                       "is too large for the default ffn_hidden (4 × hidden); give ffn_hidden",
                       false);
            }
        }
        model_heads_ = readInt(s, "heads", 1, std::nullopt);
        model_seq_ = readInt(s, "seq_len", 1, std::nullopt);
        model_vocab_ = readInt(s, "vocab", 2, std::nullopt);
        model_micro_batch_ = readInt(s, "micro_batch", 1, 1);
        model_dtype_ = readEnum(s, "dtype", "dtype", kDTypeNames, dtypeFromString, DType::BF16);
        model_flash_ = readBool(s, "flash_attention", true);
        ModelConfig& m = out_.config.model;
        m.layers = model_layers_.value;
        m.hidden = model_hidden_.value;
        m.ffn_hidden = model_ffn_.value;
        m.heads = model_heads_.value;
        m.seq_len = model_seq_.value;
        m.vocab = model_vocab_.value;
        m.micro_batch = model_micro_batch_.value;
        m.dtype = model_dtype_.value;
        m.flash_attention = model_flash_.value;
    }

    void readParallel() {
        const Section s = section(root_, "parallel", true);
        par_pipeline_ = readInt(s, "pipeline", 1, std::nullopt);
        if (par_pipeline_.valid && par_pipeline_.value > kMaxPipeline) {
            // Every stage costs kilobytes of schedule state: a million took gigabytes.
            report("parallel.pipeline",
                   "must be at most " + std::to_string(kMaxPipeline) + ", got " +
                       std::to_string(par_pipeline_.value) + " (PipeScope simulates at most " +
                       std::to_string(kMaxPipeline) + " pipeline stages)",
                   false);
            par_pipeline_ = {};
        }
        par_microbatches_ = readInt(s, "microbatches", 1, std::nullopt);
        par_schedule_ = readEnum(s, "schedule", "schedule", kScheduleNames, scheduleFromString,
                                 ScheduleKind::OneF1B);
        par_virtual_ = readInt(s, "virtual_stages", 1, 1);
        par_vocab_ = readEnum(s, "vocab", "vocab method", kVocabNames, vocabMethodFromString,
                              VocabMethod::Naive);
        par_first_ = readNullableInt(s, "first_stage_layers", 0);
        par_last_ = readNullableInt(s, "last_stage_layers", 0);
        ParallelConfig& p = out_.config.parallel;
        p.pipeline = par_pipeline_.value;
        p.microbatches = par_microbatches_.value;
        p.schedule = par_schedule_.value;
        p.vocab = par_vocab_.value;
        p.first_stage_layers = par_first_.value;
        p.last_stage_layers = par_last_.value;
    }

    void readHardware() {
        const Section s = section(root_, "hardware", false);
        HardwareConfig& h = out_.config.hardware;
        const HardwareConfig d;
        const auto take = [](double& to, const Field<double>& f) {
            if (f.valid) {
                to = f.value;
            }
        };
        if (const auto name = readString(s, "name", d.name); name.valid) {
            h.name = name.value;
        }
        // Sane limits: a denormal rate made op times infinite, a huge latency overflowed the
        // trace clock's day count.
        take(h.peak_tflops,
             readNumber(s, "peak_tflops", Bound::Positive, d.peak_tflops, kHardwareRate));
        take(h.memory_gib, readNumber(s, "memory_gib", Bound::Positive, d.memory_gib, kMemoryGib));
        take(h.p2p_gbps, readNumber(s, "p2p_gbps", Bound::Positive, d.p2p_gbps, kHardwareRate));
        take(h.allreduce_gbps,
             readNumber(s, "allreduce_gbps", Bound::Positive, d.allreduce_gbps, kHardwareRate));
        take(h.latency_us,
             readNumber(s, "latency_us", Bound::NonNegative, d.latency_us, kMicroseconds));
        take(h.memory_gbps,
             readNumber(s, "memory_gbps", Bound::Positive, d.memory_gbps, kHardwareRate));
        take(h.gemm_efficiency,
             readNumber(s, "gemm_efficiency", Bound::Fraction, d.gemm_efficiency, kEfficiency));
    }

    void readCostSource(const Section& s) {
        const Json* v = member(s, "source");
        if (!s.usable || v == nullptr) {
            return;
        }
        CostsConfig& c = out_.config.costs;
        if (!v->is_string()) {
            report("costs.source", "must be a string, got " + describeValue(*v), false);
            return;
        }
        const auto& text = v->get_ref<const std::string&>();
        constexpr std::string_view kCalibrated = "calibrated:";
        if (text == "analytic") {
            c.source = CostSource::Analytic;
        } else if (text == "table") {
            c.source = CostSource::Table;
        } else if (text.rfind(kCalibrated, 0) == 0 && text.size() > kCalibrated.size()) {
            c.source = CostSource::Calibrated;
            c.calibrated_path = text.substr(kCalibrated.size());
        } else if (text == "calibrated" || text == kCalibrated) {
            report("costs.source",
                   "\"calibrated\" needs the run it takes its times from: write "
                   "\"calibrated:PATH\", e.g. \"calibrated:run.db\"",
                   false);
        } else {
            report("costs.source",
                   "unknown cost source " + describeValue(*v) +
                       "; expected analytic, table or calibrated:PATH" +
                       didYouMean(text, kSourceNames),
                   false);
        }
    }

    void readCosts() {
        const Section s = section(root_, "costs", false);
        readCostSource(s);
        const Section table = section(s, "per_stage_us", false);
        for (const CostKey k : kAllCostKeys) {
            const Json* v = member(table, toString(k));
            if (v == nullptr) {
                continue;
            }
            const std::string path = memberPath(table.path, toString(k));
            if (!v->is_array()) {
                report(path, "must be an array of numbers, got " + describeValue(*v), false);
                continue;
            }
            auto& field = per_stage_[static_cast<std::size_t>(k)];
            field = ok(std::vector<double>(), true);
            for (std::size_t i = 0; i < v->size(); ++i) {
                const Json& e = (*v)[i];
                if (checkNumber(elementPath(path, i), e, Bound::NonNegative, "a number",
                                kMicroseconds)) {
                    field.value.push_back(e.get<double>());
                } else {
                    field.valid = false;
                }
            }
            if (field.valid) {
                out_.config.costs.per_stage_us[static_cast<std::size_t>(k)] = field.value;
            }
        }
        if (const auto f = readNullableNumber(s, "p2p_us", kMicroseconds); f.valid) {
            out_.config.costs.p2p_us = f.value;
        }
        if (const auto f = readNullableNumber(s, "collective_us", kMicroseconds); f.valid) {
            out_.config.costs.collective_us = f.value;
        }
        const Section kinds = section(s, "collectives_us", false);
        for (std::size_t i = 1; i < kCollectiveKinds; ++i) {
            const auto name = toString(static_cast<Collective>(i));
            if (const auto f = readNullableNumber(kinds, name, kMicroseconds); f.valid) {
                out_.config.costs.collectives_us[i] = f.value;
            }
        }
    }

    void readRun() {
        const Section s = section(root_, "run", false);
        run_iterations_ = readInt(s, "iterations", 1, 3);
        run_warmup_ = readInt(s, "warmup", 0, 1);
        out_.config.run.iterations = run_iterations_.value;
        out_.config.run.warmup = run_warmup_.value;
        if (const auto lr = readNumber(s, "learning_rate", Bound::Fraction, 1e-3, kLearningRate);
            lr.valid) {
            out_.config.run.learning_rate = lr.value;
        }
        const Json* v = member(s, "seed");
        if (!s.usable || v == nullptr) {
            return;
        }
        if (v->is_number_unsigned()) {
            out_.config.run.seed = v->get<std::uint64_t>();
        } else if (v->is_number_integer() && v->get<std::int64_t>() >= 0) {
            out_.config.run.seed = static_cast<std::uint64_t>(v->get<std::int64_t>());
        } else {
            report("run.seed", "must be a non-negative integer, got " + describeValue(*v), false);
        }
    }

    void checkModelRules() {
        if (model_hidden_.valid && model_heads_.valid &&
            model_hidden_.value % model_heads_.value != 0) {
            report("model.hidden",
                   std::to_string(model_hidden_.value) + " is not divisible by model.heads (" +
                       std::to_string(model_heads_.value) + "); make hidden a multiple of heads",
                   false);
        }
    }

    void checkParallelRules();
    void checkLayerSplit(std::int64_t positions);
    void checkRedistribution(std::int64_t positions);
    void checkCostsRules();

    const Json& doc_;
    bool allow_compare_;
    Section root_;
    Validation out_;

    Field<std::string> name_;
    Field<int> model_layers_, model_hidden_, model_ffn_, model_heads_, model_seq_, model_vocab_,
        model_micro_batch_;
    Field<DType> model_dtype_;
    Field<bool> model_flash_;
    Field<int> par_pipeline_, par_microbatches_, par_virtual_;
    Field<ScheduleKind> par_schedule_;
    Field<VocabMethod> par_vocab_;
    Field<std::optional<int>> par_first_, par_last_;
    std::array<Field<std::vector<double>>, kAllCostKeys.size()> per_stage_;
    Field<int> run_iterations_, run_warmup_;
};

void Validator::checkParallelRules() {
    const bool inputs_valid = par_schedule_.valid && par_virtual_.valid;
    int chunks = 0;
    if (inputs_valid) {
        const ScheduleKind sched = par_schedule_.value;
        const std::string given = std::to_string(par_virtual_.value);
        if (sched == ScheduleKind::Interleaved1F1B) {
            if (!par_virtual_.given) {
                chunks = 2;
            } else if (par_virtual_.value < 2) {
                report("parallel.virtual_stages",
                       "must be at least 2 for interleaved-1f1b, got " + given, false);
            } else {
                chunks = par_virtual_.value;
            }
        } else if (sched == ScheduleKind::VHalf) {
            if (par_virtual_.given && par_virtual_.value != 2) {
                report("parallel.virtual_stages",
                       "schedule \"v-half\" always has 2 chunks per rank, got " + given +
                           "; leave virtual_stages out",
                       false);
            } else {
                chunks = 2;
            }
        } else if (par_virtual_.given && par_virtual_.value != 1) {
            report("parallel.virtual_stages",
                   "only interleaved-1f1b takes virtual_stages; schedule \"" +
                       std::string(toString(sched)) + "\" has 1 chunk per rank, got " + given,
                   false);
        } else {
            chunks = 1;
        }
    }
    out_.config.parallel.virtual_stages = chunks;

    if (par_vocab_.valid && par_vocab_.value != VocabMethod::Redistributed) {
        for (auto* f : {&par_first_, &par_last_}) {
            if (f->valid && f->value.has_value()) {
                const char* key = f == &par_first_ ? "first_stage_layers" : "last_stage_layers";
                report(std::string("parallel.") + key,
                       "only used with parallel.vocab \"redistributed\", but parallel.vocab is \"" +
                           std::string(toString(par_vocab_.value)) +
                           "\"; remove it or set it to null",
                       false);
                f->valid = false;
            }
        }
    }

    if (par_schedule_.valid && par_pipeline_.valid && par_microbatches_.valid) {
        const int p = par_pipeline_.value;
        const int m = par_microbatches_.value;
        const std::string ps = std::to_string(p);
        if (par_schedule_.value == ScheduleKind::Interleaved1F1B && m % p != 0) {
            const std::int64_t lower = static_cast<std::int64_t>(m / p) * p;
            const std::int64_t upper = lower + p;
            report("parallel.microbatches",
                   "interleaved-1f1b needs a multiple of parallel.pipeline (" + ps + "), got " +
                       std::to_string(m) + "; use " +
                       (lower > 0 ? std::to_string(lower) + " or " : std::string()) +
                       std::to_string(upper),
                   false);
        }
        if (par_schedule_.value == ScheduleKind::VHalf && m < p) {
            report("parallel.microbatches",
                   "v-half needs at least parallel.pipeline (" + ps + ") micro-batches, got " +
                       std::to_string(m),
                   false);
        }
    }

    if (par_vocab_.valid && isShardedVocab(par_vocab_.value) && model_vocab_.valid &&
        par_pipeline_.valid && model_vocab_.value < par_pipeline_.value) {
        report("model.vocab",
               "must be at least parallel.pipeline (" + std::to_string(par_pipeline_.value) +
                   ") with vocab \"" + std::string(toString(par_vocab_.value)) +
                   "\", which gives every rank a shard of at least one row; got " +
                   std::to_string(model_vocab_.value),
               false);
    }

    if (chunks > 0 && par_pipeline_.valid && model_layers_.valid && par_vocab_.valid) {
        const std::int64_t positions = static_cast<std::int64_t>(par_pipeline_.value) * chunks;
        if (par_vocab_.value == VocabMethod::Redistributed) {
            checkRedistribution(positions);
        } else {
            checkLayerSplit(positions);
        }
    }
}

void Validator::checkLayerSplit(std::int64_t positions) {
    const int layers = model_layers_.value;
    if (layers % positions == 0) {
        return;
    }
    const std::string ls = std::to_string(layers);
    const std::string ps = std::to_string(positions);
    const std::string fix = "; use a multiple of " + ps + " layers";
    const std::string pipeline = std::to_string(par_pipeline_.value);
    std::string message;
    switch (par_schedule_.value) {
        case ScheduleKind::VHalf:
            message = "v-half needs an even split over 2 × parallel.pipeline (" + pipeline +
                      ") = " + ps + " positions, but " + ls + " layers do not divide by " + ps;
            break;
        case ScheduleKind::Interleaved1F1B:
            message = ls + " layers do not split evenly over parallel.pipeline (" + pipeline +
                      ") × parallel.virtual_stages (" +
                      std::to_string(out_.config.parallel.virtual_stages) + ") = " + ps +
                      " model chunks";
            break;
        default:
            message =
                ls + " layers do not split evenly over parallel.pipeline (" + pipeline + ") stages";
            break;
    }
    report("model.layers", message + fix + " (or parallel.vocab \"redistributed\")", false);
}

void Validator::checkRedistribution(std::int64_t positions) {
    if (positions < 2) {
        report("parallel.vocab",
               "redistributed needs at least 2 pipeline positions, got parallel.pipeline = " +
                   std::to_string(par_pipeline_.value) + "; use more stages or another method",
               false);
        return;
    }
    const int layers = model_layers_.value;
    const std::string ls = std::to_string(layers);
    // The other methods split evenly, so every position holds a layer; here the middle ones
    // could be left empty (4 layers on 100 stages ran 96 idle ranks).
    if (layers < positions - 2) {
        report("model.layers",
               ls + " layers leave pipeline positions empty: redistributed gives each of the " +
                   std::to_string(positions - 2) +
                   " positions between the first and the last at least one layer; use at least " +
                   std::to_string(positions - 2) + " layers or fewer stages",
               false);
        return;
    }
    if (!par_first_.valid || !par_last_.valid) {
        return;
    }
    const auto& first = par_first_.value;
    const auto& last = par_last_.value;
    bool each_fits = true;
    for (const auto& [key, value] : {std::pair{"parallel.first_stage_layers", first},
                                     std::pair{"parallel.last_stage_layers", last}}) {
        if (value && *value > layers) {
            report(key, std::to_string(*value) + " is more than model.layers (" + ls + ")", false);
            each_fits = false;
        }
    }
    if (!each_fits) {
        return;
    }
    // One count given: the other is chosen, but what the given one leaves must still give each
    // middle position a layer.
    if (first.has_value() != last.has_value()) {
        const bool is_first = first.has_value();
        const int given = is_first ? *first : *last;
        if (layers - given < positions - 2) {
            report(is_first ? "parallel.first_stage_layers" : "parallel.last_stage_layers",
                   std::to_string(given) + " of model.layers (" + ls + ") leaves " +
                       std::to_string(layers - given) + " for the " +
                       std::to_string(positions - 2) +
                       " positions between the first and the last, which need at least one "
                       "each; lower it",
                   false);
        }
        return;
    }
    if (!first || !last) {
        return;
    }
    const std::string sum = std::to_string(*first) + " + " + std::to_string(*last) + " = " +
                            std::to_string(*first + *last);
    if (*first + *last > layers) {
        report("parallel.last_stage_layers",
               "first_stage_layers + last_stage_layers = " + sum + " is more than model.layers (" +
                   ls + "); lower one of them",
               false);
    } else if (layers - *first - *last < positions - 2) {
        report("parallel.last_stage_layers",
               "first_stage_layers + last_stage_layers = " + sum + " leaves " +
                   std::to_string(layers - *first - *last) + " of model.layers (" + ls +
                   ") for the " + std::to_string(positions - 2) +
                   " positions between, which need at least one each; lower one of them",
               false);
    } else if (positions == 2 && *first + *last != layers) {
        report("parallel.last_stage_layers",
               "with 2 pipeline positions first_stage_layers + last_stage_layers must equal "
               "model.layers (" +
                   ls + "), got " + sum + "; set one of them to null to have it chosen",
               false);
    }
}

void Validator::checkCostsRules() {
    if (!par_pipeline_.valid) {
        return;
    }
    const auto p = static_cast<std::size_t>(par_pipeline_.value);
    for (const CostKey k : kAllCostKeys) {
        const auto& f = per_stage_[static_cast<std::size_t>(k)];
        if (f.valid && !f.value.empty() && f.value.size() != p) {
            report("costs.per_stage_us." + std::string(toString(k)),
                   "has " + std::to_string(f.value.size()) + " entries but parallel.pipeline is " +
                       std::to_string(p) + "; give one entry per rank or none",
                   false);
        }
    }
}

}  // namespace

Validation validateDocument(const Json& doc, const PositionMap& positions, bool allow_compare) {
    return Validator(doc, positions, allow_compare).run();
}

std::string deriveName(const Config& c) {
    std::string name =
        std::to_string(c.model.layers) + "L h" + std::to_string(c.model.hidden) + " V" +
        std::to_string(c.model.vocab) + " p" + std::to_string(c.parallel.pipeline) + " m" +
        std::to_string(c.parallel.microbatches) + " " + std::string(toString(c.parallel.schedule));
    if (c.parallel.schedule == ScheduleKind::Interleaved1F1B) {
        name += " v" + std::to_string(c.parallel.virtual_stages);
    }
    return name + " " + std::string(toString(c.parallel.vocab));
}

}  // namespace pipescope::schedule::detail
