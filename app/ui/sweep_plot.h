// The sweep chart (sweep_plot.cpp): drawing a sweep's points and describing them.
#pragma once

#include <vector>

#include <QPointF>
#include <QString>
#include <qcustomplot.h>

#include <pipescope/app/simulation_job.h>

namespace pipescope::app {

// Draws a sweep's MFU and peak-memory lines, one per method, into `plot`. Values that are not
// numbers are placed at 0, 1, 2, ... with their text as tick labels. `title`, when given, leads
// the chart's heading (an exported image names its config there).
void fillSweepPlot(QCustomPlot* plot, const std::vector<SweepPoint>& points,
                   const QString& key_label, const QString& title = {});

// What the sweep point nearest to `pos` (within a few pixels) measured, for a tooltip: its
// method and value, MFU, iteration time, bubble and peak memory. Empty away from every point.
QString describeSweepPointAt(const QCustomPlot* plot, const std::vector<SweepPoint>& points,
                             const QString& key_label, const QPointF& pos);

// What every method measured at one value of the sweep, the `*index`-th from the left of the
// chart (clamped to the values there are): the keyboard's way to read the points.
QString describeSweepValue(const std::vector<SweepPoint>& points, const QString& key_label,
                           int* index);

}  // namespace pipescope::app
