// Builds the indexes and level-of-detail tables of a trace (see lod.h for the rules).
#pragma once

#include <functional>
#include <string>

#include "sqlite_util.h"

namespace pipescope::trace::detail {

// Runs inside the caller's transaction. Writes op_lod, memory_lod and the pipescope_meta keys
// the reader needs (op_lod_min_level, memory_lod_min_level, max_dur_level, finalized).
// `progress`, when set, hears the fraction done (0..1) after each index and every few thousand
// rows of the level-of-detail scans, a few hundred times in all.
bool buildIndexesAndLod(Db& db, std::string* error,
                        const std::function<void(double)>& progress = {});

// Meta keys written by buildIndexesAndLod.
inline constexpr const char* kMetaOpLodMinLevel = "op_lod_min_level";
inline constexpr const char* kMetaOpLodMaxLevel = "op_lod_max_level";
inline constexpr const char* kMetaMemoryLodMinLevel = "memory_lod_min_level";
inline constexpr const char* kMetaMemoryLodMaxLevel = "memory_lod_max_level";
inline constexpr const char* kMetaMaxDurLevel = "max_dur_level";
// Summary figures, so that opening a large finished trace reads no op rows.
inline constexpr const char* kMetaOpCount = "op_count";
inline constexpr const char* kMetaMemoryCount = "memory_count";
inline constexpr const char* kMetaTimeStart = "time_start_ns";
inline constexpr const char* kMetaTimeEnd = "time_end_ns";
inline constexpr const char* kMetaIterations = "iterations";

}  // namespace pipescope::trace::detail
