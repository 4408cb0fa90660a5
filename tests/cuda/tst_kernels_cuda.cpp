// The CUDA kernels against the CPU reference kernels, on random inputs, in fp32 and bf16.
//
// A plain program (no Qt), so that it builds and runs on a bare GPU host: exit 0 when every
// check passes, 1 when one fails, 77 (skipped) without a usable device. A check compares each
// element with |got − ref| ≤ atol + rtol·|ref|. In bf16 the inputs are rounded to bf16 first
// and the reference is computed in fp32 from the rounded values, so the tolerance only has to
// cover the rounding of outputs (and of intermediates the kernel keeps in bf16), not of inputs.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <pipescope/kernels/cpu/ops.h>
#include <pipescope/kernels/cuda/gemm_profile.h>
#include <pipescope/kernels/cuda/ops.h>

namespace kc = pipescope::kernels::cpu;
namespace kg = pipescope::kernels::cuda;
using kg::Bf16;

namespace {

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(e));
    }
}

// Device memory of n elements of T, filled from / read back as floats.
template <typename T>
class Dev {
  public:
    explicit Dev(std::size_t n) : n_(n) {
        check(cudaMalloc(reinterpret_cast<void**>(&p_), std::max<std::size_t>(n, 1) * sizeof(T)),
              "cudaMalloc");
    }
    explicit Dev(const std::vector<float>& values) : Dev(values.size()) { upload(values); }
    ~Dev() { cudaFree(p_); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;

    void upload(const std::vector<float>& values) {
        std::vector<T> host(values.size());
        for (std::size_t i = 0; i < values.size(); ++i) {
            if constexpr (std::is_same_v<T, Bf16>) {
                host[i] = kg::toBf16(values[i]);
            } else {
                host[i] = static_cast<T>(values[i]);
            }
        }
        check(cudaMemcpy(p_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
              "cudaMemcpy to device");
    }
    std::vector<float> download() const {
        std::vector<T> host(n_);
        check(cudaDeviceSynchronize(), "kernel execution");
        check(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost),
              "cudaMemcpy to host");
        std::vector<float> out(n_);
        for (std::size_t i = 0; i < n_; ++i) {
            out[i] = kg::toFloat(host[i]);
        }
        return out;
    }
    T* get() { return p_; }
    const T* get() const { return p_; }

  private:
    T* p_ = nullptr;
    std::size_t n_;
};

std::unique_ptr<Dev<std::int32_t>> makeTokens(const std::vector<std::int32_t>& ids) {
    auto d = std::make_unique<Dev<std::int32_t>>(ids.size());
    check(
        cudaMemcpy(d->get(), ids.data(), ids.size() * sizeof(std::int32_t), cudaMemcpyHostToDevice),
        "cudaMemcpy tokens");
    return d;
}

std::mt19937_64& rng() {
    static std::mt19937_64 engine(20261122);
    return engine;
}

std::vector<float> randomVector(std::size_t n, double stddev = 1.0, double mean = 0.0) {
    std::normal_distribution<double> dist(mean, stddev);
    std::vector<float> v(n);
    for (float& x : v) {
        x = static_cast<float>(dist(rng()));
    }
    return v;
}

std::vector<std::int32_t> randomIds(std::size_t n, int vocab) {
    std::uniform_int_distribution<int> dist(0, vocab - 1);
    std::vector<std::int32_t> v(n);
    for (auto& x : v) {
        x = dist(rng());
    }
    return v;
}

// The values a T buffer really holds (bf16: rounded), so the CPU reference sees the same inputs.
template <typename T>
std::vector<float> asStored(std::vector<float> v) {
    if constexpr (std::is_same_v<T, Bf16>) {
        for (float& x : v) {
            x = kg::toFloat(kg::toBf16(x));
        }
    }
    return v;
}

template <typename T>
const char* typeName() {
    return std::is_same_v<T, Bf16> ? "bf16" : "fp32";
}

struct Tolerance {
    float atol;
    float rtol;
};
// Outputs stored in T.
template <typename T>
Tolerance outputTol() {
    if constexpr (std::is_same_v<T, Bf16>) {
        return {1e-2f, 1.6e-2f};
    } else {
        return {2e-5f, 2e-4f};
    }
}
// Outputs kept in fp32 whatever T (gradients, statistics, losses).
template <typename T>
Tolerance fp32OutputTol() {
    if constexpr (std::is_same_v<T, Bf16>) {
        return {2e-3f, 2e-3f};
    } else {
        return {2e-5f, 2e-4f};
    }
}
Tolerance scaled(Tolerance t, float factor) {
    return {t.atol * factor, t.rtol * factor};
}

int g_checks = 0;
int g_failures = 0;

void expectClose(const std::string& what, const std::vector<float>& got,
                 const std::vector<float>& ref, Tolerance tol) {
    ++g_checks;
    if (got.size() != ref.size()) {
        ++g_failures;
        std::printf("FAIL %s: %zu values, expected %zu\n", what.c_str(), got.size(), ref.size());
        return;
    }
    double worst = 0.0;
    std::size_t worst_at = 0;
    bool failed = false;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
        const double bound = tol.atol + tol.rtol * std::fabs(static_cast<double>(ref[i]));
        if (!(err <= bound)) {  // NaN fails too
            failed = true;
        }
        const double ratio = bound > 0 ? err / bound : err;
        if (!(ratio <= worst)) {
            worst = ratio;
            worst_at = i;
        }
    }
    if (failed) {
        ++g_failures;
        std::printf("FAIL %s: element %zu is %.9g, expected %.9g (tolerance %g + %g·|ref|)\n",
                    what.c_str(), worst_at, static_cast<double>(got[worst_at]),
                    static_cast<double>(ref[worst_at]), static_cast<double>(tol.atol),
                    static_cast<double>(tol.rtol));
    } else {
        std::printf("ok   %s (%zu values, worst at %.2f of the tolerance)\n", what.c_str(),
                    got.size(), worst);
    }
}

