#include "gemm_report.h"

#include <exception>
#include <iomanip>

#include <pipescope/kernels/cpu/gemm.h>
#include <pipescope/kernels/cpu/gemm_profile.h>

#if PIPESCOPE_HAVE_CUDA
#include <pipescope/kernels/cuda/gemm_profile.h>
#endif

namespace pipescope::cli {

namespace {

constexpr int kShapesShown = 8;

char transChar(bool transposed) {
    return transposed ? 'T' : 'N';
}

void writeCpuReport(std::ostream& os) {
    namespace k = kernels::cpu;
    const auto shapes = k::gemmProfile();
    if (shapes.empty()) {
        os << "GEMM report: no GEMMs were recorded\n";
        return;
    }
    os << "\nGEMMs inside the runner against a plain OpenBLAS sgemm of the same shape (BLAS "
          "threads "
       << k::blasThreads() << "):\n"
       << "  op  m      n      k      calls   runner GFLOP/s  plain GFLOP/s  ratio\n";
    int shown = 0;
    for (const auto& s : shapes) {
        if (shown++ == kShapesShown) {
            break;
        }
        const double runner = s.total_ns > 0 ? s.flops() / static_cast<double>(s.total_ns) : 0.0;
        const double plain = k::plainSgemmGflops(s.ta, s.tb, s.m, s.n, s.k, 5, 0.2);
        os << "  " << transChar(s.ta == k::Trans::Yes) << transChar(s.tb == k::Trans::Yes) << "  "
           << std::left << std::setw(6) << s.m << " " << std::setw(6) << s.n << " " << std::setw(6)
           << s.k << " " << std::setw(7) << s.calls << std::right << " " << std::fixed
           << std::setprecision(2) << std::setw(14) << runner << " " << std::setw(14) << plain
           << " " << std::setw(6) << (plain > 0 ? runner / plain : 0.0) << "\n";
    }
}

#if PIPESCOPE_HAVE_CUDA
void writeCudaReport(std::ostream& os, bool shared_device) {
    namespace k = kernels::cuda;
    const auto shapes = k::gemmProfile();
    if (shapes.empty()) {
        os << "GEMM report: no GEMMs were recorded\n";
        return;
    }
    double flops = 0.0;
    std::int64_t ns = 0;
    for (const auto& s : shapes) {
        flops += s.flops();
        ns += s.total_ns;
    }
    os << "\nGEMMs inside the runner (device time between events around each cuBLAS call) "
          "against a plain cuBLAS GEMM of the same shape on random matrices:\n";
    if (shared_device) {
        os << "  (ranks share a GPU here: a GEMM's time includes the other ranks' work beside "
              "it)\n";
    }
    os << "  all GEMMs: " << std::fixed << std::setprecision(1) << static_cast<double>(ns) * 1e-6
       << " ms in " << shapes.size() << " shapes, "
       << (ns > 0 ? flops / static_cast<double>(ns) : 0.0) << " GFLOP/s\n"
       << "  dev type       op  m      n      k      batch calls   runner GFLOP/s  plain GFLOP/s"
          "  ratio\n";
    int shown = 0;
    for (const auto& s : shapes) {
        if (shown++ == kShapesShown) {
            break;
        }
        const double runner = s.total_ns > 0 ? s.flops() / static_cast<double>(s.total_ns) : 0.0;
        double plain = 0.0;
        try {
            plain = k::plainGemmGflops(s, 5, 0.1);
        } catch (const std::exception& e) {
            os << "  (the plain GEMM failed: " << e.what() << ")\n";
        }
        std::string type = k::toString(s.type);
        if (s.tf32) {
            type += "/tf32";
        }
        os << "  " << std::left << std::setw(3) << s.device << " " << std::setw(10) << type << " "
           << transChar(s.ta == k::Trans::Yes) << transChar(s.tb == k::Trans::Yes) << "  "
           << std::setw(6) << s.m << " " << std::setw(6) << s.n << " " << std::setw(6) << s.k << " "
           << std::setw(5) << s.batch << " " << std::setw(7) << s.calls << std::right << " "
           << std::fixed << std::setprecision(1) << std::setw(14) << runner << " " << std::setw(14)
           << plain << " " << std::setprecision(2) << std::setw(6)
           << (plain > 0 ? runner / plain : 0.0) << "\n";
    }
}
#endif

}  // namespace

void setGemmRecording(bool on, bool cuda) {
    kernels::cpu::setGemmProfiling(on && !cuda);
#if PIPESCOPE_HAVE_CUDA
    kernels::cuda::setGemmProfiling(on && cuda);
#endif
}

void writeGemmReport(std::ostream& os, bool cuda, bool shared_device) {
#if PIPESCOPE_HAVE_CUDA
    if (cuda) {
        try {
            writeCudaReport(os, shared_device);
        } catch (const std::exception& e) {
            os << "GEMM report: " << e.what() << "\n";
        }
        return;
    }
#else
    (void)shared_device;
    if (cuda) {
        os << "GEMM report: this build has no CUDA\n";
        return;
    }
#endif
    writeCpuReport(os);
}

}  // namespace pipescope::cli
