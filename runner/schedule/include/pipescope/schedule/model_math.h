// Model arithmetic: where layers live, parameters, FLOPs and bytes per op, MFU.
// Formulas and their sources are in docs/model-math.md. All quantities are per micro-batch
// unless a name says otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <pipescope/schedule/config.h>

namespace pipescope::schedule {

// The model cut into pipeline positions (virtual stages) 0..P-1, P = ranks * chunks. Position 0
// holds the input layer and position P-1 the output layer under naive and redistributed
// handling. interleaved-1f1b: position q is chunk q / p on rank q % p. v-half: positions 0..p-1
// are chunk 0 on ranks 0..p-1, positions p..2p-1 are chunk 1 on ranks p-1..0 (so rank 0 holds
// both ends of the V). Other schedules: one chunk, position = rank.
struct Placement {
    int ranks = 1;
    int chunks = 1;
    std::vector<int> layers;          // transformer layers per position
    std::vector<int> position_rank;   // rank of each position
    std::vector<int> position_chunk;  // chunk (on its rank) of each position

    int positions() const { return static_cast<int>(layers.size()); }
    // Inverse of position_rank/position_chunk; -1 when the rank holds no such chunk. The
    // simulator asks for every op, so the common layout (chunk c of rank r at c * p + r) is
    // checked inline.
    int position(int rank, int chunk) const {
        const int q = chunk * ranks + rank;
        if (q >= 0 && static_cast<std::size_t>(q) < position_rank.size() &&
            static_cast<std::size_t>(q) < position_chunk.size() &&
            position_rank[static_cast<std::size_t>(q)] == rank &&
            position_chunk[static_cast<std::size_t>(q)] == chunk) {
            return q;
        }
        return positionSearch(rank, chunk);
    }
    int layersOnRank(int rank) const;  // summed over the rank's chunks

  private:
    int positionSearch(int rank, int chunk) const;
};

// First/last position layer counts for "redistributed".
struct RedistributionChoice {
    int first = 0;
    int last = 0;
};

// Chooses the first/last position layer counts that minimise the largest per-position cost,
// where a position costs layers * layer_cost, plus input_cost at position 0 and output_cost at
// position P-1 (ties: the more even split of the middle positions, then fewer moved layers).
// Costs are any consistent unit (FLOPs, microseconds).
RedistributionChoice chooseRedistribution(const Config& config, double layer_cost,
                                          double input_cost, double output_cost);

// The placement of a validated config. Under "redistributed" it uses the explicit counts, or,
// when one or both are unset, the analytic (FLOP-based) balance of chooseRedistribution; pass
// `choice` to force counts. The middle positions share
// the remaining layers as evenly as possible (the extra layers go to the earliest of them).
Placement computePlacement(const Config& config,
                           const std::optional<RedistributionChoice>& choice = std::nullopt);

// ---- parameters -----------------------------------------------------------------------------
std::int64_t paddedVocab(const Config& config);     // V rounded up to a multiple of p when sharded
std::int64_t paramsPerLayer(const ModelConfig& m);  // 4h^2 + 2hf + biases + 2 LayerNorms
std::int64_t inputLayerParams(const ModelConfig& m);   // token (V x h) + position (s x h)
std::int64_t outputLayerParams(const ModelConfig& m);  // V x h + final LayerNorm (2h)
std::int64_t totalParams(const ModelConfig& m);

// Parameters each rank holds: its transformer layers plus its vocabulary share (whole tables on
// the end positions' ranks for naive/redistributed, a 1/p shard of each table for the sharded
// methods, padded vocabulary).
struct RankParams {
    std::int64_t transformer = 0;
    std::int64_t vocab = 0;  // input + output layer parameters held by this rank
    std::int64_t total() const { return transformer + vocab; }
};
std::vector<RankParams> paramsPerRank(const Config& config, const Placement& placement);

// Bytes per parameter of weights, gradients and optimizer state (mixed precision + Adam:
// bf16/fp16 weights, fp32 gradients, fp32 master weights + two moments; fp32: 4 + 4 + 8).
struct BytesPerParam {
    double weights = 0;
    double grads = 0;
    double optimizer = 0;
    double total() const { return weights + grads + optimizer; }
};
BytesPerParam bytesPerParam(DType dtype);

// ---- FLOPs per micro-batch ------------------------------------------------------------------
double layerForwardFlops(const ModelConfig& m);         // 8bsh^2 + 4bs^2h + 4bshf
double layerBackwardInputFlops(const ModelConfig& m);   // B when W is split: 8bsh^2+8bs^2h+4bshf
double layerBackwardWeightFlops(const ModelConfig& m);  // W: 8bsh^2 + 4bshf
double layerBackwardFlops(const ModelConfig& m);        // B + W = 2 x forward
// The whole output layer with V = m.vocab (naive and redistributed never pad, so that is the
// padded V there too).
double outputLayerForwardFlops(const ModelConfig& m);   // 2bshV
double outputLayerBackwardFlops(const ModelConfig& m);  // 4bshV
// Vocabulary-parallel passes of one shard (V/p rows): vocab-1 S = 2bshV/p, T = 4bshV/p;
// vocab-2 S = 4bshV/p (logits + softmax-weighted A_d), T = 2bshV/p (weight gradient only);
// interlaced: S = 2bshV/p, T = 4bshV/p (as vocab-1). Other methods: 0.
double vocabSFlops(const Config& config);
double vocabTFlops(const Config& config);

// ---- bytes per micro-batch -------------------------------------------------------------------
// Activations one transformer layer keeps from F to B (no recomputation), with d the dtype size
// and a the heads: s*b*h*(8d + 2) + 2d*s*b*f + (2d + 1)*a*s^2*b   (= 34sbh + 5as^2b for d = 2,
// f = 4h: Korthikanti et al. 2022). With model.flash_attention (the default) the last term, the
// attention scores, softmax and dropout mask, is not kept.
double layerActivationBytes(const ModelConfig& m);
// What a split backward (zb-h1, v-half) keeps of one layer from B to W: of the activations only
// the four linear layers' inputs, d*s*b*(3h + f) (layerWeightInputBytes), and beside them the
// gradients of those layers' outputs (qkv 3h, proj h, fc1 f, fc2 h per token) and of the two
// layer norms' parameters, d*(s*b*(5h + f) + 4h) (layerHeldGradBytes). Together about one
// layer's activations, so deferring W costs no memory. A whole backward frees them as it goes.
double layerWeightInputBytes(const ModelConfig& m);
double layerHeldGradBytes(const ModelConfig& m);
double logitsBytes(const ModelConfig& m, std::int64_t vocab_rows);  // fp32: 4*b*s*rows
double hiddenBytes(const ModelConfig& m);      // one s*b*h tensor in the model dtype
double hiddenBytesFp32(const ModelConfig& m);  // one s*b*h tensor in fp32
// Input layer lookups read and write one s*b*h tensor (memory-bound). The backward reads the
// incoming s*b*h gradient and reads and writes as many fp32 gradient rows (scatter-add).
double inputLayerForwardBytes(const ModelConfig& m);
double inputLayerBackwardBytes(const ModelConfig& m);

// ---- whole iteration --------------------------------------------------------------------------
// architecture.md: 3 * (2*B*s*h*V + L*(8*B*s*h^2 + 4*B*s^2*h + 4*B*s*h*f)),
// B = micro_batch * microbatches, V unpadded.
double modelFlopsPerIteration(const Config& config);
// Model FLOPs / (ranks * iteration time * peak FLOP/s).
double mfu(const Config& config, double iteration_time_s);
double tokensPerIteration(const Config& config);

}  // namespace pipescope::schedule
