#include "sqlite_util.h"

namespace pipescope::trace::detail {

int Db::open(const std::string& path, int flags) {
    close();
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc == SQLITE_OK) {
        sqlite3_extended_result_codes(db_, 1);
        // A reader may meet a writer's lock briefly (WAL checkpoint); wait instead of failing.
        sqlite3_busy_timeout(db_, 5000);
    }
    return rc;
}

void Db::close() {
    if (db_) {
        sqlite3_close_v2(db_);
        db_ = nullptr;
    }
}

int Db::exec(std::string_view sql) {
    const std::string s(sql);
    return sqlite3_exec(db_, s.c_str(), nullptr, nullptr, nullptr);
}

std::string Db::errorMessage() const {
    return db_ ? std::string(sqlite3_errmsg(db_)) : std::string("database is not open");
}

bool Db::tableExists(std::string_view name) const {
    Stmt s(*this, "SELECT 1 FROM sqlite_master WHERE type IN ('table','view') AND name = ?");
    if (!s.valid()) {
        return false;
    }
    s.bind(1, name);
    return s.step() == SQLITE_ROW;
}

int Stmt::prepare(const Db& db, std::string_view sql) {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    rc_ = sqlite3_prepare_v3(db.get(), sql.data(), static_cast<int>(sql.size()),
                             SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
    return rc_;
}

std::int64_t queryInt(const Db& db, std::string_view sql) {
    Stmt s(db, sql);
    if (s.valid() && s.step() == SQLITE_ROW) {
        return s.int64(0);
    }
    return 0;
}

}  // namespace pipescope::trace::detail