void expect(bool condition, const std::string& what) {
    ++g_checks;
    if (!condition) {
        ++g_failures;
        std::printf("FAIL %s\n", what.c_str());
    } else {
        std::printf("ok   %s\n", what.c_str());
    }
}

struct Context {
    kg::BlasHandle blas;
    kg::Exec exec;
    Context() { exec.blas = blas.get(); }
};

// --- GEMM --------------------------------------------------------------------------------------

template <typename TIn, typename TOut>
void testGemm(Context& ctx) {
    const std::int64_t m = 37, n = 29, k = 53, pad = 3;
    for (kc::Trans ta : {kc::Trans::No, kc::Trans::Yes}) {
        for (kc::Trans tb : {kc::Trans::No, kc::Trans::Yes}) {
            const std::int64_t a_rows = ta == kc::Trans::No ? m : k;
            const std::int64_t a_cols = ta == kc::Trans::No ? k : m;
            const std::int64_t b_rows = tb == kc::Trans::No ? k : n;
            const std::int64_t b_cols = tb == kc::Trans::No ? n : k;
            const std::int64_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
            const auto a = asStored<TIn>(randomVector(static_cast<std::size_t>(a_rows * lda)));
            const auto b = asStored<TIn>(randomVector(static_cast<std::size_t>(b_rows * ldb)));
            const auto c0 = asStored<TOut>(randomVector(static_cast<std::size_t>(m * ldc)));
            Dev<TIn> da(a), db(b);
            Dev<TOut> dc(c0);
            const float alpha = 0.5f, beta = 0.25f;
            kg::gemm<TIn, TOut>(ctx.exec, ta == kc::Trans::Yes ? kg::Trans::Yes : kg::Trans::No,
                                tb == kc::Trans::Yes ? kg::Trans::Yes : kg::Trans::No, m, n, k,
                                alpha, da.get(), lda, db.get(), ldb, beta, dc.get(), ldc);
            auto ref = c0;
            kc::gemm<float>(ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, beta, ref.data(),
                            ldc);
            expectClose(std::string("gemm ") + typeName<TIn>() + "→" + typeName<TOut>() + " " +
                            (ta == kc::Trans::Yes ? "T" : "N") +
                            (tb == kc::Trans::Yes ? "T" : "N") + " (padded rows)",
                        dc.download(), ref, scaled(outputTol<TOut>(), 2.0f));
        }
    }
    // k = 0: C = beta · C.
    const auto c0 = asStored<TOut>(randomVector(12));
    Dev<TOut> dc(c0);
    Dev<TIn> dummy(1);
    kg::gemm<TIn, TOut>(ctx.exec, kg::Trans::No, kg::Trans::No, 3, 4, 0, 1.0f, dummy.get(), 1,
                        dummy.get(), 4, 0.5f, dc.get(), 4);
    auto ref = c0;
    for (float& x : ref) {
        x *= 0.5f;
    }
    expectClose(std::string("gemm k = 0 scales C (") + typeName<TOut>() + ")", dc.download(), ref,
                outputTol<TOut>());
}

// The GEMM profiler: calls are counted per shape while it is on, not at all while it is off, and
// a plain GEMM of a recorded shape runs without counting as the runner's.
void testGemmProfile(Context& ctx) {
    const std::int64_t m = 64, n = 48, k = 32;
    Dev<float> a(randomVector(static_cast<std::size_t>(m * k)));
    Dev<float> b(randomVector(static_cast<std::size_t>(k * n)));
    Dev<float> c(static_cast<std::size_t>(m * n));
    const auto run = [&](std::int64_t rows, int calls) {
        for (int i = 0; i < calls; ++i) {
            kg::gemm<float, float>(ctx.exec, kg::Trans::No, kg::Trans::No, rows, n, k, 1.0f,
                                   a.get(), k, b.get(), n, 0.0f, c.get(), n);
        }
    };
    kg::resetGemmProfile();
    run(m, 2);  // profiling off: not recorded
    kg::setGemmProfiling(true);
    run(m, 3);
    run(m / 2, 1);
    kg::setGemmProfiling(false);
    auto shapes = kg::gemmProfile();
    const auto find = [&](std::int64_t rows) -> const kg::GemmShapeStats* {
        for (const auto& s : shapes) {
            if (s.m == rows && s.n == n && s.k == k) {
                return &s;
            }
        }
        return nullptr;
    };
    expect(shapes.size() == 2, "two shapes recorded (" + std::to_string(shapes.size()) + ")");
    const auto* full = find(m);
    const auto* half = find(m / 2);
    expect(full != nullptr && full->calls == 3 && full->total_ns > 0 && half != nullptr &&
               half->calls == 1 && half->total_ns > 0 && full->type == kg::GemmType::F32,
           "calls while profiling are counted per shape, with device time");
    const double plain = full != nullptr ? kg::plainGemmGflops(*full, 3, 0.01) : 0.0;
    expect(plain > 0.0,
           "a plain cuBLAS GEMM of the shape runs (" + std::to_string(plain) + " GFLOP/s)");
    kg::setGemmProfiling(true);
    if (full != nullptr) {
        const kg::GemmShapeStats shape = *full;
        (void)kg::plainGemmGflops(shape, 3, 0.01);
    }
    kg::setGemmProfiling(false);
    shapes = kg::gemmProfile();
    const auto* again = find(m);
    expect(again != nullptr && again->calls == 3,
           "the plain GEMM does not count as the runner's, even while profiling");
    kg::resetGemmProfile();
    expect(kg::gemmProfile().empty(), "reset forgets what was recorded");
}

