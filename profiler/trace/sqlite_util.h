// Thin RAII wrappers over the SQLite C API, private to the trace library.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <sqlite3.h>
#include <string>
#include <string_view>

namespace pipescope::trace::detail {

class Db {
  public:
    Db() = default;
    ~Db() { close(); }
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;
    Db(Db&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
    Db& operator=(Db&& o) noexcept {
        if (this != &o) {
            close();
            db_ = o.db_;
            o.db_ = nullptr;
        }
        return *this;
    }

    // Returns the SQLite result code; on failure errorMessage() says why.
    int open(const std::string& path, int flags);
    void close();
    sqlite3* get() const { return db_; }
    explicit operator bool() const { return db_ != nullptr; }

    // Runs one or more statements without results; returns the result code.
    int exec(std::string_view sql);
    std::string errorMessage() const;
    int extendedErrorCode() const { return db_ ? sqlite3_extended_errcode(db_) : SQLITE_MISUSE; }
    bool tableExists(std::string_view name) const;

  private:
    sqlite3* db_ = nullptr;
};

class Stmt {
  public:
    Stmt() = default;
    Stmt(const Db& db, std::string_view sql) { prepare(db, sql); }
    ~Stmt() { sqlite3_finalize(stmt_); }
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;
    Stmt(Stmt&& o) noexcept : stmt_(o.stmt_), rc_(o.rc_) { o.stmt_ = nullptr; }
    Stmt& operator=(Stmt&& o) noexcept {
        if (this != &o) {
            sqlite3_finalize(stmt_);
            stmt_ = o.stmt_;
            rc_ = o.rc_;
            o.stmt_ = nullptr;
        }
        return *this;
    }

    int prepare(const Db& db, std::string_view sql);
    bool valid() const { return stmt_ != nullptr; }
    int prepareResult() const { return rc_; }

    Stmt& bind(int index, std::int64_t v) {
        sqlite3_bind_int64(stmt_, index, v);
        return *this;
    }
    Stmt& bind(int index, int v) { return bind(index, static_cast<std::int64_t>(v)); }
    Stmt& bind(int index, double v) {
        sqlite3_bind_double(stmt_, index, v);
        return *this;
    }
    Stmt& bind(int index, std::string_view v) {
        sqlite3_bind_text(stmt_, index, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        return *this;
    }
    Stmt& bindNull(int index) {
        sqlite3_bind_null(stmt_, index);
        return *this;
    }
    // Binds NULL when v < 0 (the records use -1 for "none").
    Stmt& bindOrNull(int index, std::int64_t v) { return v < 0 ? bindNull(index) : bind(index, v); }
    template <class T>
    Stmt& bind(int index, const std::optional<T>& v) {
        return v ? bind(index, *v) : bindNull(index);
    }

    // SQLITE_ROW, SQLITE_DONE or an error code.
    int step() { return sqlite3_step(stmt_); }
    void reset() {
        sqlite3_reset(stmt_);
        sqlite3_clear_bindings(stmt_);
    }

    std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
    int int32(int col) const { return sqlite3_column_int(stmt_, col); }
    double real(int col) const { return sqlite3_column_double(stmt_, col); }
    bool isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
    std::int64_t int64OrMinus1(int col) const { return isNull(col) ? -1 : int64(col); }
    std::string text(int col) const {
        const auto* p = sqlite3_column_text(stmt_, col);
        return p ? std::string(reinterpret_cast<const char*>(p),
                               static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col)))
                 : std::string();
    }

  private:
    sqlite3_stmt* stmt_ = nullptr;
    int rc_ = SQLITE_OK;
};

// Runs a query expected to return one integer (0 when there is no row).
std::int64_t queryInt(const Db& db, std::string_view sql);

// Holds a connection's queries to a deadline while it lives: SQLite calls back every thousand
// virtual-machine steps and a query past the deadline stops with SQLITE_INTERRUPT.
class DeadlineGuard {
  public:
    DeadlineGuard(sqlite3* db, std::chrono::steady_clock::time_point at) : db_(db), at_(at) {
        sqlite3_progress_handler(
            db_, 1000,
            [](void* p) {
                const auto* when = static_cast<const std::chrono::steady_clock::time_point*>(p);
                return std::chrono::steady_clock::now() > *when ? 1 : 0;
            },
            &at_);
    }
    ~DeadlineGuard() { sqlite3_progress_handler(db_, 0, nullptr, nullptr); }
    DeadlineGuard(const DeadlineGuard&) = delete;
    DeadlineGuard& operator=(const DeadlineGuard&) = delete;

  private:
    sqlite3* db_;
    std::chrono::steady_clock::time_point at_;
};

}  // namespace pipescope::trace::detail
