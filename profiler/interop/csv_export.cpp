#include <algorithm>

#include <pipescope/interop/csv_export.h>

#include "atomic_file.h"
#include "known_rows.h"
#include "pipescope/trace/json_text.h"
#include "progress.h"

namespace pipescope::interop {

namespace {

constexpr const char* kEol = "\r\n";  // RFC 4180 line end

// Integers where -1 stands for NULL in the records: an empty field, as SQLite's CSV mode writes.
void appendNullable(std::string* out, std::int64_t v) {
    if (v >= 0) {
        trace::appendInt(out, v);
    }
}

void appendOptional(std::string* out, const std::optional<int>& v) {
    if (v) {
        trace::appendInt(out, *v);
    }
}

trace::TraceStatus writeOps(const trace::TraceReader& reader, detail::AtomicFile* file,
                            std::int64_t* rows, detail::Progress* progress) {
    file->write(
        "id,rank,iteration,kind,microbatch,chunk,lane,start_ns,end_ns,dur_ns,source,op_index,"
        "peer,collective,bytes,cpu_ns");
    file->write(kEol);
    std::string line;
    return reader.forEachOp([&](const trace::OpRecord& op) {
        // The view joins the enum tables, so rows of unknown kinds are not in it either.
        if (!detail::isKnownOp(op)) {
            return progress->step();
        }
        line.clear();
        using trace::appendInt;
        appendInt(&line, op.id);
        line += ',';
        appendInt(&line, op.rank);
        line += ',';
        appendInt(&line, op.iteration);
        line += ',';
        line += trace::toString(op.kind);
        line += ',';
        appendNullable(&line, op.microbatch);
        line += ',';
        appendInt(&line, op.chunk);
        line += ',';
        line += trace::toString(op.lane);
        line += ',';
        appendInt(&line, op.start_ns);
        line += ',';
        appendInt(&line, op.end_ns);
        line += ',';
        appendInt(&line, op.end_ns - op.start_ns);
        line += ',';
        line += trace::toString(op.source);
        line += ',';
        appendInt(&line, op.op_index);
        line += ',';
        appendNullable(&line, op.peer);
        line += ',';
        line += detail::collectiveName(op.collective);
        line += ',';
        appendNullable(&line, op.bytes);
        line += ',';
        appendNullable(&line, op.cpu_ns);
        line += kEol;
        file->write(line);
        ++*rows;
        return progress->step();
    });
}

trace::TraceStatus writeMemory(const trace::TraceReader& reader, detail::AtomicFile* file,
                               std::int64_t* rows, detail::Progress* progress) {
    file->write("rank,t_ns,bytes,category");
    file->write(kEol);
    std::string line;
    return reader.forEachMemory([&](const trace::MemorySample& s) {
        if (!detail::isKnownCategory(s.category)) {
            return progress->step();
        }
        line.clear();
        trace::appendInt(&line, s.rank);
        line += ',';
        trace::appendInt(&line, s.t_ns);
        line += ',';
        trace::appendInt(&line, s.bytes);
        line += ',';
        line += trace::toString(s.category);
        line += kEol;
        file->write(line);
        ++*rows;
        return progress->step();
    });
}

trace::TraceStatus writeMetrics(const trace::TraceReader& reader, detail::AtomicFile* file,
                                std::int64_t* rows) {
    file->write("key,value,rank,iteration");
    file->write(kEol);
    std::string line;
    for (const trace::MetricRecord& m : reader.metrics()) {
        line = csvField(m.key);
        line += ',';
        trace::appendDouble(&line, m.value);
        line += ',';
        appendOptional(&line, m.rank);
        line += ',';
        appendOptional(&line, m.iteration);
        line += kEol;
        file->write(line);
        ++*rows;
    }
    return trace::TraceStatus::success();
}

}  // namespace

std::optional<CsvTable> csvTableFromString(std::string_view name) {
    for (CsvTable t : {CsvTable::Op, CsvTable::Memory, CsvTable::Metric}) {
        if (toString(t) == name) {
            return t;
        }
    }
    return std::nullopt;
}

std::string_view toString(CsvTable table) {
    switch (table) {
        case CsvTable::Op:
            return "op";
        case CsvTable::Memory:
            return "memory";
        case CsvTable::Metric:
            return "metric";
    }
    return "op";
}

std::string csvField(std::string_view text) {
    if (text.find_first_of(",\"\r\n") == std::string_view::npos) {
        return std::string(text);
    }
    std::string out = "\"";
    for (char c : text) {
        out += c;
        if (c == '"') {
            out += '"';
        }
    }
    out += '"';
    return out;
}

trace::TraceStatus exportCsv(const trace::TraceReader& reader, const std::string& out_path,
                             CsvTable table, std::int64_t* rows,
                             const std::function<bool(double)>& progress) {
    std::int64_t count = 0;
    detail::Progress steps(progress, 1.0, "the export");
    steps.addTotal(table == CsvTable::Op       ? reader.opCount()
                   : table == CsvTable::Memory ? reader.memorySampleCount()
                                               : 0);
    if (trace::TraceStatus st = detail::notTheTrace(reader.path(), out_path); !st.ok()) {
        return st;
    }
    detail::AtomicFile file;
    trace::TraceStatus st = file.open(out_path);
    if (!st.ok()) {
        return st;
    }
    switch (table) {
        case CsvTable::Op:
            st = writeOps(reader, &file, &count, &steps);
            break;
        case CsvTable::Memory:
            st = writeMemory(reader, &file, &count, &steps);
            break;
        case CsvTable::Metric:
            st = writeMetrics(reader, &file, &count);
            break;
    }
    if (rows) {
        *rows = count;
    }
    if (steps.stopped()) {
        return steps.cancelled();
    }
    return st.ok() ? file.commit() : st;
}

}  // namespace pipescope::interop