// --- Dense layers ------------------------------------------------------------------------------

template <typename T>
void testLinear(Context& ctx) {
    const std::int64_t rows = 33, in = 48, out = 40;
    const auto x = asStored<T>(randomVector(rows * in));
    const auto w = asStored<T>(randomVector(out * in, 0.2));
    const auto b = asStored<T>(randomVector(out));
    const auto dy = asStored<T>(randomVector(rows * out));
    const auto dw0 = randomVector(out * in);
    const auto db0 = randomVector(out);
    Dev<T> dx_(x), dw_(w), db_(b), ddy(dy), dy_out(rows * out), dxg(rows * in);
    Dev<float> dwg(dw0), dbg(db0);
    kg::linearForward<T>(ctx.exec, dx_.get(), dw_.get(), db_.get(), dy_out.get(), rows, in, out);
    kg::linearBackwardInput<T>(ctx.exec, ddy.get(), dw_.get(), dxg.get(), rows, in, out);
    kg::linearBackwardWeight<T>(ctx.exec, ddy.get(), dx_.get(), dwg.get(), dbg.get(), rows, in,
                                out);
    std::vector<float> y(rows * out), dxr(rows * in), dwr = dw0, dbr = db0;
    kc::linearForward<float>(x.data(), w.data(), b.data(), y.data(), rows, in, out);
    kc::linearBackwardInput<float>(dy.data(), w.data(), dxr.data(), rows, in, out);
    kc::linearBackwardWeight<float>(dy.data(), x.data(), dwr.data(), dbr.data(), rows, in, out);
    const std::string t = typeName<T>();
    expectClose("linearForward " + t, dy_out.download(), y, scaled(outputTol<T>(), 2.0f));
    expectClose("linearBackwardInput " + t, dxg.download(), dxr, scaled(outputTol<T>(), 2.0f));
    expectClose("linearBackwardWeight dw (accumulated) " + t, dwg.download(), dwr,
                fp32OutputTol<T>());
    expectClose("linearBackwardWeight db (accumulated) " + t, dbg.download(), dbr,
                fp32OutputTol<T>());
    // Without a bias: y is overwritten, whatever it held, and dw alone accumulates.
    Dev<T> y_nb(asStored<T>(randomVector(rows * out)));
    Dev<float> dw_nb(dw0);
    kg::linearForward<T>(ctx.exec, dx_.get(), dw_.get(), nullptr, y_nb.get(), rows, in, out);
    kg::linearBackwardWeight<T>(ctx.exec, ddy.get(), dx_.get(), dw_nb.get(), nullptr, rows, in,
                                out);
    std::vector<float> y_nbr(rows * out), dw_nbr = dw0;
    kc::linearForward<float>(x.data(), w.data(), nullptr, y_nbr.data(), rows, in, out);
    kc::linearBackwardWeight<float>(dy.data(), x.data(), dw_nbr.data(), nullptr, rows, in, out);
    expectClose("linearForward without bias " + t, y_nb.download(), y_nbr,
                scaled(outputTol<T>(), 2.0f));
    expectClose("linearBackwardWeight without bias " + t, dw_nb.download(), dw_nbr,
                fp32OutputTol<T>());
}

