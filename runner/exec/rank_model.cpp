#include <algorithm>

#include <pipescope/exec/rank_model.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::exec {

kernels::cpu::VocabShard vocabShardOf(const schedule::Config& config, int rank) {
    const std::int64_t rows = schedule::paddedVocab(config) / config.parallel.pipeline;
    const std::int64_t begin = std::min<std::int64_t>(config.model.vocab, rank * rows);
    const std::int64_t end = std::min<std::int64_t>(config.model.vocab, begin + rows);
    return {begin, end};
}

RankModel::RankModel(const schedule::Config& config, const schedule::Schedule& schedule, int rank,
                     std::uint64_t seed, MemoryTracker* tracker, double init_stddev)
    : rank_(rank), shape_(modelShapeFromConfig(config)) {
    const schedule::Placement& pl = schedule.placement;
    const int last = pl.positions() - 1;
    chunks_.resize(static_cast<std::size_t>(pl.chunks));
    int first_layer = 0;
    for (int q = 0; q < pl.positions(); ++q) {
        const int layers = pl.layers[static_cast<std::size_t>(q)];
        if (pl.position_rank[static_cast<std::size_t>(q)] == rank) {
            Chunk& c =
                chunks_[static_cast<std::size_t>(pl.position_chunk[static_cast<std::size_t>(q)])];
            c.position = q;
            c.first_layer = first_layer;
            c.layers.reserve(static_cast<std::size_t>(layers));
            for (int l = 0; l < layers; ++l) {
                c.layers.emplace_back(shape_, tracker);
                c.layers.back().init(seed, first_layer + l, init_stddev);
            }
            if (q == last) {
                c.final_norm = std::make_unique<FinalNorm<float>>(shape_, tracker);
            }
        }
        first_layer += layers;
    }
    const bool sharded = schedule::isShardedVocab(config.parallel.vocab);
    const kernels::cpu::VocabShard full{0, shape_.vocab};
    if (sharded || pl.position_rank.front() == rank) {
        input_ = std::make_unique<InputLayer<float>>(
            shape_, sharded ? vocabShardOf(config, rank) : full, tracker);
        input_->init(seed, init_stddev);
    }
    if (sharded || pl.position_rank.back() == rank) {
        output_ = std::make_unique<OutputLayer<float>>(
            shape_, sharded ? vocabShardOf(config, rank) : full, tracker);
        output_->init(seed, init_stddev);
    }
}

std::vector<std::pair<std::string, Param<float>*>> RankModel::namedParams() {
    std::vector<std::pair<std::string, Param<float>*>> out;
    if (input_) {
        for (Param<float>* p : input_->params()) {
            out.emplace_back(p->name, p);
        }
    }
    // Model order: by position, which is by first layer.
    std::vector<Chunk*> ordered;
    for (Chunk& c : chunks_) {
        ordered.push_back(&c);
    }
    std::sort(ordered.begin(), ordered.end(),
              [](const Chunk* a, const Chunk* b) { return a->position < b->position; });
    for (Chunk* c : ordered) {
        for (std::size_t l = 0; l < c->layers.size(); ++l) {
            for (Param<float>* p : c->layers[l].params()) {
                out.emplace_back("layers." + std::to_string(c->first_layer + static_cast<int>(l)) +
                                     "." + p->name,
                                 p);
            }
        }
        if (c->final_norm) {
            for (Param<float>* p : c->final_norm->params()) {
                out.emplace_back(p->name, p);
            }
        }
    }
    if (output_) {
        for (Param<float>* p : output_->params()) {
            out.emplace_back(p->name, p);
        }
    }
    return out;
}

std::vector<Param<float>*> RankModel::params() {
    std::vector<Param<float>*> out;
    for (const auto& named : namedParams()) {
        out.push_back(named.second);
    }
    return out;
}

}  // namespace pipescope::exec
