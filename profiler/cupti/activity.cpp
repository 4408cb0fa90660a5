#include <algorithm>
#include <cstdlib>
#include <cupti.h>
#include <cxxabi.h>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include <pipescope/cupti/activity.h>

namespace pipescope::cupti {

namespace {

// CUPTI counts in unsigned nanoseconds; a record that never completed has 0.
std::int64_t traceTime(std::uint64_t t, std::int64_t origin) {
    return static_cast<std::int64_t>(t) - origin;
}

// Whether CUPTI timed a device record: it leaves start or end 0 when it could not (no device
// buffer space for the timestamps, or a forced flush of work that had not finished).
bool timed(std::uint64_t start, std::uint64_t end) {
    return start != 0 && end != 0 && end >= start;
}

// Calls that launch no device work, among those the runner (and cuBLAS and NCCL under it) make
// many of: their external correlation will never meet a device record, so it is not kept.
bool runtimeLaunchesNothing(CUpti_CallbackId cbid) {
    switch (cbid) {
        case CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaGetDeviceCount_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaPeekAtLastError_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventCreateWithFlags_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_v11010:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventRecordWithFlags_ptsz_v11010:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventQuery_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaEventSynchronize_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamQuery_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020:
        case CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_ptsz_v7000:
        case CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020:
            return true;
        default:
            return false;
    }
}

bool driverLaunchesNothing(CUpti_CallbackId cbid) {
    switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent:
        case CUPTI_DRIVER_TRACE_CBID_cuCtxSetCurrent:
        case CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice:
        case CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize:
        case CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuDeviceGet:
        case CUPTI_DRIVER_TRACE_CBID_cuPointerGetAttribute:
        case CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress:
        case CUPTI_DRIVER_TRACE_CBID_cuGetProcAddress_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuEventRecord:
        case CUPTI_DRIVER_TRACE_CBID_cuEventRecord_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags:
        case CUPTI_DRIVER_TRACE_CBID_cuEventRecordWithFlags_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuEventQuery:
        case CUPTI_DRIVER_TRACE_CBID_cuEventSynchronize:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamWaitEvent_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamQuery:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamQuery_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize:
        case CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize_ptsz:
            return true;
        default:
            return false;
    }
}

// Driver calls that put work on a stream: cuBLAS and NCCL launch through them, and their
// kernels' correlation ids are theirs, so they are written beside the runtime calls (as
// Nsight's export does) for a kernel's row to find the call that launched it.
bool driverLaunchesWork(CUpti_CallbackId cbid) {
    switch (cbid) {
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
        case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
        case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2:
        case CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async:
        case CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz:
        case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async:
        case CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz:
            return true;
        default:
            return false;
    }
}

// The name of a runtime or driver call ("cudaLaunchKernel_v7000", "cuLaunchKernel").
const std::string& apiName(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
    thread_local std::map<std::pair<CUpti_CallbackDomain, CUpti_CallbackId>, std::string> cache;
    auto it = cache.find({domain, cbid});
    if (it == cache.end()) {
        const char* name = nullptr;
        std::string text =
            cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr
                ? std::string(name)
                : (domain == CUPTI_CB_DOMAIN_DRIVER_API ? "cuDriverApi_" : "cudaRuntimeApi_") +
                      std::to_string(cbid);
        it = cache.emplace(std::make_pair(domain, cbid), std::move(text)).first;
    }
    return it->second;
}

struct KernelNames {
    std::string demangled;
    std::string short_name;
};

// A run launches the same few hundred kernels thousands of times: demangle each name once per
// parsing thread, not once per record.
const KernelNames& kernelNames(const char* mangled) {
    thread_local std::unordered_map<std::string, KernelNames> cache;
    const std::string key = mangled != nullptr ? mangled : std::string();
    auto it = cache.find(key);
    if (it == cache.end()) {
        KernelNames names;
        names.demangled = demangledKernelName(mangled);
        names.short_name = shortKernelName(names.demangled);
        it = cache.emplace(key, std::move(names)).first;
    }
    return it->second;
}

}  // namespace

