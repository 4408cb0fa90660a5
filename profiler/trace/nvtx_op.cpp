#include <charconv>

#include <pipescope/trace/nvtx_op.h>

namespace pipescope::trace {

namespace {

// Reads the decimal number after `tag` at the front of `s` and drops both from `s`.
std::optional<int> takeNumber(std::string_view& s, std::string_view tag) {
    if (s.substr(0, tag.size()) != tag) {
        return std::nullopt;
    }
    s.remove_prefix(tag.size());
    int value = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    if (ec != std::errc() || end == s.data() || value < 0) {
        return std::nullopt;
    }
    s.remove_prefix(static_cast<std::size_t>(end - s.data()));
    return value;
}

}  // namespace

std::string nvtxOpText(std::string_view label, int rank, int iteration, int op_index) {
    std::string text(label);
    text += " [r" + std::to_string(rank) + " i" + std::to_string(iteration) + " #" +
            std::to_string(op_index) + "]";
    return text;
}

bool nvtxLabelFits(std::string_view label, std::string_view kind, int microbatch) {
    if (label.substr(0, kind.size()) != kind) {
        return false;
    }
    std::string_view rest = label.substr(kind.size());
    // "S" is not the front of "SEND_F0".
    if (!rest.empty() && ((rest.front() >= 'A' && rest.front() <= 'Z') || rest.front() == '_')) {
        return false;
    }
    if (microbatch < 0) {
        return true;
    }
    // A collective names its micro-batch after the collective: "ALLREDUCE(C1,3)".
    if (!rest.empty() && rest.front() == '(') {
        const std::size_t comma = rest.find(',');
        if (comma == std::string_view::npos) {
            return false;
        }
        rest.remove_prefix(comma + 1);
    }
    const auto number = takeNumber(rest, "");
    return number && *number == microbatch;
}

std::optional<NvtxOpRef> parseNvtxOpText(std::string_view text) {
    const std::size_t open = text.rfind(" [r");
    if (open == std::string_view::npos || open == 0 || text.back() != ']') {
        return std::nullopt;
    }
    std::string_view s = text.substr(open + 2, text.size() - open - 3);
    NvtxOpRef ref;
    const auto rank = takeNumber(s, "r");
    const auto iteration = takeNumber(s, " i");
    const auto index = takeNumber(s, " #");
    if (!rank || !iteration || !index || !s.empty()) {
        return std::nullopt;
    }
    ref.rank = *rank;
    ref.iteration = *iteration;
    ref.op_index = *index;
    ref.label = text.substr(0, open);
    return ref;
}

}  // namespace pipescope::trace
