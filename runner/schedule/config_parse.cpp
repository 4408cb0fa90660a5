#include <algorithm>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/ir.h>

#include "config_keys.h"
#include "config_validate.h"
#include "json_reader.h"

namespace pipescope::schedule {

using detail::Json;

namespace {

// A message is one line of printable text whatever the keys hold: a key "seed\u0000" put a NUL
// byte in it, and a key of megabytes would fill the terminal.
std::string printable(std::string_view s, std::size_t max_bytes) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (out.size() >= max_bytes && (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
            return out + "...";
        }
        const auto c = static_cast<unsigned char>(s[i]);
        if (c < 0x20 || c == 0x7F) {
            char esc[8];
            std::snprintf(esc, sizeof esc, "\\u%04x", c);
            out += esc;
        } else {
            out += s[i];
        }
    }
    return out;
}

}  // namespace

std::string ConfigIssue::text() const {
    const std::string shown_message = printable(message, std::string::npos);
    return path.empty() ? shown_message : printable(path, 80) + ": " + shown_message;
}

std::string ConfigIssue::text(std::string_view source_name) const {
    std::string out(source_name);
    if (line > 0) {
        out += ":" + std::to_string(line) + ":" + std::to_string(column);
    }
    return out + ": " + text();
}

std::string ParseResult::errorText() const {
    std::string out;
    for (const ConfigIssue& issue : issues) {
        if (!out.empty()) {
            out += '\n';
        }
        out += issue.text(source_name);
    }
    return out;
}

namespace {

constexpr std::size_t kMaxIssues = 100;

// An issue that suggests a fix (unknown key or name, "did you mean ...?").
bool hasSuggestion(const ConfigIssue& issue) {
    return issue.message.find("(did you mean \"") != std::string::npos;
}

std::string dumpJson(const Json& value, int indent) {
    return value.dump(indent, ' ', false, Json::error_handler_t::replace);
}

// An override's value: JSON where it is valid JSON, else the text as a string, so that
// "parallel.vocab=vocab-2" needs no quotes.
Json overrideValue(const std::string& value_json) {
    detail::JsonReadResult r = detail::readJson(value_json);
    if (r.error) {
        return Json(value_json);
    }
    return std::move(r.value);
}

std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && space(s.front())) {
        s.remove_prefix(1);
    }
    while (!s.empty() && space(s.back())) {
        s.remove_suffix(1);
    }
    return s;
}

Json optionalJson(const std::optional<int>& v) {
    return v ? Json(*v) : Json(nullptr);
}
Json optionalJson(const std::optional<double>& v) {
    return v ? Json(*v) : Json(nullptr);
}

Json configToJson(const Config& c) {
    Json j = Json::object();
    j["name"] = c.name;
    const ModelConfig& m = c.model;
    j["model"] = {{"layers", m.layers},
                  {"hidden", m.hidden},
                  {"ffn_hidden", m.ffn_hidden},
                  {"heads", m.heads},
                  {"seq_len", m.seq_len},
                  {"vocab", m.vocab},
                  {"micro_batch", m.micro_batch},
                  {"dtype", toString(m.dtype)},
                  {"flash_attention", m.flash_attention}};
    const ParallelConfig& p = c.parallel;
    j["parallel"] = {{"pipeline", p.pipeline},
                     {"microbatches", p.microbatches},
                     {"schedule", toString(p.schedule)},
                     {"vocab", toString(p.vocab)},
                     {"first_stage_layers", optionalJson(p.first_stage_layers)},
                     {"last_stage_layers", optionalJson(p.last_stage_layers)}};
    // Only interleaved-1f1b takes it; the other schedules imply theirs (1, or 2 for v-half), and
    // writing it would refuse the document once a variant or sweep changes the schedule.
    if (p.schedule == ScheduleKind::Interleaved1F1B) {
        j["parallel"]["virtual_stages"] = p.virtual_stages;
    }
    const HardwareConfig& h = c.hardware;
    j["hardware"] = {{"name", h.name},
                     {"peak_tflops", h.peak_tflops},
                     {"memory_gib", h.memory_gib},
                     {"p2p_gbps", h.p2p_gbps},
                     {"allreduce_gbps", h.allreduce_gbps},
                     {"latency_us", h.latency_us},
                     {"memory_gbps", h.memory_gbps},
                     {"gemm_efficiency", h.gemm_efficiency}};
    Json table = Json::object();
    for (const CostKey k : kAllCostKeys) {
        table[std::string(toString(k))] = c.costs.table(k);
    }
    const std::string source = c.costs.source == CostSource::Calibrated
                                   ? "calibrated:" + c.costs.calibrated_path
                                   : std::string(toString(c.costs.source));
    Json kinds = Json::object();
    for (std::size_t i = 1; i < kCollectiveKinds; ++i) {
        kinds[std::string(toString(static_cast<Collective>(i)))] =
            optionalJson(c.costs.collectives_us[i]);
    }
    j["costs"] = {{"source", source},
                  {"per_stage_us", std::move(table)},
                  {"p2p_us", optionalJson(c.costs.p2p_us)},
                  {"collective_us", optionalJson(c.costs.collective_us)},
                  {"collectives_us", std::move(kinds)}};
    j["run"] = {{"iterations", c.run.iterations},
                {"warmup", c.run.warmup},
                {"seed", c.run.seed},
                {"learning_rate", c.run.learning_rate}};
    Json compare = Json::array();
    for (const Variant& v : c.compare) {
        Json set = Json::object();
        for (const Override& o : v.overrides) {
            set[o.path] = overrideValue(o.value_json);
        }
        compare.push_back({{"label", v.label}, {"set", std::move(set)}});
    }
    j["compare"] = std::move(compare);
    return j;
}

