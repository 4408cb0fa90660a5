// Value types of the trace file (docs/trace-format.md). Times are nanoseconds since the run's
// time origin (run.start_ns, wall-clock epoch nanoseconds) unless a name says otherwise.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pipescope::trace {

// Schema version written to PRAGMA user_version; readers refuse newer files. Version 2 added the
// gpu lane (device spans of the CUDA backend's ops); version 1 files read unchanged.
inline constexpr int kSchemaVersion = 2;

// Op kinds of the schedule IR (architecture.md), stored as integers in op.kind; the
// ENUM_OP_KIND table of every trace holds their names.
enum class OpKind : std::uint8_t {
    F = 0,
    B = 1,
    W = 2,
    IF = 3,
    IB = 4,
    S = 5,
    T = 6,
    L = 7,
    SendF = 8,
    RecvF = 9,
    SendB = 10,
    RecvB = 11,
    Bcast = 12,
    AllReduce = 13,
    Opt = 14,
};
inline constexpr int kOpKindCount = 15;

// Compute and comm: the host spans (or simulated spans) of the ops on each of the rank's
// streams. Gpu: the device activity of the same ops (source gpu), beside them.
enum class Lane : std::uint8_t { Compute = 0, Comm = 1, Gpu = 2 };
inline constexpr int kLaneCount = 3;

enum class Source : std::uint8_t { Sim = 0, Host = 1, Gpu = 2 };

enum class MemoryCategory : std::uint8_t {
    Weights = 0,
    Grads = 1,
    Optimizer = 2,
    Activations = 3,
    Vocab = 4,
    CommBuffers = 5,
    Workspace = 6,
};
inline constexpr int kMemoryCategoryCount = 7;

enum class RunStatus { Running, Complete, Failed, Cancelled };

std::string_view toString(OpKind k);          // "F", "SEND_F", "ALLREDUCE", ...
std::string_view toString(Lane l);            // "compute", "comm", "gpu"
std::string_view toString(Source s);          // "sim", "host", "gpu"
std::string_view toString(MemoryCategory c);  // "weights", "comm_buffers", ...
std::string_view toString(RunStatus s);       // "running", "complete", ...
std::optional<OpKind> opKindFromString(std::string_view s);
std::optional<RunStatus> runStatusFromString(std::string_view s);
// Ranks a trace may have; a file claiming more is damaged.
inline constexpr int kMaxRanks = 1 << 16;

// Name of a vocabulary collective (op.collective) as ENUM_COLLECTIVE names it; empty for 0 (not
// a collective) and for ids this build does not know.
std::string_view collectiveName(int id);

bool isCommKind(OpKind k);      // sends, receives and collectives
bool isBlockingWait(OpKind k);  // receives and collectives: a compute lane may wait on them

// One row of `run`.
struct RunInfo {
    std::string name;
    std::string config_json;
    std::string backend;  // "sim", "cpu", "cuda"
    RunStatus status = RunStatus::Running;
    std::string message;                 // why a run failed or was cancelled
    std::int64_t start_ns = 0;           // wall-clock epoch ns of the run start: the time origin
    std::optional<std::int64_t> end_ns;  // epoch ns
    std::string host;
    std::string versions;
    std::string command_line;
    int ranks = 0;
    int iterations = 0;
    int warmup = 0;
    // One per launch, shared by the files of its processes, so that a merge can tell two runs of
    // one config apart (pipescope_meta.run_id); empty where nobody set it.
    std::string run_id;
    // The boot id of the machine that wrote the file (thisBootId; pipescope_meta.boot_id): files
    // of one machine share one clock, so a merge applies no measured offset between them.
    std::string boot_id;
};

// One row of `rank`.
struct RankInfo {
    int rank = 0;
    std::string stages;  // pipeline positions this rank holds, e.g. "0,15" for v-half
    std::string device;  // "cpu", "cuda:0", "sim"
    std::string host;
    std::int64_t clock_offset_ns = 0;  // add to this rank's times to get rank 0's clock
    std::int64_t pid = 0;
};

// One row of `op`: an executed op of the schedule IR.
struct OpRecord {
    std::int64_t id = 0;  // rowid; assigned by the file, ignored by the writer
    int rank = 0;
    int iteration = 0;
    OpKind kind = OpKind::F;
    int microbatch = -1;  // -1: none (OPT)
    int chunk = 0;
    Lane lane = Lane::Compute;
    std::int64_t start_ns = 0;
    std::int64_t end_ns = 0;
    Source source = Source::Sim;
    int op_index = 0;          // index in its rank's op list
    int peer = -1;             // point-to-point peer, or a broadcast's root; -1 otherwise
    int collective = 0;        // which vocabulary collective (ENUM_COLLECTIVE); 0 otherwise
    std::int64_t bytes = -1;   // communicated bytes; -1 when not applicable
    std::int64_t cpu_ns = -1;  // thread CPU time of a host span; -1 when not measured

    // end - start, held at the ends of the int64 range (a damaged file's op from -2^63 to
    // 2^63 - 1 takes "forever", not a wrapped negative time).
    std::int64_t duration() const {
        std::int64_t d = 0;
        if (__builtin_sub_overflow(end_ns, start_ns, &d)) {
            return end_ns > start_ns ? std::numeric_limits<std::int64_t>::max()
                                     : std::numeric_limits<std::int64_t>::min();
        }
        return d;
    }
};

// One row of `memory`: the bytes of one category on one rank from t_ns on.
struct MemorySample {
    int rank = 0;
    std::int64_t t_ns = 0;
    std::int64_t bytes = 0;
    MemoryCategory category = MemoryCategory::Weights;
};

