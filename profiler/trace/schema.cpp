#include "schema.h"

#include <string>

#include <pipescope/trace/lod.h>
#include <pipescope/trace/types.h>

namespace pipescope::trace::detail {

namespace {

// Nsight Systems' table and column names (schema 3.x of `nsys export --type sqlite`), a subset
// of the columns; times are ns since the run's time origin, as Nsight's are since its session
// start. Public scripts select columns by name, so the order and the extra columns Nsight has
// do not matter.
const char* const kNsightSql = R"sql(
CREATE TABLE StringIds (
    id INTEGER NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE ThreadNames (
    nameId INTEGER NOT NULL,
    priority INTEGER,
    globalTid INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL,
    greenContextId INTEGER,
    streamId INTEGER NOT NULL,
    correlationId INTEGER,
    globalPid INTEGER,
    demangledName INTEGER NOT NULL,
    shortName INTEGER NOT NULL,
    mangledName INTEGER,
    launchType INTEGER,
    cacheConfig INTEGER,
    registersPerThread INTEGER NOT NULL,
    gridX INTEGER NOT NULL,
    gridY INTEGER NOT NULL,
    gridZ INTEGER NOT NULL,
    blockX INTEGER NOT NULL,
    blockY INTEGER NOT NULL,
    blockZ INTEGER NOT NULL,
    staticSharedMemory INTEGER NOT NULL,
    dynamicSharedMemory INTEGER NOT NULL,
    localMemoryPerThread INTEGER NOT NULL,
    localMemoryTotal INTEGER NOT NULL,
    gridId INTEGER NOT NULL,
    sharedMemoryExecuted INTEGER,
    graphNodeId INTEGER,
    sharedMemoryLimitConfig INTEGER,
    graphId INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL,
    greenContextId INTEGER,
    streamId INTEGER NOT NULL,
    correlationId INTEGER,
    globalPid INTEGER,
    bytes INTEGER NOT NULL,
    copyKind INTEGER NOT NULL,
    deprecatedSrcId INTEGER,
    srcKind INTEGER,
    dstKind INTEGER,
    srcDeviceId INTEGER,
    srcContextId INTEGER,
    dstDeviceId INTEGER,
    dstContextId INTEGER,
    migrationCause INTEGER,
    graphNodeId INTEGER,
    virtualAddress INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL,
    greenContextId INTEGER,
    streamId INTEGER NOT NULL,
    correlationId INTEGER,
    globalPid INTEGER,
    value INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    graphNodeId INTEGER,
    memKind INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    eventClass INTEGER NOT NULL,
    globalTid INTEGER,
    correlationId INTEGER,
    nameId INTEGER NOT NULL,
    returnValue INTEGER NOT NULL,
    callchainId INTEGER
);
CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (
    start INTEGER NOT NULL,
    end INTEGER NOT NULL,
    deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL,
    greenContextId INTEGER,
    streamId INTEGER NOT NULL,
    correlationId INTEGER,
    globalPid INTEGER,
    syncType INTEGER NOT NULL,
    eventId INTEGER NOT NULL
);
CREATE TABLE NVTX_EVENTS (
    start INTEGER NOT NULL,
    end INTEGER,
    eventType INTEGER NOT NULL,
    rangeId INTEGER,
    category INTEGER,
    color INTEGER,
    text TEXT,
    globalTid INTEGER,
    endGlobalTid INTEGER,
    textId INTEGER,
    domainId INTEGER,
    uint64Value INTEGER,
    int64Value INTEGER,
    doubleValue REAL,
    uint32Value INTEGER,
    int32Value INTEGER,
    floatValue REAL,
    jsonTextId INTEGER,
    jsonText TEXT
);
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start INTEGER NOT NULL,
    globalPid INTEGER NOT NULL,
    deviceId INTEGER NOT NULL,
    contextId INTEGER NOT NULL,
    address INTEGER NOT NULL,
    pc INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    memKind INTEGER NOT NULL,
    memoryOperationType INTEGER NOT NULL,
    name TEXT,
    correlationId INTEGER
);
CREATE TABLE TARGET_INFO_GPU (
    vmId INTEGER NOT NULL,
    id INTEGER NOT NULL,
    name TEXT,
    busLocation TEXT,
    isDiscrete INTEGER,
    l2CacheSize INTEGER,
    totalMemory INTEGER,
    memoryBandwidth INTEGER,
    clockRate INTEGER,
    smCount INTEGER,
    pwGpuId INTEGER,
    uuid TEXT,
    luid INTEGER,
    chipName TEXT,
    cuDevice INTEGER,
    computeMajor INTEGER,
    computeMinor INTEGER
);
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs INTEGER,
    utcTime TEXT,
    localTime TEXT
);
CREATE TABLE ENUM_NSYS_EVENT_TYPE (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT,
    label TEXT
);
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT,
    label TEXT
);
CREATE TABLE ENUM_CUDA_MEM_KIND (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT,
    label TEXT
);
CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT,
    label TEXT
);
CREATE TABLE ENUM_NSYS_EVENT_CLASS (
    id INTEGER NOT NULL PRIMARY KEY,
    name TEXT,
    label TEXT
);
CREATE TABLE META_DATA_EXPORT (
    name TEXT NOT NULL,
    value TEXT
);
INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES
    (34, 'NvtxMark', 'NVTX Mark'),
    (59, 'NvtxPushPopRange', 'NVTX PushPop Range'),
    (60, 'NvtxStartEndRange', 'NVTX Start/End Range'),
    (75, 'NvtxDomainCreate', 'NVTX Domain Create');
