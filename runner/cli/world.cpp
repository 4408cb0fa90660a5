#include "world.h"

#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <vector>

#include <pipescope/exec/socket_transport.h>
#if PIPESCOPE_HAVE_MPI
#include <pipescope/exec/mpi_transport.h>
#endif

#include "exit_codes.h"

namespace pipescope::cli {

namespace {

// A new launch's id: 16 hex digits from the system's random source.
std::string newRunId() {
    std::random_device random;
    const std::uint64_t id = (static_cast<std::uint64_t>(random()) << 32) ^ random();
    std::ostringstream text;
    text << std::hex << std::setw(16) << std::setfill('0') << id;
    return text.str();
}

}  // namespace

std::optional<World> joinWorld(const Options& options, const LaunchContext& launch,
                               std::uint64_t run_key, std::ostream& human, int* exit_code,
                               const std::atomic<bool>* cancel) {
    World world;
    std::unique_ptr<exec::Transport>& transport = world.transport;
    const auto refused = [&](int rc) {
        *exit_code = rc;
        return std::nullopt;
    };
    if (launch.world > 1) {
        const TransportChoice choice =
            chooseTransport(options.transport, launch, PIPESCOPE_HAVE_MPI);
        if (!choice.kind) {
            std::cerr << "pipescope-run: " << choice.error << "\n";
            return refused(choice.exit_code);
        }
        std::string error;
        const auto timeout =
            std::chrono::milliseconds(static_cast<std::int64_t>(options.timeout_s * 1000));
        if (*choice.kind == TransportKind::Mpi) {
#if PIPESCOPE_HAVE_MPI
            transport = exec::MpiTransport::start(run_key, timeout, &error);
            if (!transport) {
                std::cerr << "pipescope-run: MPI: " << error << "\n";
                return refused(kExitFailed);
            }
            if (transport->rank() != launch.rank || transport->world() != launch.world) {
                std::cerr << "pipescope-run: MPI makes this process rank " << transport->rank()
                          << " of " << transport->world() << " but " << launch.source
                          << " says rank " << launch.rank << " of " << launch.world << "\n";
                transport->abort("its ranks disagree with the launcher's");
                return refused(kExitBadInput);
            }
            human << "rank " << launch.rank << " of " << launch.world << " (from " << launch.source
                  << "), over " << transport->describe() << "\n"
                  << std::flush;
#endif
        } else {
            const auto rendezvous = exec::parseRendezvous(launch.rendezvous, &error);
            if (!rendezvous) {
                std::cerr << "pipescope-run: " << launch.rendezvous_from << ": " << error << "\n";
                return refused(kExitBadInput);
            }
            human << "rank " << launch.rank << " of " << launch.world << " (from " << launch.source
                  << "), meeting at " << launch.rendezvous << "\n"
                  << std::flush;
            transport = exec::SocketTransport::connect(
                launch.rank, launch.world, *rendezvous, run_key, timeout,
                std::min(timeout, std::chrono::milliseconds(300000)), &error, cancel);
            if (!transport) {
                std::cerr << "pipescope-run: " << error << "\n";
                return refused(cancel != nullptr && cancel->load() ? kExitCancelled : kExitFailed);
            }
        }
        world.start_offset = transport->measureClockOffset(32);
    }
    // Rank 0's id for this launch on every process: merge refuses a file of another launch.
    world.run_id = newRunId();
    if (transport) {
        std::vector<char> bytes(world.run_id.begin(), world.run_id.end());
        if (const auto st = transport->shareFromRank0(&bytes); !st.ok()) {
            transport->abort("it did not receive rank 0's run id: " + st.message);
            std::cerr << "pipescope-run: " << st.message << "\n";
            return refused(kExitFailed);
        }
        world.run_id.assign(bytes.begin(), bytes.end());
    }
    return world;
}

}  // namespace pipescope::cli
