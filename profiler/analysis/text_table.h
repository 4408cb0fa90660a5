// Plain-text tables with aligned columns and locale-independent number formatting (the GUI sets
// the C locale from the environment, where printf might write a decimal comma).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipescope::analysis::detail {

// `v` with exactly `decimals` digits after the point; "-" when empty.
std::string fixed(std::optional<double> v, int decimals);
// `ratio` as a percentage with one decimal ("38.9%"); "-" when empty.
std::string percent(std::optional<double> ratio);
// Signed variants for deltas: "+1.250", "-3.0%"; no sign when the change rounds to zero.
std::string signedFixed(std::optional<double> v, int decimals);
std::string signedPercent(std::optional<double> ratio);

// `text` with control characters (tabs, escape sequences) replaced by spaces, so names taken
// from a trace cannot break the layout or drive the terminal.
std::string printable(std::string text);

// `count` things over `iterations` iterations, per iteration: whole when it comes out whole,
// else with one decimal.
std::string perIteration(std::int64_t count, double iterations);

// The label of run `i` in a comparison: A, B, ..., Z, AA, AB, ... (short column headers; a
// legend names the files).
std::string runLabel(std::size_t i);

// Iteration numbers, ascending, as ranges: "1", "1-9", "0, 2, 5-7".
std::string iterationList(const std::vector<int>& iterations);

class TextTable {
  public:
    // The first `left_columns` columns are left-aligned (labels), the rest right-aligned.
    TextTable(std::vector<std::string> header, std::size_t left_columns);
    void addRow(std::vector<std::string> cells);
    std::string render() const;

  private:
    std::vector<std::vector<std::string>> rows_;
    std::size_t left_columns_ = 0;
};

}  // namespace pipescope::analysis::detail
