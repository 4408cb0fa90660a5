// The table models under QAbstractItemModelTester, on real simulated runs.
#include <QAbstractItemModelTester>
#include <QTemporaryDir>
#include <QtTest>

#include <pipescope/analysis/compare.h>
#include <pipescope/app/compare_model.h>
#include <pipescope/app/recent_files.h>
#include <pipescope/app/simulation_job.h>
#include <pipescope/app/summary_model.h>
#include <pipescope/schedule/config_parse.h>

#include "testsupport.h"

using namespace pipescope;

namespace {

std::vector<app::RunDataPtr> methods() {
    auto parsed = schedule::loadConfigFile(std::string(PIPESCOPE_SOURCE_DIR) +
                                           "/resources/presets/default.json");
    app::SimRequest req;
    req.kind = app::SimRequest::Kind::Methods;
    req.config = *parsed.config;
    return app::runSimRequest(req).runs;
}

}  // namespace

class TstAppcoreModels : public QObject {
    Q_OBJECT

  private slots:
    void summaryModel();
    void compareModel();
    void recentFiles();
};

void TstAppcoreModels::summaryModel() {
    const auto runs = methods();
    QVERIFY(runs.size() >= 2);
    app::SummaryModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setStats(runs.front()->stats());
    QCOMPARE(model.rowCount(), runs.front()->rankCount() + 1);
    const auto& r0 = runs.front()->stats().ranks[0];
    QCOMPARE(model.data(model.index(0, app::SummaryModel::Busy), app::SummaryModel::ValueRole)
                 .toDouble(),
             r0.busy_ns / 1e6);
    QCOMPARE(model.data(model.index(model.rowCount() - 1, 0)).toString(), QString("mean"));
    model.setStats(runs.back()->stats());
    model.setStats({});
    QCOMPARE(model.rowCount(), 0);
}

void TstAppcoreModels::compareModel() {
    const auto runs = methods();
    std::vector<analysis::RunStats> stats;
    for (const auto& r : runs) {
        stats.push_back(r->stats());
    }
    app::CompareModel model;
    QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    model.setComparison(analysis::compareRuns({stats.front(), stats.back()}));  // naive, vocab-2
    QCOMPARE(model.columnCount(), 1 + 2 + 2);
    QCOMPARE(model.headerData(2, Qt::Horizontal).toString(), QString("vocab-2"));
    // Iteration time: vocab-2 is faster, so its delta is negative and judged better.
    int row = -1;
    for (int i = 0; i < model.rowCount(); ++i) {
        if (model.comparison().quantities[static_cast<std::size_t>(i)].key == "iteration_time_ns") {
            row = i;
        }
    }
    QVERIFY(row >= 0);
    QVERIFY(model.data(model.index(row, 3), app::CompareModel::ValueRole).toDouble() < 0);
    QCOMPARE(model.data(model.index(row, 3), app::CompareModel::VerdictRole).toInt(),
             static_cast<int>(analysis::Verdict::Better));
    QVERIFY(model.data(model.index(row, 4)).toString().startsWith('-'));
}

void TstAppcoreModels::recentFiles() {
    QTemporaryDir dir;
    const QString ini = dir.filePath("settings.ini");
    app::RecentFiles recent("recent", 2, ini);
    QStringList files;
    for (int i = 0; i < 3; ++i) {
        files << dir.filePath(QString("f%1.db").arg(i));
        QFile f(files.back());
        QVERIFY(f.open(QIODevice::WriteOnly));
    }
    recent.add(files[0]);
    recent.add(files[1]);
    recent.add(files[0]);  // moves to the front, no duplicate
    QCOMPARE(recent.files(), (QStringList{files[0], files[1]}));
    recent.add(files[2]);  // the oldest falls off
    QCOMPARE(recent.files(), (QStringList{files[2], files[0]}));
    QFile::remove(files[2]);
    QCOMPARE(recent.files(), QStringList{files[0]});  // missing files are left out
    recent.clear();
    QVERIFY(recent.files().isEmpty());
}

QTEST_GUILESS_MAIN(TstAppcoreModels)
#include "tst_appcore_models.moc"
