// The CUPTI record parser on activity buffers built here, record by record, as CUPTI fills them
// on a GPU: every field lands in its Nsight column, times move to the trace's origin, external
// correlation ties kernels to ops, and a bad buffer is an error, not a crash. Needs no GPU.
#include <algorithm>
#include <cstring>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <vector>

#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/cupti/activity.h>
#include <pipescope/cupti/tracer.h>
#include <pipescope/trace/reader.h>
#include <pipescope/trace/writer.h>

using namespace pipescope;

namespace {

// An 8-byte-aligned buffer of consecutive records.
class ActivityBuffer {
  public:
    template <typename Record>
    void add(const Record& r) {
        static_assert(sizeof(Record) % 8 == 0);
        const std::size_t at = used_;
        used_ += sizeof(Record);
        storage_.resize((used_ + 7) / 8);
        std::memcpy(reinterpret_cast<std::uint8_t*>(storage_.data()) + at, &r, sizeof(Record));
    }
    std::uint8_t* data() { return reinterpret_cast<std::uint8_t*>(storage_.data()); }
    std::size_t size() const { return used_; }

  private:
    std::vector<std::uint64_t> storage_;
    std::size_t used_ = 0;
};

constexpr std::int64_t kOrigin = 1'700'000'000'000'000'000;
constexpr std::int64_t kPid = std::int64_t{4242} << 24;

CUpti_ActivityKernel10 kernel(std::uint32_t correlation, std::uint64_t start, std::uint64_t end,
                              const char* name) {
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.start = static_cast<std::uint64_t>(kOrigin) + start;
    k.end = static_cast<std::uint64_t>(kOrigin) + end;
    k.deviceId = 0;
    k.contextId = 1;
    k.streamId = 7;
    k.correlationId = correlation;
    k.gridId = correlation * 10;
    k.gridX = 128;
    k.gridY = 2;
    k.gridZ = 1;
    k.blockX = 256;
    k.blockY = 1;
    k.blockZ = 1;
    k.registersPerThread = 32;
    k.staticSharedMemory = 1024;
    k.dynamicSharedMemory = 4096;
    k.name = name;
    return k;
}

CUpti_ActivityMemcpy6 copyRecord(std::uint32_t correlation, std::uint64_t start,
                                 std::uint64_t end) {
    CUpti_ActivityMemcpy6 c{};
    c.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    c.start = static_cast<std::uint64_t>(kOrigin) + start;
    c.end = static_cast<std::uint64_t>(kOrigin) + end;
    c.correlationId = correlation;
    return c;
}

CUpti_ActivityExternalCorrelation external(std::uint32_t correlation, std::uint64_t op) {
    CUpti_ActivityExternalCorrelation e{};
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
    e.externalId = op;
    e.correlationId = correlation;
    return e;
}

}  // namespace

class TstCuptiActivity : public QObject {
    Q_OBJECT

  private slots:
    void everyRecordKindBecomesItsRow();
    void externalCorrelationGivesEachOpItsGpuSpan();
    void accumulatorJoinsPiecesInAnyOrder();
    void untimedRecordsAreLeftOut();
    void callsWithoutDeviceWorkKeepNoCorrelation();
    void syncDevicesAcrossFlushes();
    void copiesJoinByTheirRuntimeCall();
    void kernelNames();
    void badBuffersAreErrors();
    void rowsReachTheTrace();
    void tracerSaysWhyItCannotTrace();
    void refusedPushIsReported();
};