void ParsedActivity::append(ParsedActivity&& other) {
    const auto move_all = [](auto& into, auto& from) {
        into.insert(into.end(), std::make_move_iterator(from.begin()),
                    std::make_move_iterator(from.end()));
        from.clear();
    };
    move_all(kernels, other.kernels);
    move_all(memcpys, other.memcpys);
    copy_runtime_correlation.insert(other.copy_runtime_correlation.begin(),
                                    other.copy_runtime_correlation.end());
    other.copy_runtime_correlation.clear();
    move_all(memsets, other.memsets);
    move_all(runtime, other.runtime);
    move_all(syncs, other.syncs);
    external.insert(other.external.begin(), other.external.end());
    other.external.clear();
    skipped += other.skipped;
    other.skipped = 0;
    untimed += other.untimed;
    other.untimed = 0;
}

bool ParsedActivity::empty() const {
    return kernels.empty() && memcpys.empty() && memsets.empty() && runtime.empty() &&
           syncs.empty() && external.empty();
}

ActivityParser::ActivityParser(std::int64_t global_pid, std::int64_t origin_ns)
    : global_pid_(global_pid), origin_ns_(origin_ns) {}

std::string ActivityParser::parse(std::uint8_t* buffer, std::size_t valid_size,
                                  ParsedActivity* out) const {
    if (buffer == nullptr || valid_size == 0) {
        return {};
    }
    if (reinterpret_cast<std::uintptr_t>(buffer) % 8 != 0) {
        return "CUPTI activity buffer is not 8-byte aligned";
    }
    // Calls of this buffer that launched no device work: their external correlations (which
    // may come before or after them) are dropped once the buffer is read.
    std::vector<std::uint32_t> no_work;
    const auto done = [&](std::string problem) {
        for (const std::uint32_t c : no_work) {
            out->external.erase(c);
        }
        return problem;
    };
    CUpti_Activity* record = nullptr;
    for (;;) {
        const CUptiResult rc = cuptiActivityGetNextRecord(buffer, valid_size, &record);
        if (rc == CUPTI_ERROR_MAX_LIMIT_REACHED) {
            return done({});  // the end of the valid records
        }
        if (rc != CUPTI_SUCCESS) {
            const char* text = nullptr;
            cuptiGetResultString(rc, &text);
            return done(std::string("CUPTI activity buffer: cannot read the next record (") +
                        (text != nullptr ? text : "unknown error") + ")");
        }
        switch (record->kind) {
            case CUPTI_ACTIVITY_KIND_KERNEL:
            case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
                const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
                if (!timed(k->start, k->end)) {
                    ++out->untimed;
                    break;
                }
                trace::KernelRecord r;
                r.start = traceTime(k->start, origin_ns_);
                r.end = traceTime(k->end, origin_ns_);
                r.device_id = static_cast<int>(k->deviceId);
                r.context_id = static_cast<int>(k->contextId);
                r.stream_id = static_cast<int>(k->streamId);
                r.correlation_id = k->correlationId;
                r.global_pid = global_pid_;
                r.grid_id = k->gridId;
                const KernelNames& names = kernelNames(k->name);
                r.demangled_name = names.demangled;
                r.short_name = names.short_name;
                r.grid_x = k->gridX;
                r.grid_y = k->gridY;
                r.grid_z = k->gridZ;
                r.block_x = k->blockX;
                r.block_y = k->blockY;
                r.block_z = k->blockZ;
                r.registers_per_thread = k->registersPerThread;
                r.static_shared_memory = k->staticSharedMemory;
                r.dynamic_shared_memory = k->dynamicSharedMemory;
                out->kernels.push_back(std::move(r));
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMCPY: {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(record);
                if (!timed(m->start, m->end)) {
                    ++out->untimed;
                    break;
                }
                trace::MemcpyRecord r;
                r.start = traceTime(m->start, origin_ns_);
                r.end = traceTime(m->end, origin_ns_);
                r.device_id = static_cast<int>(m->deviceId);
                r.context_id = static_cast<int>(m->contextId);
                r.stream_id = static_cast<int>(m->streamId);
                r.correlation_id = m->correlationId;
                r.global_pid = global_pid_;
                r.bytes = static_cast<std::int64_t>(m->bytes);
                // CUPTI's memcpy and memory kinds number as ENUM_CUDA_MEMCPY_OPER and
                // ENUM_CUDA_MEM_KIND do.
                r.copy_kind = m->copyKind;
                r.src_kind = m->srcKind;
                r.dst_kind = m->dstKind;
                out->memcpys.push_back(r);
                if (m->runtimeCorrelationId != 0 && m->runtimeCorrelationId != m->correlationId) {
                    out->copy_runtime_correlation[m->correlationId] = m->runtimeCorrelationId;
                }
                break;
            }
            case CUPTI_ACTIVITY_KIND_MEMSET: {
                const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
                if (!timed(m->start, m->end)) {
                    ++out->untimed;
                    break;
                }
                trace::MemsetRecord r;
                r.start = traceTime(m->start, origin_ns_);
                r.end = traceTime(m->end, origin_ns_);
                r.device_id = static_cast<int>(m->deviceId);
                r.context_id = static_cast<int>(m->contextId);
                r.stream_id = static_cast<int>(m->streamId);
                r.correlation_id = m->correlationId;
                r.global_pid = global_pid_;
                r.value = static_cast<int>(m->value);
                r.bytes = static_cast<std::int64_t>(m->bytes);
                r.mem_kind = m->memoryKind;
                out->memsets.push_back(r);
                break;
            }
            case CUPTI_ACTIVITY_KIND_RUNTIME:
            case CUPTI_ACTIVITY_KIND_DRIVER: {
                // Every runtime call is written; of the driver calls (cuBLAS's and NCCL's, and
                // the runtime's own), those that put work on a stream.
                const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(record);
                const bool driver = a->kind == CUPTI_ACTIVITY_KIND_DRIVER;
                if (driver ? driverLaunchesNothing(a->cbid) : runtimeLaunchesNothing(a->cbid)) {
                    no_work.push_back(a->correlationId);
                }
                if (driver && !driverLaunchesWork(a->cbid)) {
                    ++out->skipped;
                    break;
                }
                if (!timed(a->start, a->end)) {
                    ++out->untimed;
                    break;
                }
                trace::RuntimeRecord r;
                r.start = traceTime(a->start, origin_ns_);
                r.end = traceTime(a->end, origin_ns_);
                r.global_tid = global_pid_ | static_cast<std::int64_t>(a->threadId & 0xffffff);
                r.correlation_id = a->correlationId;
                r.name = apiName(driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                                 a->cbid);
                r.return_value = static_cast<int>(a->returnValue);
                r.event_class =
                    driver ? trace::kEventClassCudaDriver : trace::kEventClassCudaRuntime;
                out->runtime.push_back(std::move(r));
                break;
            }
            case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
                const auto* s = reinterpret_cast<const CUpti_ActivitySynchronization2*>(record);
                if (!timed(s->start, s->end)) {
                    ++out->untimed;
                    break;
                }
                trace::SyncRecord r;
                r.start = traceTime(s->start, origin_ns_);
                r.end = traceTime(s->end, origin_ns_);
                r.device_id = -1;  // the record names the context; see resolveSyncDevices
                r.context_id = static_cast<int>(s->contextId);
                r.stream_id = static_cast<int>(s->streamId);
                r.correlation_id = s->correlationId;
                r.global_pid = global_pid_;
                r.sync_type = static_cast<int>(s->type);
                // "Not applicable" is -1, as for the stream.
                r.event_id = s->cudaEventId == CUPTI_SYNCHRONIZATION_INVALID_VALUE
                                 ? -1
                                 : static_cast<std::int64_t>(s->cudaEventId);
                out->syncs.push_back(r);
                break;
            }
            case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
                const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
                if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
                    out->external[e->correlationId] = e->externalId;
                } else {
                    ++out->skipped;
                }
                break;
            }
            default:
                ++out->skipped;
                break;
        }
    }
}

