// How long ops take: the interface through which schedule generation and the simulator ask for
// durations, and the analytic model derived from the model arithmetic. Generation needs
// durations to place the vocabulary passes, so the analytic model lives here beside the FLOP and
// byte counts it is made of; the simulator layers measured tables on top (runner/sim).
#pragma once

#include <cstdint>

#include <pipescope/schedule/config.h>
#include <pipescope/schedule/ir.h>
#include <pipescope/schedule/model_math.h>

namespace pipescope::schedule {

class CostModel {
  public:
    virtual ~CostModel() = default;
    // Seconds of a compute op (F, B, W, IF, IB, S, T, L, OPT) on `rank`.
    virtual double compute(int rank, const Op& op) const = 0;
    // Seconds a send occupies its p2p stream (latency + transfer).
    virtual double send(int rank, const Op& op) const = 0;
    // Seconds of a collective once every rank has joined it.
    virtual double collective(const Op& op) const = 0;
};

// Every op takes one unit; enough to decide whether a schedule can run at all.
class UnitCostModel final : public CostModel {
  public:
    double compute(int, const Op&) const override { return 1.0; }
    double send(int, const Op&) const override { return 1.0; }
    double collective(const Op&) const override { return 1.0; }
};

// Durations from FLOPs and bytes against the hardware entry (docs/cost-model.md):
//  - GEMM-bound work: FLOPs / (peak_tflops * gemm_efficiency);
//  - memory-bound work (embedding lookups, softmax over the logits, loss, optimizer step):
//    bytes / memory_gbps;
//  - a send: latency_us + bytes / p2p_gbps;
//  - an all-reduce (ring): latency_us + 2 (p - 1) / p * bytes / allreduce_gbps;
//    a broadcast (pipelined): latency_us + bytes / allreduce_gbps; nothing on one rank.
class AnalyticCostModel final : public CostModel {
  public:
    AnalyticCostModel(const Config& config, const Placement& placement);
    double compute(int rank, const Op& op) const override;
    double send(int rank, const Op& op) const override;
    double collective(const Op& op) const override;

    // Parts of compute(), for the table model's fallback and for docs/tests.
    double gemmSeconds(double flops) const;
    double memorySeconds(double bytes) const;

  private:
    Config config_;
    Placement placement_;
    std::vector<std::int64_t> rank_params_;
};

// Bytes an op moves: activations and gradients between stages, and the vocabulary collectives
// (vocabulary-parallelism.md, the table of collectives).
std::int64_t commBytes(const Config& config, const Op& op);

}  // namespace pipescope::schedule