template <typename T>
void testLayerNorm(Context& ctx) {
    // Rows longer than a block's 1024 threads, and more rows (70000) than a grid's 65535 blocks.
    struct Shape {
        std::int64_t rows, dim;
    };
    for (const Shape sh : {Shape{7, 96}, Shape{7, 1500}, Shape{70000, 8}}) {
        const std::int64_t rows = sh.rows, dim = sh.dim;
        const auto x = asStored<T>(randomVector(rows * dim, 2.0, 0.5));
        const auto gamma = asStored<T>(randomVector(dim, 0.3, 1.0));
        const auto beta = asStored<T>(randomVector(dim, 0.1));
        const auto dy = asStored<T>(randomVector(rows * dim));
        const auto dgamma0 = randomVector(dim), dbeta0 = randomVector(dim);
        Dev<T> dx_(x), dg(gamma), dbt(beta), dyd(dy), y(rows * dim), dxo(rows * dim);
        Dev<float> mean(rows), rstd(rows), dgam(dgamma0), dbet(dbeta0);
        const float eps = 1e-5f;
        kg::layerNormForward<T>(ctx.exec, dx_.get(), dg.get(), dbt.get(), y.get(), mean.get(),
                                rstd.get(), rows, dim, eps);
        kg::layerNormBackward<T>(ctx.exec, dyd.get(), dx_.get(), dg.get(), mean.get(), rstd.get(),
                                 dxo.get(), dgam.get(), dbet.get(), rows, dim);
        std::vector<float> yr(rows * dim), mr(rows), rr(rows), dxr(rows * dim);
        auto dgr = dgamma0, dbr = dbeta0;
        kc::layerNormForward<float>(x.data(), gamma.data(), beta.data(), yr.data(), mr.data(),
                                    rr.data(), rows, dim, eps);
        kc::layerNormBackward<float>(dy.data(), x.data(), gamma.data(), mr.data(), rr.data(),
                                     dxr.data(), dgr.data(), dbr.data(), rows, dim);
        const std::string t = std::string(typeName<T>()) + " rows " + std::to_string(rows) +
                              " dim " + std::to_string(dim);
        expectClose("layerNormForward y " + t, y.download(), yr, outputTol<T>());
        expectClose("layerNormForward mean " + t, mean.download(), mr, fp32OutputTol<float>());
        expectClose("layerNormForward rstd " + t, rstd.download(), rr, fp32OutputTol<float>());
        expectClose("layerNormBackward dx " + t, dxo.download(), dxr, scaled(outputTol<T>(), 2.0f));
        expectClose("layerNormBackward dgamma " + t, dgam.download(), dgr,
                    scaled(fp32OutputTol<T>(), 2.0f));
        expectClose("layerNormBackward dbeta " + t, dbet.download(), dbr,
                    scaled(fp32OutputTol<T>(), 2.0f));
    }
}

template <typename T>
void testElementwise(Context& ctx) {
    const std::int64_t n = 10007;
    const auto x = asStored<T>(randomVector(n, 2.0));
    const auto dy = asStored<T>(randomVector(n));
    Dev<T> dx_(x), ddy(dy), y(n), dxo(n), sum(n);
    kg::geluForward<T>(ctx.exec, dx_.get(), y.get(), n);
    kg::geluBackward<T>(ctx.exec, ddy.get(), dx_.get(), dxo.get(), n);
    kg::add<T>(ctx.exec, dx_.get(), ddy.get(), sum.get(), n);
    std::vector<float> yr(n), dxr(n), sr(n);
    kc::geluForward<float>(x.data(), yr.data(), n);
    kc::geluBackward<float>(dy.data(), x.data(), dxr.data(), n);
    for (std::int64_t i = 0; i < n; ++i) {
        sr[i] = x[i] + dy[i];
    }
    const std::string t = typeName<T>();
    expectClose("geluForward " + t, y.download(), yr, outputTol<T>());
    expectClose("geluBackward " + t, dxo.download(), dxr, outputTol<T>());
    expectClose("add " + t, sum.download(), sr, outputTol<T>());
    // scaleRows: x[r, :] *= scale[r].
    const std::int64_t rows = 97, cols = n / 97;
    const auto scale = randomVector(rows);
    Dev<float> dscale(scale);
    Dev<T> scaled_x(x);
    kg::scaleRows<T>(ctx.exec, scaled_x.get(), dscale.get(), rows, cols);
    std::vector<float> scaled_ref(x.begin(), x.begin() + rows * cols);
    for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < cols; ++j) {
            scaled_ref[r * cols + j] *= scale[r];
        }
    }
    auto scaled_got = scaled_x.download();
    scaled_got.resize(scaled_ref.size());
    expectClose("scaleRows " + t, scaled_got, scaled_ref, outputTol<T>());
    // In place: y may alias x.
    kg::geluForward<T>(ctx.exec, dx_.get(), dx_.get(), n);
    expectClose("geluForward in place " + t, dx_.download(), yr, outputTol<T>());
}

void testConvert(Context& ctx) {
    const std::int64_t n = 1000;
    Dev<float> filled(n);
    kg::fill(ctx.exec, filled.get(), n, 0.25f);
    expectClose("fill", filled.download(), std::vector<float>(n, 0.25f), {0.0f, 0.0f});
    const auto x = randomVector(n, 3.0);
    Dev<float> src(x), back(n);
    Dev<Bf16> half(n);
    kg::convert<float, Bf16>(ctx.exec, src.get(), half.get(), n);
    kg::convert<Bf16, float>(ctx.exec, half.get(), back.get(), n);
    // The device's rounding must be the host's (toBf16): round to nearest, ties to even.
    expectClose("convert fp32 → bf16 → fp32 equals the host rounding", back.download(),
                asStored<Bf16>(x), {0.0f, 0.0f});
}

// --- Embeddings --------------------------------------------------------------------------------

