#include "text_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace pipescope::analysis::detail {

namespace {

// Display width: UTF-8 continuation bytes take no column.
std::size_t width(const std::string& s) {
    return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0u) != 0x80u;
    }));
}

}  // namespace

std::string printable(std::string text) {
    for (char& c : text) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7F) {
            c = ' ';
        }
    }
    return text;
}

std::string fixed(std::optional<double> v, int decimals) {
    if (!v || !std::isfinite(*v)) {
        return "-";
    }
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, *v, std::chars_format::fixed, decimals);
    std::string s(buf, r.ptr);
    // A tiny negative value rounds to "-0.000": show it as zero.
    if (s.find_first_not_of("-0.") == std::string::npos && s.front() == '-') {
        s.erase(0, 1);
    }
    return s;
}

std::string percent(std::optional<double> ratio) {
    if (!ratio) {
        return "-";
    }
    return fixed(*ratio * 100.0, 1) + "%";
}

namespace {

// A sign for a formatted change: "+" before a positive one, none before one that rounds to zero
// (a tiny negative change would read "-0.000"); "-" (missing) as it is.
std::string withSign(std::string s) {
    if (s == "-") {
        return s;
    }
    if (s.find_first_of("123456789") == std::string::npos) {
        return s.front() == '-' ? s.substr(1) : s;
    }
    return s.front() == '-' ? s : "+" + s;
}

}  // namespace

std::string signedFixed(std::optional<double> v, int decimals) {
    return withSign(fixed(v, decimals));
}

std::string signedPercent(std::optional<double> ratio) {
    return withSign(percent(ratio));
}

std::string runLabel(std::size_t i) {
    std::string label;
    for (std::size_t n = i + 1; n > 0; n = (n - 1) / 26) {
        label.insert(label.begin(), static_cast<char>('A' + (n - 1) % 26));
    }
    return label;
}

std::string perIteration(std::int64_t count, double iterations) {
    const double v = static_cast<double>(count) / iterations;
    return fixed(v, std::fabs(v - std::round(v)) < 1e-9 ? 0 : 1);
}

std::string iterationList(const std::vector<int>& its) {
    std::string out;
    for (std::size_t i = 0; i < its.size();) {
        std::size_t j = i;
        while (j + 1 < its.size() && its[j + 1] == its[j] + 1) {
            ++j;
        }
        if (!out.empty()) {
            out += ", ";
        }
        out += std::to_string(its[i]);
        if (j > i) {
            out += '-';
            out += std::to_string(its[j]);
        }
        i = j + 1;
    }
    return out;
}

TextTable::TextTable(std::vector<std::string> header, std::size_t left_columns)
    : left_columns_(left_columns) {
    rows_.push_back(std::move(header));
}

void TextTable::addRow(std::vector<std::string> cells) {
    rows_.push_back(std::move(cells));
}

std::string TextTable::render() const {
    std::vector<std::size_t> widths;
    for (const auto& row : rows_) {
        widths.resize(std::max(widths.size(), row.size()), 0);
        for (std::size_t c = 0; c < row.size(); ++c) {
            widths[c] = std::max(widths[c], width(row[c]));
        }
    }
    std::string out;
    for (const auto& row : rows_) {
        std::string line;
        for (std::size_t c = 0; c < row.size(); ++c) {
            const std::string fill(widths[c] - width(row[c]), ' ');
            if (c > 0) {
                line += "  ";
            }
            line += c < left_columns_ ? row[c] + fill : fill + row[c];
        }
        while (!line.empty() && line.back() == ' ') {
            line.pop_back();
        }
        out += line + '\n';
    }
    return out;
}

}  // namespace pipescope::analysis::detail