void resolveSyncDevices(ParsedActivity* activity, std::unordered_map<int, int>* known) {
    std::unordered_map<int, int> local;
    std::unordered_map<int, int>& device_of = known != nullptr ? *known : local;
    for (const auto& k : activity->kernels) {
        device_of[k.context_id] = k.device_id;
    }
    for (const auto& m : activity->memcpys) {
        device_of[m.context_id] = m.device_id;
    }
    for (const auto& m : activity->memsets) {
        device_of[m.context_id] = m.device_id;
    }
    for (auto& s : activity->syncs) {
        if (s.device_id < 0) {
            const auto it = device_of.find(s.context_id);
            s.device_id = it == device_of.end() ? 0 : it->second;
        }
    }
}

void writeActivity(const ParsedActivity& activity, trace::TraceWriter& writer) {
    for (const auto& k : activity.kernels) {
        writer.addKernel(k);
    }
    for (const auto& m : activity.memcpys) {
        writer.addMemcpy(m);
    }
    for (const auto& m : activity.memsets) {
        writer.addMemset(m);
    }
    for (const auto& r : activity.runtime) {
        writer.addRuntime(r);
    }
    for (const auto& s : activity.syncs) {
        writer.addSync(s);
    }
}

std::string demangledKernelName(const char* mangled) {
    if (mangled == nullptr) {
        return "(unnamed kernel)";
    }
    int status = 0;
    std::unique_ptr<char, decltype(&std::free)> text(
        abi::__cxa_demangle(mangled, nullptr, nullptr, &status), &std::free);
    return status == 0 && text ? std::string(text.get()) : std::string(mangled);
}

