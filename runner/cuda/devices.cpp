#include <cuda_runtime_api.h>

#include <pipescope/cuda/devices.h>

namespace pipescope::cuda {

DeviceList listDevices() {
    DeviceList out;
    cudaRuntimeGetVersion(&out.runtime_version);
    cudaDriverGetVersion(&out.driver_version);
    int count = 0;
    const cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess) {
        const std::string code = cudaGetErrorName(rc);
        switch (rc) {
            case cudaErrorInsufficientDriver:
                out.problem = out.driver_version == 0
                                  ? "no NVIDIA driver is loaded (" + code + ")"
                                  : "the NVIDIA driver is older than the CUDA runtime " +
                                        std::to_string(out.runtime_version) + " (" + code + ")";
                break;
            case cudaErrorNoDevice:
                out.problem = "the NVIDIA driver sees no GPU (" + code + ")";
                break;
            default:
                out.problem = "cudaGetDeviceCount failed: " + code + ": " + cudaGetErrorString(rc);
                break;
        }
        return out;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, i) != cudaSuccess) {
            continue;
        }
        char bus[32] = {};
        cudaDeviceGetPCIBusId(bus, sizeof bus, i);
        out.devices.push_back(Device{i, prop.name, static_cast<std::int64_t>(prop.totalGlobalMem),
                                     prop.major, prop.minor, prop.multiProcessorCount, bus});
    }
    return out;
}

}  // namespace pipescope::cuda
