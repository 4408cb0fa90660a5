// The CUDA backend's communication where NCCL is not used: device buffers staged through host
// memory over a host transport (the in-process fabric, or the socket transport of a
// multi-process run). It works for any placement, several ranks on one GPU included.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/comm.h>

namespace pipescope::cuda {

class StagedComm final : public exec::Comm {
  public:
    using Copy = std::function<void(float* dst, const float* src, std::size_t floats)>;
    // `to_host` and `to_device` copy on the calling lane's stream and wait for it.
    StagedComm(std::unique_ptr<exec::Comm> host, Copy to_host, Copy to_device)
        : host_(std::move(host)), to_host_(std::move(to_host)), to_device_(std::move(to_device)) {}

    int rank() const override { return host_->rank(); }
    int size() const override { return host_->size(); }
    void setActivity(std::string what) override { host_->setActivity(std::move(what)); }

    exec::CommStatus send(int peer, std::uint64_t tag, const float* data,
                          std::size_t count) override {
        std::vector<float> h(count);
        to_host_(h.data(), data, count);
        return host_->send(peer, tag, h.data(), count);
    }
    exec::CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        std::vector<float> h(count);
        auto st = host_->recv(peer, tag, h.data(), count);
        if (st.ok()) {
            to_device_(data, h.data(), count);
        }
        return st;
    }
    exec::CommStatus broadcast(const std::vector<int>& group, int root, std::uint64_t tag,
                               float* data, std::size_t count) override {
        std::vector<float> h(count);
        if (rank() == root) {
            to_host_(h.data(), data, count);
        }
        auto st = host_->broadcast(group, root, tag, h.data(), count);
        if (st.ok() && rank() != root) {
            to_device_(data, h.data(), count);
        }
        return st;
    }
    exec::CommStatus allReduce(const std::vector<int>& group, std::uint64_t tag, float* data,
                               std::size_t count, exec::ReduceOp op) override {
        std::vector<float> h(count);
        to_host_(h.data(), data, count);
        auto st = host_->allReduce(group, tag, h.data(), count, op);
        if (st.ok()) {
            to_device_(data, h.data(), count);
        }
        return st;
    }

  private:
    std::unique_ptr<exec::Comm> host_;
    Copy to_host_;
    Copy to_device_;
};

}  // namespace pipescope::cuda