void TstCuptiActivity::everyRecordKindBecomesItsRow() {
    ActivityBuffer buf;
    buf.add(kernel(100, 5'000, 9'000, "_Z6addOnePfi"));
    CUpti_ActivityMemcpy6 copy = copyRecord(101, 1'000, 2'000);
    copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
    copy.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;
    copy.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    copy.bytes = 1 << 20;
    copy.deviceId = 0;
    copy.contextId = 1;
    copy.streamId = 9;
    buf.add(copy);
    CUpti_ActivityMemset4 set{};
    set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    set.value = 0;
    set.bytes = 4096;
    set.start = kOrigin + 2'500;
    set.end = kOrigin + 2'600;
    set.contextId = 1;
    set.streamId = 9;
    set.correlationId = 102;
    set.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
    buf.add(set);
    CUpti_ActivityAPI api{};
    api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    api.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    api.start = kOrigin + 4'000;
    api.end = kOrigin + 4'200;
    api.processId = 4242;
    api.threadId = 77;
    api.correlationId = 100;
    api.returnValue = 0;
    buf.add(api);
    CUpti_ActivitySynchronization2 sync{};
    sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
    sync.start = kOrigin + 9'000;
    sync.end = kOrigin + 9'500;
    sync.correlationId = 103;
    sync.contextId = 1;
    sync.streamId = 7;
    buf.add(sync);
    buf.add(external(100, 5));

    cupti::ParsedActivity out;
    const cupti::ActivityParser parser(kPid, kOrigin);
    const std::string err = parser.parse(buf.data(), buf.size(), &out);
    QVERIFY2(err.empty(), err.c_str());

    QCOMPARE(out.kernels.size(), std::size_t(1));
    const auto& k = out.kernels[0];
    QCOMPARE(k.start, std::int64_t(5'000));
    QCOMPARE(k.end, std::int64_t(9'000));
    QCOMPARE(k.stream_id, 7);
    QCOMPARE(k.correlation_id, std::int64_t(100));
    QCOMPARE(k.global_pid, kPid);
    QCOMPARE(k.grid_id, std::int64_t(1000));
    QCOMPARE(k.grid_x, 128);
    QCOMPARE(k.grid_y, 2);
    QCOMPARE(k.block_x, 256);
    QCOMPARE(k.registers_per_thread, 32);
    QCOMPARE(k.static_shared_memory, 1024);
    QCOMPARE(k.dynamic_shared_memory, 4096);
    QCOMPARE(k.demangled_name, std::string("addOne(float*, int)"));
    QCOMPARE(k.short_name, std::string("addOne"));

    QCOMPARE(out.memcpys.size(), std::size_t(1));
    QCOMPARE(out.memcpys[0].bytes, std::int64_t(1 << 20));
    QCOMPARE(out.memcpys[0].copy_kind, 1);  // CUDA_MEMCPY_KIND_HTOD
    QCOMPARE(out.memcpys[0].src_kind, 2);   // pinned
    QCOMPARE(out.memcpys[0].dst_kind, 3);   // device
    QCOMPARE(out.memcpys[0].start, std::int64_t(1'000));
    QCOMPARE(out.memcpys[0].stream_id, 9);

    QCOMPARE(out.memsets.size(), std::size_t(1));
    QCOMPARE(out.memsets[0].bytes, std::int64_t(4096));
    QCOMPARE(out.memsets[0].mem_kind, 3);

    QCOMPARE(out.runtime.size(), std::size_t(1));
    QCOMPARE(out.runtime[0].name, std::string("cudaLaunchKernel_v7000"));
    QCOMPARE(out.runtime[0].global_tid, kPid | 77);
    QCOMPARE(out.runtime[0].start, std::int64_t(4'000));
    QCOMPARE(out.runtime[0].event_class, trace::kEventClassCudaRuntime);

    QCOMPARE(out.syncs.size(), std::size_t(1));
    QCOMPARE(out.syncs[0].sync_type,
             static_cast<int>(CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE));
    QCOMPARE(out.syncs[0].device_id, -1);
    cupti::resolveSyncDevices(&out);
    QCOMPARE(out.syncs[0].device_id, 0);

    QCOMPARE(out.external.size(), std::size_t(1));
    QCOMPARE(out.external.at(100), std::uint64_t(5));
    QCOMPARE(out.skipped, std::int64_t(0));
}

void TstCuptiActivity::externalCorrelationGivesEachOpItsGpuSpan() {
    // Op 11 launched two kernels (correlation 200, 201) and op 12 one (202); kernel 203 ran
    // outside any op. Buffers arrive per thread and out of order: the mapping may come in a
    // later buffer than its kernels.
    ActivityBuffer first;
    first.add(kernel(201, 3'000, 4'500, "k2"));
    first.add(kernel(202, 5'000, 5'100, "k3"));
    first.add(kernel(203, 6'000, 6'100, "k4"));
    first.add(kernel(200, 1'000, 2'000, "k1"));
    ActivityBuffer second;
    second.add(external(200, 11));
    second.add(external(201, 11));
    second.add(external(202, 12));
    CUpti_ActivityExternalCorrelation other = external(203, 99);
    other.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_OPENACC;  // not ours: skipped
    second.add(other);

    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::ParsedActivity a;
    QVERIFY(parser.parse(first.data(), first.size(), &a).empty());
    cupti::ParsedActivity b;
    QVERIFY(parser.parse(second.data(), second.size(), &b).empty());
    a.append(std::move(b));
    QVERIFY(b.empty());
    QCOMPARE(a.kernels.size(), std::size_t(4));
    QCOMPARE(a.skipped, std::int64_t(1));

    const auto spans = cupti::gpuSpansByExternalId(a);
    QCOMPARE(spans.size(), std::size_t(2));
    QCOMPARE(spans.at(11).start, std::int64_t(1'000));
    // Each kernel of an op is tied to it by its own process, correlation id and start (the
    // trace's op_correlation row); kernel 203 is of no op.
    cupti::GpuSpanAccumulator acc;
    acc.add(a);
    auto records = acc.takeAttributed();
    std::sort(records.begin(), records.end(),
              [](const auto& x, const auto& y) { return x.start < y.start; });
    QCOMPARE(records.size(), std::size_t(3));
    const std::int64_t expected[][3] = {{200, 1'000, 11}, {201, 3'000, 11}, {202, 5'000, 12}};
    for (std::size_t i = 0; i < records.size(); ++i) {
        QCOMPARE(records[i].correlation_id, expected[i][0]);
        QCOMPARE(records[i].start, expected[i][1]);
        QCOMPARE(records[i].external_id, static_cast<std::uint64_t>(expected[i][2]));
        QCOMPARE(records[i].global_pid, kPid);
    }
    QVERIFY(acc.takeAttributed().empty());  // each record once
    QCOMPARE(spans.at(11).end, std::int64_t(4'500));
    QCOMPARE(spans.at(11).kernels, 2);
    QCOMPARE(spans.at(12).start, std::int64_t(5'000));
    QCOMPARE(spans.at(12).end, std::int64_t(5'100));
    QCOMPARE(spans.at(12).kernels, 1);
}

void TstCuptiActivity::accumulatorJoinsPiecesInAnyOrder() {
    // Three flushes: kernels before their correlation, a correlation before its kernel, and a
    // kernel of no op (the parameter upload) that never gets one.
    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::GpuSpanAccumulator acc;
    const auto feed = [&](ActivityBuffer& buffer) {
        cupti::ParsedActivity a;
        QVERIFY(parser.parse(buffer.data(), buffer.size(), &a).empty());
        acc.add(a);
    };
    ActivityBuffer one;
    one.add(kernel(300, 10'000, 11'000, "a"));
    one.add(kernel(301, 12'000, 12'500, "b"));
    one.add(kernel(50, 100, 200, "upload"));
    one.add(external(302, 21));
    feed(one);
    QVERIFY(acc.spans().empty());
    QCOMPARE(acc.unattributed(), std::size_t(3));

    QVERIFY(acc.takeAttributed().empty());  // no op known yet

    ActivityBuffer two;
    two.add(external(300, 20));
    two.add(external(301, 20));
    feed(two);
    // The kernels that waited for their correlation are tied to their op now.
    const auto late = acc.takeAttributed();
    QCOMPARE(late.size(), std::size_t(2));
    QCOMPARE(late[0].correlation_id, std::int64_t(300));
    QCOMPARE(late[0].start, std::int64_t(10'000));
    QCOMPARE(late[0].external_id, std::uint64_t(20));
    QCOMPARE(late[1].correlation_id, std::int64_t(301));
    QCOMPARE(acc.spans().size(), std::size_t(1));
    QCOMPARE(acc.spans().at(20).start, std::int64_t(10'000));
    QCOMPARE(acc.spans().at(20).end, std::int64_t(12'500));
    QCOMPARE(acc.spans().at(20).kernels, 2);
    QCOMPARE(acc.unattributed(), std::size_t(1));

    ActivityBuffer three;
    three.add(kernel(302, 13'000, 14'000, "c"));
    three.add(kernel(303, 15'000, 15'100, "d"));  // its correlation comes never: unattributed
    feed(three);
    QCOMPARE(acc.spans().size(), std::size_t(2));
    QCOMPARE(acc.spans().at(21).kernels, 1);
    QCOMPARE(acc.spans().at(21).end, std::int64_t(14'000));
    QCOMPARE(acc.unattributed(), std::size_t(2));

    QCOMPARE(acc.takeAttributed().size(), std::size_t(1));  // 302; 303 is of no op

    // A correlation is used once: a second record with the same id is not attributed twice.
    ActivityBuffer again;
    again.add(kernel(300, 90'000, 91'000, "a"));
    feed(again);
    QCOMPARE(acc.spans().at(20).end, std::int64_t(12'500));
    QVERIFY(acc.takeAttributed().empty());
    acc.clearSpans();
    QVERIFY(acc.spans().empty());
}

void TstCuptiActivity::untimedRecordsAreLeftOut() {
    // CUPTI leaves start or end 0 for work it could not time: such rows would sit 54 years
    // before the trace and stretch their op's gpu span across it.
    ActivityBuffer buf;
    CUpti_ActivityKernel10 no_start = kernel(400, 0, 100, "a");
    no_start.start = 0;
    buf.add(no_start);
    CUpti_ActivityKernel10 no_end = kernel(401, 100, 0, "b");
    no_end.end = 0;
    buf.add(no_end);
    buf.add(kernel(402, 500, 400, "backwards"));
    buf.add(kernel(403, 1'000, 1'200, "fine"));
    CUpti_ActivityMemcpy6 copy = copyRecord(404, 10, 0);
    copy.end = 0;
    buf.add(copy);
    CUpti_ActivityMemset4 set{};
    set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    set.start = 0;
    set.end = 0;
    set.correlationId = 405;
    buf.add(set);
    for (std::uint32_t c = 400; c <= 405; ++c) {
        buf.add(external(c, 30));
    }
    CUpti_ActivityAPI call{};  // a runtime call without timestamps
    call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
    call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
    call.correlationId = 406;
    buf.add(call);
    CUpti_ActivitySynchronization2 wait{};  // and a synchronization
    wait.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    wait.correlationId = 407;
    buf.add(wait);
    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::ParsedActivity out;
    QVERIFY(parser.parse(buf.data(), buf.size(), &out).empty());
    QCOMPARE(out.kernels.size(), std::size_t(1));
    QCOMPARE(out.kernels[0].short_name, std::string("fine"));
    QVERIFY(out.memcpys.empty());
    QVERIFY(out.memsets.empty());
    QVERIFY(out.runtime.empty());
    QVERIFY(out.syncs.empty());
    QCOMPARE(out.untimed, std::int64_t(7));
    const auto spans = cupti::gpuSpansByExternalId(out);
    QCOMPARE(spans.at(30).start, std::int64_t(1'000));
    QCOMPARE(spans.at(30).end, std::int64_t(1'200));
    QCOMPARE(spans.at(30).kernels, 1);
}

void TstCuptiActivity::callsWithoutDeviceWorkKeepNoCorrelation() {
    // An op's event records, stream waits and device queries (runtime and driver) launch
    // nothing: their correlations, before or after them in the buffer, are not kept. A launch's
    // is, until its kernel comes.
    ActivityBuffer buf;
    const auto api = [](CUpti_ActivityKind kind, CUpti_CallbackId cbid, std::uint32_t c) {
        CUpti_ActivityAPI a{};
        a.kind = kind;
        a.cbid = cbid;
        a.start = kOrigin + 10;
        a.end = kOrigin + 20;
        a.correlationId = c;
        return a;
    };
    buf.add(external(500, 40));
    buf.add(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020, 500));
    buf.add(
        api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaStreamWaitEvent_v3020, 501));
    buf.add(external(501, 40));  // after its call
    buf.add(external(502, 40));
    buf.add(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent, 502));
    buf.add(external(503, 40));
    buf.add(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 503));
    buf.add(external(504, 40));
    buf.add(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 504));
    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::ParsedActivity out;
    QVERIFY(parser.parse(buf.data(), buf.size(), &out).empty());
    // Every runtime call stays in the table, and a driver call that launches work (cuBLAS's
    // and NCCL's kernels carry its correlation id) joins it; other driver calls do not.
    QCOMPARE(out.runtime.size(), std::size_t(4));
    QCOMPARE(out.runtime.back().name, std::string("cuLaunchKernel"));
    QCOMPARE(out.runtime.back().correlation_id, std::int64_t(504));
    // Nsight's classes: the driver's launch is a driver call, the others runtime calls.
    QCOMPARE(out.runtime.back().event_class, trace::kEventClassCudaDriver);
    QCOMPARE(out.runtime.front().event_class, trace::kEventClassCudaRuntime);
    QCOMPARE(out.skipped, std::int64_t(1));  // cuCtxGetCurrent
    QCOMPARE(out.external.size(), std::size_t(2));
    QVERIFY(out.external.count(503) == 1 && out.external.count(504) == 1);

    // The accumulator forgets the oldest correlations past kRemembered (those of an earlier
    // flush first).
    cupti::GpuSpanAccumulator acc;
    const auto full = static_cast<std::uint32_t>(cupti::GpuSpanAccumulator::kRemembered);
    cupti::ParsedActivity older;
    for (std::uint32_t c = 1; c <= full; ++c) {
        older.external[c] = 7;
    }
    acc.add(older);
    QCOMPARE(acc.forgotten(), std::int64_t(0));
    cupti::ParsedActivity newer;
    for (std::uint32_t c = full + 1; c <= full + 10; ++c) {
        newer.external[c] = 8;
    }
    newer.kernels.push_back({});
    newer.kernels.back().correlation_id = full + 10;
    newer.kernels.back().start = 5;
    newer.kernels.back().end = 6;
    acc.add(newer);
    QCOMPARE(acc.forgotten(), std::int64_t(10));
    QVERIFY(acc.spans().count(8) == 1);
    QCOMPARE(acc.spans().at(8).kernels, 1);
}

void TstCuptiActivity::syncDevicesAcrossFlushes() {
    // A flush with only a synchronization of context 3 takes the device that an earlier flush
    // saw context 3 on.
    std::unordered_map<int, int> known;
    cupti::ParsedActivity first;
    first.memsets.push_back({});
    first.memsets.back().context_id = 3;
    first.memsets.back().device_id = 2;
    cupti::resolveSyncDevices(&first, &known);
    cupti::ParsedActivity second;
    second.syncs.push_back({});
    second.syncs.back().context_id = 3;
    second.syncs.back().device_id = -1;
    cupti::resolveSyncDevices(&second, &known);
    QCOMPARE(second.syncs[0].device_id, 2);
    // Not applicable ids are -1, the stream's and the event's alike.
    ActivityBuffer buf;
    CUpti_ActivitySynchronization2 sync{};
    sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
    sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
    sync.start = kOrigin + 1;
    sync.end = kOrigin + 2;
    sync.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    sync.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
    buf.add(sync);
    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::ParsedActivity out;
    QVERIFY(parser.parse(buf.data(), buf.size(), &out).empty());
    QCOMPARE(out.syncs.size(), std::size_t(1));
    QCOMPARE(out.syncs[0].stream_id, -1);
    QCOMPARE(out.syncs[0].event_id, std::int64_t(-1));
}

void TstCuptiActivity::copiesJoinByTheirRuntimeCall() {
    // A copy's correlation is its driver call's; the external id may have been recorded for the
    // runtime call only (runtimeCorrelationId), in a later buffer too.
    ActivityBuffer copies;
    CUpti_ActivityMemcpy6 first = copyRecord(700, 100, 300);
    first.runtimeCorrelationId = 701;
    copies.add(first);
    CUpti_ActivityMemcpy6 second = copyRecord(702, 400, 500);
    second.runtimeCorrelationId = 703;
    copies.add(second);
    ActivityBuffer ids;
    ids.add(external(701, 50));
    ids.add(external(703, 51));
    ids.add(external(702, 51));  // both calls recorded: one attribution, both forgotten
    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::ParsedActivity a, b;
    QVERIFY(parser.parse(copies.data(), copies.size(), &a).empty());
    QVERIFY(parser.parse(ids.data(), ids.size(), &b).empty());
    QCOMPARE(a.copy_runtime_correlation.size(), std::size_t(2));
    cupti::GpuSpanAccumulator acc;
    acc.add(a);
    QCOMPARE(acc.unattributed(), std::size_t(2));
    acc.add(b);
    QCOMPARE(acc.unattributed(), std::size_t(0));
    QCOMPARE(acc.spans().at(50).start, std::int64_t(100));
    QCOMPARE(acc.spans().at(50).end, std::int64_t(300));
    QCOMPARE(acc.spans().at(51).kernels, 1);
    // A copy's op_correlation row names the copy by its own correlation id (its driver call's,
    // what the MEMCPY table holds), not the runtime call's that carried the op.
    const auto records = acc.takeAttributed();
    QCOMPARE(records.size(), std::size_t(2));
    QCOMPARE(records[0].correlation_id, std::int64_t(700));
    QCOMPARE(records[0].external_id, std::uint64_t(50));
    QCOMPARE(records[0].start, std::int64_t(100));
    QCOMPARE(records[1].correlation_id, std::int64_t(702));
    QCOMPARE(records[1].external_id, std::uint64_t(51));
    // Appending keeps the copies' runtime correlations.
    cupti::ParsedActivity joined;
    joined.memcpys.push_back({});  // a copy made by hand, without one
    joined.append(std::move(a));
    QCOMPARE(joined.memcpys.size(), std::size_t(3));
    QCOMPARE(joined.copy_runtime_correlation.size(), std::size_t(2));
    QCOMPARE(joined.copy_runtime_correlation.at(700), std::uint32_t(701));
}

void TstCuptiActivity::kernelNames() {
    QCOMPARE(cupti::demangledKernelName(nullptr), std::string("(unnamed kernel)"));
    QCOMPARE(cupti::demangledKernelName("ampere_sgemm_128x64_nn"),
             std::string("ampere_sgemm_128x64_nn"));
    const std::string templated =
        cupti::demangledKernelName("_ZN9pipescope7kernels4cuda15layerNormKernelIfEEvPKfPfi");
    QCOMPARE(templated,
             std::string("void pipescope::kernels::cuda::layerNormKernel<float>(float const*, "
                         "float*, int)"));
    QCOMPARE(cupti::shortKernelName(templated), std::string("layerNormKernel"));
    QCOMPARE(cupti::shortKernelName("ampere_sgemm_128x64_nn"),
             std::string("ampere_sgemm_128x64_nn"));
    QCOMPARE(cupti::shortKernelName("void (anonymous namespace)::fill<std::pair<int, int>>(int)"),
             std::string("fill"));
}

void TstCuptiActivity::badBuffersAreErrors() {
    const cupti::ActivityParser parser(kPid, kOrigin);
    cupti::ParsedActivity out;
    QVERIFY(parser.parse(nullptr, 0, &out).empty());
    QVERIFY(out.empty());

    ActivityBuffer buf;
    buf.add(kernel(1, 0, 10, "k"));
    buf.add(kernel(2, 10, 20, "k"));
    // Misaligned: refused with a message, nothing read.
    const std::string misaligned = parser.parse(buf.data() + 4, buf.size() - 4, &out);
    QVERIFY2(misaligned.find("aligned") != std::string::npos, misaligned.c_str());
    QVERIFY(out.empty());

    // A record of a kind CUPTI does not know: an error naming CUPTI's reason; the records
    // before it are kept.
    ActivityBuffer bad;
    bad.add(kernel(3, 0, 10, "k"));
    CUpti_ActivityKernel10 junk{};
    junk.kind = static_cast<CUpti_ActivityKind>(0x7ffffff0);
    bad.add(junk);
    const std::string err = parser.parse(bad.data(), bad.size(), &out);
    QVERIFY2(!err.empty() && err.find("CUPTI") != std::string::npos, err.c_str());
    QCOMPARE(out.kernels.size(), std::size_t(1));
}

void TstCuptiActivity::rowsReachTheTrace() {
    QTemporaryDir dir;
    const std::string path = dir.filePath("gpu.db").toStdString();
    ActivityBuffer buf;
    buf.add(kernel(10, 100, 200, "_Z6addOnePfi"));
    buf.add(kernel(11, 300, 400, "_Z6addOnePfi"));
    cupti::ParsedActivity out;
    QVERIFY(cupti::ActivityParser(kPid, kOrigin).parse(buf.data(), buf.size(), &out).empty());
    {
        trace::TraceWriter w;
        trace::RunInfo info;
        info.name = "cupti";
        info.backend = "cuda";
        info.ranks = 1;
        QVERIFY(w.create(path, info).ok());
        cupti::writeActivity(out, w);
        QVERIFY(w.finish(trace::RunStatus::Complete, {}, 400).ok());
    }
    trace::TraceReader r;
    QVERIFY(r.open(path).ok());
    QCOMPARE(r.kernelCount(), std::int64_t(2));
    std::vector<trace::KernelRecord> back;
    QVERIFY(r.forEachKernel([&](const trace::KernelRecord& k) {
                 back.push_back(k);
                 return true;
             }).ok());
    QCOMPARE(back.size(), std::size_t(2));
    QCOMPARE(back[1].start, std::int64_t(300));
    QCOMPARE(back[1].short_name, std::string("addOne"));
    QCOMPARE(back[1].demangled_name, std::string("addOne(float*, int)"));
}

void TstCuptiActivity::tracerSaysWhyItCannotTrace() {
    auto& tracer = cupti::ActivityTracer::instance();
    int devices = 0;
    const bool gpu = cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
    const std::string why = tracer.start(kPid, 0, cupti::ActivityTracer::timestamp());
    if (gpu) {
        // With a GPU (and no other profiler attached) tracing starts and stops cleanly.
        QVERIFY2(why.empty(), why.c_str());
        QVERIFY(tracer.active());
        { const cupti::OpScope scope(1); }
        tracer.stop();
        QVERIFY(!tracer.active());
        return;
    }
    // Without one, start() refuses with CUPTI's reason, and the rest is harmless.
    QVERIFY2(why.find("CUPTI") != std::string::npos, why.c_str());
    QVERIFY(!tracer.active());
    { const cupti::OpScope scope(1); }
    QVERIFY(tracer.flush(true).empty());
    QVERIFY(tracer.stop().empty());
    qInfo("without a GPU: %s", why.c_str());
}

void TstCuptiActivity::refusedPushIsReported() {
    // A push CUPTI refuses leaves the op's device work tied to no op: the tracer must say so
    // (lastError, printed by the run) rather than lose the attribution silently. Without a GPU
    // CUPTI refuses every push, which is how this is tested here.
    if (cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 1) ==
        CUPTI_SUCCESS) {
        std::uint64_t id = 0;
        cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
        QSKIP("CUPTI accepts external correlation ids here");
    }
    auto& tracer = cupti::ActivityTracer::instance();
    tracer.pushOp(7);
    const std::string error = tracer.lastError();
    QVERIFY2(error.find("external correlation id") != std::string::npos, error.c_str());
}

QTEST_GUILESS_MAIN(TstCuptiActivity)
#include "tst_cupti_activity.moc"
