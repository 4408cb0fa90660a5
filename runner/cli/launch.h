// Which rank this process is, from the command line or from the launcher that started it
// (torchrun, Open MPI's mpirun, Slurm's srun, other PMI launchers), and where the ranks meet.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "options.h"

namespace pipescope::cli {

struct LaunchContext {
    int rank = 0;
    int world = 1;
    int local_rank = 0;           // the rank among this machine's processes: its GPU
    int local_world = 1;          // the processes on this machine (they share its cores)
    std::string rendezvous;       // HOST:PORT where rank 0 listens (world > 1)
    std::string rendezvous_from;  // the flag or variables it came from, for messages
    std::string source;   // "flags", "torchrun", "Open MPI", "Slurm", "PMI" or "" (one process)
    std::string warning;  // a launcher's variables half set: why this process runs every rank
};

// The default rendezvous of a multi-process run on one machine.
inline constexpr const char* kDefaultRendezvous = "127.0.0.1:29517";

// Flags win over the environment; among launchers, torchrun's variables, then Open MPI's, then
// Slurm's, then PMI's. `getenv` is std::getenv in the runner (a map in the tests). nullopt and
// `error` (naming the flag or variable) when the values do not make a world.
std::optional<LaunchContext> launchContext(const Options& options,
                                           const std::function<const char*(const char*)>& getenv,
                                           std::string* error);

enum class TransportKind { Socket, Mpi };

struct TransportChoice {
    std::optional<TransportKind> kind;  // nullopt: `error` says why, `exit_code` how to exit
    std::string error;
    int exit_code = 0;
};

// --transport for a multi-process run. auto and socket: TCP, under every launcher (and faster
// where processes share cores: MPI's transport polls, see mpi_transport.cpp). mpi: refused in a
// build without MPI (`mpi_built`; exit 3) and for processes that no MPI launcher started
// (exit 2).
TransportChoice chooseTransport(const std::string& wanted, const LaunchContext& launch,
                                bool mpi_built);

// RUN.db -> RUN-rank3.db: each process of a multi-process run writes its own trace.
std::string rankTracePath(const std::string& path, int rank);

}  // namespace pipescope::cli
