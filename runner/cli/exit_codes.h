// pipescope-run's exit codes (runner-cli.md, "Exit codes").
#pragma once

namespace pipescope::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitNoBackend = 3;
inline constexpr int kExitFailed = 4;
inline constexpr int kExitCancelled = 130;  // as a shell reports a process ended by Ctrl-C

}  // namespace pipescope::cli
