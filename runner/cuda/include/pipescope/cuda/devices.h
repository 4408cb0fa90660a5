// CUDA devices visible to this process, or why there are none (no driver, no device, a runtime
// too new for the driver). The only CUDA code so far; the CUDA backend builds on it.
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

}  // namespace pipescope::cuda
