// The GEMM profiler: event pairs per cuBLAS call, folded into per-shape totals by the thread
// that made them (each thread its own state, so rank threads never contend), and a plain cuBLAS
// GEMM of a recorded shape to compare with.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "common.cuh"
#include "gemm_probe.h"

namespace pipescope::kernels::cuda {

namespace {

std::atomic<bool> g_profiling{false};
// Set while this thread times a plain GEMM, which must not count as the runner's.
thread_local bool t_plain = false;

auto tie(const detail::GemmKey& k) {
    return std::make_tuple(k.device, static_cast<int>(k.type), k.tf32, static_cast<int>(k.ta),
                           static_cast<int>(k.tb), k.m, k.n, k.k, k.batch);
}
struct KeyLess {
    bool operator()(const detail::GemmKey& a, const detail::GemmKey& b) const {
        return tie(a) < tie(b);
    }
};

struct Totals {
    std::int64_t calls = 0;
    std::int64_t ns = 0;
};

struct Pending {
    detail::GemmKey key;
    cudaEvent_t start = nullptr;
    cudaEvent_t stop = nullptr;
};

struct ThreadState {
    std::mutex m;
    std::deque<Pending> pending;
    std::vector<std::pair<int, cudaEvent_t>> free_events;  // (device, event)
    std::map<detail::GemmKey, Totals, KeyLess> totals;

    cudaEvent_t event(int device) {
        for (auto it = free_events.begin(); it != free_events.end(); ++it) {
            if (it->first == device) {
                const cudaEvent_t e = it->second;
                free_events.erase(it);
                return e;
            }
        }
        cudaEvent_t e = nullptr;
        PIPESCOPE_CUDA_CHECK(cudaEventCreate(&e));
        return e;
    }
    void recycle(int device, cudaEvent_t e) {
        if (e != nullptr) {
            free_events.emplace_back(device, e);
        }
    }
    // Folds the oldest pending pair into the totals; false if its stop event has not happened
    // yet and `wait` is false.
    bool foldFront(bool wait) {
        Pending& p = pending.front();
        if (wait) {
            PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(p.stop));
        } else {
            const cudaError_t q = cudaEventQuery(p.stop);
            if (q == cudaErrorNotReady) {
                // Not an error, but the runtime may keep it as the thread's last one, and the
                // next launch check (the bias after this GEMM) would then report it.
                (void)cudaGetLastError();
                return false;
            }
            PIPESCOPE_CUDA_CHECK(q);
        }
        float ms = 0.0f;
        PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
        Totals& t = totals[p.key];
        t.calls += 1;
        t.ns += std::llround(static_cast<double>(ms) * 1e6);
        recycle(p.key.device, p.start);
        recycle(p.key.device, p.stop);
        pending.pop_front();
        return true;
    }
};

std::mutex g_registry_m;
std::vector<std::shared_ptr<ThreadState>>& registry() {
    static std::vector<std::shared_ptr<ThreadState>> states;
    return states;
}

ThreadState& threadState() {
    thread_local std::shared_ptr<ThreadState> state;
    if (!state) {
        state = std::make_shared<ThreadState>();
        std::lock_guard<std::mutex> lock(g_registry_m);
        registry().push_back(state);
    }
    return *state;
}

// Restores the calling thread's current device on the way out.
class DeviceScope {
  public:
    explicit DeviceScope(int device) {
        PIPESCOPE_CUDA_CHECK(cudaGetDevice(&saved_));
        PIPESCOPE_CUDA_CHECK(cudaSetDevice(device));
    }
    ~DeviceScope() { (void)cudaSetDevice(saved_); }
    DeviceScope(const DeviceScope&) = delete;
    DeviceScope& operator=(const DeviceScope&) = delete;

  private:
    int saved_ = 0;
};

// Waits for every pending pair of `state` and folds it; the caller holds state.m.
void drain(ThreadState& state) {
    while (!state.pending.empty()) {
        DeviceScope on(state.pending.front().key.device);
        state.foldFront(true);
    }
}

class DeviceMemory {
  public:
    explicit DeviceMemory(std::size_t bytes) {
        PIPESCOPE_CUDA_CHECK(cudaMalloc(&p_, std::max<std::size_t>(bytes, 1)));
    }
    ~DeviceMemory() { (void)cudaFree(p_); }
    DeviceMemory(const DeviceMemory&) = delete;
    DeviceMemory& operator=(const DeviceMemory&) = delete;
    template <typename T>
    T* as() const {
        return static_cast<T*>(p_);
    }

