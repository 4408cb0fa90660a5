// CUDA devices visible to this process, or why there are none (no driver, no device, a runtime
// too new for the driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pipescope::cuda {

struct Device {
    int index = 0;
    std::string name;
    std::int64_t memory_bytes = 0;
    int compute_major = 0;
    int compute_minor = 0;
    int sm_count = 0;
    std::string bus_id;
};

struct DeviceList {
    std::vector<Device> devices;
    std::string problem;      // empty when the query worked (devices may still be empty)
    int runtime_version = 0;  // e.g. 13000
    int driver_version = 0;   // 0 without a driver
};

DeviceList listDevices();

// Free memory of `device` in bytes now, or -1 with the reason in *why.
std::int64_t freeDeviceMemory(int device, std::string* why);

}  // namespace pipescope::cuda
