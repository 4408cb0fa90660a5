// Schedules saved as JSON so that a user can hand-edit one and see it simulated
// (docs/schedule-ir.md, "Schedule files"). Ops are written as their labels: "F3", "B2.c1",
// "SEND_F3>2", "RECV_B3.c1<1", "ALLREDUCE(output,3)", "OPT".
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::schedule {

std::string scheduleToJson(const Schedule& schedule);

struct ScheduleLoad {
    std::optional<Schedule> schedule;
    std::string error;  // names the file and the place: "s.json: ops[2][15] \"F3x\": ..."
};

// Reads a schedule for `config` (which fixes the placement and the bytes of communication);
// the file's ranks, micro-batches, schedule and vocabulary method must match the config. The
// result is not yet validated: call validateSchedule.
ScheduleLoad scheduleFromJson(std::string_view text, const Config& config,
                              std::string_view source_name);
ScheduleLoad loadScheduleFile(const std::string& path, const Config& config);

// Parses one op label; nullopt (with *error) when it is not one.
std::optional<Op> parseOpLabel(std::string_view label, std::string* error);

}  // namespace pipescope::schedule
