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
// Writes `text` to stdout: 0, or 4 after saying so on stderr when it cannot be written (a
// closed stdout, a full disk behind it), as pipescope-run and pipescope-trace report it.
int printOut(const QString& text);

}  // namespace pipescope::app
