// The check of a trace file's schema version, made before reading it (reader.cpp) and before
// writing into an existing one (unfinished.cpp).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "schema.h"

namespace pipescope::trace::detail {

namespace {

// A file of a schema `version` newer than this build reads.
TraceStatus newerVersion(const std::string& path, const std::string& version) {
    return TraceStatus::error(TraceStatus::Code::NewerVersion,
                              path + ": written by a newer PipeScope (trace schema version " +
                                  version + "; this build reads up to version " +
                                  std::to_string(kSchemaVersion) + "): update PipeScope");
}

// A meta value as a message quotes it: printable, and short whatever the file holds.
std::string quoteMeta(const std::string& value) {
    std::string out = "\"";
    for (std::size_t i = 0; i < value.size(); ++i) {
        if (i == 40) {
            return out + "...\"";
        }
        const auto c = static_cast<unsigned char>(value[i]);
        out += c < 0x20 || c >= 0x7F ? '?' : value[i];
    }
    return out + "\"";
}

// pipescope_meta.schema_version repeats PRAGMA user_version (`version`) as text. Absent is fine
// (the pragma decides); present, it must be the same whole number, or the file was damaged or
// edited, and one newer than this build knows is refused as the pragma is.
TraceStatus checkSchemaVersionText(const Db& db, const std::string& path, std::int64_t version) {
    Stmt s(db, "SELECT value FROM pipescope_meta WHERE key = ?");
    s.bind(1, std::string_view(detail::kMetaSchemaVersion));
    if (!s.valid() || s.step() != SQLITE_ROW) {
        return TraceStatus::success();
    }
    const std::string text = s.text(0);
    const auto damaged = [&](const std::string& why) {
        return TraceStatus::error(TraceStatus::Code::Corrupt,
                                  path + ": its schema version (pipescope_meta.schema_version) " +
                                      quoteMeta(text) + " " + why + ": the file is damaged");
    };
    const bool digits = !text.empty() && std::all_of(text.begin(), text.end(),
                                                     [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
        return damaged("is not a version number");
    }
    const std::size_t first = std::min(text.find_first_not_of('0'), text.size() - 1);
    if (text.size() - first > 9) {
        return damaged("is not a version any PipeScope writes");
    }
    const std::int64_t stated = std::stoll(text);
    if (stated > kSchemaVersion) {
        return newerVersion(path, text);
    }
    if (stated != version) {
        return damaged("disagrees with the file's PRAGMA user_version (" + std::to_string(version) +
                       ")");
    }
    return TraceStatus::success();
}

}  // namespace

TraceStatus checkSchemaVersion(const Db& db, const std::string& path) {
    const std::int64_t version = queryInt(db, "PRAGMA user_version");
    if (version > kSchemaVersion) {
        return newerVersion(path, std::to_string(version));
    }
    if (version < 0) {
        return TraceStatus::error(TraceStatus::Code::Corrupt,
                                  path + ": its schema version (PRAGMA user_version) is " +
                                      std::to_string(version) +
                                      ", not a version any PipeScope writes: the file is damaged");
    }
    if (version == 0) {
        return TraceStatus::error(TraceStatus::Code::NotPipeScope,
                                  path +
                                      ": has a pipescope_meta table but no schema version "
                                      "(PRAGMA user_version is 0)");
    }
    return checkSchemaVersionText(db, path, version);
}

}  // namespace pipescope::trace::detail
