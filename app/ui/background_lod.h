// Level-of-detail results fetched off the GUI thread, so a repaint never waits for the trace
// file. A chart asks for the window it shows; it gets the cached result at once when that covers
// the window at its resolution, and otherwise the stale one (to draw meanwhile) while a worker
// queries the window plus half a view on each side, so the pans that follow need no query. When
// the worker's result lands, `arrived` runs on the GUI thread.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>

#include <QFutureWatcher>
#include <QtConcurrent/QtConcurrentRun>

namespace pipescope::app {

template <class Result>
class BackgroundLod {
  public:
    // Runs on a worker thread (and on the GUI thread for in-place queries): it must only touch
    // what it captured, and the run's level-of-detail queries, which may be called from any
    // thread.
    using Query = std::function<Result(std::int64_t t0, std::int64_t t1, int pixels)>;

    struct Entry {
        std::int64_t t0 = 0;
        std::int64_t t1 = 0;
        int pixels = 0;
        int generation = 0;
        double query_ms = 0;
        Result result;

        // Same resolution within a percent, and the window inside within a pixel (view edges are
        // rounded to whole nanoseconds).
        bool covers(std::int64_t want_t0, std::int64_t want_t1, int want_pixels) const {
            if (pixels <= 0 || want_pixels <= 0) {
                return false;
            }
            const double have = static_cast<double>(t1 - t0) / pixels;
            const double want = static_cast<double>(want_t1 - want_t0) / want_pixels;
            return std::abs(have - want) <= 0.01 * want &&
                   static_cast<double>(want_t0) >= static_cast<double>(t0) - have &&
                   static_cast<double>(want_t1) <= static_cast<double>(t1) + have;
        }
    };
    using EntryPtr = std::shared_ptr<const Entry>;

    enum class Mode {
        Background,  // stale result now, fresh one later (in place only when nothing is cached)
        InPlace,     // query now unless the cache covers the window; keep the result
        Export,      // query now, exactly this window; leave the cache alone
    };

    explicit BackgroundLod(std::function<void()> arrived) : arrived_(std::move(arrived)) {}
    BackgroundLod(const BackgroundLod&) = delete;
    BackgroundLod& operator=(const BackgroundLod&) = delete;

    // A new run or a new kind of result: forget the cache; queries in flight are dropped when
    // they land.
    void reset() {
        cache_.reset();
        pending_ = false;
        ++generation_;
    }

    struct Got {
        EntryPtr entry;         // never null
        bool current = false;   // made for this window and resolution
        bool in_place = false;  // queried just now, on this thread
    };

    // The result to draw for [t0, t1) at `pixels`.
    Got get(std::int64_t t0, std::int64_t t1, int pixels, const Query& query, Mode mode) {
        if (mode != Mode::Export) {
            take();  // finished, but its signal is not in yet
        }
        const bool covered = cache_ && cache_->covers(t0, t1, pixels);
        if (mode == Mode::Export || (!covered && (mode == Mode::InPlace || !cache_))) {
            EntryPtr fresh = run(query, t0, t1, pixels, generation_);
            if (mode != Mode::Export) {
                cache_ = fresh;
            }
            return {std::move(fresh), true, true};
        }
        if (!covered) {
            fetch(query, t0, t1, pixels);
        }
        return {cache_, covered, false};
    }

    bool running() const { return pending_ && watcher_ && watcher_->isRunning(); }
    int queries() const { return queries_; }
    double lastQueryMs() const { return last_ms_; }

  private:
    static EntryPtr run(const Query& query, std::int64_t t0, std::int64_t t1, int pixels,
                        int generation) {
        const auto start = std::chrono::steady_clock::now();
        auto e = std::make_shared<Entry>();
        e->t0 = t0;
        e->t1 = t1;
        e->pixels = pixels;
        e->generation = generation;
        e->result = query(t0, t1, pixels);
        e->query_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        return e;
    }

    // Moves a finished background result into the cache; true when it is for the current run.
    bool take() {
        if (!pending_ || !watcher_ || !watcher_->isFinished()) {
            return false;
        }
        pending_ = false;
        EntryPtr e = watcher_->result();
        if (e->generation != generation_) {
            return false;
        }
        cache_ = std::move(e);
        last_ms_ = cache_->query_ms;
        return true;
    }

    void fetch(const Query& query, std::int64_t t0, std::int64_t t1, int pixels) {
        if (pending_) {
            return;  // when it lands, the repaint asks again for wherever the view is then
        }
        if (!watcher_) {
            watcher_ = std::make_unique<QFutureWatcher<EntryPtr>>();
            QObject::connect(watcher_.get(), &QFutureWatcherBase::finished, watcher_.get(), [this] {
                if (take() && arrived_) {
                    arrived_();
                }
            });
        }
        const std::int64_t margin = (t1 - t0) / 2;
        const std::int64_t q0 = t0 - margin;
        const std::int64_t q1 = t1 + margin;
        const int q_pixels = static_cast<int>(
            std::lround(static_cast<double>(pixels) * static_cast<double>(q1 - q0) /
                        static_cast<double>(t1 - t0)));
        ++queries_;
        pending_ = true;
        watcher_->setFuture(QtConcurrent::run([query, q0, q1, q_pixels, gen = generation_] {
            return run(query, q0, q1, q_pixels, gen);
        }));
    }

    std::function<void()> arrived_;
    EntryPtr cache_;
    std::unique_ptr<QFutureWatcher<EntryPtr>> watcher_;
    bool pending_ = false;
    int generation_ = 0;
    int queries_ = 0;
    double last_ms_ = 0;
};

}  // namespace pipescope::app
