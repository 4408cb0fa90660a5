#include "json_value.h"

#include "pipescope/trace/json_text.h"

namespace pipescope::analysis::detail {

Json intArray(const std::vector<int>& values) {
    Json out = Json::array();
    for (const int v : values) {
        out.push(v);
    }
    return out;
}

std::string jsonQuote(std::string_view text) {
    std::string out;
    out.reserve(text.size() + 2);
    trace::appendJsonString(&out, text);
    return out;
}

std::string jsonNumber(double v) {
    std::string out;
    trace::appendDouble(&out, v);
    return out;
}

Json& Json::set(std::string key, Json value) {
    if (!std::holds_alternative<Object>(v_)) {
        v_ = Object{};
    }
    std::get<Object>(v_).emplace_back(std::move(key), std::move(value));
    return *this;
}

Json& Json::push(Json value) {
    if (!std::holds_alternative<Array>(v_)) {
        v_ = Array{};
    }
    std::get<Array>(v_).push_back(std::move(value));
    return *this;
}

std::string Json::dump() const {
    std::string out;
    dumpTo(&out, 0);
    out += '\n';
    return out;
}

void Json::dumpTo(std::string* out, int indent) const {
    const std::string pad(static_cast<std::size_t>(indent + 2), ' ');
    const std::string close_pad(static_cast<std::size_t>(indent), ' ');
    if (std::holds_alternative<std::monostate>(v_)) {
        *out += "null";
    } else if (const bool* b = std::get_if<bool>(&v_)) {
        *out += *b ? "true" : "false";
    } else if (const std::int64_t* i = std::get_if<std::int64_t>(&v_)) {
        *out += std::to_string(*i);
    } else if (const double* d = std::get_if<double>(&v_)) {
        *out += jsonNumber(*d);
    } else if (const std::string* s = std::get_if<std::string>(&v_)) {
        *out += jsonQuote(*s);
    } else if (const Array* a = std::get_if<Array>(&v_)) {
        // Arrays of plain numbers stay on one line: per-iteration series read better that way.
        bool flat = true;
        for (const Json& e : *a) {
            flat = flat && !std::holds_alternative<Array>(e.v_) &&
                   !std::holds_alternative<Object>(e.v_);
        }
        *out += '[';
        for (std::size_t k = 0; k < a->size(); ++k) {
            *out += k ? (flat ? ", " : ",\n") : (flat ? "" : "\n");
            if (!flat) {
                *out += pad;
            }
            (*a)[k].dumpTo(out, indent + 2);
        }
        if (!flat && !a->empty()) {
            *out += '\n' + close_pad;
        }
        *out += ']';
    } else if (const Object* o = std::get_if<Object>(&v_)) {
        *out += '{';
        for (std::size_t k = 0; k < o->size(); ++k) {
            *out += k ? ",\n" : "\n";
            *out += pad + jsonQuote((*o)[k].first) + ": ";
            (*o)[k].second.dumpTo(out, indent + 2);
        }
        if (!o->empty()) {
            *out += '\n' + close_pad;
        }
        *out += '}';
    }
}

}  // namespace pipescope::analysis::detail
