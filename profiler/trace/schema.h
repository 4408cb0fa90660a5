// The SQL schema of a trace file, defined in one place (documented in docs/trace-format.md).
#pragma once

#include <string>

#include "sqlite_util.h"

namespace pipescope::trace::detail {

// Creates every table, view and enum row of an empty trace; returns a SQLite result code.
int createSchema(Db& db, std::string* error);

// Indexes for time-window queries; built when a run is finalized (cheaper after the bulk load).
extern const char* const kIndexSql;

// Keys of pipescope_meta.
inline constexpr const char* kMetaFormat = "format";        // "pipescope-trace"
inline constexpr const char* kMetaFinalized = "finalized";  // "1" once indexes + LOD exist
inline constexpr const char* kMetaLodBaseNs = "lod_base_ns";
inline constexpr const char* kMetaRunId = "run_id";    // RunInfo::run_id, when set
inline constexpr const char* kMetaBootId = "boot_id";  // RunInfo::boot_id, when set
inline constexpr const char* kFormatName = "pipescope-trace";

}  // namespace pipescope::trace::detail
