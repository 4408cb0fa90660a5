// The words of a sweep: its values as people read them, why a key cannot be swept, the values
// typed into the Values field, and what could not be simulated, for the page and for an
// exported chart.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <QString>
#include <QStringList>

#include <pipescope/app/simulation_job.h>

namespace pipescope::app {

// A swept value as people read it: 1f1b, not the JSON string "1f1b" the config takes.
QString sweepValueText(const std::string& value);

// Why `key` cannot be swept (empty when it can): the sweep draws one line per vocabulary method,
// so parallel.vocab is already its lines, and compare is no setting of the model.
QString sweepKeyProblem(const QString& key);

// The points that could not be simulated, one line per value and reason, in sweep order:
// "every method at 3: ..." when all methods failed there for it, else the methods by name.
QStringList sweepProblems(const std::vector<SweepPoint>& points);

// The chart's note on the points it lacks: "left out, could not be simulated: naive, vocab-2
// at 3, 5; redistributed at 1" ("" when every point is there).
QString sweepLeftOut(const std::vector<SweepPoint>& points);

// Parses "32000, 64000,128000" into JSON values; an error names the value that is wrong.
std::optional<std::vector<std::string>> parseSweepValues(const QString& text, QString* error);

}  // namespace pipescope::app