  private:
    void* p_ = nullptr;
};

class OwnStream {
  public:
    OwnStream() { PIPESCOPE_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
    ~OwnStream() { (void)cudaStreamDestroy(s_); }
    OwnStream(const OwnStream&) = delete;
    OwnStream& operator=(const OwnStream&) = delete;
    cudaStream_t get() const { return s_; }

  private:
    cudaStream_t s_ = nullptr;
};

class OwnEvent {
  public:
    OwnEvent() { PIPESCOPE_CUDA_CHECK(cudaEventCreate(&e_)); }
    ~OwnEvent() { (void)cudaEventDestroy(e_); }
    OwnEvent(const OwnEvent&) = delete;
    OwnEvent& operator=(const OwnEvent&) = delete;
    cudaEvent_t get() const { return e_; }

  private:
    cudaEvent_t e_ = nullptr;
};

// Uniform values in [-1, 1) from a hash of the index: random enough that the tensor cores do
// not see the zeros they are faster on.
template <typename D>
__global__ void fillUniformKernel(D* p, std::int64_t count, std::uint32_t seed) {
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < count; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        std::uint32_t h = static_cast<std::uint32_t>(i) * 2654435761U ^ seed;
        h ^= h >> 16;
        h *= 0x7feb352dU;
        h ^= h >> 15;
        h *= 0x846ca68bU;
        h ^= h >> 16;
        const float u = static_cast<float>(h >> 8) * (1.0f / 16777216.0f);
        p[i] = detail::store<D>(2.0f * u - 1.0f);
    }
}

template <typename T>
void fillUniform(T* p, std::int64_t count, std::uint32_t seed, cudaStream_t stream) {
    if (count == 0) {
        return;
    }
    fillUniformKernel<<<detail::elementwiseGrid(count), detail::kElementwiseBlock, 0, stream>>>(
        detail::dev(p), count, seed);
    PIPESCOPE_CHECK_LAUNCH("fillUniformKernel");
}

template <typename TIn, typename TOut>
double timePlainGemm(const GemmShape& s, int min_reps, double min_seconds) {
    const std::int64_t a_count = s.m * s.k;
    const std::int64_t b_count = s.k * s.n;
    const std::int64_t c_count = s.m * s.n;
    DeviceMemory a(static_cast<std::size_t>(a_count * s.batch) * sizeof(TIn));
    DeviceMemory b(static_cast<std::size_t>(b_count * s.batch) * sizeof(TIn));
    DeviceMemory c(static_cast<std::size_t>(c_count * s.batch) * sizeof(TOut));
    OwnStream stream;
    BlasHandle blas;
    fillUniform(a.as<TIn>(), a_count * s.batch, 1U, stream.get());
    fillUniform(b.as<TIn>(), b_count * s.batch, 2U, stream.get());
    const Exec exec{stream.get(), blas.get(), s.tf32};
    const std::int64_t lda = s.ta == Trans::No ? s.k : s.m;
    const std::int64_t ldb = s.tb == Trans::No ? s.n : s.k;
    const auto run = [&](int reps) {
        for (int i = 0; i < reps; ++i) {
            gemmStridedBatched(exec, s.ta, s.tb, s.m, s.n, s.k, 1.0f, a.as<TIn>(), lda, a_count,
                               b.as<TIn>(), ldb, b_count, 0.0f, c.as<TOut>(), s.n, c_count,
                               s.batch);
        }
    };
    OwnEvent start;
    OwnEvent stop;
    const auto timed = [&](int reps) {
        PIPESCOPE_CUDA_CHECK(cudaEventRecord(start.get(), stream.get()));
        run(reps);
        PIPESCOPE_CUDA_CHECK(cudaEventRecord(stop.get(), stream.get()));
        PIPESCOPE_CUDA_CHECK(cudaEventSynchronize(stop.get()));
        float ms = 0.0f;
        PIPESCOPE_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        return static_cast<double>(ms) * 1e-3;
    };
    run(1);  // warm-up: cuBLAS picks and loads its kernel
    const double one = std::max(timed(1), 1e-7);
    const double wanted = std::ceil(min_seconds / one);
    constexpr int kMaxReps = 100000;
    const int floor_reps = std::clamp(min_reps, 1, kMaxReps);
    const int reps = static_cast<int>(
        std::clamp(wanted, static_cast<double>(floor_reps), static_cast<double>(kMaxReps)));
    const double seconds = timed(reps);
    const double flops = 2.0 * static_cast<double>(s.m) * static_cast<double>(s.n) *
                         static_cast<double>(s.k) * static_cast<double>(s.batch) * reps;
    return seconds > 0 ? flops / seconds * 1e-9 : 0.0;
}

}  // namespace

