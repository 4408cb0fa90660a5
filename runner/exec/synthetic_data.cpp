#include <algorithm>
#include <cmath>

#include <pipescope/exec/synthetic_data.h>

namespace pipescope::exec {

namespace {

// SplitMix64: a small, well-mixed generator whose whole state is one integer, so a batch's
// stream is defined by (seed, iteration, micro-batch) alone.
std::uint64_t splitmix(std::uint64_t& state) {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

double uniform01(std::uint64_t& state) {
    return static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53;
}

std::int32_t below(std::uint64_t& state, int n) {
    return static_cast<std::int32_t>(splitmix(state) % static_cast<std::uint64_t>(n));
}

}  // namespace

MarkovData::MarkovData(int vocab, std::uint64_t seed, int successors, double concentration)
    : vocab_(std::max(2, vocab)),
      seed_(seed),
      concentration_(std::clamp(concentration, 0.0, 1.0)),
      successors_(std::clamp(successors, 1, std::max(2, vocab))) {
    std::uint64_t state = seed_ ^ 0x5eed0fc4a1bULL;
    table_.resize(static_cast<std::size_t>(vocab_) * static_cast<std::size_t>(successors_));
    // Successors favour low token ids (density ∝ id^(−2/3)), as word frequencies in text are
    // skewed: the chain's tokens are far from equally common, so a model first learns their
    // frequencies, then the transitions, and its loss falls from the start.
    for (auto& t : table_) {
        const double u = uniform01(state);
        t = std::min(vocab_ - 1, static_cast<std::int32_t>(vocab_ * u * u * u));
    }
}

std::int32_t MarkovData::next(std::int32_t token, std::uint64_t& state) const {
    if (uniform01(state) < concentration_) {
        const auto k = static_cast<std::size_t>(below(state, successors_));
        return table_[static_cast<std::size_t>(token) * static_cast<std::size_t>(successors_) + k];
    }
    return below(state, vocab_);
}

std::vector<std::int32_t> MarkovData::batch(int iteration, int microbatch, int batch,
                                            int seq_len) const {
    const auto row = static_cast<std::size_t>(seq_len) + 1;
    std::vector<std::int32_t> out(static_cast<std::size_t>(std::max(0, batch)) * row);
    for (int b = 0; b < batch; ++b) {
        std::uint64_t state = seed_;
        for (std::uint64_t v :
             {static_cast<std::uint64_t>(iteration), static_cast<std::uint64_t>(microbatch),
              static_cast<std::uint64_t>(b)}) {
            state = splitmix(state) ^ v;
        }
        auto* tokens = out.data() + static_cast<std::size_t>(b) * row;
        tokens[0] = below(state, vocab_);
        for (std::size_t i = 1; i < row; ++i) {
            tokens[i] = next(tokens[i - 1], state);
        }
    }
    return out;
}

double MarkovData::entropyRate() const {
    // Every state has the same structure: each listed successor gets c/k plus the uniform share
    // (1-c)/V (repeats in a token's list add up), every other token only the uniform share.
    const double uniform = (1.0 - concentration_) / vocab_;
    double total = 0;
    std::vector<std::int32_t> list(static_cast<std::size_t>(successors_));
    for (int t = 0; t < vocab_; ++t) {
        std::copy_n(table_.begin() + static_cast<std::ptrdiff_t>(t) * successors_, successors_,
                    list.begin());
        std::sort(list.begin(), list.end());
        double h = 0;
        int listed = 0;
        for (std::size_t i = 0; i < list.size();) {
            std::size_t j = i;
            while (j < list.size() && list[j] == list[i]) {
                ++j;
            }
            const double p = concentration_ * static_cast<double>(j - i) / successors_ + uniform;
            h -= p * std::log(p);
            ++listed;
            i = j;
        }
        if (uniform > 0) {
            h -= static_cast<double>(vocab_ - listed) * uniform * std::log(uniform);
        }
        total += h;
    }
    return total / vocab_;
}

}  // namespace pipescope::exec
