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

std::int64_t freeDeviceMemory(int device, std::string* why) {
    int previous = 0;
    cudaGetDevice(&previous);
    cudaError_t rc = cudaSetDevice(device);
    std::size_t free_bytes = 0;
    std::size_t total = 0;
    if (rc == cudaSuccess) {
        rc = cudaMemGetInfo(&free_bytes, &total);
    }
    cudaSetDevice(previous);
    if (rc != cudaSuccess) {
        *why = std::string("cannot read its free memory: ") + cudaGetErrorName(rc) + ": " +
               cudaGetErrorString(rc);
        return -1;
    }
    return static_cast<std::int64_t>(free_bytes);
}

}  // namespace pipescope::cuda
