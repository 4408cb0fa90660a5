// The static validator (architecture.md): checks a schedule before anything runs and reports the
// first violation with its rank, op index and reason.
#pragma once

#include <optional>
#include <string>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::schedule {

struct ScheduleError {
    OpRef where;          // rank -1: the schedule as a whole
    std::string message;  // "rank 2, op 17 (F5): ..."
};

// Checks, in order: every op a rank needs appears exactly once and nothing else does; sends and
// receives pair up in the same order on both sides; every rank joins the same collectives in
// the same order; every op comes after the ops of its own rank that produce its inputs; and a
// run with unit costs finishes (no deadlock).
std::optional<ScheduleError> validateSchedule(const Schedule& schedule);

struct ExecGraph;

// The structural checks alone (everything but the deadlock check), handing the built execution
// graph to the caller: a simulator that times the graph anyway learns about a deadlock from
// that timing (GraphTiming::complete), which is the same test with other costs.
std::optional<ScheduleError> validateStructure(const Schedule& schedule, ExecGraph* graph);

}  // namespace pipescope::schedule
