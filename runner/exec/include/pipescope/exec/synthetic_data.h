// Training data for real runs without a dataset: token sequences drawn from a fixed random Markov
// chain over the vocabulary. Each token has a few likely successors, drawn with a bias towards
// low token ids (so tokens are unequally common, as in text), so the next token is
// predictable from the current one and a model that learns shows a falling loss, well below the
// uniform log(V); the chain and every batch follow from the seed alone, so every rank (and every
// backend) draws the same batches without sharing them.
#pragma once

#include <cstdint>
#include <vector>

namespace pipescope::exec {

class MarkovData {
  public:
    // `successors` likely next tokens per token (at least 1), taking `concentration` of the
    // probability between them (0..1); the rest is spread over the whole vocabulary.
    MarkovData(int vocab, std::uint64_t seed, int successors = 4, double concentration = 0.9);

    int vocab() const { return vocab_; }

    // The sequences of one micro-batch: `batch` rows of `seq_len + 1` tokens (inputs are the
    // first seq_len, targets the last seq_len), row-major. The same (iteration, microbatch)
    // always gives the same tokens.
    std::vector<std::int32_t> batch(int iteration, int microbatch, int batch, int seq_len) const;

    // The chain's entropy rate in nats: the lowest mean loss a model can reach on this data.
    double entropyRate() const;

  private:
    std::int32_t next(std::int32_t token, std::uint64_t& state) const;

    int vocab_;
    std::uint64_t seed_;
    double concentration_;
    int successors_;
    std::vector<std::int32_t> table_;  // vocab x successors
};

}  // namespace pipescope::exec
