// The CUDA device query. Without a GPU it must say why (no driver, no device) and the test is
// reported as skipped (exit 77); with one it must describe each device sensibly.
#include <cstdio>

#include <QtTest>

#include <pipescope/cuda/devices.h>

class TstCudaDevices : public QObject {
    Q_OBJECT

  private slots:
    void describesEveryDevice();
};

void TstCudaDevices::describesEveryDevice() {
    const auto list = pipescope::cuda::listDevices();
    QVERIFY(list.problem.empty());
    QVERIFY(list.runtime_version >= 12000);
    QVERIFY(list.driver_version >= list.runtime_version / 1000 * 1000);
    for (const auto& d : list.devices) {
        QVERIFY(!d.name.empty());
        QVERIFY(d.memory_bytes > (1LL << 30));
        QVERIFY(d.compute_major >= 7);
        QVERIFY(d.sm_count > 0);
        QVERIFY(!d.bus_id.empty());
    }
}

int main(int argc, char** argv) {
    const auto list = pipescope::cuda::listDevices();
    if (list.devices.empty()) {
        // The reason must name what is missing, not be empty or a bare error code.
        const bool says_why = list.problem.find("driver") != std::string::npos ||
                              list.problem.find("device") != std::string::npos ||
                              list.problem.find("GPU") != std::string::npos;
        if (!says_why) {
            std::fprintf(stderr, "FAIL: no device and no usable reason: '%s'\n",
                         list.problem.c_str());
            return 1;
        }
        std::printf("SKIP: no CUDA device here: %s (runtime %d, driver %d)\n", list.problem.c_str(),
                    list.runtime_version, list.driver_version);
        return 77;
    }
    QCoreApplication app(argc, argv);
    TstCudaDevices t;
    return QTest::qExec(&t, argc, argv);
}

#include "tst_cuda_devices.moc"
