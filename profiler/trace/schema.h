// The SQL schema of a trace file, defined in one place (documented in docs/trace-format.md).
#pragma once

#include <string>

#include <pipescope/trace/types.h>

#include "sqlite_util.h"

namespace pipescope::trace::detail {

// Creates every table, view and enum row of an empty trace; returns a SQLite result code.
int createSchema(Db& db, std::string* error);

// The file's schema version (PRAGMA user_version, and pipescope_meta.schema_version when
// present): an error naming `path` and the versions when this build cannot read it (newer,
// missing, damaged). Checked before reading a trace and before writing into an existing one.
TraceStatus checkSchemaVersion(const Db& db, const std::string& path);

// Indexes for time-window queries and joins; built when a run is finalized (cheaper after the
// bulk load). A trace from before a table existed gets no index on it.
extern const char* const kIndexSql;

// META_DATA_EXPORT.EXPORT_SCHEMA_VERSION: the version of `nsys export --type sqlite`'s schema
// (Nsight Systems 2024.4) whose table and column names the Nsight-compatible tables follow, for
// scripts that check it before they read an export.
inline constexpr const char* kNsightSchemaVersion = "3.15.1";

// Keys of pipescope_meta.
inline constexpr const char* kMetaFormat = "format";                 // "pipescope-trace"
inline constexpr const char* kMetaSchemaVersion = "schema_version";  // PRAGMA user_version
inline constexpr const char* kMetaFinalized = "finalized";           // "1" once indexes + LOD exist
inline constexpr const char* kMetaLodBaseNs = "lod_base_ns";
inline constexpr const char* kMetaRunId = "run_id";    // RunInfo::run_id, when set
inline constexpr const char* kMetaBootId = "boot_id";  // RunInfo::boot_id, when set
inline constexpr const char* kFormatName = "pipescope-trace";

}  // namespace pipescope::trace::detail