// Applies the overrides to a read document, validates it and orders the issues: override
// problems first (they come from the command line), then the document's in source order.
ParseResult finish(detail::JsonReadResult doc, const std::vector<Override>& overrides,
                   std::string_view source_name, bool allow_compare) {
    ParseResult result;
    result.source_name = std::string(source_name);
    if (doc.error) {
        result.issues.push_back(
            ConfigIssue{"", doc.error->message, doc.error->pos.line, doc.error->pos.column});
        return result;
    }
    std::vector<ConfigIssue> found;
    for (const detail::DuplicateKey& d : doc.duplicates) {
        const detail::TextPos first = detail::issuePosition(doc.positions, d.path, true);
        found.push_back(ConfigIssue{d.path,
                                    "duplicate key; it already appears at line " +
                                        std::to_string(first.line) + ", column " +
                                        std::to_string(first.column),
                                    d.pos.line, d.pos.column});
    }
    for (const Override& o : overrides) {
        if (const auto problem = detail::checkKeyPath(o.path)) {
            result.issues.push_back(ConfigIssue{o.path, *problem, 0, 0});
            continue;
        }
        std::string error;
        if (!detail::setPath(doc.value, o.path, overrideValue(o.value_json), &error)) {
            result.issues.push_back(ConfigIssue{o.path, error, 0, 0});
            continue;
        }
        detail::forgetPositions(doc.positions, o.path);
    }
    detail::dropKeysLeftBehind(doc.value, overrides, &doc.positions);
    detail::Validation v = detail::validateDocument(doc.value, doc.positions, allow_compare);
    found.insert(found.end(), std::make_move_iterator(v.issues.begin()),
                 std::make_move_iterator(v.issues.end()));
    std::stable_sort(found.begin(), found.end(), [](const ConfigIssue& a, const ConfigIssue& b) {
        const auto key = [](const ConfigIssue& i) {
            return std::pair(i.line > 0 ? i.line : INT_MAX, i.column);
        };
        return key(a) < key(b);
    });
    result.issues.insert(result.issues.end(), std::make_move_iterator(found.begin()),
                         std::make_move_iterator(found.end()));
    // A generated or mangled file can have thousands of issues; past the first ones they are
    // noise, and printing them all costs more than finding them. An issue with a "did you mean"
    // is kept past the cap (up to as many again): a misspelt key is often the one mistake
    // behind the others, its fix is a word away, and the file can have it anywhere.
    if (result.issues.size() > kMaxIssues) {
        std::vector<ConfigIssue> extra;
        std::size_t more = 0;
        for (std::size_t i = kMaxIssues; i < result.issues.size(); ++i) {
            if (extra.size() < kMaxIssues && hasSuggestion(result.issues[i])) {
                extra.push_back(std::move(result.issues[i]));
            } else {
                ++more;
            }
        }
        result.issues.resize(kMaxIssues);
        result.issues.insert(result.issues.end(), std::make_move_iterator(extra.begin()),
                             std::make_move_iterator(extra.end()));
        if (more > 0) {
            result.issues.push_back(ConfigIssue{
                "",
                "and " + std::to_string(more) + " more issues (only the first " +
                    std::to_string(kMaxIssues) + " are listed" +
                    (extra.empty() ? std::string()
                                   : ", and the " + std::to_string(extra.size()) +
                                         " after them with a \"did you mean\" suggestion") +
                    ")",
                0, 0});
        }
    }
    if (result.issues.empty()) {
        result.config = std::move(v.config);
    }
    return result;
}

// Whether a change of `path` belongs in the config's name: not the run's length or seed, nor the
// compare list (the name describes the pipeline being run).
bool namesAChange(std::string_view path) {
    return path.rfind("run.", 0) != 0 && path != "compare" && path != "name";
}

// "parallel.schedule=v-half": a change as a name shows it, strings without their quotes.
std::string describeChange(const std::string& path, std::string value_json) {
    if (value_json.size() >= 2 && value_json.front() == '"' && value_json.back() == '"') {
        value_json = value_json.substr(1, value_json.size() - 2);
    }
    return path + "=" + value_json;
}

// The leaves (values that are not objects) of `edited` that `base` has not, or has otherwise.
void collectChanges(const Json& base, const Json& edited, const std::string& prefix,
                    std::string* out) {
    for (const auto& [key, value] : edited.items()) {
        const std::string path = detail::memberPath(prefix, key);
        if (!namesAChange(path)) {
            continue;
        }
        const auto it = base.is_object() ? base.find(key) : base.end();
        if (value.is_object()) {
            collectChanges(it != base.end() ? *it : Json::object(), value, path, out);
        } else if (it == base.end() || *it != value) {
            *out += (out->empty() ? "" : ", ") + describeChange(path, dumpJson(value, -1));
        }
    }
}

}  // namespace

