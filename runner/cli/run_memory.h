// The memory of a real run (--backend cpu|cuda): what the machine has free, what the config
// will hold per rank, and how the process keeps what it has allocated between iterations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::cli {

// MemAvailable of /proc/meminfo in bytes; 0 when unknown.
std::int64_t availableMemory();

// Makes the heap keep freed blocks for the next iteration (glibc: no trimming, no mmap below
// 32 MiB).
void keepFreedMemory();

// The bytes each rank of `schedule` holds on the CPU backend (fp32 throughout), by the
// simulator's memory model; nullopt with `error` set when the config cannot be simulated.
std::optional<std::vector<std::int64_t>> estimateMemory(const schedule::Config& config,
                                                        const schedule::Schedule& schedule,
                                                        std::string* error);

}  // namespace pipescope::cli