std::string shortKernelName(const std::string& demangled) {
    // The function's own name: before its parameter list, without template arguments, its
    // namespaces and its return type.
    std::string text = demangled;
    static const std::string kAnonymous = "(anonymous namespace)::";
    for (auto at = text.find(kAnonymous); at != std::string::npos; at = text.find(kAnonymous)) {
        text.erase(at, kAnonymous.size());
    }
    std::string name;
    int depth = 0;
    for (char c : text) {
        if (c == '(' && depth == 0) {
            break;
        }
        if (c == '<') {
            ++depth;
        } else if (c == '>') {
            depth = std::max(0, depth - 1);
        } else if (depth == 0) {
            name += c;
        }
    }
    if (const auto colon = name.rfind("::"); colon != std::string::npos) {
        name = name.substr(colon + 2);
    }
    if (const auto space = name.rfind(' '); space != std::string::npos) {
        name = name.substr(space + 1);
    }
    return name.empty() ? demangled : name;
}

std::map<std::uint64_t, GpuSpan> gpuSpansByExternalId(const ParsedActivity& activity) {
    GpuSpanAccumulator spans;
    spans.add(activity);
    return spans.spans();
}

bool GpuSpanAccumulator::attribute(const DeviceWork& work) {
    auto it = external_.find(work.correlation);
    if (it == external_.end() && work.alias != 0) {
        it = external_.find(work.alias);
    }
    if (it == external_.end()) {
        return false;
    }
    // A launch, copy or memset has one device record: its correlation is not needed again.
    const std::uint64_t id = it->second;
    external_.erase(it);
    if (work.alias != 0) {  // a copy's driver and runtime calls: neither is needed again
        external_.erase(work.alias);
        external_.erase(work.correlation);
    }
    if (work.end < work.start) {
        return true;  // an incomplete record: nothing to add
    }
    attributed_.push_back({id, work.global_pid, work.correlation, work.start});
    auto [span, inserted] = spans_.try_emplace(id, GpuSpan{work.start, work.end, 0});
    if (!inserted) {
        span->second.start = std::min(span->second.start, work.start);
        span->second.end = std::max(span->second.end, work.end);
    }
    ++span->second.kernels;
    return true;
}

void GpuSpanAccumulator::add(const ParsedActivity& activity) {
    for (const auto& [correlation, id] : activity.external) {
        // The newest wins: correlation ids are 32-bit and come round again in a long run.
        external_.insert_or_assign(correlation, id);
        order_.push_back(correlation);
    }
    while (order_.size() > kRemembered) {
        if (external_.erase(order_.front()) > 0) {
            ++forgotten_;
        }
        order_.pop_front();
    }
    // Records that waited for their correlation first, in their order.
    std::vector<DeviceWork> waiting;
    waiting.swap(unresolved_);
    for (const DeviceWork& w : waiting) {
        if (!attribute(w)) {
            unresolved_.push_back(w);
        }
    }
    const auto take = [&](const auto& record, std::uint32_t alias = 0) {
        const DeviceWork w{static_cast<std::uint32_t>(record.correlation_id), record.start,
                           record.end, alias, record.global_pid};
        if (!attribute(w)) {
            unresolved_.push_back(w);
        }
    };
    for (const auto& k : activity.kernels) {
        take(k);
    }
    for (const auto& m : activity.memcpys) {
        const auto alias =
            activity.copy_runtime_correlation.find(static_cast<std::uint32_t>(m.correlation_id));
        take(m, alias != activity.copy_runtime_correlation.end() ? alias->second : 0);
    }
    for (const auto& m : activity.memsets) {
        take(m);
    }
}

}  // namespace pipescope::cupti
