#include <algorithm>
#include <cmath>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/reader.h>

#include "reader_impl.h"

namespace pipescope::trace {

LodEntry lodEntryFromOp(const OpRecord& o) {
    LodEntry e;
    e.start_ns = o.start_ns;
    e.end_ns = o.end_ns;
    e.busy_ns = o.duration();
    e.count = 1;
    e.kind = o.kind;
    e.op_id = o.id;
    e.microbatch = o.microbatch;
    e.chunk = o.chunk;
    e.iteration = o.iteration;
    e.op_index = o.op_index;
    return e;
}

// After folding, any two neighbouring narrow entries span more than the threshold, which bounds
// the entries per pixel.
std::vector<LodEntry> foldLodEntries(std::vector<LodEntry> in, double threshold) {
    std::vector<LodEntry> out;
    out.reserve(in.size());
    auto width = [](const LodEntry& e) { return static_cast<double>(e.end_ns - e.start_ns); };
    for (auto& e : in) {
        if (!out.empty()) {
            LodEntry& c = out.back();
            const double merged = static_cast<double>(std::max(c.end_ns, e.end_ns) - c.start_ns);
            if (width(c) < threshold && width(e) < threshold &&
                static_cast<double>(e.start_ns - c.end_ns) < threshold && merged <= threshold) {
                if (e.busy_ns > c.busy_ns) {
                    c.kind = e.kind;
                }
                c.mixed = c.mixed || e.mixed || c.kind != e.kind;
                c.end_ns = std::max(c.end_ns, e.end_ns);
                c.busy_ns += e.busy_ns;
                c.count += e.count;
                c.op_id = -1;
                c.microbatch = -1;
                c.iteration = -1;
                c.op_index = -1;
                continue;
            }
        }
        out.push_back(std::move(e));
    }
    return out;
}

namespace {

// (series, time, min, max, last) updates of memory pixels, in time order.
struct MemoryUpdate {
    int series;
    std::int64_t t;
    std::int64_t min, max, last;
};

// Raw samples as updates of each category and the total; `carry` gets the levels before t0.
void samplesToUpdates(const std::vector<MemorySample>& samples, std::int64_t t0,
                      std::array<std::int64_t, MemoryPixel::kSeries>* carry,
                      std::vector<MemoryUpdate>* updates) {
    constexpr int kTotal = kMemoryCategoryCount;
    std::array<std::int64_t, kMemoryCategoryCount> current{};
    std::size_t i = 0;
    // Samples before t0 (the carried-in levels) come first.
    for (; i < samples.size() && samples[i].t_ns < t0; ++i) {
        current[static_cast<std::size_t>(samples[i].category)] = samples[i].bytes;
    }
    for (int c = 0; c < kMemoryCategoryCount; ++c) {
        (*carry)[static_cast<std::size_t>(c)] = current[static_cast<std::size_t>(c)];
        (*carry)[kTotal] = memoryTotalAdd((*carry)[kTotal], current[static_cast<std::size_t>(c)]);
    }
    while (i < samples.size()) {
        const std::int64_t t = samples[i].t_ns;
        for (; i < samples.size() && samples[i].t_ns == t; ++i) {
            const auto c = static_cast<std::size_t>(samples[i].category);
            current[c] = samples[i].bytes;
            updates->push_back({static_cast<int>(c), t, current[c], current[c], current[c]});
        }
        std::int64_t total = 0;
        for (auto v : current) {
            total = memoryTotalAdd(total, v);
        }
        updates->push_back({kTotal, t, total, total, total});
    }
}

std::vector<MemoryPixel> toPixels(const std::vector<MemoryUpdate>& updates,
                                  std::array<std::int64_t, MemoryPixel::kSeries> carry,
                                  std::int64_t t0, std::int64_t t1, int pixels,
                                  double ns_per_pixel) {
    std::vector<MemoryPixel> out(static_cast<std::size_t>(pixels));
    std::size_t u = 0;
    for (int p = 0; p < pixels; ++p) {
        MemoryPixel& px = out[static_cast<std::size_t>(p)];
        px.t_ns = t0 + static_cast<std::int64_t>(std::floor(p * ns_per_pixel));
        const auto pixel_end =
            p + 1 == pixels ? t1
                            : t0 + static_cast<std::int64_t>(std::floor((p + 1) * ns_per_pixel));
        px.min = carry;
        px.max = carry;
        for (; u < updates.size() && updates[u].t < pixel_end; ++u) {
            const auto s = static_cast<std::size_t>(updates[u].series);
            px.min[s] = std::min(px.min[s], updates[u].min);
            px.max[s] = std::max(px.max[s], updates[u].max);
            carry[s] = updates[u].last;
        }
        px.last = carry;
    }
    return out;
}

}  // namespace

std::vector<MemoryPixel> memoryPixels(const std::vector<MemorySample>& samples, std::int64_t t0,
                                      std::int64_t t1, int pixels) {
    pixels = std::max(1, pixels);
    t1 = std::max(t1, t0 + 1);
    std::array<std::int64_t, MemoryPixel::kSeries> carry{};
    std::vector<MemoryUpdate> updates;
    samplesToUpdates(samples, t0, &carry, &updates);
    return toPixels(updates, carry, t0, t1, pixels, static_cast<double>(t1 - t0) / pixels);
}

OpLodResult TraceReader::opsLod(std::int64_t t0, std::int64_t t1, int pixels,
                                const LodOptions& options) const {
    const Impl& d = *impl_;
    OpLodResult result;
    pixels = std::max(1, pixels);
    t1 = std::max(t1, t0 + 1);
    result.ns_per_pixel = static_cast<double>(t1 - t0) / pixels;
    int level = lodLevelFor(result.ns_per_pixel);
    const bool have_levels = d.finalized && d.op_lod_max >= d.op_lod_min;
    if (have_levels) {
        level = std::min(level, d.op_lod_max);
    }
    const bool use_lod = have_levels && level >= d.op_lod_min;
    result.level = use_lod ? level : -1;
    const double threshold = options.fold_pixels * result.ns_per_pixel;

    for (const RankInfo& rank : d.ranks) {
        for (int lane = 0; lane < kLaneCount; ++lane) {
            std::vector<LodEntry> entries;
            const auto raw =
                d.rawOps(rank.rank, lane, use_lod ? level + 1 : 0, t0, t1, &result.rows_read);
            entries.reserve(raw.size());
            for (const auto& o : raw) {
                entries.push_back(lodEntryFromOp(o));
            }
            if (use_lod) {
                // A folded entry spans at most its bucket plus one narrow op: < 2 W_level.
                detail::Stmt& s = d.lod_window;
                s.reset();
                s.bind(1, level).bind(2, rank.rank).bind(3, lane);
                s.bind(4, t0 - 2 * lodWidth(level)).bind(5, t1);
                int rc;
                while ((rc = s.step()) == SQLITE_ROW) {
                    ++result.rows_read;
                    LodEntry e;
                    e.start_ns = s.int64(0);
                    e.end_ns = s.int64(1);
                    e.count = s.int32(2);
                    e.busy_ns = s.int64(3);
                    e.kind = static_cast<OpKind>(s.int32(4));
                    e.mixed = s.int32(5) != 0;
                    if (overlaps(e.start_ns, e.end_ns, t0, t1)) {
                        entries.push_back(e);
                    }
                }
                if (rc != SQLITE_DONE) {
                    d.noteError("reading level-of-detail rows failed");
                }
                std::stable_sort(
                    entries.begin(), entries.end(),
                    [](const LodEntry& a, const LodEntry& b) { return a.start_ns < b.start_ns; });
            }
            result.lanes.push_back(LaneLod{rank.rank, static_cast<Lane>(lane),
                                           foldLodEntries(std::move(entries), threshold)});
        }
    }
    return result;
}

MemoryLodResult TraceReader::memoryLod(int rank, std::int64_t t0, std::int64_t t1,
                                       int pixels) const {
    const Impl& d = *impl_;
    constexpr int kSeries = MemoryPixel::kSeries;
    MemoryLodResult result;
    pixels = std::max(1, pixels);
    t1 = std::max(t1, t0 + 1);
    result.ns_per_pixel = static_cast<double>(t1 - t0) / pixels;
    int level = lodLevelFor(result.ns_per_pixel);
    const bool have_levels = d.finalized && d.memory_lod_max >= d.memory_lod_min;
    if (have_levels) {
        level = std::min(level, d.memory_lod_max);
    }
    const bool use_lod = have_levels && level >= d.memory_lod_min;
    result.level = use_lod ? level : -1;

    std::vector<MemoryUpdate> updates;
    std::array<std::int64_t, kSeries> carry{};

    if (use_lod) {
        for (int s = 0; s < kSeries; ++s) {
            detail::Stmt& b = d.mem_lod_before;
            b.reset();
            b.bind(1, level).bind(2, rank).bind(3, s).bind(4, t0);
            if (b.step() == SQLITE_ROW) {
                carry[static_cast<std::size_t>(s)] = b.int64(0);
                ++result.rows_read;
            }
        }
        // One range of the primary key per series (a window over every category at once would
        // scan the rank's whole level), then merged by time.
        detail::Stmt& w = d.mem_lod_window;
        for (int s = 0; s < kSeries; ++s) {
            w.reset();
            w.bind(1, level).bind(2, rank).bind(3, s).bind(4, t0).bind(5, t1);
            int rc;
            while ((rc = w.step()) == SQLITE_ROW) {
                ++result.rows_read;
                updates.push_back({w.int32(0), w.int64(1), w.int64(2), w.int64(3), w.int64(4)});
            }
            if (rc != SQLITE_DONE) {
                d.noteError("reading memory level-of-detail rows failed");
            }
        }
        std::stable_sort(updates.begin(), updates.end(),
                         [](const MemoryUpdate& a, const MemoryUpdate& b) { return a.t < b.t; });
    } else {
        const auto samples = memory(rank, t0, t1);
        result.rows_read += static_cast<std::int64_t>(samples.size());
        samplesToUpdates(samples, t0, &carry, &updates);
    }
    result.pixels = toPixels(updates, carry, t0, t1, pixels, result.ns_per_pixel);
    return result;
}

}  // namespace pipescope::trace
