// Formulas and their sources: docs/model-math.md.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include <pipescope/schedule/model_math.h>

namespace pipescope::schedule {
namespace {

int chunksOf(const Config& c) {
    switch (c.parallel.schedule) {
        case ScheduleKind::Interleaved1F1B:
            return std::max(1, c.parallel.virtual_stages);
        case ScheduleKind::VHalf:
            return 2;
        default:
            return 1;
    }
}

int positionsOf(const Config& c) {
    return std::max(1, c.parallel.pipeline) * chunksOf(c);
}

// `total` layers over `count` positions, as evenly as possible, the earliest taking the extra.
std::vector<int> spreadEvenly(int total, int count) {
    std::vector<int> out(static_cast<std::size_t>(std::max(0, count)), 0);
    if (count <= 0 || total <= 0) {
        return out;
    }
    for (int i = 0; i < count; ++i) {
        out[static_cast<std::size_t>(i)] = total / count + (i < total % count ? 1 : 0);
    }
    return out;
}

// The per-position layer counts of a redistributed split.
std::vector<int> redistributedLayers(int layers, int positions, int first, int last) {
    if (positions <= 1) {
        return {layers};
    }
    std::vector<int> out;
    out.push_back(first);
    const std::vector<int> middle = spreadEvenly(layers - first - last, positions - 2);
    out.insert(out.end(), middle.begin(), middle.end());
    out.push_back(last);
    return out;
}

double b(const ModelConfig& m) {
    return m.micro_batch;
}
double s(const ModelConfig& m) {
    return m.seq_len;
}
double h(const ModelConfig& m) {
    return m.hidden;
}
double f(const ModelConfig& m) {
    return m.ffn_hidden;
}
double d(const ModelConfig& m) {
    return dtypeBytes(m.dtype);
}

// Rows of one vocabulary shard under the sharded methods (padded vocabulary / p).
double shardRows(const Config& c) {
    return static_cast<double>(paddedVocab(c)) / std::max(1, c.parallel.pipeline);
}

}  // namespace

int Placement::positionSearch(int rank, int chunk) const {
    // Chunk 1 under v-half sits at 2p - 1 - r; otherwise search.
    const int q = 2 * ranks - 1 - rank;
    if (chunk == 1 && q >= 0 && static_cast<std::size_t>(q) < position_rank.size() &&
        static_cast<std::size_t>(q) < position_chunk.size() &&
        position_rank[static_cast<std::size_t>(q)] == rank &&
        position_chunk[static_cast<std::size_t>(q)] == chunk) {
        return q;
    }
    for (std::size_t k = 0; k < position_rank.size(); ++k) {
        if (k < position_chunk.size() && position_rank[k] == rank && position_chunk[k] == chunk) {
            return static_cast<int>(k);
        }
    }
    return -1;
}

int Placement::layersOnRank(int rank) const {
    // Through the rank's chunks, not all positions: callers ask for every rank, and p^2 steps
    // took minutes at p = 10^5.
    int total = 0;
    for (int c = 0; c < chunks; ++c) {
        const int q = position(rank, c);
        if (q >= 0 && static_cast<std::size_t>(q) < layers.size()) {
            total += layers[static_cast<std::size_t>(q)];
        }
    }
    return total;
}

RedistributionChoice chooseRedistribution(const Config& config, double layer_cost,
                                          double input_cost, double output_cost) {
    const int layers = config.model.layers;
    const int positions = positionsOf(config);
    const auto& fixed_first = config.parallel.first_stage_layers;
    const auto& fixed_last = config.parallel.last_stage_layers;
    if (positions <= 1) {
        return {layers, 0};
    }
    if (fixed_first && fixed_last) {
        return {*fixed_first, *fixed_last};
    }
    // Ties are compared with a relative tolerance so that sums of the same costs taken in a
    // different order do not decide.
    const auto less = [](double a, double b2) {
        return a < b2 - 1e-9 * std::max(std::abs(a), std::abs(b2));
    };
    const std::vector<int> even = spreadEvenly(layers, positions);
    RedistributionChoice best{even.front(), even.back()};
    double best_max = std::numeric_limits<double>::infinity();
    double best_spread = best_max;
    int best_moved = std::numeric_limits<int>::max();
    const std::int64_t middle = positions - 2;
    // The cost of each candidate in O(1): the middle positions hold lo or lo + 1 layers.
    const auto consider = [&](int first, int last) {
        double max_cost = first * layer_cost + input_cost;
        double min_cost = max_cost;
        const double end_cost = last * layer_cost + output_cost;
        max_cost = std::max(max_cost, end_cost);
        min_cost = std::min(min_cost, end_cost);
        if (middle > 0) {
            const std::int64_t rest = layers - first - last;
            const auto lo = static_cast<double>(rest / middle);
            const double hi = lo + (rest % middle != 0 ? 1.0 : 0.0);
            max_cost = std::max(max_cost, hi * layer_cost);
            min_cost = std::min(min_cost, lo * layer_cost);
        }
        const double spread = max_cost - min_cost;
        const int moved = std::abs(first - even.front()) + std::abs(last - even.back());
        const bool better =
            less(max_cost, best_max) ||
            (!less(best_max, max_cost) &&
             (less(spread, best_spread) || (!less(best_spread, spread) && moved < best_moved)));
        if (better) {
            best = {first, last};
            best_max = max_cost;
            best_spread = spread;
            best_moved = moved;
        }
    };
    // The most layers a position with `extra` cost can hold and keep its cost within `bound`.
    const auto fits = [&](double bound, double extra) -> std::int64_t {
        if (!(layer_cost > 0) || !std::isfinite(bound)) {
            return layers;
        }
        const double n = std::floor((bound - extra) / layer_cost);
        return static_cast<std::int64_t>(std::clamp(n, -1.0, static_cast<double>(layers)));
    };
    // A candidate whose every position costs at most `bound`, if there is one.
    const auto within = [&](double bound) -> std::optional<RedistributionChoice> {
        const std::int64_t in_middle = middle > 0 ? fits(bound, 0.0) * middle : 0;
        const std::int64_t first =
            fixed_first ? *fixed_first
                        : std::min<std::int64_t>(fits(bound, input_cost),
                                                 layers - fixed_last.value_or(0) - middle);
        std::int64_t last = fixed_last ? *fixed_last
                            : positions == 2
                                ? layers - first
                                : std::max<std::int64_t>(0, layers - first - in_middle);
        const std::int64_t rest = layers - first - last;
        if (first < 0 || first > fits(bound, input_cost) || last < 0 ||
            last > fits(bound, output_cost) || rest < middle || rest > in_middle) {
            return std::nullopt;
        }
        return RedistributionChoice{static_cast<int>(first), static_cast<int>(last)};
    };
    // The smallest such bound, by bisection. The winner costs no more than it (up to the
    // tolerance of `less`), so the search below skips every candidate that costs more: without
    // that it took O(layers^2) steps, hours for 10^5 layers.
    double low = 0;
    double high = layers * layer_cost + input_cost + output_cost;
    std::optional<RedistributionChoice> seed = within(high);
    for (int i = 0; i < 200 && seed && low < high; ++i) {
        const double mid = low + (high - low) / 2;
        if (mid <= low || mid >= high) {
            break;
        }
        if (const auto c = within(mid)) {
            high = mid;
            seed = c;
        } else {
            low = mid;
        }
    }
    double bound = std::numeric_limits<double>::infinity();
    if (seed) {
        const double saved_max = best_max;
        consider(seed->first, seed->last);  // only to learn its cost; the search redoes it
        bound = best_max;
        best_max = saved_max;
        best_spread = std::numeric_limits<double>::infinity();
        best_moved = std::numeric_limits<int>::max();
        best = {even.front(), even.back()};
    }
    // The margin covers the tolerance of `less`.
    const auto most = [&](double extra) {
        return fits(std::min(bound, best_max) * (1 + 1e-6), extra);
    };
    const int first_begin = fixed_first ? *fixed_first : 0;
    const int first_end = fixed_first ? std::min(*fixed_first, layers) : layers;
    for (std::int64_t first = first_begin; first <= first_end; ++first) {
        if (first > most(input_cost)) {
            break;  // every later first costs more still
        }
        // What the middle and last cannot hold must be on the first position.
        const std::int64_t middle_most = middle > 0 ? most(0.0) * middle : 0;
        const std::int64_t last_most =
            fixed_last ? std::min<std::int64_t>(*fixed_last, most(output_cost)) : most(output_cost);
        const std::int64_t need = layers - last_most - middle_most;
        if (first < need && !fixed_first) {
            first = need - 1;  // the loop's ++first lands on it
            continue;
        }
        std::int64_t last_begin = std::max<std::int64_t>(0, layers - first - middle_most);
        // Every middle position keeps a layer (a rank with none would idle through the run).
        std::int64_t last_end = layers - first - middle;
        if (positions == 2) {
            last_begin = last_end;
        }
        if (fixed_last) {
            if (*fixed_last < last_begin || *fixed_last > last_end) {
                continue;
            }
            last_begin = last_end = *fixed_last;
        }
        for (std::int64_t last = last_begin; last <= last_end; ++last) {
            if (last > most(output_cost)) {
                break;
            }
            consider(static_cast<int>(first), static_cast<int>(last));
        }
    }
    return best;
}

Placement computePlacement(const Config& config,
                           const std::optional<RedistributionChoice>& choice) {
    Placement p;
    p.ranks = std::max(1, config.parallel.pipeline);
    p.chunks = chunksOf(config);
    const int positions = p.ranks * p.chunks;
    for (int q = 0; q < positions; ++q) {
        int rank = q;
        int chunk = 0;
        if (config.parallel.schedule == ScheduleKind::Interleaved1F1B) {
            rank = q % p.ranks;
            chunk = q / p.ranks;
        } else if (config.parallel.schedule == ScheduleKind::VHalf) {
            rank = q < p.ranks ? q : 2 * p.ranks - 1 - q;
            chunk = q < p.ranks ? 0 : 1;
        }
        p.position_rank.push_back(rank);
        p.position_chunk.push_back(chunk);
    }
    const int layers = config.model.layers;
    if (config.parallel.vocab != VocabMethod::Redistributed || positions < 2) {
        p.layers = spreadEvenly(layers, positions);
        return p;
    }
    RedistributionChoice c;
    if (choice) {
        c = *choice;
    } else {
        const ModelConfig& m = config.model;
        c = chooseRedistribution(config, layerForwardFlops(m) + layerBackwardFlops(m), 0.0,
                                 outputLayerForwardFlops(m) + outputLayerBackwardFlops(m));
    }
    // A forced choice that does not fit is cut down rather than producing negative counts.
    c.first = std::clamp(c.first, 0, layers);
    c.last = std::clamp(c.last, 0, layers - c.first);
    if (positions == 2) {
        c.last = layers - c.first;
    }
    p.layers = redistributedLayers(layers, positions, c.first, c.last);
    return p;
}

// ---- parameters -----------------------------------------------------------------------------

std::int64_t paddedVocab(const Config& config) {
    const std::int64_t v = config.model.vocab;
    if (!isShardedVocab(config.parallel.vocab) || config.parallel.pipeline <= 1) {
        return v;
    }
    const std::int64_t p = config.parallel.pipeline;
    return (v + p - 1) / p * p;
}

std::int64_t paramsPerLayer(const ModelConfig& m) {
    const std::int64_t hh = m.hidden;
    const std::int64_t ff = m.ffn_hidden;
    const std::int64_t qkv = 3 * hh * hh + 3 * hh;
    const std::int64_t projection = hh * hh + hh;
    const std::int64_t mlp = 2 * hh * ff + ff + hh;
    const std::int64_t layer_norms = 4 * hh;
    return qkv + projection + mlp + layer_norms;
}

std::int64_t inputLayerParams(const ModelConfig& m) {
    return m.vocab * m.hidden + static_cast<std::int64_t>(m.seq_len) * m.hidden;
}

std::int64_t outputLayerParams(const ModelConfig& m) {
    return m.vocab * m.hidden + 2 * static_cast<std::int64_t>(m.hidden);
}

std::int64_t totalParams(const ModelConfig& m) {
    return m.layers * paramsPerLayer(m) + inputLayerParams(m) + outputLayerParams(m);
}

std::vector<RankParams> paramsPerRank(const Config& config, const Placement& placement) {
    std::vector<RankParams> out(static_cast<std::size_t>(std::max(1, placement.ranks)));
    const ModelConfig& m = config.model;
    const std::int64_t per_layer = paramsPerLayer(m);
    for (int r = 0; r < placement.ranks; ++r) {
        out[static_cast<std::size_t>(r)].transformer = placement.layersOnRank(r) * per_layer;
    }
    if (placement.positions() == 0) {
        return out;
    }
    const auto first_rank = static_cast<std::size_t>(placement.position_rank.front());
    const auto last_rank = static_cast<std::size_t>(placement.position_rank.back());
    if (isShardedVocab(config.parallel.vocab)) {
        const std::int64_t rows = paddedVocab(config) / std::max(1, placement.ranks);
        for (auto& rp : out) {
            rp.vocab = 2 * rows * m.hidden;
        }
        out[first_rank].vocab += static_cast<std::int64_t>(m.seq_len) * m.hidden;
        out[last_rank].vocab += 2 * static_cast<std::int64_t>(m.hidden);
    } else {
        out[first_rank].vocab += inputLayerParams(m);
        out[last_rank].vocab += outputLayerParams(m);
    }
    return out;
}

BytesPerParam bytesPerParam(DType dtype) {
    if (dtype == DType::FP32) {
        return {4, 4, 8};
    }
    return {2, 4, 12};
}

// ---- FLOPs per micro-batch ------------------------------------------------------------------

double layerForwardFlops(const ModelConfig& m) {
    return 8 * b(m) * s(m) * h(m) * h(m) + 4 * b(m) * s(m) * s(m) * h(m) +
           4 * b(m) * s(m) * h(m) * f(m);
}

double layerBackwardInputFlops(const ModelConfig& m) {
    return 8 * b(m) * s(m) * h(m) * h(m) + 8 * b(m) * s(m) * s(m) * h(m) +
           4 * b(m) * s(m) * h(m) * f(m);
}

double layerBackwardWeightFlops(const ModelConfig& m) {
    return 8 * b(m) * s(m) * h(m) * h(m) + 4 * b(m) * s(m) * h(m) * f(m);
}

double layerBackwardFlops(const ModelConfig& m) {
    return layerBackwardInputFlops(m) + layerBackwardWeightFlops(m);
}

double outputLayerForwardFlops(const ModelConfig& m) {
    return 2 * b(m) * s(m) * h(m) * static_cast<double>(m.vocab);
}

double outputLayerBackwardFlops(const ModelConfig& m) {
    return 4 * b(m) * s(m) * h(m) * static_cast<double>(m.vocab);
}

double vocabSFlops(const Config& config) {
    const ModelConfig& m = config.model;
    const double unit = 2 * b(m) * s(m) * h(m) * shardRows(config);
    switch (config.parallel.vocab) {
        case VocabMethod::Vocab2:
            return 2 * unit;
        case VocabMethod::Vocab1:
        case VocabMethod::Interlaced:
            return unit;
        default:
            return 0;
    }
}

double vocabTFlops(const Config& config) {
    const ModelConfig& m = config.model;
    const double unit = 2 * b(m) * s(m) * h(m) * shardRows(config);
    switch (config.parallel.vocab) {
        case VocabMethod::Vocab2:
            return unit;
        case VocabMethod::Vocab1:
        case VocabMethod::Interlaced:
            return 2 * unit;
        default:
            return 0;
    }
}

// ---- bytes per micro-batch -------------------------------------------------------------------

double layerActivationBytes(const ModelConfig& m) {
    const double sb = s(m) * b(m);
    // Fused attention keeps no s x s scores, softmax or dropout mask (it recomputes them).
    const double scores = m.flash_attention ? 0.0 : (2 * d(m) + 1) * m.heads * s(m) * s(m) * b(m);
    return sb * h(m) * (8 * d(m) + 2) + 2 * d(m) * sb * f(m) + scores;
}

double layerWeightInputBytes(const ModelConfig& m) {
    return d(m) * s(m) * b(m) * (3 * h(m) + f(m));
}

double layerHeldGradBytes(const ModelConfig& m) {
    return d(m) * (s(m) * b(m) * (5 * h(m) + f(m)) + 4 * h(m));
}

double logitsBytes(const ModelConfig& m, std::int64_t vocab_rows) {
    return 4 * b(m) * s(m) * static_cast<double>(vocab_rows);
}

double hiddenBytes(const ModelConfig& m) {
    return s(m) * b(m) * h(m) * d(m);
}

double hiddenBytesFp32(const ModelConfig& m) {
    return 4 * s(m) * b(m) * h(m);
}

double inputLayerForwardBytes(const ModelConfig& m) {
    // Gather the embedding rows of the tokens, write the s*b*h output.
    return 2 * hiddenBytes(m);
}

double inputLayerBackwardBytes(const ModelConfig& m) {
    // Read the incoming s*b*h gradient and read-modify-write the same number of fp32 gradient
    // rows (gradients are kept in fp32, bytesPerParam).
    return hiddenBytes(m) + 2 * hiddenBytesFp32(m);
}

// ---- whole iteration --------------------------------------------------------------------------

double modelFlopsPerIteration(const Config& config) {
    const ModelConfig& m = config.model;
    const double big_b = b(m) * config.parallel.microbatches;
    const double per_layer = 8 * big_b * s(m) * h(m) * h(m) + 4 * big_b * s(m) * s(m) * h(m) +
                             4 * big_b * s(m) * h(m) * f(m);
    return 3 * (2 * big_b * s(m) * h(m) * static_cast<double>(m.vocab) + m.layers * per_layer);
}

double mfu(const Config& config, double iteration_time_s) {
    const double peak = config.hardware.peak_tflops * 1e12;
    const double ranks = std::max(1, config.parallel.pipeline);
    if (!(iteration_time_s > 0) || !(peak > 0)) {
        return 0.0;
    }
    return modelFlopsPerIteration(config) / (ranks * iteration_time_s * peak);
}

double tokensPerIteration(const Config& config) {
    return b(config.model) * s(config.model) * config.parallel.microbatches;
}

}  // namespace pipescope::schedule
