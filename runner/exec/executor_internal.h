// Internals of PipelineExecutor shared by its two source files: the run's state
// (pipeline_executor.cpp drives the threads) and the op handlers (pipeline_ops.cpp).
#pragma once

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <pipescope/exec/comm.h>
#include <pipescope/exec/in_process_comm.h>
#include <pipescope/exec/pipeline_executor.h>
#include <pipescope/exec/rank_backend.h>
#include <pipescope/exec/synthetic_data.h>
#include <pipescope/schedule/exec_graph.h>

namespace pipescope::exec::detail {

// What an op failed on; the lane adds the iteration, rank and op.
struct OpError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
// A communication call that did not succeed.
struct CommError : std::runtime_error {
    CommError(const CommStatus& s) : std::runtime_error(s.message), status(s) {}
    CommStatus status;
};

// Named buffers a rank keeps between its ops, keyed by (slot, micro-batch, chunk).
enum class Slot : int {
    ActIn,      // a position's input activations (RECV_F)
    ActOut,     // a position's output activations (for SEND_F, the next position, or X)
    GradOut,    // the gradient of a position's output (RECV_B)
    GradIn,     // the gradient of a position's input (for SEND_B, the previous position, IB)
    Embed,      // IF's output, summed by ALLREDUCE(input)
    EmbedGrad,  // the embedding-output gradient of BCAST(input_grad), for IB
    OutX,       // X(i) of BCAST(output_bcast), for S
    LossGrad,   // g(i): the loss gradient per token
    Stats,      // S's statistics: local max, local sum, global max, global sum, target logit
    Basis,      // vocab-2: A_d and G_d
    DxSum,      // vocab-2: the all-reduced sum of the local (α A − G)
    DxPart,     // vocab-1, interlaced: the local part of dX, then its sum
};

class BufferStore {
  public:
    explicit BufferStore(RankBackend* backend) : backend_(backend) {}

    Buffer allocate(std::int64_t floats, trace::MemoryCategory category) const;
    float* make(Slot s, int mb, int chunk, std::int64_t floats, trace::MemoryCategory category);
    float* get(Slot s, int mb, int chunk);
    Buffer take(Slot s, int mb, int chunk);
    void put(Slot s, int mb, int chunk, Buffer b);
    void drop(Slot s, int mb, int chunk);
    void clear();

  private:
    using Key = std::tuple<int, int, int>;
    RankBackend* backend_;
    std::mutex m_;
    std::map<Key, Buffer> map_;
};

struct RankState {
    std::unique_ptr<MemoryTracker> tracker;
    std::unique_ptr<RankBackend> backend;
    std::unique_ptr<BufferStore> buffers;
    std::array<std::unique_ptr<Comm>, schedule::kStreamCount> comm;
    std::array<std::vector<int>, schedule::kStreamCount> lane_ops;  // op indices per stream
    // The compute lane's token cache for one iteration.
    int token_iteration = -1;
    std::map<int, TokenRows> tokens;
};

// Everything one run shares between its threads.
struct Run {
    schedule::Config config;
    schedule::Schedule schedule;
    ExecOptions options;
    schedule::ExecGraph graph;
    ModelShape shape;
    MarkovData data;
    bool sharded = false;
    std::vector<int> group;  // every rank
    std::unique_ptr<InProcessFabric> fabric;
    std::vector<RankState> ranks;
    std::unique_ptr<std::atomic<int>[]> done;  // per node: iterations completed
    // Per node: how many ops of other lanes wait for it to start (asynchronous lanes).
    std::vector<int> awaited;

    int laneOf(int node) const {
        const schedule::OpRef& at = graph.node_ref[static_cast<std::size_t>(node)];
        return static_cast<int>(
            schedule.ops[static_cast<std::size_t>(at.rank)][static_cast<std::size_t>(at.index)]
                .stream());
    }

    Run(const schedule::Config& c, schedule::Schedule s, ExecOptions o);

    int rankOf(int position) const {
        return schedule.placement.position_rank[static_cast<std::size_t>(position)];
    }
    int chunkOf(int position) const {
        return schedule.placement.position_chunk[static_cast<std::size_t>(position)];
    }
    int lastPosition() const { return schedule.lastPosition(); }
    const TokenRows& tokens(RankState& rs, int iteration, int mb);
    // Adds a finished micro-batch's mean loss to the iteration's.
    void recordLoss(int iteration, double loss);

    std::mutex book_m;
    std::vector<double> loss_sum;
    std::vector<int> loss_count;
};

// Runs one op of rank `rank`; returns the bytes it communicated (-1 for a compute op). Throws
// OpError or CommError.
std::int64_t runOp(Run& run, int rank, int iteration, const schedule::Op& op);

}  // namespace pipescope::exec::detail