template <typename T>
void testEmbedding(Context& ctx) {
    const int vocab = 16;
    const std::int64_t rows = 40, dim = 24;
    const auto ids = randomIds(rows, vocab);
    const auto tokens = makeTokens(ids);
    for (kg::VocabShard shard : {kg::VocabShard{5, 12}, kg::VocabShard{0, vocab}}) {
        const kc::VocabShard cshard{shard.begin, shard.end};
        const auto table = asStored<T>(randomVector(shard.size() * dim));
        const auto dout = asStored<T>(randomVector(rows * dim));
        const auto dtable0 = randomVector(shard.size() * dim);
        Dev<T> dtab(table), out(rows * dim), ddout(dout);
        Dev<float> dgrad(dtable0);
        kg::embeddingForward<T>(ctx.exec, tokens->get(), dtab.get(), out.get(), rows, dim, shard);
        kg::embeddingBackward<T>(ctx.exec, tokens->get(), ddout.get(), dgrad.get(), rows, dim,
                                 shard);
        std::vector<float> outr(rows * dim);
        auto gradr = dtable0;
        kc::embeddingForward<float>(ids.data(), table.data(), outr.data(), rows, dim, cshard);
        kc::embeddingBackward<float>(ids.data(), dout.data(), gradr.data(), rows, dim, cshard);
        const std::string t = std::string(typeName<T>()) + " shard [" +
                              std::to_string(shard.begin) + ", " + std::to_string(shard.end) + ")";
        expectClose("embeddingForward " + t, out.download(), outr, {0.0f, 0.0f});
        expectClose("embeddingBackward " + t, dgrad.download(), gradr, fp32OutputTol<T>());
    }
    const std::int64_t batch = 3, seq = 5;
    const auto x = asStored<T>(randomVector(batch * seq * dim));
    const auto pos = asStored<T>(randomVector(seq * dim));
    const auto dpos0 = randomVector(seq * dim);
    Dev<T> dx_(x), dpos_(pos);
    Dev<float> dgrad(dpos0);
    kg::positionEmbeddingForward<T>(ctx.exec, dx_.get(), dpos_.get(), batch, seq, dim);
    kg::positionEmbeddingBackward<T>(ctx.exec, dx_.get(), dgrad.get(), batch, seq, dim);
    auto xr = x;
    auto gr = dpos0;
    kc::positionEmbeddingForward<float>(xr.data(), pos.data(), batch, seq, dim);
    const auto xr_stored = asStored<T>(xr);
    kc::positionEmbeddingBackward<float>(xr_stored.data(), gr.data(), batch, seq, dim);
    const std::string t = typeName<T>();
    expectClose("positionEmbeddingForward " + t, dx_.download(), xr, outputTol<T>());
    expectClose("positionEmbeddingBackward " + t, dgrad.download(), gr, fp32OutputTol<T>());
}

// --- Output layer ------------------------------------------------------------------------------

