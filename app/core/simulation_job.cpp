#include <chrono>
#include <cstdio>
#include <unistd.h>

#include <QtConcurrent/QtConcurrentRun>

#include <pipescope/app/sim_run_data.h>
#include <pipescope/app/simulation_job.h>
#include <pipescope/schedule/config_parse.h>
#include <pipescope/schedule/generate.h>
#include <pipescope/sim/simulator.h>
#include <pipescope/trace/units.h>

namespace pipescope::app {

namespace {

using trace::memoryText;

// The config with overrides applied (through the JSON form, so every rule is checked again),
// without its compare variants: they are not the point's, and its values may not suit them.
schedule::ParseResult withOverrides(const schedule::Config& base,
                                    const std::vector<schedule::Override>& overrides) {
    schedule::Config point = base;
    point.compare.clear();
    return schedule::parseConfig(schedule::toJson(point), overrides, "<current config>");
}

std::string quoted(std::string_view s) {
    return "\"" + std::string(s) + "\"";
}

std::string opsText(double ops) {
    return ops >= 1e6 ? trace::fixedText(ops / 1e6, 1) + " million" : trace::fixedText(ops, 0);
}

// Empty when the config's simulation fits in `budget` beside `held` bytes of runs kept already;
// otherwise why not, naming the keys that set its size. estimatedOps is an upper estimate, so
// this errs on the side of refusing.
std::string memoryRefusal(const schedule::Config& c, double held, std::int64_t budget) {
    if (budget < 0) {
        return {};
    }
    const double ops = sim::estimatedOps(c);
    const double need = ops * kBytesPerSimulatedOp;
    // Past the simulator's own limit no amount of memory would do: its refusal says so.
    if (held + need <= static_cast<double>(budget) ||
        ops > static_cast<double>(sim::kMaxSimulatedOps)) {
        return {};
    }
    return "parallel.microbatches: " + std::to_string(c.parallel.microbatches) +
           " micro-batches on " + std::to_string(c.parallel.pipeline) + " stages make up to " +
           opsText(ops) + " ops, about " + memoryText(need) + " to simulate and show" +
           (held > 0 ? " beside the " + memoryText(held) + " of runs above" : "") + ", and " +
           memoryText(static_cast<double>(budget)) +
           " of memory is free; lower parallel.microbatches or parallel.pipeline, or run "
           "pipescope-run on the config, which keeps no views";
}

}  // namespace

std::vector<schedule::VocabMethod> allMethods() {
    using schedule::VocabMethod;
    return {VocabMethod::Naive, VocabMethod::Redistributed, VocabMethod::Interlaced,
            VocabMethod::Vocab1, VocabMethod::Vocab2};
}

std::int64_t availableMemoryBytes() {
    if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
        char line[256];
        long long kib = -1;
        while (std::fgets(line, sizeof line, f)) {
            if (std::sscanf(line, "MemAvailable: %lld kB", &kib) == 1) {
                break;
            }
        }
        std::fclose(f);
        if (kib >= 0) {
            return static_cast<std::int64_t>(kib) * 1024;
        }
    }
#ifdef _SC_AVPHYS_PAGES
    const long pages = sysconf(_SC_AVPHYS_PAGES);
    const long size = sysconf(_SC_PAGESIZE);
    if (pages > 0 && size > 0) {
        return static_cast<std::int64_t>(pages) * size;
    }
#endif
    return -1;
}

