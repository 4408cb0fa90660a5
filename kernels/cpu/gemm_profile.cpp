#include <algorithm>
#include <atomic>
#include <cassert>
#include <chrono>
#if PIPESCOPE_HAVE_OPENBLAS
#include <cblas.h>
#endif
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include <pipescope/kernels/cpu/gemm_profile.h>

#include "gemm_profile_internal.h"

namespace pipescope::kernels::cpu {

namespace detail {

constinit std::atomic<bool> gemm_profiling_on{false};

}  // namespace detail

namespace {

// (ta, tb, m, n, k)
using Key = std::tuple<Trans, Trans, std::int64_t, std::int64_t, std::int64_t>;

struct Totals {
    std::int64_t calls = 0;
    std::int64_t ns = 0;
};

using ShapeMap = std::map<Key, Totals>;

void mergeInto(ShapeMap& into, const ShapeMap& from) {
    for (const auto& [key, t] : from) {
        Totals& to = into[key];
        to.calls += t.calls;
        to.ns += t.ns;
    }
}

// One thread's totals. Its mutex is taken by that thread on every recorded call and by the
// readers below only while they report or reset, so the GEMM threads do not contend with one
// another.
struct ThreadLog {
    std::mutex m;
    ShapeMap shapes;
};

// Every thread's log while the thread lives, and the totals of the threads that have ended.
struct Registry {
    std::mutex m;
    std::vector<ThreadLog*> live;
    ShapeMap ended;
};

// Never destroyed: a thread may end (and hand its totals over) after static destruction began.
Registry& registry() {
    static Registry* r = new Registry;
    return *r;
}

// Lock order everywhere: the registry first, then a thread's log.
struct ThreadSlot {
    ThreadLog log;

    ThreadSlot() {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.m);
        r.live.push_back(&log);
    }

    ~ThreadSlot() {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.m);
        {
            std::lock_guard<std::mutex> log_lock(log.m);
            mergeInto(r.ended, log.shapes);
        }
        r.live.erase(std::find(r.live.begin(), r.live.end(), &log));
    }

    ThreadSlot(const ThreadSlot&) = delete;
    ThreadSlot& operator=(const ThreadSlot&) = delete;
};

ThreadLog& threadLog() {
    thread_local ThreadSlot slot;
    return slot.log;
}

#if PIPESCOPE_HAVE_OPENBLAS
// OpenBLAS's default interface takes 32-bit sizes.
blasint toBlasInt(std::int64_t v) {
    assert(v >= 0 && v <= std::numeric_limits<blasint>::max());
    return static_cast<blasint>(v);
}
#endif

}  // namespace

namespace detail {

void recordGemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                std::int64_t ns) {
    ThreadLog& log = threadLog();
    std::lock_guard<std::mutex> lock(log.m);
    Totals& t = log.shapes[Key{ta, tb, m, n, k}];
    t.calls += 1;
    t.ns += ns;
}

}  // namespace detail

void setGemmProfiling(bool on) {
    detail::gemm_profiling_on.store(on, std::memory_order_relaxed);
}

bool gemmProfiling() {
    return detail::gemm_profiling_on.load(std::memory_order_relaxed);
}

std::vector<GemmShapeStats> gemmProfile() {
    ShapeMap all;
    {
        Registry& r = registry();
        std::lock_guard<std::mutex> lock(r.m);
        all = r.ended;
        for (ThreadLog* log : r.live) {
            std::lock_guard<std::mutex> log_lock(log->m);
            mergeInto(all, log->shapes);
        }
    }
    std::vector<GemmShapeStats> out;
    out.reserve(all.size());
    for (const auto& [key, t] : all) {
        GemmShapeStats s;
        std::tie(s.ta, s.tb, s.m, s.n, s.k) = key;
        s.calls = t.calls;
        s.total_ns = t.ns;
        out.push_back(s);
    }
    // Stable, so that equal times keep the shapes' (ta, tb, m, n, k) order.
    std::stable_sort(out.begin(), out.end(), [](const GemmShapeStats& a, const GemmShapeStats& b) {
        return a.total_ns > b.total_ns;
    });
    return out;
}

void resetGemmProfile() {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.m);
    r.ended.clear();
    for (ThreadLog* log : r.live) {
        std::lock_guard<std::mutex> log_lock(log->m);
        log->shapes.clear();
    }
}

double plainSgemmGflops(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                        int min_reps, double min_seconds) {
#if !PIPESCOPE_HAVE_OPENBLAS
    (void)ta;
    (void)tb;
    (void)min_reps;
    (void)min_seconds;
    m = 0;  // no OpenBLAS in this build: nothing to compare with
#endif
    if (m <= 0 || n <= 0 || k <= 0) {
        return 0.0;
    }
#if PIPESCOPE_HAVE_OPENBLAS
    // op(A) is m×k and op(B) k×n whichever way they are stored; packed, C is m×n.
    std::vector<float> a(static_cast<std::size_t>(m * k));
    std::vector<float> b(static_cast<std::size_t>(k * n));
    std::vector<float> c(static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<float>(i % 7) * 0.01f;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
        b[i] = static_cast<float>(i % 5) * 0.02f;
    }
    const CBLAS_TRANSPOSE cta = ta == Trans::Yes ? CblasTrans : CblasNoTrans;
    const CBLAS_TRANSPOSE ctb = tb == Trans::Yes ? CblasTrans : CblasNoTrans;
    const blasint bm = toBlasInt(m);
    const blasint bn = toBlasInt(n);
    const blasint bk = toBlasInt(k);
    const blasint lda = ta == Trans::No ? bk : bm;
    const blasint ldb = tb == Trans::No ? bn : bk;
    // cblas_sgemm itself, not gemm(): the reference is neither wrapped nor recorded.
    const auto call = [&] {
        cblas_sgemm(CblasRowMajor, cta, ctb, bm, bn, bk, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                    c.data(), bn);
    };
    call();  // warm-up: first touch of the pages, OpenBLAS's buffers and threads
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    std::int64_t reps = 0;
    double seconds = 0.0;
    while (reps < std::max(min_reps, 1) || seconds < min_seconds) {
        call();
        ++reps;
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    if (seconds <= 0.0) {
        return 0.0;
    }
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
           static_cast<double>(reps) / seconds * 1e-9;
#else
    return 0.0;
#endif
}

}  // namespace pipescope::kernels::cpu