template <typename T>
void testCrossEntropy(Context& ctx) {
    const std::int64_t rows = 9, vocab = 2000, hidden = 24;
    const std::string t = typeName<T>();
    const auto logits = asStored<T>(randomVector(rows * vocab, 3.0));
    const auto ids = randomIds(rows, static_cast<int>(vocab));
    const auto dloss = randomVector(rows);
    const auto targets = makeTokens(ids);
    Dev<T> dlog(logits), dgrad(rows * vocab);
    Dev<float> loss(rows), ddloss(dloss);

    kg::crossEntropyForward<T>(ctx.exec, dlog.get(), targets->get(), loss.get(), rows, vocab);
    kg::crossEntropyBackward<T>(ctx.exec, dlog.get(), targets->get(), ddloss.get(), dgrad.get(),
                                rows, vocab);
    std::vector<float> lossr(rows), gradr(rows * vocab);
    kc::crossEntropyForward<float>(logits.data(), ids.data(), lossr.data(), rows, vocab);
    kc::crossEntropyBackward<float>(logits.data(), ids.data(), dloss.data(), gradr.data(), rows,
                                    vocab);
    expectClose("crossEntropyForward (one pass, vocab 2000) " + t, loss.download(), lossr,
                fp32OutputTol<float>());
    expectClose("crossEntropyBackward " + t, dgrad.download(), gradr,
                {outputTol<T>().atol * 0.01f, outputTol<T>().rtol});

    // Shards, one of them empty: fused S statistics against the two CPU pieces, the combine
    // and the rescale-then-sum against the full statistics, and the loss from them.
    const std::vector<kg::VocabShard> shards = {{0, 700}, {700, 1333}, {1333, 2000}, {2000, 2000}};
    Dev<float> gmax(rows), gsum(rows);
    std::vector<float> running_max(rows, -INFINITY), running_sum(rows, 0.0f), tl_sum(rows, 0.0f);
    std::vector<std::vector<float>> local_max, local_sum;
    const auto w = asStored<T>(randomVector(vocab * hidden, 0.3));
    for (const kg::VocabShard& shard : shards) {
        const kc::VocabShard cs{shard.begin, shard.end};
        std::vector<float> slice(rows * shard.size());
        for (std::int64_t r = 0; r < rows; ++r) {
            std::copy_n(logits.begin() + r * vocab + shard.begin, shard.size(),
                        slice.begin() + r * shard.size());
        }
        Dev<T> dslice(slice);
        Dev<float> mx(rows), sm(rows), tl(rows);
        kg::vocabShardStats<T>(ctx.exec, dslice.get(), targets->get(), mx.get(), sm.get(), tl.get(),
                               rows, shard);
        std::vector<float> mxr(rows), smr(rows), tlr(rows);
        kc::vocabShardSoftmaxStats<float>(slice.data(), mxr.data(), smr.data(), rows, shard.size());
        kc::vocabShardTargetLogit<float>(slice.data(), ids.data(), tlr.data(), rows, cs);
        const std::string s = " " + t + " shard [" + std::to_string(shard.begin) + ", " +
                              std::to_string(shard.end) + ")";
        const auto got_max = mx.download();
        expect(std::equal(got_max.begin(), got_max.end(), mxr.begin()),
               "vocabShardStats max is exact" + s);
        expectClose("vocabShardStats sum" + s, sm.download(), smr, fp32OutputTol<float>());
        expectClose("vocabShardStats target logit" + s, tl.download(), tlr, {0.0f, 0.0f});
        kc::onlineSoftmaxCombine<float>(running_max.data(), running_sum.data(), mxr.data(),
                                        smr.data(), rows);
        for (std::int64_t r = 0; r < rows; ++r) {
            tl_sum[r] += tlr[r];
        }
        local_max.push_back(mxr);
        local_sum.push_back(smr);
        if (shard.begin == 0) {
            check(cudaMemcpy(gmax.get(), mx.get(), rows * sizeof(float), cudaMemcpyDeviceToDevice),
                  "copy");
            check(cudaMemcpy(gsum.get(), sm.get(), rows * sizeof(float), cudaMemcpyDeviceToDevice),
                  "copy");
        } else {
            kg::onlineSoftmaxCombine(ctx.exec, gmax.get(), gsum.get(), mx.get(), sm.get(), rows);
        }
    }
    expectClose("onlineSoftmaxCombine over 4 shards (max) " + t, gmax.download(), running_max,
                {0.0f, 0.0f});
    expectClose("onlineSoftmaxCombine over 4 shards (sum) " + t, gsum.download(), running_sum,
                fp32OutputTol<float>());
    // The all-reduce route: max first, then each shard's rescaled sum, summed.
    std::vector<float> rescaled_total(rows, 0.0f);
    for (std::size_t d = 0; d < shards.size(); ++d) {
        Dev<float> s(local_sum[d]), lm(local_max[d]);
        kg::rescaleShardSum(ctx.exec, s.get(), lm.get(), gmax.get(), rows);
        const auto got = s.download();
        for (std::int64_t r = 0; r < rows; ++r) {
            rescaled_total[r] += got[r];
        }
    }
    expectClose("rescaleShardSum then sum equals the combined sum " + t, rescaled_total,
                running_sum, fp32OutputTol<float>());
    Dev<float> dtl(tl_sum), loss2(rows);
    kg::crossEntropyLossFromStats(ctx.exec, gmax.get(), gsum.get(), dtl.get(), loss2.get(), rows);
    expectClose("crossEntropyLossFromStats equals the full loss " + t, loss2.download(), lossr,
                fp32OutputTol<float>());

    // T, in place, per shard; and vocab-2's basis: Σ_d (α_d · P_d W_d − W_d[y]) = ∂loss/∂x.
    std::vector<float> ones(rows, 1.0f);
    Dev<float> dones(ones);
    std::vector<float> grad_ones(rows * vocab);
    kc::crossEntropyBackward<float>(logits.data(), ids.data(), ones.data(), grad_ones.data(), rows,
                                    vocab);
    std::vector<float> dx_ref(rows * hidden);
    kc::gemm<float>(kc::Trans::No, kc::Trans::No, rows, hidden, vocab, 1.0f, grad_ones.data(),
                    w.data(), 0.0f, dx_ref.data());
    std::vector<float> dx_sum(rows * hidden, 0.0f);
    for (std::size_t d = 0; d < shards.size(); ++d) {
        const kg::VocabShard shard = shards[d];
        const kc::VocabShard cs{shard.begin, shard.end};
        std::vector<float> slice(rows * shard.size());
        for (std::int64_t r = 0; r < rows; ++r) {
            std::copy_n(logits.begin() + r * vocab + shard.begin, shard.size(),
                        slice.begin() + r * shard.size());
        }
        const std::string s = " " + t + " shard [" + std::to_string(shard.begin) + ", " +
                              std::to_string(shard.end) + ")";
        Dev<T> dslice(slice);
        kg::vocabShardCrossEntropyBackward<T>(ctx.exec, dslice.get(), targets->get(), gmax.get(),
                                              gsum.get(), ddloss.get(), dslice.get(), rows, shard);
        std::vector<float> ref(slice.size());
        kc::vocabShardCrossEntropyBackward<float>(slice.data(), ids.data(), running_max.data(),
                                                  running_sum.data(), dloss.data(), ref.data(),
                                                  rows, cs);
        expectClose("vocabShardCrossEntropyBackward in place" + s, dslice.download(), ref,
                    {outputTol<T>().atol * 0.01f, outputTol<T>().rtol});

        // Vocab-2 basis.
        Dev<T> logits_d(slice), p(rows * shard.size()), a(rows * hidden), g(rows * hidden),
            part(rows * hidden);
        std::vector<float> w_slice(w.begin() + shard.begin * hidden,
                                   w.begin() + shard.end * hidden);
        Dev<T> wd(w_slice);
        Dev<float> lm(local_max[d]), ls(local_sum[d]);
        kg::softmaxFromStats<T>(ctx.exec, logits_d.get(), lm.get(), ls.get(), p.get(), rows,
                                shard.size());
        kg::gemm<T, T>(ctx.exec, kg::Trans::No, kg::Trans::No, rows, hidden, shard.size(), 1.0f,
                       p.get(), shard.size(), wd.get(), hidden, 0.0f, a.get(), hidden);
        kg::embeddingForward<T>(ctx.exec, targets->get(), wd.get(), g.get(), rows, hidden, shard);
        kg::vocabBasisCombine<T>(ctx.exec, a.get(), g.get(), lm.get(), ls.get(), gmax.get(),
                                 gsum.get(), part.get(), rows, hidden);
        const auto got = part.download();
        for (std::size_t i = 0; i < got.size(); ++i) {
            dx_sum[i] += got[i];
        }
        if (shard.size() > 0) {
            std::vector<float> pr(slice.size());
            for (std::int64_t r = 0; r < rows; ++r) {
                for (std::int64_t j = 0; j < shard.size(); ++j) {
                    pr[r * shard.size() + j] =
                        std::exp(slice[r * shard.size() + j] - local_max[d][r]) / local_sum[d][r];
                }
            }
            expectClose("softmaxFromStats" + s, p.download(), pr, outputTol<T>());
        }
    }
    expectClose("vocab-2 basis: Σ_d (α_d P_d W_d − W_d[y]) = ∂loss/∂X " + t, dx_sum, dx_ref,
                scaled(outputTol<T>(), 3.0f));
}

