// TraceReader's searches for the ops a click asks about (a selected op's dependencies, its
// micro-batch's path), each held to a deadline so that a pathological trace cannot freeze the
// window.
#include <pipescope/trace/reader.h>

#include "reader_impl.h"
#include "schema.h"

namespace pipescope::trace {

using detail::DeadlineGuard;
using detail::Stmt;

std::optional<std::vector<OpRecord>> TraceReader::findOps(
    const OpQuery& q, std::chrono::steady_clock::time_point deadline) const {
    // One micro-batch's ops: the (iteration, micro-batch, rank) index holds them together, a few
    // per rank, so SQLite reads those and sorts them, however long the iteration. Otherwise SQLite
    // walks (rank, start_ns) over the window and tests the rest per row; without the indexes,
    // one scan of the rank. The other terms are written `+column` so that the planner never
    // prefers an index that cannot give the order by start.
    const bool by_microbatch =
        impl_->microbatch_index && q.iteration && q.microbatch && *q.microbatch >= 0;
    std::string sql = std::string("SELECT ") + kOpColumns + " FROM op";
    std::vector<std::int64_t> args;
    const auto term = [&](const char* condition, std::int64_t value) {
        sql += condition;
        args.push_back(value);
    };
    if (by_microbatch) {
        sql += " INDEXED BY op_iteration_microbatch";
        term(" WHERE iteration = ?", *q.iteration);
        term(" AND microbatch = ?", *q.microbatch);
        if (q.rank) {
            term(" AND rank = ?", *q.rank);
        }
        term(" AND +start_ns >= ?", q.start_from);
    } else {
        if (q.rank) {
            term(" WHERE rank = ?", *q.rank);
            term(" AND start_ns >= ?", q.start_from);
        } else {
            term(" WHERE +start_ns >= ?", q.start_from);
        }
        if (q.iteration) {
            term(" AND +iteration = ?", *q.iteration);
        }
        if (q.microbatch && *q.microbatch < 0) {
            sql += " AND +microbatch IS NULL";
        } else if (q.microbatch) {
            term(" AND +microbatch = ?", *q.microbatch);
        }
    }
    term(by_microbatch || !q.rank ? " AND +start_ns < ?" : " AND start_ns < ?", q.start_before);
    if (q.lane) {
        term(" AND +lane = ?", static_cast<int>(*q.lane));
    }
    if (q.kind) {
        term(" AND +kind = ?", static_cast<int>(*q.kind));
    }
    if (q.chunk) {
        term(" AND +chunk = ?", *q.chunk);
    }
    if (q.peer) {
        term(" AND +peer = ?", *q.peer);
    }
    if (q.collective) {
        term(" AND coalesce(collective, 0) = ?", *q.collective);
    }
    if (q.end_by) {
        term(" AND +end_ns <= ?", *q.end_by);
    }
    if (q.exclude_id) {
        term(" AND rowid != ?", *q.exclude_id);
    }
    const char* by_rank = q.rank ? "" : "rank, ";
    sql += std::string(" ORDER BY ") + by_rank +
           (q.latest_first ? "start_ns DESC, rowid DESC" : "start_ns, rowid");
    const DeadlineGuard guard(impl_->db.get(), deadline);
    Stmt s(impl_->db, sql);
    if (!s.valid()) {
        return std::nullopt;
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
        s.bind(static_cast<int>(i + 1), args[i]);
    }
    std::vector<OpRecord> out;
    const auto full = [&] { return q.limit > 0 && static_cast<int>(out.size()) >= q.limit; };
    int rc = SQLITE_DONE;
    while (!full() && (rc = s.step()) == SQLITE_ROW) {
        const OpRecord o = Impl::readOp(s);
        if (isKnownOp(o)) {
            out.push_back(o);
        }
    }
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        return std::nullopt;
    }
    return out;
}

std::optional<std::vector<OpRecord>> TraceReader::microbatchOps(
    int iteration, int microbatch, std::int64_t t0, std::int64_t t1,
    std::chrono::milliseconds budget) const {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    if (impl_->microbatch_index && microbatch >= 0) {
        OpQuery q;  // every rank at once
        q.iteration = iteration;
        q.microbatch = microbatch;
        q.start_from = t0;
        q.start_before = t1;
        return findOps(q, deadline);
    }
    std::vector<OpRecord> out;
    for (const auto& rank : impl_->ranks) {
        OpQuery q;
        q.rank = rank.rank;
        q.iteration = iteration;
        q.microbatch = microbatch;
        q.start_from = t0;
        q.start_before = t1;
        auto found = findOps(q, deadline);
        if (!found) {
            return std::nullopt;
        }
        out.insert(out.end(), found->begin(), found->end());
    }
    return out;
}

}  // namespace pipescope::trace