INSERT INTO ENUM_NSYS_EVENT_CLASS VALUES
    (0, 'TRACE_PROCESS_EVENT_CUDA_RUNTIME', 'CUDA runtime'),
    (1, 'TRACE_PROCESS_EVENT_CUDA_DRIVER', 'CUDA driver');
INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES
    (0, 'CUDA_MEMCPY_KIND_UNKNOWN', 'Unknown'),
    (1, 'CUDA_MEMCPY_KIND_HTOD', 'Host-to-Device'),
    (2, 'CUDA_MEMCPY_KIND_DTOH', 'Device-to-Host'),
    (3, 'CUDA_MEMCPY_KIND_HTOA', 'Host-to-Array'),
    (4, 'CUDA_MEMCPY_KIND_ATOH', 'Array-to-Host'),
    (5, 'CUDA_MEMCPY_KIND_ATOA', 'Array-to-Array'),
    (6, 'CUDA_MEMCPY_KIND_ATOD', 'Array-to-Device'),
    (7, 'CUDA_MEMCPY_KIND_DTOA', 'Device-to-Array'),
    (8, 'CUDA_MEMCPY_KIND_DTOD', 'Device-to-Device'),
    (9, 'CUDA_MEMCPY_KIND_HTOH', 'Host-to-Host'),
    (10, 'CUDA_MEMCPY_KIND_PTOP', 'Peer-to-Peer');