const char* toString(GemmType type) {
    switch (type) {
        case GemmType::F32:
            return "fp32";
        case GemmType::Bf16:
            return "bf16";
        case GemmType::Bf16ToF32:
            return "bf16>fp32";
    }
    return "?";
}

void setGemmProfiling(bool on) {
    g_profiling.store(on, std::memory_order_relaxed);
}

bool gemmProfiling() {
    return g_profiling.load(std::memory_order_relaxed);
}

std::vector<GemmShapeStats> gemmProfile() {
    std::map<detail::GemmKey, Totals, KeyLess> all;
    {
        std::lock_guard<std::mutex> registry_lock(g_registry_m);
        for (const auto& state : registry()) {
            std::lock_guard<std::mutex> lock(state->m);
            drain(*state);
            for (const auto& [key, t] : state->totals) {
                Totals& into = all[key];
                into.calls += t.calls;
                into.ns += t.ns;
            }
        }
    }
    std::vector<GemmShapeStats> out;
    for (const auto& [key, t] : all) {
        GemmShapeStats s;
        static_cast<GemmShape&>(s) = key;
        s.calls = t.calls;
        s.total_ns = t.ns;
        out.push_back(s);
    }
    std::stable_sort(out.begin(), out.end(), [](const GemmShapeStats& a, const GemmShapeStats& b) {
        return a.total_ns > b.total_ns;
    });
    return out;
}

void resetGemmProfile() {
    std::lock_guard<std::mutex> registry_lock(g_registry_m);
    for (const auto& state : registry()) {
        std::lock_guard<std::mutex> lock(state->m);
        drain(*state);
        state->totals.clear();
    }
}

double plainGemmGflops(const GemmShape& shape, int min_reps, double min_seconds) {
    if (shape.m <= 0 || shape.n <= 0 || shape.k <= 0 || shape.batch <= 0) {
        return 0.0;
    }
    DeviceScope on(shape.device);
    t_plain = true;
    struct Reset {
        ~Reset() { t_plain = false; }
    } reset;
    switch (shape.type) {
        case GemmType::F32:
            return timePlainGemm<float, float>(shape, min_reps, min_seconds);
        case GemmType::Bf16:
            return timePlainGemm<Bf16, Bf16>(shape, min_reps, min_seconds);
        case GemmType::Bf16ToF32:
            return timePlainGemm<Bf16, float>(shape, min_reps, min_seconds);
    }
    return 0.0;
}

namespace detail {

GemmProbe::GemmProbe(const Exec& exec, const GemmKey& key) {
    if (!gemmProfiling() || t_plain) {
        return;
    }
    key_ = key;
    PIPESCOPE_CUDA_CHECK(cudaGetDevice(&key_.device));
    stream_ = exec.stream;
    ThreadState& state = threadState();
    std::lock_guard<std::mutex> lock(state.m);
    // Fold what has finished, so the pending list stays as short as the work in flight.
    while (!state.pending.empty() && state.foldFront(false)) {
    }
    start_ = state.event(key_.device);
    stop_ = state.event(key_.device);
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(start_, stream_));
}

void GemmProbe::done() {
    if (start_ == nullptr) {
        return;
    }
    PIPESCOPE_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    ThreadState& state = threadState();
    std::lock_guard<std::mutex> lock(state.m);
    state.pending.push_back({key_, start_, stop_});
    start_ = nullptr;
    stop_ = nullptr;
}

GemmProbe::~GemmProbe() {
    if (start_ != nullptr) {  // the call threw: give the events back unused
        ThreadState& state = threadState();
        std::lock_guard<std::mutex> lock(state.m);
        state.recycle(key_.device, start_);
        state.recycle(key_.device, stop_);
    }
}

}  // namespace detail

}  // namespace pipescope::kernels::cuda
