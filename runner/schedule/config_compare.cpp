// The "compare" list: each variant is checked as the config it would produce, so that a preset
// cannot promise a comparison that fails only when someone runs it.
#include <map>
#include <optional>
#include <set>
#include <string>

#include "config_fields.h"
#include "config_keys.h"
#include "config_validate.h"

namespace pipescope::schedule::detail {
namespace {

bool startsWithPath(const std::string& path, const std::string& prefix) {
    return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
           (path[prefix.size()] == '.' || path[prefix.size()] == '[');
}

// Issues of the config a variant produces, moved under "compare[i]": onto the set key that
// caused them where there is one, else onto the variant with the base path kept in the message.
void reportVariantIssues(const std::vector<ConfigIssue>& found, const Variant& variant,
                         const std::string& variant_path, const std::set<std::string>& base_texts,
                         FieldReader& reader) {
    for (const ConfigIssue& issue : found) {
        if (base_texts.count(issue.text()) != 0) {
            continue;
        }
        const Override* cause = nullptr;
        for (const Override& o : variant.overrides) {
            if (issue.path == o.path || startsWithPath(issue.path, o.path) ||
                startsWithPath(o.path, issue.path)) {
                cause = &o;
                break;
            }
        }
        if (cause != nullptr) {
            const std::string set_path = variant_path + ".set.";
            std::string path = set_path + issue.path;
            const bool located = reader.positions().count(path) != 0;
            const TextPos pos =
                issuePosition(reader.positions(), located ? path : set_path + cause->path, false);
            reader.issues().push_back(
                ConfigIssue{std::move(path), issue.message, pos.line, pos.column});
        } else {
            const TextPos pos = issuePosition(reader.positions(), variant_path, false);
            reader.issues().push_back(ConfigIssue{
                variant_path, "makes the config invalid: " + issue.text(), pos.line, pos.column});
        }
    }
}

// A label names its variant's row in tables and its trace file (BASE-LABEL.db, a byte of the
// file name for each byte of the label): one line, and short enough for a file name.
std::optional<std::string> labelProblem(const std::string& label) {
    constexpr std::size_t kMaxBytes = 100;
    if (auto problem = lineProblem(label)) {
        return problem;
    }
    if (label.size() > kMaxBytes) {
        return "must be at most " + std::to_string(kMaxBytes) +
               " bytes long (it becomes part of the variant's trace file name), got " +
               std::to_string(label.size());
    }
    return std::nullopt;
}

}  // namespace

void validateCompare(const Json& doc, const PositionMap& positions,
                     const std::vector<ConfigIssue>& base_issues, std::vector<Variant>* variants,
                     std::vector<ConfigIssue>* issues) {
    FieldReader reader(positions, issues);
    const Json& list = doc.at("compare");
    if (!list.is_array()) {
        reader.report("compare", "must be an array of variants, got " + describeValue(list), false);
        return;
    }
    Json base = doc;
    base.erase("compare");
    std::set<std::string> base_texts;
    for (const ConfigIssue& issue : base_issues) {
        base_texts.insert(issue.text());
    }
    std::map<std::string, std::string> label_owner;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string path = elementPath("compare", i);
        const Json& entry = list[i];
        if (!entry.is_object()) {
            reader.report(
                path, "must be an object with \"label\" and \"set\", got " + describeValue(entry),
                false);
            continue;
        }
        const Section s{&entry, true, path};
        reader.checkUnknownKeys(s, *knownKeys(kVariantObject));
        bool usable = true;
        Variant variant;
        if (const Json* label = reader.member(s, "label"); label == nullptr) {
            reader.reportMissing(path + ".label");
            usable = false;
        } else if (!label->is_string() || label->get_ref<const std::string&>().empty()) {
            reader.report(path + ".label",
                          "must be a non-empty string, got " + describeValue(*label), false);
            usable = false;
        } else if (const auto problem = labelProblem(label->get_ref<const std::string&>())) {
            reader.report(path + ".label", *problem, false);
            usable = false;
        } else {
            variant.label = label->get<std::string>();
            const auto [owner, inserted] = label_owner.emplace(variant.label, path);
            if (!inserted) {
                reader.report(
                    path + ".label",
                    "duplicate label \"" + variant.label + "\" (also " + owner->second + ")",
                    false);
                usable = false;
            }
        }
        const Json* set = reader.member(s, "set");
        if (set == nullptr) {
            reader.reportMissing(path + ".set");
            usable = false;
        } else if (!set->is_object()) {
            reader.report(path + ".set",
                          "must be an object of key paths and values, got " + describeValue(*set),
                          false);
            usable = false;
        }
        Json applied = base;
        if (set != nullptr && set->is_object()) {
            for (const auto& item : set->items()) {
                const std::string key_path = path + ".set." + item.key();
                if (item.key() == "compare") {
                    reader.report(key_path, "a variant cannot set \"compare\"", true);
                    usable = false;
                    continue;
                }
                if (const auto problem = checkKeyPath(item.key())) {
                    reader.report(key_path, *problem, true);
                    usable = false;
                    continue;
                }
                variant.overrides.push_back(Override{
                    item.key(), item.value().dump(-1, ' ', false, Json::error_handler_t::replace)});
                // A failure here means the base document has a non-object where the key path
                // needs one, which the base's own issues already report.
                usable = setPath(applied, item.key(), item.value(), nullptr) && usable;
            }
        }
        if (usable) {
            // As every override does: a variant that switches the method or the schedule leaves
            // the keys of the old one behind (config.md).
            dropKeysLeftBehind(applied, variant.overrides, nullptr);
            const Validation result = validateDocument(applied, {}, false);
            reportVariantIssues(result.issues, variant, path, base_texts, reader);
        }
        variants->push_back(std::move(variant));
    }
}

}  // namespace pipescope::schedule::detail