// --- Attention ---------------------------------------------------------------------------------

template <typename T>
void testAttention(Context& ctx) {
    struct Shape {
        std::int64_t batch, seq, heads, head_dim;
    };
    // The last: rows of scores longer than a block's 1024 threads.
    for (Shape sh : {Shape{2, 7, 3, 8}, Shape{2, 40, 2, 16}, Shape{1, 1100, 1, 8}}) {
        const std::int64_t rows = sh.batch * sh.seq, width = sh.heads * sh.head_dim;
        const std::int64_t square = sh.seq * sh.seq;
        const auto qkv = asStored<T>(randomVector(rows * 3 * width));
        const auto dout = asStored<T>(randomVector(rows * width));
        Dev<T> dqkv_in(qkv), out(rows * width), probs(sh.batch * sh.heads * square), ddout(dout),
            dqkv(rows * 3 * width);
        const std::int64_t ws = kg::attentionWorkspace(sh.heads, sh.seq);
        Dev<float> scores(ws), dprobs(ws);
        Dev<T> dscores(ws);
        kg::attentionForward<T>(ctx.exec, dqkv_in.get(), out.get(), probs.get(), scores.get(),
                                sh.batch, sh.seq, sh.heads, sh.head_dim);
        kg::attentionBackward<T>(ctx.exec, ddout.get(), dqkv_in.get(), probs.get(), dqkv.get(),
                                 dprobs.get(), dscores.get(), sh.batch, sh.seq, sh.heads,
                                 sh.head_dim);
        std::vector<float> outr(rows * width), pr(sh.batch * sh.heads * square),
            dqkvr(rows * 3 * width), wsr(kc::attentionBackwardWorkspace(sh.seq));
        kc::attentionForward<float>(qkv.data(), outr.data(), pr.data(), sh.batch, sh.seq, sh.heads,
                                    sh.head_dim);
        // The backward's reference uses the probabilities as the kernel stored them.
        const auto p_stored = asStored<T>(pr);
        kc::attentionBackward<float>(dout.data(), qkv.data(), p_stored.data(), dqkvr.data(),
                                     wsr.data(), sh.batch, sh.seq, sh.heads, sh.head_dim);
        const std::string t = std::string(typeName<T>()) + " seq " + std::to_string(sh.seq);
        expectClose("attentionForward probs " + t, probs.download(), pr, outputTol<T>());
        expectClose("attentionForward out " + t, out.download(), outr,
                    scaled(outputTol<T>(), 2.0f));
        expectClose("attentionBackward dqkv " + t, dqkv.download(), dqkvr,
                    scaled(outputTol<T>(), 3.0f));
        if constexpr (std::is_same_v<T, float>) {
            // dscores may share dprobs' memory in fp32.
            Dev<float> shared(ws), dqkv2(rows * 3 * width);
            kg::attentionBackward<float>(ctx.exec, ddout.get(), dqkv_in.get(), probs.get(),
                                         dqkv2.get(), shared.get(), shared.get(), sh.batch, sh.seq,
                                         sh.heads, sh.head_dim);
            expectClose("attentionBackward with dscores = dprobs " + t, dqkv2.download(), dqkvr,
                        scaled(outputTol<T>(), 3.0f));
        }
    }
}

// --- Optimizer ---------------------------------------------------------------------------------

void testAdamW(Context& ctx) {
    const std::int64_t n = 1000;
    auto p = randomVector(n), m = std::vector<float>(n, 0.0f), v = m;
    Dev<float> dp(p), dm(m), dv(v), dg(n);
    kc::AdamWConfig cc;
    cc.lr = 3e-3;
    kg::AdamWConfig gc;
    gc.lr = 3e-3;
    for (int step = 1; step <= 3; ++step) {
        // |g| near 1: 1 - beta2 computed in float on the device would be 1.3e-5 off (relative)
        // in the second moment, past its tolerance.
        const auto grad = randomVector(n, 1.0);
        dg.upload(grad);
        kg::adamwStep(ctx.exec, dp.get(), dg.get(), dm.get(), dv.get(), n, gc, step);
        kc::adamwStep<float>(p.data(), grad.data(), m.data(), v.data(), n, cc, step);
    }
    expectClose("adamwStep × 3: weights", dp.download(), p, {1e-6f, 1e-5f});
    expectClose("adamwStep × 3: first moment", dm.download(), m, {1e-7f, 1e-5f});
    expectClose("adamwStep × 3: second moment", dv.download(), v, {1e-9f, 1e-5f});
}

