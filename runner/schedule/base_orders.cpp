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

std::vector<BaseOp> vHalfOrder(const VHalfTimetable& t, int rank, int microbatches) {
    struct Item {
        double time;
        int along;  // place on the micro-batch's path: F of position q is q, B is 2 * positions - 1
                    // - q
        BaseOp op;
    };
    const int positions = static_cast<int>(t.position_rank.size());
    std::vector<Item> items;
    for (int q = 0; q < positions; ++q) {
        if (t.position_rank[static_cast<std::size_t>(q)] != rank) {
            continue;
        }
        const int chunk = q < positions / 2 ? 0 : 1;
        for (int i = 0; i < microbatches; ++i) {
            const double base = i * t.period;
            items.push_back(
                {base + t.f_offset[static_cast<std::size_t>(q)], q, {OpKind::F, i, chunk}});
            items.push_back({base + t.b_offset[static_cast<std::size_t>(q)],
                             2 * positions - 1 - q,
                             {OpKind::B, i, chunk}});
        }
    }
    std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
        if (a.time != b.time) {
            return a.time < b.time;
        }
        if (a.op.microbatch != b.op.microbatch) {
            return a.op.microbatch < b.op.microbatch;
        }
        return a.along < b.along;
    });
    std::vector<BaseOp> out;
    out.reserve(items.size());
    for (const Item& it : items) {
        out.push_back(it.op);
    }
    return out;
}

}  // namespace pipescope::schedule::detail
