#include "launch.h"

#include <algorithm>
#include <cstdlib>

namespace pipescope::cli {

namespace {

// A non-negative integer from `text`; nullopt for anything else.
std::optional<int> count(const char* text) {
    if (text == nullptr || *text == '\0') {
        return std::nullopt;
    }
    char* end = nullptr;
    const long v = std::strtol(text, &end, 10);
    if (*end != '\0' || v < 0 || v > 1 << 20) {
        return std::nullopt;
    }
    return static_cast<int>(v);
}

struct Scheme {
    const char* name;
    const char* rank;
    const char* world;
    const char* local;
    const char* local_world;
};

constexpr Scheme kSchemes[] = {
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
    {"PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
};

}  // namespace

std::optional<LaunchContext> launchContext(const Options& o,
                                           const std::function<const char*(const char*)>& getenv,
                                           std::string* error) {
    LaunchContext c;
    if (o.rank || o.world_size) {
        if (!o.rank || !o.world_size) {
            *error = "--rank and --world-size go together";
            return std::nullopt;
        }
        c.rank = *o.rank;
        c.world = *o.world_size;
        c.local_rank = c.rank;
        c.local_world = c.world;  // started by hand: on this machine, as far as we know
        c.source = "flags";
    } else {
        for (const Scheme& s : kSchemes) {
            const char* rank = getenv(s.rank);
            const char* world = getenv(s.world);
            if (rank == nullptr || world == nullptr) {
                if ((rank == nullptr) != (world == nullptr) && c.warning.empty()) {
                    c.warning = std::string(s.name) +
                                " environment: " + (rank != nullptr ? s.rank : s.world) +
                                " is set but " + (rank != nullptr ? s.world : s.rank) +
                                " is not, so this process runs every rank itself; for one rank "
                                "per process set both (a launcher does), or pass --rank and "
                                "--world-size";
                }
                continue;
            }
            c.warning.clear();
            const auto r = count(rank);
            const auto w = count(world);
            if (!r || !w) {
                *error = std::string(s.name) + " environment: " + (r ? s.world : s.rank) + "=\"" +
                         (r ? world : rank) + "\" is not a number";
                return std::nullopt;
            }
            c.rank = *r;
            c.world = *w;
            c.local_rank = count(getenv(s.local)).value_or(c.rank);
            // Unknown (or Slurm's "4(x2)" form): assume every process is on this machine.
            c.local_world = std::max(1, count(getenv(s.local_world)).value_or(c.world));
            c.source = s.name;
            break;
        }
    }
    if (c.world < 1 || c.rank >= c.world) {
        *error = "rank " + std::to_string(c.rank) + " is not below the world size " +
                 std::to_string(c.world) + (c.source.empty() ? "" : " (from " + c.source + ")");
        return std::nullopt;
    }
    if (c.world == 1) {
        return c;
    }
    if (!o.rendezvous.empty()) {
        c.rendezvous = o.rendezvous;
        c.rendezvous_from = "--rendezvous";
    } else if (const char* addr = getenv("MASTER_ADDR"); addr != nullptr && *addr != '\0') {
        const char* port = getenv("MASTER_PORT");
        if (port == nullptr || !count(port)) {
            *error = "MASTER_ADDR is set but MASTER_PORT is not a port number";
            return std::nullopt;
        }
        if (*count(port) >= 65535) {
            *error = "MASTER_PORT=" + std::string(port) +
                     ": the runner meets one port above torchrun's store, and there is none "
                     "above it; pick a lower MASTER_PORT";
            return std::nullopt;
        }
        // torchrun's own store uses MASTER_PORT: the runner meets one port above it.
        c.rendezvous = std::string(addr) + ":" + std::to_string(*count(port) + 1);
        c.rendezvous_from = "MASTER_ADDR and MASTER_PORT";
    } else if (const char* env = getenv("PIPESCOPE_RENDEZVOUS"); env != nullptr && *env != '\0') {
        c.rendezvous = env;
        c.rendezvous_from = "PIPESCOPE_RENDEZVOUS";
    } else {
        c.rendezvous = kDefaultRendezvous;
    }
    return c;
}

TransportChoice chooseTransport(const std::string& wanted, const LaunchContext& launch,
                                bool mpi_built) {
    TransportChoice c;
    const bool mpi_launcher =
        launch.source == "Open MPI" || launch.source == "Slurm" || launch.source == "PMI";
    if (wanted != "mpi") {
        c.kind = TransportKind::Socket;
    } else if (!mpi_built) {
        c.error =
            "--transport mpi: this pipescope-run was built without MPI (install libopenmpi-dev "
            "and build again), or use --transport socket";
        c.exit_code = 3;
    } else if (!mpi_launcher) {
        c.error =
            "--transport mpi needs an MPI launcher (mpirun, or srun with PMIx), but this "
            "process was started " +
            std::string(launch.source == "flags" ? "with --rank/--world-size"
                                                 : "by " + launch.source) +
            "; use --transport socket";
        c.exit_code = 2;
    } else {
        c.kind = TransportKind::Mpi;
    }
    return c;
}

std::string rankTracePath(const std::string& path, int rank) {
    const auto slash = path.find_last_of('/');
    const auto dot = path.find_last_of('.');
    const std::string suffix = "-rank" + std::to_string(rank);
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
        return path + suffix;
    }
    return path.substr(0, dot) + suffix + path.substr(dot);
}

}  // namespace pipescope::cli