// --- Errors ------------------------------------------------------------------------------------

void testErrors(Context& ctx) {
    bool threw = false;
    try {
        kg::gemm<float, float>(ctx.exec, kg::Trans::No, kg::Trans::No, -1, 2, 2, 1.0f, nullptr, 2,
                               nullptr, 2, 0.0f, nullptr, 2);
    } catch (const std::invalid_argument& e) {
        threw = std::string(e.what()).find("m = -1") != std::string::npos;
    }
    expect(threw, "gemm with a negative size throws and names it");
    threw = false;
    try {
        Dev<float> a(4);
        kg::gemm<float, float>(kg::Exec{}, kg::Trans::No, kg::Trans::No, 2, 2, 2, 1.0f, a.get(), 2,
                               a.get(), 2, 0.0f, a.get(), 2);
    } catch (const std::invalid_argument& e) {
        threw = std::string(e.what()).find("cuBLAS handle") != std::string::npos;
    }
    expect(threw, "gemm without a cuBLAS handle throws");
    threw = false;
    Dev<float> y(std::vector<float>{7.0f, 7.0f, 7.0f, 7.0f});
    try {
        Dev<float> x(4);
        Dev<float> w(4);
        Dev<float> b(std::vector<float>{1.0f, 2.0f});
        kg::linearForward<float>(kg::Exec{}, x.get(), w.get(), b.get(), y.get(), 2, 2, 2);
    } catch (const std::invalid_argument& e) {
        threw = std::string(e.what()).find("cuBLAS handle") != std::string::npos;
    }
    expect(threw && y.download() == std::vector<float>{7.0f, 7.0f, 7.0f, 7.0f},
           "linearForward without a cuBLAS handle throws before it writes the bias into y");
    threw = false;
    try {
        // Two negative sizes have a positive product: each must be checked on its own.
        kg::positionEmbeddingForward<float>(ctx.exec, nullptr, nullptr, -2, -3, 4);
    } catch (const std::invalid_argument& e) {
        threw = std::string(e.what()).find("batch is negative (-2)") != std::string::npos;
    }
    expect(threw,
           "positionEmbeddingForward with negative batch and seq_len throws and names batch");
    std::string message;
    try {
        kg::throwCudaError(cudaErrorInvalidConfiguration, "launch of someKernel", "/x/y/file.cu",
                           42);
    } catch (const kg::CudaError& e) {
        message = e.what();
    }
    expect(message.find("someKernel") != std::string::npos &&
               message.find("cudaErrorInvalidConfiguration") != std::string::npos &&
               message.find("file.cu:42") != std::string::npos,
           "a failed launch names the kernel, the error and the place: " + message);
}

}  // namespace

int main() {
    // Line by line into the log, which keeps what was printed when a time limit stops the test.
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        std::printf("SKIP: no CUDA device here: %s\n",
                    e != cudaSuccess
                        ? (std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e)).c_str()
                        : "the driver reports 0 devices");
        return 77;
    }
    cudaDeviceProp prop{};
    std::unique_ptr<Context> ctx;
    try {
        check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
        std::printf("device 0: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
        ctx = std::make_unique<Context>();
    } catch (const std::exception& ex) {
        std::printf("FAIL setup: %s\n", ex.what());
        return 1;
    }

    const std::vector<std::pair<const char*, std::function<void(Context&)>>> tests = {
        {"gemm fp32", testGemm<float, float>},
        {"gemm bf16", testGemm<Bf16, Bf16>},
        {"gemm bf16→fp32", testGemm<Bf16, float>},
        {"gemm profile", testGemmProfile},
        {"linear fp32", testLinear<float>},
        {"linear bf16", testLinear<Bf16>},
        {"layernorm fp32", testLayerNorm<float>},
        {"layernorm bf16", testLayerNorm<Bf16>},
        {"elementwise fp32", testElementwise<float>},
        {"elementwise bf16", testElementwise<Bf16>},
        {"convert", testConvert},
        {"embedding fp32", testEmbedding<float>},
        {"embedding bf16", testEmbedding<Bf16>},
        {"cross-entropy fp32", testCrossEntropy<float>},
        {"cross-entropy bf16", testCrossEntropy<Bf16>},
        {"attention fp32", testAttention<float>},
        {"attention bf16", testAttention<Bf16>},
        {"adamw", testAdamW},
        {"errors", testErrors},
    };
    for (const auto& [name, test] : tests) {
        std::printf("--- %s\n", name);
        try {
            test(*ctx);
            check(cudaDeviceSynchronize(), "kernel execution");
        } catch (const std::exception& ex) {
            ++g_failures;
            std::printf("FAIL %s threw: %s\n", name, ex.what());
            if (cudaGetLastError() != cudaSuccess) {
                std::printf("the CUDA context is broken; stopping\n");
                break;
            }
        }
    }
    std::printf("%d checks, %d failed\n", g_checks, g_failures);
    return g_failures == 0 ? 0 : 1;
}
