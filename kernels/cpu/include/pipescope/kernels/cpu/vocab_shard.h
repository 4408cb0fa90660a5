// A contiguous slice of the vocabulary held by one rank (vocabulary-parallelism.md, section 3).
#pragma once

#include <cstdint>

namespace pipescope::kernels::cpu {

// Token ids [begin, end). A shard's table or logits have end − begin rows or columns; the full
// vocabulary is the shard {0, V}.
struct VocabShard {
    std::int64_t begin = 0;
    std::int64_t end = 0;

    std::int64_t size() const { return end - begin; }
    bool contains(std::int64_t token) const { return token >= begin && token < end; }
};

}  // namespace pipescope::kernels::cpu
