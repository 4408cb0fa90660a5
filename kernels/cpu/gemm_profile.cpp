#include <algorithm>
#include <atomic>
#include <cblas.h>
#include <chrono>
#include <map>
#include <mutex>
#include <tuple>

#include <pipescope/kernels/cpu/gemm_profile.h>

#include "gemm_profile_internal.h"

namespace pipescope::kernels::cpu {

namespace {

using Key = std::tuple<int, int, std::int64_t, std::int64_t, std::int64_t>;

struct Profile {
    std::atomic<bool> on{false};
    std::mutex m;
    std::map<Key, std::pair<std::int64_t, std::int64_t>> shapes;  // calls, ns
};

Profile& profile() {
    static Profile p;
    return p;
}

}  // namespace

namespace detail {

bool gemmProfilingOn() {
    return profile().on.load(std::memory_order_relaxed);
}

void recordGemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                std::int64_t ns) {
    Profile& p = profile();
    std::lock_guard<std::mutex> lock(p.m);
    auto& s = p.shapes[Key{static_cast<int>(ta), static_cast<int>(tb), m, n, k}];
    s.first += 1;
    s.second += ns;
}

}  // namespace detail

void setGemmProfiling(bool on) {
    profile().on.store(on);
}

bool gemmProfiling() {
    return profile().on.load();
}

std::vector<GemmShapeStats> gemmProfile() {
    Profile& p = profile();
    std::vector<GemmShapeStats> out;
    {
        std::lock_guard<std::mutex> lock(p.m);
        for (const auto& [key, value] : p.shapes) {
            GemmShapeStats s;
            s.ta = static_cast<Trans>(std::get<0>(key));
            s.tb = static_cast<Trans>(std::get<1>(key));
            s.m = std::get<2>(key);
            s.n = std::get<3>(key);
            s.k = std::get<4>(key);
            s.calls = value.first;
            s.total_ns = value.second;
            out.push_back(s);
        }
    }
    std::sort(out.begin(), out.end(), [](const GemmShapeStats& a, const GemmShapeStats& b) {
        return a.total_ns > b.total_ns;
    });
    return out;
}

void resetGemmProfile() {
    Profile& p = profile();
    std::lock_guard<std::mutex> lock(p.m);
    p.shapes.clear();
}

double plainSgemmGflops(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k,
                        int min_reps, double min_seconds) {
    if (m <= 0 || n <= 0 || k <= 0) {
        return 0.0;
    }
    std::vector<float> a(static_cast<std::size_t>(m * k));
    std::vector<float> b(static_cast<std::size_t>(k * n));
    std::vector<float> c(static_cast<std::size_t>(m * n));
    for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<float>(i % 7) * 0.01f;
    }
    for (std::size_t i = 0; i < b.size(); ++i) {
        b[i] = static_cast<float>(i % 5) * 0.02f;
    }
    const auto lda = static_cast<blasint>(ta == Trans::No ? k : m);
    const auto ldb = static_cast<blasint>(tb == Trans::No ? n : k);
    const auto call = [&] {
        cblas_sgemm(CblasRowMajor, ta == Trans::Yes ? CblasTrans : CblasNoTrans,
                    tb == Trans::Yes ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                    static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, a.data(), lda, b.data(),
                    ldb, 0.0f, c.data(), static_cast<blasint>(n));
    };
    call();  // warm-up: pages, BLAS buffers
    using Clock = std::chrono::steady_clock;
    const auto start = Clock::now();
    int reps = 0;
    double seconds = 0;
    while (reps < min_reps || seconds < min_seconds) {
        call();
        ++reps;
        seconds = std::chrono::duration<double>(Clock::now() - start).count();
    }
    return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * reps /
           seconds * 1e-9;
}

}  // namespace pipescope::kernels::cpu
