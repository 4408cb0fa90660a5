// The CUDA backend's communication where NCCL is not used: device buffers staged through host
// memory over a host transport (the in-process fabric, or the socket transport of a
// multi-process run). It works for any placement, several ranks on one GPU included.
//
// Point-to-point messages between ranks of one process on one GPU (NCCL takes one rank per GPU)
// skip the host when a Direct path is given: the sender copies its data into a fresh device
// buffer and sends the buffer's address and size over the host transport; the receiver copies
// from it and frees it.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <pipescope/exec/comm.h>

namespace pipescope::cuda {

struct DirectCopy {
    // The peers reached by a device copy (same process, same GPU).
    std::function<bool(int peer)> reaches;
    // A device copy of `floats` values at `data` that the receiver will own, complete when the
    // call returns.
    std::function<float*(const float* data, std::size_t floats)> stage;
    // Copies `floats` values from a staged buffer to `dst` on the calling lane's stream, waits,
    // and frees the staged buffer.
    std::function<void(float* dst, float* staged, std::size_t floats)> take;
    // Frees a staged buffer that was never taken.
    std::function<void(float* staged)> discard;
};

class StagedComm final : public exec::Comm {
  public:
    using Copy = std::function<void(float* dst, const float* src, std::size_t floats)>;
    // `to_host` and `to_device` copy on the calling lane's stream and wait for it.
    StagedComm(std::unique_ptr<exec::Comm> host, Copy to_host, Copy to_device,
               DirectCopy direct = {})
        : host_(std::move(host)),
          to_host_(std::move(to_host)),
          to_device_(std::move(to_device)),
          direct_(std::move(direct)) {}

    int rank() const override { return host_->rank(); }
    int size() const override { return host_->size(); }
    void setActivity(std::string what) override { host_->setActivity(std::move(what)); }

    exec::CommStatus send(int peer, std::uint64_t tag, const float* data,
                          std::size_t count) override {
        if (direct(peer, count)) {
            float* staged = direct_.stage(data, count);
            auto st = host_->send(peer, tag, Handle{staged, count}.words().data(), kHandleWords);
            if (!st.ok()) {
                direct_.discard(staged);
            }
            return st;
        }
        std::vector<float> h(count);
        to_host_(h.data(), data, count);
        return host_->send(peer, tag, h.data(), count);
    }
    exec::CommStatus recv(int peer, std::uint64_t tag, float* data, std::size_t count) override {
        if (direct(peer, count)) {
            std::array<float, kHandleWords> words{};
            auto st = host_->recv(peer, tag, words.data(), kHandleWords);
            if (!st.ok()) {
                return st;
            }
            const Handle h = Handle::from(words);
            if (h.count != count) {
                direct_.discard(h.staged);
                return exec::CommStatus::error(exec::CommStatus::Code::BadCall,
                                               "rank " + std::to_string(peer) + " sent " +
                                                   std::to_string(h.count) + " values where rank " +
                                                   std::to_string(rank()) + " expects " +
                                                   std::to_string(count));
            }
            direct_.take(data, h.staged, count);
            return st;
        }
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
    // A staged buffer's address and size, carried as the bits of four floats.
    static constexpr std::size_t kHandleWords = 4;
    struct Handle {
        float* staged = nullptr;
        std::uint64_t count = 0;
        std::array<float, kHandleWords> words() const {
            std::array<float, kHandleWords> w{};
            const auto address = reinterpret_cast<std::uintptr_t>(staged);
            const std::uint64_t bits[2] = {static_cast<std::uint64_t>(address), count};
            static_assert(sizeof bits == sizeof(float) * kHandleWords);
            std::memcpy(w.data(), bits, sizeof bits);
            return w;
        }
        static Handle from(const std::array<float, kHandleWords>& w) {
            std::uint64_t bits[2] = {};
            std::memcpy(bits, w.data(), sizeof bits);
            return {reinterpret_cast<float*>(static_cast<std::uintptr_t>(bits[0])), bits[1]};
        }
    };

    bool direct(int peer, std::size_t count) const {
        return count > 0 && direct_.reaches && direct_.reaches(peer);
    }

    std::unique_ptr<exec::Comm> host_;
    Copy to_host_;
    Copy to_device_;
    DirectCopy direct_;
};

}  // namespace pipescope::cuda