INSERT INTO ENUM_CUDA_MEM_KIND VALUES
    (0, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown'),
    (1, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
    (2, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'),
    (3, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),
    (4, 'CUDA_MEMOPR_MEMORY_KIND_ARRAY', 'Array'),
    (5, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', 'Managed'),
    (6, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static'),
    (7, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC', 'Managed Static');
INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES
    (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),
    (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');
)sql";

// PipeScope's own tables. op.kind, op.lane, op.source and memory.category are small integers
// named by the ENUM_* tables; the *_named views join the names in.
const char* const kPipeScopeSql = R"sql(
CREATE TABLE pipescope_meta (
    key TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    name TEXT NOT NULL,
    config_json TEXT NOT NULL,
    backend TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'cancelled')),
    message TEXT,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER,
    host TEXT,
    versions TEXT,
    command_line TEXT,
    ranks INTEGER NOT NULL,
    iterations INTEGER NOT NULL,
    warmup INTEGER NOT NULL
);
CREATE TABLE rank (
    rank INTEGER NOT NULL PRIMARY KEY,
    stages TEXT NOT NULL,
    device TEXT,
    host TEXT,
    clock_offset_ns INTEGER NOT NULL DEFAULT 0,
    pid INTEGER
);
CREATE TABLE op (
    rank INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    microbatch INTEGER,
    chunk INTEGER NOT NULL,
    lane INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    source INTEGER NOT NULL,
    op_index INTEGER NOT NULL,
    peer INTEGER,
    collective INTEGER,
    bytes INTEGER,
    cpu_ns INTEGER,
    dur_level INTEGER NOT NULL
);
CREATE TABLE memory (
    rank INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    bytes INTEGER NOT NULL,
    category INTEGER NOT NULL
);
CREATE TABLE metric (
    key TEXT NOT NULL,
    value REAL NOT NULL,
    rank INTEGER,
    iteration INTEGER
);
CREATE TABLE op_correlation (
    globalPid INTEGER NOT NULL,
    correlationId INTEGER NOT NULL,
    start INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    iteration INTEGER NOT NULL,
    op_index INTEGER NOT NULL
);
CREATE TABLE op_lod (
    level INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    lane INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    count INTEGER NOT NULL,
    busy_ns INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    mixed INTEGER NOT NULL,
    PRIMARY KEY (level, rank, lane, start_ns)
) WITHOUT ROWID;
CREATE TABLE memory_lod (
    level INTEGER NOT NULL,
    rank INTEGER NOT NULL,
    category INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    min_bytes INTEGER NOT NULL,
    max_bytes INTEGER NOT NULL,
    last_bytes INTEGER NOT NULL,
    PRIMARY KEY (level, rank, category, start_ns)
) WITHOUT ROWID;
CREATE TABLE ENUM_OP_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL);
CREATE TABLE ENUM_LANE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE ENUM_SOURCE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE ENUM_MEMORY_CATEGORY (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE ENUM_COLLECTIVE (id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT NOT NULL);
INSERT INTO ENUM_COLLECTIVE VALUES
    (1, 'input', 'all-reduce of the sharded embedding lookups (after IF)'),
    (2, 'input_grad', 'broadcast of the embedding-output gradient (before IB)'),
    (3, 'output_bcast', 'broadcast of the output layer input and loss gradient (before S)'),
    (4, 'output', 'all-reduce of the softmax statistics, barrier C (after S)'),
    (5, 'output_grad', 'all-reduce of the output layer input gradient (after T)');
INSERT INTO ENUM_OP_KIND VALUES
    (0, 'F', 'transformer forward'),
    (1, 'B', 'transformer backward (input gradient where W is split)'),
    (2, 'W', 'transformer weight gradient'),
    (3, 'IF', 'vocabulary-parallel input layer forward'),
    (4, 'IB', 'vocabulary-parallel input layer backward'),
    (5, 'S', 'vocabulary-parallel output layer forward pass'),
    (6, 'T', 'vocabulary-parallel output layer backward pass'),
    (7, 'L', 'loss on the last stage'),
    (8, 'SEND_F', 'send activations'),
    (9, 'RECV_F', 'receive activations'),
    (10, 'SEND_B', 'send gradients'),
    (11, 'RECV_B', 'receive gradients'),
    (12, 'BCAST', 'broadcast over the pipeline ranks'),
    (13, 'ALLREDUCE', 'all-reduce over the pipeline ranks'),
    (14, 'OPT', 'optimizer step');
INSERT INTO ENUM_LANE VALUES (0, 'compute'), (1, 'comm'), (2, 'gpu');
INSERT INTO ENUM_SOURCE VALUES (0, 'sim'), (1, 'host'), (2, 'gpu');
INSERT INTO ENUM_MEMORY_CATEGORY VALUES
    (0, 'weights'), (1, 'grads'), (2, 'optimizer'), (3, 'activations'), (4, 'vocab'),
    (5, 'comm_buffers'), (6, 'workspace');
CREATE VIEW op_named AS
    SELECT op.rowid AS id, op.rank, op.iteration, k.name AS kind, op.microbatch, op.chunk,
           l.name AS lane, op.start_ns, op.end_ns, op.end_ns - op.start_ns AS dur_ns,
           s.name AS source, op.op_index, op.peer, c.name AS collective, op.bytes, op.cpu_ns
    FROM op
    JOIN ENUM_OP_KIND k ON k.id = op.kind
    JOIN ENUM_LANE l ON l.id = op.lane
    JOIN ENUM_SOURCE s ON s.id = op.source
    LEFT JOIN ENUM_COLLECTIVE c ON c.id = op.collective;
CREATE VIEW memory_named AS
    SELECT m.rank, m.t_ns, m.bytes, c.name AS category
    FROM memory m JOIN ENUM_MEMORY_CATEGORY c ON c.id = m.category;
)sql";

}  // namespace

const char* const kIndexSql = R"sql(
CREATE INDEX IF NOT EXISTS op_rank_start ON op (rank, start_ns);
CREATE INDEX IF NOT EXISTS op_rank_lane_level_start ON op (rank, lane, dur_level, start_ns);
CREATE INDEX IF NOT EXISTS op_iteration_microbatch ON op (iteration, microbatch, rank);
CREATE INDEX IF NOT EXISTS memory_rank_t ON memory (rank, t_ns);
CREATE INDEX IF NOT EXISTS memory_rank_category_t ON memory (rank, category, t_ns);
CREATE INDEX IF NOT EXISTS kernel_device_start ON CUPTI_ACTIVITY_KIND_KERNEL (deviceId, start);
CREATE INDEX IF NOT EXISTS nvtx_start ON NVTX_EVENTS (globalTid, start);
CREATE INDEX IF NOT EXISTS op_correlation_record ON op_correlation (globalPid, correlationId, start);
CREATE INDEX IF NOT EXISTS op_correlation_op ON op_correlation (rank, iteration, op_index);
)sql";

int createSchema(Db& db, std::string* error) {
    std::string sql = "BEGIN;\n";
    sql += kNsightSql;
    sql += kPipeScopeSql;
    sql += "INSERT INTO pipescope_meta VALUES ('" + std::string(kMetaFormat) + "', '" +
           kFormatName + "');\n";
    sql += "INSERT INTO pipescope_meta VALUES ('" + std::string(kMetaSchemaVersion) + "', '" +
           std::to_string(kSchemaVersion) + "');\n";
    sql += "INSERT INTO pipescope_meta VALUES ('" + std::string(kMetaLodBaseNs) + "', '" +
           std::to_string(kLodBaseNs) + "');\n";
    sql += "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_PRODUCT_NAME', 'PipeScope');\n";
    sql += "INSERT INTO META_DATA_EXPORT VALUES ('EXPORT_SCHEMA_VERSION', '" +
           std::string(kNsightSchemaVersion) + "');\n";
    sql += "INSERT INTO META_DATA_EXPORT VALUES ('PIPESCOPE_TRACE_VERSION', '" +
           std::to_string(kSchemaVersion) + "');\n";
    sql += "PRAGMA user_version = " + std::to_string(kSchemaVersion) + ";\nCOMMIT;\n";
    const int rc = db.exec(sql);
    if (rc != SQLITE_OK && error) {
        *error = db.errorMessage();
        db.exec("ROLLBACK");
    }
    return rc;
}

}  // namespace pipescope::trace::detail