// One row of `metric`.
struct MetricRecord {
    std::string key;
    double value = 0;
    std::optional<int> rank;
    std::optional<int> iteration;
};

// Rows of a newer minor format may carry kinds, lanes, sources or categories this build does
// not know; readers of the op and memory tables skip them, as the *_named views do.
bool isKnownOp(const OpRecord& op);
// How people read an op: "F3", "F3.c1", "SEND_F3 → 2", "RECV_B3 ← 1", "ALLREDUCE(output,3)".
std::string opLabel(const OpRecord& op);
bool isKnownCategory(MemoryCategory category);

// ---- Nsight-compatible GPU records (subset of the columns; see docs/trace-format.md) --------
struct KernelRecord {
    std::int64_t start = 0, end = 0;
    int device_id = 0;
    int context_id = 0;
    int stream_id = 0;
    std::int64_t correlation_id = 0;
    std::int64_t global_pid = 0;
    std::int64_t grid_id = 0;
    std::string demangled_name;
    std::string short_name;
    int grid_x = 1, grid_y = 1, grid_z = 1;
    int block_x = 1, block_y = 1, block_z = 1;
    int registers_per_thread = 0;
    int static_shared_memory = 0;
    int dynamic_shared_memory = 0;
};

struct MemcpyRecord {
    std::int64_t start = 0, end = 0;
    int device_id = 0, context_id = 0, stream_id = 0;
    std::int64_t correlation_id = 0;
    std::int64_t global_pid = 0;
    std::int64_t bytes = 0;
    int copy_kind = 0;               // ENUM_CUDA_MEMCPY_OPER
    int src_kind = 0, dst_kind = 0;  // ENUM_CUDA_MEM_KIND
};

struct MemsetRecord {
    std::int64_t start = 0, end = 0;
    int device_id = 0, context_id = 0, stream_id = 0;
    std::int64_t correlation_id = 0;
    std::int64_t global_pid = 0;
    int value = 0;
    std::int64_t bytes = 0;
    int mem_kind = 0;
};

// Nsight's ENUM_NSYS_EVENT_CLASS ids of CUPTI_ACTIVITY_KIND_RUNTIME.eventClass: a call of the
// CUDA runtime, or of the driver (the launches cuBLAS and NCCL make).
inline constexpr int kEventClassCudaRuntime = 0;
inline constexpr int kEventClassCudaDriver = 1;

struct RuntimeRecord {
    std::int64_t start = 0, end = 0;
    std::int64_t global_tid = 0;
    std::int64_t correlation_id = 0;
    std::string name;  // "cudaLaunchKernel_v7000"
    int return_value = 0;
    int event_class = kEventClassCudaRuntime;
};

// One row of op_correlation: the op whose call launched a device record (a kernel, copy or
// memset), found through CUPTI's external correlation id or, for an Nsight import, the op's
// NVTX range. The record is the one of its table with the same global_pid, correlation_id and
// start: correlation ids are 32-bit and come round again in a long run, starts tell them apart.
struct OpCorrelation {
    std::int64_t global_pid = 0;
    std::int64_t correlation_id = 0;
    std::int64_t start = 0;  // the device record's start
    int rank = 0;
    int iteration = 0;
    int op_index = 0;
};

// One row of ThreadNames: a thread's name, as Nsight lists the threads it saw.
struct ThreadName {
    std::int64_t global_tid = 0;
    std::string name;
    int priority = 0;
};

struct SyncRecord {
    std::int64_t start = 0, end = 0;
    int device_id = 0, context_id = 0, stream_id = 0;
    std::int64_t correlation_id = 0;
    std::int64_t global_pid = 0;
    int sync_type = 0;
    std::int64_t event_id = 0;
};

struct NvtxRecord {
    std::int64_t start = 0;
    std::optional<std::int64_t> end;  // none for marks
    // ENUM_NSYS_EVENT_TYPE: 59 push/pop range, 60 start/end range, 34 mark, 75 domain creation
    // (text: the domain's name; no end)
    int event_type = 59;
    std::string text;
    std::int64_t global_tid = 0;
    int domain_id = 0;
};

struct GpuMemoryEvent {
    std::int64_t start = 0;
    std::int64_t global_pid = 0;
    int device_id = 0;
    int context_id = 0;
    std::int64_t address = 0;
    std::int64_t bytes = 0;
    int mem_kind = 0;
    int operation = 0;  // 0 allocation, 1 deallocation
    std::string name;
};

struct GpuInfo {
    int id = 0;
    std::string name;
    std::string bus_location;
    std::int64_t total_memory = 0;
    std::int64_t memory_bandwidth = 0;
    std::int64_t clock_rate = 0;
    int sm_count = 0;
    std::string uuid;
    int compute_major = 0;
    int compute_minor = 0;
};

// How the file answered: ok, or a message naming the file and the problem.
struct TraceStatus {
    enum class Code {
        Ok,
        NotFound,
        NotSqlite,     // the file is not a SQLite database
        Corrupt,       // truncated or damaged
        NotPipeScope,  // a SQLite file that is not a PipeScope trace
        NsightExport,  // an Nsight Systems export, not ours
        NewerVersion,  // written by a newer PipeScope
        Exists,        // refusing to overwrite
        IoError,
        BadInput,
        Cancelled,  // the caller asked to stop
    };
    Code code = Code::Ok;
    std::string message;

    bool ok() const { return code == Code::Ok; }
    explicit operator bool() const { return ok(); }
    static TraceStatus success() { return {}; }
    static TraceStatus error(Code c, std::string m) { return {c, std::move(m)}; }
};

}  // namespace pipescope::trace
