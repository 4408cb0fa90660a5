#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include <pipescope/schedule/generate.h>
#include <pipescope/schedule/schedule_json.h>

#include "json_reader.h"

namespace pipescope::schedule {

namespace {

using Json = nlohmann::json;

bool readInt(std::string_view& s, int* out) {
    const auto* begin = s.data();
    const auto* end = s.data() + s.size();
    const auto [ptr, ec] = std::from_chars(begin, end, *out);
    if (ec != std::errc() || ptr == begin || *out < 0) {
        return false;
    }
    s.remove_prefix(static_cast<std::size_t>(ptr - begin));
    return true;
}

bool eat(std::string_view& s, std::string_view token) {
    if (s.substr(0, token.size()) != token) {
        return false;
    }
    s.remove_prefix(token.size());
    return true;
}

}  // namespace

std::optional<Op> parseOpLabel(std::string_view label, std::string* error) {
    const std::string original(label);
    auto bad = [&](const std::string& why) -> std::optional<Op> {
        *error = "\"" + original + "\": " + why +
                 " (ops look like F3, B2.c1, SEND_F3>2, RECV_B3<1, ALLREDUCE(output,3), OPT)";
        return std::nullopt;
    };
    Op op;
    if (label == "OPT") {
        op.kind = OpKind::Opt;
        return op;
    }
    for (OpKind k : {OpKind::Bcast, OpKind::AllReduce}) {
        if (eat(label, toString(k))) {
            op.kind = k;
            if (!eat(label, "(")) {
                return bad("a collective is written KIND(which,micro-batch)");
            }
            const auto comma = label.find(',');
            const auto close = label.find(')');
            if (comma == std::string_view::npos || close == std::string_view::npos ||
                close + 1 != label.size() || comma > close) {
                return bad("a collective is written KIND(which,micro-batch)");
            }
            const auto which = collectiveFromString(label.substr(0, comma));
            if (!which || *which == Collective::None) {
                return bad("unknown collective \"" + std::string(label.substr(0, comma)) +
                           "\" (input, input_grad, output_bcast, output, output_grad)");
            }
            op.collective = *which;
            std::string_view num = label.substr(comma + 1, close - comma - 1);
            if (!readInt(num, &op.microbatch) || !num.empty()) {
                return bad("the micro-batch must be a number");
            }
            return op;
        }
    }
    // The kind is the label's leading capitals and underscores, named in full: "FOO7" is an
    // unknown kind, not F followed by something that is not a number.
    const std::string_view kind_text = label.substr(
        0, std::min(label.size(), label.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_")));
    static const OpKind kinds[] = {OpKind::SendF, OpKind::SendB, OpKind::RecvF, OpKind::RecvB,
                                   OpKind::IF,    OpKind::IB,    OpKind::F,     OpKind::B,
                                   OpKind::W,     OpKind::S,     OpKind::T,     OpKind::L};
    const auto* kind = std::find_if(std::begin(kinds), std::end(kinds),
                                    [&](OpKind k) { return toString(k) == kind_text; });
    if (kind == std::end(kinds)) {
        return bad(kind_text.empty() ? std::string("an op starts with its kind")
                                     : "unknown op kind \"" + std::string(kind_text) + "\"");
    }
    op.kind = *kind;
    label.remove_prefix(kind_text.size());
    if (!readInt(label, &op.microbatch)) {
        return bad("the kind must be followed by a micro-batch number");
    }
    if (eat(label, ".c") && !readInt(label, &op.chunk)) {
        return bad("\".c\" must be followed by a chunk number");
    }
    if (isComm(op.kind)) {
        const bool send = op.kind == OpKind::SendF || op.kind == OpKind::SendB;
        if (!eat(label, send ? ">" : "<") || !readInt(label, &op.peer)) {
            return bad(send ? "a send names its peer: SEND_F3>2"
                            : "a receive names its peer: RECV_F3<1");
        }
    }
    if (!label.empty()) {
        return bad("unexpected \"" + std::string(label) + "\" at the end");
    }
    return op;
}

std::string scheduleToJson(const Schedule& s) {
    Json j;
    j["format"] = "pipescope-schedule";
    j["version"] = 1;
    j["ranks"] = s.ranks;
    j["microbatches"] = s.microbatches;
    j["schedule"] = std::string(toString(s.base));
    j["vocab"] = std::string(toString(s.vocab));
    j["layers_per_position"] = s.placement.layers;
    Json ops = Json::array();
    for (const auto& list : s.ops) {
        Json rank = Json::array();
        for (const auto& o : list) {
            rank.push_back(o.label());
        }
        ops.push_back(std::move(rank));
    }
    j["ops"] = std::move(ops);
    // One rank per line keeps hand-edited diffs readable.
    std::string out = "{\n";
    for (const char* key : {"format", "version", "ranks", "microbatches", "schedule", "vocab",
                            "layers_per_position"}) {
        out += "  \"" + std::string(key) + "\": " + j[key].dump() + ",\n";
    }
    out += "  \"ops\": [\n";
    for (std::size_t r = 0; r < j["ops"].size(); ++r) {
        out += "    " + j["ops"][r].dump() + (r + 1 < j["ops"].size() ? ",\n" : "\n");
    }
    out += "  ]\n}\n";
    return out;
}

namespace {

// A rank's collectives are the method's: each role (input, input_grad, output_bcast, output,
// output_grad) with its kind (a sum or a broadcast) once per micro-batch, in any order, and none
// in a method without sharded vocabulary layers. The executors' validation (validateSchedule)
// only sees that every rank joins each collective; a BCAST where the method sums was timed by
// the simulator as if it were right, and failed the CPU run mid-way. The generated schedule of
// the same config is the reference. Empty when they agree, else what is wrong and where.
std::string checkCollectives(const Schedule& s, const Config& config) {
    const GenerateResult ref = generateSchedule(config);
    if (!ref.schedule || static_cast<int>(ref.schedule->ops.size()) != s.ranks) {
        return {};  // nothing to hold the file against; the validation still runs
    }
    const auto collectives = [](const std::vector<Op>& ops) {
        std::vector<std::pair<std::string, int>> out;  // (label, place in the list)
        for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
            const Op& o = ops[static_cast<std::size_t>(i)];
            if (o.kind == OpKind::AllReduce || o.kind == OpKind::Bcast) {
                out.emplace_back(o.label(), i);
            }
        }
        std::sort(out.begin(), out.end());
        return out;
    };
    const std::string method = std::string(toString(s.base)) + " schedule with " +
                               std::string(toString(s.vocab)) + " vocabulary layers";
    for (int r = 0; r < s.ranks; ++r) {
        const auto have = collectives(s.ops[static_cast<std::size_t>(r)]);
        const auto want = collectives(ref.schedule->ops[static_cast<std::size_t>(r)]);
        const auto byLabel = [](const auto& a, const auto& b) { return a.first < b.first; };
        std::vector<std::pair<std::string, int>> extra;
        std::vector<std::pair<std::string, int>> missing;
        std::set_difference(have.begin(), have.end(), want.begin(), want.end(),
                            std::back_inserter(extra), byLabel);
        std::set_difference(want.begin(), want.end(), have.begin(), have.end(),
                            std::back_inserter(missing), byLabel);
        if (!extra.empty()) {
            // The first in the rank's list, and what the method runs instead, where that is one
            // label: BCAST(output,3) for ALLREDUCE(output,3).
            const auto first =
                *std::min_element(extra.begin(), extra.end(),
                                  [](const auto& a, const auto& b) { return a.second < b.second; });
            std::string instead;
            if (extra.size() == 1 && missing.size() == 1) {
                instead = "; the method runs " + missing.front().first + " there";
            }
            return "ops[" + std::to_string(r) + "][" + std::to_string(first.second) + "] " +
                   first.first + ": " +
                   (want.empty() ? "a " + method + " has no collectives"
                                 : "not a collective of rank " + std::to_string(r) + " in a " +
                                       method + " (or one too many)" + instead);
        }
        if (!missing.empty()) {
            return "rank " + std::to_string(r) + ": " + missing.front().first + " is missing (a " +
                   method + " runs it on every rank)";
        }
    }
    return {};
}

// A point-to-point op of rank `r` whose peer is no other rank: the check of the whole schedule
// would only find some op missing, without naming the label that is wrong. Empty when none.
std::string badPeer(const Op& op, const Schedule& s, int r) {
    const bool p2p = op.kind == OpKind::SendF || op.kind == OpKind::SendB ||
                     op.kind == OpKind::RecvF || op.kind == OpKind::RecvB;
    if (p2p && (op.peer >= s.ranks || op.peer == r)) {
        return "peer " + std::to_string(op.peer) + " is not another rank of the " +
               std::to_string(s.ranks) + "-rank schedule (0 to " + std::to_string(s.ranks - 1) +
               ", not " + std::to_string(r) + " itself)";
    }
    return {};
}

}  // namespace

ScheduleLoad scheduleFromJson(std::string_view text, const Config& config,
                              std::string_view source_name) {
    ScheduleLoad out;
    const std::string src(source_name);
    // The config reader's words for a syntax slip, with its line and column.
    if (const detail::JsonReadResult read = detail::readJson(text); read.error) {
        out.error = src + ":" + std::to_string(read.error->pos.line) + ":" +
                    std::to_string(read.error->pos.column) + ": " + read.error->message;
        return out;
    }
    Json j;
    try {
        j = Json::parse(text);
    } catch (const Json::parse_error& e) {
        out.error = src + ": not valid JSON (" + std::string(e.what()) + ")";
        return out;
    }
    auto fail = [&](const std::string& why) {
        out.error = src + ": " + why;
        return out;
    };
    // json::value() throws when the key holds another type: "format": 5 aborted the program.
    if (!j.is_object() || !j.contains("format") || !j["format"].is_string() ||
        j["format"] != Json("pipescope-schedule")) {
        return fail("not a PipeScope schedule (\"format\" must be \"pipescope-schedule\")");
    }
    // Compared as JSON numbers, not through get<int>(), which cut 4294967297 down to 1 (then
    // accepted) and 2^40 to 0 (then named as 0).
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != Json(1)) {
        return fail("\"version\" must be 1");
    }
    auto number = [&](const char* key, int want,
                      const char* config_key) -> std::optional<std::string> {
        if (!j.contains(key) || !j[key].is_number_integer()) {
            return "\"" + std::string(key) + "\" must be an integer";
        }
        if (j[key] != Json(want)) {
            return "\"" + std::string(key) + "\" is " + j[key].dump() + " but the config's " +
                   config_key + " is " + std::to_string(want);
        }
        return std::nullopt;
    };
    if (auto e = number("ranks", config.parallel.pipeline, "parallel.pipeline")) {
        return fail(*e);
    }
    if (auto e = number("microbatches", config.parallel.microbatches, "parallel.microbatches")) {
        return fail(*e);
    }
    for (const auto& [key, want] :
         {std::pair<const char*, std::string>{"schedule",
                                              std::string(toString(config.parallel.schedule))},
          {"vocab", std::string(toString(config.parallel.vocab))}}) {
        if (!j.contains(key) || !j[key].is_string() || j[key].get<std::string>() != want) {
            return fail("\"" + std::string(key) + "\" must be \"" + want +
                        "\" to match the config's parallel." + key);
        }
    }
    Schedule s;
    s.ranks = config.parallel.pipeline;
    s.microbatches = config.parallel.microbatches;
    s.base = config.parallel.schedule;
    s.vocab = config.parallel.vocab;
    s.split_backward = s.base == ScheduleKind::ZBH1 || s.base == ScheduleKind::VHalf;
    s.placement = computePlacement(config);
    if (j.contains("layers_per_position") && j["layers_per_position"] != Json(s.placement.layers)) {
        return fail("\"layers_per_position\" " + j["layers_per_position"].dump() +
                    " differs from the config's layer split " + Json(s.placement.layers).dump());
    }
    if (!j.contains("ops") || !j["ops"].is_array() ||
        static_cast<int>(j["ops"].size()) != s.ranks) {
        return fail("\"ops\" must be an array of " + std::to_string(s.ranks) +
                    " op lists, one per rank");
    }
    const int last_rank = s.placement.position_rank[static_cast<std::size_t>(s.lastPosition())];
    for (int r = 0; r < s.ranks; ++r) {
        const Json& list = j["ops"][static_cast<std::size_t>(r)];
        if (!list.is_array()) {
            return fail("ops[" + std::to_string(r) + "] must be an array of op labels");
        }
        std::vector<Op> ops;
        for (std::size_t i = 0; i < list.size(); ++i) {
            const std::string at = "ops[" + std::to_string(r) + "][" + std::to_string(i) + "] ";
            if (!list[i].is_string()) {
                return fail(at + "must be a string");
            }
            std::string why;
            auto op = parseOpLabel(list[i].get<std::string>(), &why);
            if (!op) {
                return fail(at + why);
            }
            if (why = badPeer(*op, s, r); !why.empty()) {
                return fail(at + "\"" + list[i].get<std::string>() + "\": " + why);
            }
            if (op->kind == OpKind::Bcast) {
                op->root = op->collective == Collective::InputGradBcast
                               ? s.placement.position_rank[0]
                               : last_rank;
            }
            op->blocking = isComm(op->kind) &&
                           (op->kind == OpKind::Bcast || op->kind == OpKind::AllReduce) &&
                           s.vocab == VocabMethod::Interlaced;
            op->bytes = commBytes(config, *op);
            ops.push_back(*op);
        }
        s.ops.push_back(std::move(ops));
    }
    if (const std::string why = checkCollectives(s, config); !why.empty()) {
        return fail(why);
    }
    out.schedule = std::move(s);
    return out;
}

ScheduleLoad loadScheduleFile(const std::string& path, const Config& config) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
        ScheduleLoad out;
        out.error = path + ": no such file";
        return out;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in || std::filesystem::is_directory(path, ec)) {
        ScheduleLoad out;
        out.error = path + ": cannot read the file";
        return out;
    }
    std::ostringstream text;
    text << in.rdbuf();
    return scheduleFromJson(text.str(), config, path);
}

}  // namespace pipescope::schedule