SimOutput runSimRequest(const SimRequest& req, const std::atomic<bool>* cancel,
                        const std::function<void(int, int)>& progress) {
    const auto t0 = std::chrono::steady_clock::now();
    SimOutput out;
    const std::int64_t budget =
        req.memory_budget_bytes >= 0 ? req.memory_budget_bytes : availableMemoryBytes();
    double held = 0;  // bytes of the runs this request keeps (Methods)
    const auto cancelled = [&] { return cancel && cancel->load(); };
    sim::SimOptions options;
    options.cancel = cancel;
    // Null with `error` empty when cancelled.
    const auto simulateOne = [&](const schedule::Config& c, const std::string& name,
                                 std::string* error) -> std::shared_ptr<SimRunData> {
        if (std::string refusal = memoryRefusal(c, held, budget); !refusal.empty()) {
            *error = name + ": " + refusal;
            return nullptr;
        }
        auto sim = sim::simulate(c, options);
        if (sim.cancelled || cancelled()) {
            out.cancelled = true;
            return nullptr;
        }
        if (!sim.result) {
            *error = name + ": " + sim.error;
            return nullptr;
        }
        auto run = std::make_shared<SimRunData>(std::move(*sim.result), name);
        held += static_cast<double>(run->opCount()) * kBytesPerSimulatedOp;
        return run;
    };

    switch (req.kind) {
        case SimRequest::Kind::Single: {
            std::string error;
            if (auto run = simulateOne(req.config, std::string(toString(req.config.parallel.vocab)),
                                       &error)) {
                out.runs.push_back(std::move(run));
            } else if (!error.empty()) {
                out.errors.push_back(error);
            }
            break;
        }
        case SimRequest::Kind::Methods: {
            const auto methods = allMethods();
            int done = 0;
            for (auto m : methods) {
                if (cancelled()) {
                    out.cancelled = true;
                    break;
                }
                const std::string name(toString(m));
                auto parsed = withOverrides(req.config, {{"parallel.vocab", quoted(name)}});
                std::string error;
                if (!parsed.ok()) {
                    out.errors.push_back(name + ": " + parsed.errorText());
                } else if (auto run = simulateOne(*parsed.config, name, &error)) {
                    out.runs.push_back(std::move(run));
                } else if (!error.empty()) {
                    out.errors.push_back(error);
                }
                if (progress) {
                    progress(++done, static_cast<int>(methods.size()));
                }
            }
            break;
        }
        case SimRequest::Kind::Sweep: {
            const auto methods = allMethods();
            const int total = static_cast<int>(methods.size() * req.sweep_values.size());
            int done = 0;
            for (auto m : methods) {
                for (const auto& value : req.sweep_values) {
                    if (cancelled()) {
                        out.cancelled = true;
                        break;
                    }
                    SweepPoint pt;
                    pt.method = std::string(toString(m));
                    pt.value = value;
                    auto parsed = withOverrides(
                        req.config,
                        {{req.sweep_key, value}, {"parallel.vocab", quoted(pt.method)}});
                    if (!parsed.ok()) {
                        pt.error = parsed.errorText();
                    } else if (std::string refusal = memoryRefusal(*parsed.config, 0, budget);
                               !refusal.empty()) {
                        pt.error = refusal;  // a point's run is not kept: one at a time
                    } else if (auto sim = sim::simulate(*parsed.config, options); sim.cancelled) {
                        out.cancelled = true;
                        break;
                    } else if (!sim.result) {
                        pt.error = sim.error;
                    } else {
                        pt.ok = true;
                        pt.iteration_ms = sim.result->iteration_time_s * 1e3;
                        pt.mfu = sim.result->mfu;
                        pt.bubble_ratio = sim.result->bubble_ratio;
                        pt.peak_memory_bytes = sim.result->maxPeakMemory();
                    }
                    out.sweep.push_back(std::move(pt));
                    if (progress) {
                        progress(++done, total);
                    }
                }
            }
            break;
        }
    }
    out.elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    return out;
}

SimulationController::SimulationController(QObject* parent) : QObject(parent) {
    debounce_.setSingleShot(true);
    debounce_.setInterval(kDefaultDebounceMs);
    connect(&debounce_, &QTimer::timeout, this, &SimulationController::startPending);
    connect(&watcher_, &QFutureWatcher<SimOutput>::finished, this,
            &SimulationController::onJobFinished);
}

SimulationController::~SimulationController() {
    cancel();
    watcher_.waitForFinished();
}

void SimulationController::setDebounceMs(int ms) {
    debounce_.setInterval(std::max(0, ms));
}

quint64 SimulationController::request(SimRequest request) {
    pending_ = std::move(request);
    pending_id_ = next_id_++;
    // The job running now is for an older request: stop it, so the new one starts as soon as
    // the debounce ends rather than after a long simulation nobody will see.
    if (running_ && cancel_flag_) {
        cancel_flag_->store(true);
    }
    debounce_.start();
    return pending_id_;
}

void SimulationController::cancel() {
    pending_.reset();
    debounce_.stop();
    if (cancel_flag_) {
        cancel_flag_->store(true);
    }
}

bool SimulationController::busy() const {
    return running_ || pending_.has_value();
}

void SimulationController::startPending() {
    if (running_ || !pending_) {
        return;  // a running job starts the waiting one when it finishes
    }
    SimRequest req = std::move(*pending_);
    pending_.reset();
    running_ = true;
    running_id_ = pending_id_;
    cancel_flag_ = std::make_shared<std::atomic<bool>>(false);
    const quint64 id = running_id_;
    QPointer<SimulationController> self(this);
    auto flag = cancel_flag_;
    emit started(id);
    watcher_.setFuture(QtConcurrent::run([req = std::move(req), flag, id, self]() {
        return runSimRequest(req, flag.get(), [&](int done, int total) {
            QMetaObject::invokeMethod(
                self.data(),
                [self, id, done, total] {
                    if (self) {
                        emit self->progress(id, done, total);
                    }
                },
                Qt::QueuedConnection);
        });
    }));
}

void SimulationController::onJobFinished() {
    running_ = false;
    auto output = std::make_shared<const SimOutput>(watcher_.result());
    const quint64 id = running_id_;
    if (pending_ && !debounce_.isActive()) {
        startPending();
    }
    emit finished(id, std::move(output));
}

}  // namespace pipescope::app
