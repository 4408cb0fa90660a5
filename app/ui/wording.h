// Words that depend on a count. Qt's "%n run(s)" needs a translation file to lose its "(s)", and
// the app ships none: these say "1 run" and "3 runs" themselves.
#pragma once

#include <QString>

namespace pipescope::app {

// "1 run", "3 runs".
inline QString counted(qsizetype n, const QString& one, const QString& many) {
    return QStringLiteral("%1 %2").arg(n).arg(n == 1 ? one : many);
}

}  // namespace pipescope::app
