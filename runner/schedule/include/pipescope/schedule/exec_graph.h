// The dependency graph of a schedule and its timing. Building the graph resolves every op's
// inputs (which op produces them) from the IR's semantics; timing it with a cost model is the
// simulator's clock, and timing it with unit costs proves the schedule cannot deadlock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <pipescope/schedule/cost_model.h>
#include <pipescope/schedule/ir.h>

namespace pipescope::schedule {

struct ExecGraph {
    std::vector<int> rank_offset;                 // node id of each rank's first op; size ranks + 1
    std::vector<OpRef> node_ref;                  // node -> (rank, index)
    std::vector<int> start_dep_begin;             // CSR: start_deps[start_dep_begin[n] .. [n+1])
    std::vector<int> start_deps;                  // nodes that must end before node n starts
    std::vector<int> end_dep;                     // receives: the send whose end ends them; else -1
    std::vector<int> group;                       // collectives: the instance id; else -1
    std::vector<std::vector<int>> group_members;  // instance -> member nodes (one per rank)

    int nodeCount() const { return static_cast<int>(node_ref.size()); }
    int node(int rank, int index) const {
        return rank_offset[static_cast<std::size_t>(rank)] + index;
    }
};

struct GraphError {
    OpRef where;
    std::string message;  // "rank 2, op 17 (F5): ..."
};

struct GraphBuild {
    ExecGraph graph;
    std::optional<GraphError> error;
};

// "rank 2, op 7 (F3)": where an op stands, for error messages.
std::string opPlace(const Schedule& schedule, int rank, int index);

// Resolves the inputs of every op; fails on an input no op produces, a receive without a send,
// collectives whose members disagree.
GraphBuild buildGraph(const Schedule& schedule);

struct NodeTime {
    double start = 0;
    double end = 0;
};

struct GraphTiming {
    std::vector<NodeTime> times;  // per node
    bool complete = false;
    std::string deadlock;  // when not complete: the ops that wait on each other
};

// Times every op from t = 0. A schedule whose graph has a cycle is reported as a deadlock that
// names the ranks and ops waiting on each other.
GraphTiming timeGraph(const Schedule& schedule, const ExecGraph& graph, const CostModel& costs);

}  // namespace pipescope::schedule