ParseResult parseConfig(std::string_view json_text, std::string_view source_name) {
    return parseConfig(json_text, std::vector<Override>{}, source_name);
}

ParseResult parseConfig(std::string_view json_text, const std::vector<Override>& overrides,
                        std::string_view source_name) {
    try {
        return finish(detail::readJson(json_text), overrides, source_name, true);
    } catch (const std::exception& e) {
        // Nothing above is expected to throw; if it does, the caller still gets an issue.
        ParseResult r;
        r.source_name = std::string(source_name);
        r.issues.push_back(ConfigIssue{"", std::string("internal error: ") + e.what(), 0, 0});
        return r;
    }
}

ParseResult loadConfigFile(const std::string& path, const std::vector<Override>& overrides) {
    const auto fail = [&path](std::string message) {
        ParseResult r;
        r.source_name = path;
        r.issues.push_back(ConfigIssue{"", std::move(message), 0, 0});
        return r;
    };
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        return fail("is a directory, not a config file");
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return fail(std::filesystem::exists(path, ec) ? "cannot open the file for reading"
                                                      : "no such file");
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) {
        return fail("could not read the whole file");
    }
    ParseResult r = parseConfig(text.str(), overrides, path);
    if (r.ok() && r.config->name != detail::deriveName(*r.config)) {
        std::string changes;
        for (const Override& o : overrides) {
            if (o.path == "name") {
                return r;  // the command line named it
            }
            if (!namesAChange(o.path)) {
                continue;
            }
            changes += (changes.empty() ? "" : ", ") + describeChange(o.path, o.value_json);
        }
        if (!changes.empty()) {
            r.config->name += " [" + changes + "]";
        }
    }
    return r;
}

std::optional<KeyOwner> ownerOf(std::string_view path) {
    if (path == "parallel.virtual_stages") {
        return KeyOwner{"parallel.schedule", toString(ScheduleKind::Interleaved1F1B)};
    }
    if (path == "parallel.first_stage_layers" || path == "parallel.last_stage_layers") {
        return KeyOwner{"parallel.vocab", toString(VocabMethod::Redistributed)};
    }
    return std::nullopt;
}

std::optional<std::string> configKeyProblem(std::string_view path) {
    return detail::checkKeyPath(path);
}

std::optional<std::string_view> closestName(std::string_view word,
                                            const std::vector<std::string_view>& candidates) {
    return detail::closestMatch(word, candidates);
}

std::optional<Override> parseOverride(std::string_view assignment, std::string* error) {
    const auto fail = [&](std::string message) -> std::optional<Override> {
        if (error != nullptr) {
            *error = std::move(message);
        }
        return std::nullopt;
    };
    const auto eq = assignment.find('=');
    if (eq == std::string_view::npos) {
        return fail("expected KEY=VALUE (e.g. model.vocab=256000), got \"" +
                    std::string(assignment) + "\"");
    }
    const std::string_view path = trim(assignment.substr(0, eq));
    const std::string_view value = trim(assignment.substr(eq + 1));
    if (path.empty()) {
        return fail("missing the key before '=' in \"" + std::string(assignment) + "\"");
    }
    Override o;
    o.path = std::string(path);
    o.value_json =
        detail::readJson(value).error ? dumpJson(Json(std::string(value)), -1) : std::string(value);
    return o;
}

std::string toJson(const Config& config, int indent) {
    return dumpJson(configToJson(config), indent);
}

std::string editedName(const Config& base, const Config& edited) {
    if (edited.name != base.name) {
        return edited.name;  // derived anew from the edited values, or named by the user
    }
    std::string changes;
    collectChanges(configToJson(base), configToJson(edited), "", &changes);
    return changes.empty() ? base.name : base.name + " [" + changes + "]";
}

ParseResult applyVariant(const Config& base, const Variant& variant) {
    const std::string source = "compare variant \"" + variant.label + "\"";
    try {
        detail::JsonReadResult doc;
        doc.value = configToJson(base);
        doc.value.erase("compare");
        const bool sets_name = std::any_of(variant.overrides.begin(), variant.overrides.end(),
                                           [](const Override& o) { return o.path == "name"; });
        if (!sets_name) {
            // A derived name describes the base's contents, which the variant changes: derive it
            // again. A chosen name is kept and the label added.
            if (base.name == detail::deriveName(base)) {
                doc.value.erase("name");
            } else {
                doc.value["name"] = base.name + " [" + variant.label + "]";
            }
        }
        return finish(std::move(doc), variant.overrides, source, false);
    } catch (const std::exception& e) {
        ParseResult r;
        r.source_name = source;
        r.issues.push_back(ConfigIssue{"", std::string("internal error: ") + e.what(), 0, 0});
        return r;
    }
}

}  // namespace pipescope::schedule
