// `pipescope --export VIEW --out FILE (--config CONFIG.json | RUN.db ...)`: renders one view
// to PNG, SVG or PDF with no window (and no display: main() picks the offscreen platform).
#pragma once

#include <QStringList>

namespace pipescope::app {

// True when the arguments ask for a headless export.
bool wantsHeadless(const QStringList& args);
// Runs the export; returns the exit code (0 ok, 2 bad arguments or input, 4 rendering failed)
// and prints what it wrote or why it could not.
int runHeadless(const QStringList& args);
QString headlessUsage();

}  // namespace pipescope::app
