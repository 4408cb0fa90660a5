#include "base_orders.h"

#include <algorithm>

namespace pipescope::schedule::detail {

std::vector<BaseOp> gpipeOrder(int microbatches) {
    std::vector<BaseOp> out;
    for (int i = 0; i < microbatches; ++i) {
        out.push_back({OpKind::F, i, 0});
    }
    for (int i = 0; i < microbatches; ++i) {
        out.push_back({OpKind::B, i, 0});
    }
    return out;
}

std::vector<BaseOp> oneF1BOrder(int ranks, int rank, int microbatches, int extra) {
    const int warmup = std::clamp(ranks - rank - 1 + extra, 0, microbatches);
    std::vector<BaseOp> out;
    for (int i = 0; i < warmup; ++i) {
        out.push_back({OpKind::F, i, 0});
    }
    for (int i = 0; i < microbatches - warmup; ++i) {
        out.push_back({OpKind::F, warmup + i, 0});
        out.push_back({OpKind::B, i, 0});
    }
    for (int i = microbatches - warmup; i < microbatches; ++i) {
        out.push_back({OpKind::B, i, 0});
    }
    return out;
}

std::vector<BaseOp> interleavedOrder(int ranks, int rank, int microbatches, int chunks, int extra) {
    const int total = microbatches * chunks;
    const int warmup = std::clamp((ranks - rank - 1) * 2 + (chunks - 1) * ranks + extra, 0, total);
    auto at = [&](int k, bool forward) {
        const int group = k / ranks;
        const int chunk = forward ? group % chunks : chunks - 1 - group % chunks;
        const int mb = (k / (ranks * chunks)) * ranks + k % ranks;
        return BaseOp{forward ? OpKind::F : OpKind::B, mb, chunk};
    };
    std::vector<BaseOp> out;
    for (int k = 0; k < warmup; ++k) {
        out.push_back(at(k, true));
    }
    for (int k = 0; k < total - warmup; ++k) {
        out.push_back(at(warmup + k, true));
        out.push_back(at(k, false));
    }
    for (int k = total - warmup; k < total; ++k) {
        out.push_back(at(k, false));
    }
    return out;
}

}  // namespace pipescope::schedule::detail
