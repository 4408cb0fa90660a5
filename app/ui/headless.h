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
// Why argument `argv[i]` (i >= 1) cannot be taken, for the first one that is not UTF-8, or
// empty. Qt reads arguments and file names as UTF-8: a name with other bytes (Latin-1's "\xe9")
// reached it with U+FFFD in their place, so --out wrote a file of another name than the one given
// and --config looked for one that is not there.
QString argumentNotUtf8(int argc, char** argv);
// Writes `text` to stdout: 0, or 4 after saying so on stderr when it cannot be written (a
// closed stdout, a full disk behind it), as pipescope-run and pipescope-trace report it.
int printOut(const QString& text);

}  // namespace pipescope::app
