// Simulations for the views, off the GUI thread: the current config, the five vocabulary
// methods side by side, or a sweep of one key. The controller debounces requests and keeps at
// most one job running and one waiting: a request made while a job runs replaces the waiting
// one, so stale configs are never simulated and results arrive in request order.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QFutureWatcher>
#include <QObject>
#include <QTimer>

#include <pipescope/app/run_data.h>
#include <pipescope/schedule/config.h>

namespace pipescope::app {

struct SimRequest {
    enum class Kind { Single, Methods, Sweep };
    Kind kind = Kind::Single;
    schedule::Config config;
    // Sweep: the key and its values (JSON text: 32000, "vocab-2"); every vocabulary method that
    // exists for the config's schedule is simulated at each value.
    std::string sweep_key;
    std::vector<std::string> sweep_values;
    // Memory the simulations may take, in bytes; -1: what the system has free when the job
    // starts (MemAvailable). A simulation that would not fit is refused with a message instead
    // of pushing the machine into swap or the out-of-memory killer.
    std::int64_t memory_budget_bytes = -1;
};

// What the app holds per simulated op (schedule, graph, timing, memory curves and the view's
// records), measured: a p=64, m=4096 vocab-2 explorer (3.66 M ops) took it from 60 MB to 1.09 GB
// resident, five such runs of Compare methods to 5.0 GB.
inline constexpr double kBytesPerSimulatedOp = 300;

// The memory this machine has free now (Linux MemAvailable, else free physical pages); -1 if
// unknown.
std::int64_t availableMemoryBytes();

struct SweepPoint {
    std::string method;
    std::string value;
    bool ok = false;
    std::string error;
    double iteration_ms = 0;
    double mfu = 0;
    double bubble_ratio = 0;
    std::int64_t peak_memory_bytes = 0;
};

struct SimOutput {
    std::vector<RunDataPtr> runs;     // Single: one; Methods: one per method that could run
    std::vector<std::string> errors;  // what could not be simulated, each naming why
    std::vector<SweepPoint> sweep;    // Sweep: methods × values
    bool cancelled = false;
    double elapsed_ms = 0;
};

// The vocabulary methods, in the paper's order (each combines with every base schedule).
std::vector<schedule::VocabMethod> allMethods();

// Runs a request on the calling thread. `cancel` is polled between simulations and inside
// long ones (sim::SimOptions::cancel); `progress` (done, total) is called after each.
SimOutput runSimRequest(const SimRequest& request, const std::atomic<bool>* cancel = nullptr,
                        const std::function<void(int, int)>& progress = {});

class SimulationController : public QObject {
    Q_OBJECT

  public:
    static constexpr int kDefaultDebounceMs = 30;

    explicit SimulationController(QObject* parent = nullptr);
    ~SimulationController() override;

    // Debounce delay before a request starts (default 30 ms; 0 starts at the next event loop
    // turn).
    void setDebounceMs(int ms);
    // Queues a request; returns its number. Finished results of older requests that are
    // superseded are still delivered (they are complete), but a superseded request that has not
    // started never runs.
    quint64 request(SimRequest request);
    // Stops the running job at its next simulation boundary and drops the waiting one.
    void cancel();
    bool busy() const;

  signals:
    void started(quint64 id);
    void progress(quint64 id, int done, int total);
    void finished(quint64 id, std::shared_ptr<const pipescope::app::SimOutput> output);

  private:
    void startPending();
    void onJobFinished();

    QTimer debounce_;
    QFutureWatcher<SimOutput> watcher_;
    std::optional<SimRequest> pending_;
    quint64 pending_id_ = 0;
    quint64 running_id_ = 0;
    quint64 next_id_ = 1;
    bool running_ = false;
    std::shared_ptr<std::atomic<bool>> cancel_flag_;
};

}  // namespace pipescope::app
