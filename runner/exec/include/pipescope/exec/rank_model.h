// The part of the GPT model one pipeline rank holds under a schedule's placement: the transformer
// layers of each of its positions (chunks), the final LayerNorm where the last position is, and
// the vocabulary layers — whole tables on the end positions' ranks for naive and redistributed,
// one shard of each table on every rank for the sharded methods (vocabulary-parallelism.md 3).
// Every piece draws its initial values per global element, so the ranks together start from
// exactly the parameters of a single-device ReferenceTrainer with the same seed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pipescope/exec/model.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::exec {

// Rows [begin, end) of the vocabulary tables rank `rank` holds under a sharded method: V padded
// up to a multiple of p, then V/p rows each (the last shard may be shorter, or empty).
kernels::cpu::VocabShard vocabShardOf(const schedule::Config& config, int rank);

class RankModel {
  public:
    struct Chunk {
        int position = 0;
        int first_layer = 0;  // model-wide index of the chunk's first transformer layer
        std::vector<TransformerLayer<float>> layers;
        std::unique_ptr<FinalNorm<float>> final_norm;  // on the last position only
    };

    RankModel(const schedule::Config& config, const schedule::Schedule& schedule, int rank,
              std::uint64_t seed, MemoryTracker* tracker, double init_stddev = 0.02);

    int rank() const { return rank_; }
    const ModelShape& shape() const { return shape_; }
    Chunk& chunk(int c) { return chunks_[static_cast<std::size_t>(c)]; }
    const Chunk& chunk(int c) const { return chunks_[static_cast<std::size_t>(c)]; }
    int chunkCount() const { return static_cast<int>(chunks_.size()); }
    // Null where this rank holds no part of the table.
    InputLayer<float>* input() { return input_.get(); }
    OutputLayer<float>* output() { return output_.get(); }

    // Every parameter this rank holds with its model-wide name (as ReferenceTrainer names
    // them); vocabulary tables may be shards, whose rows vocabShard() gives.
    std::vector<std::pair<std::string, Param<float>*>> namedParams();
    std::vector<Param<float>*> params();

  private:
    int rank_;
    ModelShape shape_;
    std::vector<Chunk> chunks_;
    std::unique_ptr<InputLayer<float>> input_;
    std::unique_ptr<OutputLayer<float>> output_;
};

}  // namespace pipescope::exec
