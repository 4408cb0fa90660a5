#include <cerrno>
#include <fstream>
#include <signal.h>
#include <string>

#include <pipescope/exec/process.h>

namespace pipescope::exec {

bool processRuns(std::int64_t pid) {
    if (pid <= 0) {
        return true;
    }
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
        return false;
    }
    // kill() also finds zombies: /proc says which state the process is in.
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) {
        return true;  // no /proc: kill() said it exists
    }
    const auto close = line.rfind(')');  // the name in parentheses may hold anything
    return close == std::string::npos || close + 2 >= line.size() ||
           (line[close + 2] != 'Z' && line[close + 2] != 'X');
}

}  // namespace pipescope::exec
