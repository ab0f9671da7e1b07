#pragma once
// The op-list builder the vision families share (workloads/src/vision.cpp, vision_seg.cpp): appends ops while tracking
// the current feature map. Internal to gpuplan_wl.
#include <cstdint>
#include <string>

#include "gpuplan/wl/vision.hpp"

namespace gpuplan::wl::detail {

/// Output size of a window k with stride s and padding p over n: ⌊(n + 2p − k)/s⌋ + 1, or 0 when the window does
/// not fit (the map vanishes; the decoder reports it).
inline std::int64_t out_size(std::int64_t n, std::int64_t k, std::int64_t s, std::int64_t p) {
  const std::int64_t span = n + 2 * p - k;
  return span < 0 ? 0 : span / s + 1;
}

/// Appends ops while tracking the current feature map (C, H, W).
class Builder {
 public:
  Builder(VisionGraph& g, std::int64_t c, std::int64_t h, std::int64_t w) : g_(g), c_(c), h_(h), w_(w) {}
  [[nodiscard]] std::int64_t c() const { return c_; }
  [[nodiscard]] std::int64_t h() const { return h_; }
  [[nodiscard]] std::int64_t last() const { return static_cast<std::int64_t>(g_.ops.size()) - 1; }

  /// Convolution with torchvision's padding (k−1)/2 unless `pad` is given (patchify stems: 0).
  void conv(const std::string& name, std::int64_t out, std::int64_t k, std::int64_t stride, std::int64_t groups,
            bool bias, std::int64_t pad = -1) {
    const std::int64_t p = pad >= 0 ? pad : (k - 1) / 2;
    VisionOp op = base(VisionOpKind::conv, name);
    op.kernel = k;
    op.stride = stride;
    op.groups = groups;
    op.bias = bias;
    op.c_out = out;
    op.h_out = out_size(h_, k, stride, p);
    op.w_out = out_size(w_, k, stride, p);
    push(op);
  }
  /// A transposed convolution (no padding): every input pixel meets the k×k kernel; output (H − 1)·stride + k.
  void conv_transpose(const std::string& name, std::int64_t out, std::int64_t k, std::int64_t stride, bool bias) {
    VisionOp op = base(VisionOpKind::conv, name);
    op.kernel = k;
    op.stride = stride;
    op.bias = bias;
    op.transposed = true;
    op.c_out = out;
    op.h_out = (h_ - 1) * stride + k;
    op.w_out = (w_ - 1) * stride + k;
    push(op);
  }
  void norm(const std::string& name, VisionNorm kind) {
    VisionOp op = base(VisionOpKind::norm, name);
    op.norm = kind;
    push(op);
  }
  void act(const std::string& name, VisionAct a) {
    VisionOp op = base(VisionOpKind::activation, name);
    op.act = a;
    push(op);
  }
  void pool(const std::string& name, VisionPool kind, std::int64_t k = 1, std::int64_t stride = 1) {
    VisionOp op = base(VisionOpKind::pool, name);
    op.pool = kind;
    op.kernel = k;
    op.stride = stride;
    if (kind == VisionPool::global_avg) {
      op.h_out = op.w_out = 1;
    } else {
      const std::int64_t p = (k - 1) / 2;
      op.h_out = out_size(h_, k, stride, p);
      op.w_out = out_size(w_, k, stride, p);
    }
    push(op);
  }
  /// A linear layer over the current tokens (H = tokens, W = 1) or over a pooled vector (H = W = 1).
  void linear(const std::string& name, std::int64_t out, bool bias = true) {
    VisionOp op = base(VisionOpKind::linear, name);
    op.c_out = out;
    op.bias = bias;
    push(op);
  }
  void add(const std::string& name, std::int64_t residual_from) {
    VisionOp op = base(VisionOpKind::add, name);
    op.residual_from = residual_from;
    push(op);
  }
  void mul(const std::string& name, std::int64_t extra_params = 0) {
    VisionOp op = base(VisionOpKind::mul, name);
    op.extra_params = extra_params;
    push(op);
  }
  /// Attention of the current tokens over themselves, or over `kv_tokens` other tokens (cross-attention).
  void attention(const std::string& name, std::int64_t hidden, std::int64_t heads, std::int64_t kv_tokens = 0) {
    VisionOp op = base(VisionOpKind::attention, name);
    op.c_in = 3 * hidden;
    op.c_out = hidden;
    op.heads = heads;
    op.kv_tokens = kv_tokens;
    push(op);
  }
  void embedding(const std::string& name, std::int64_t tokens, std::int64_t extra_params) {
    VisionOp op = base(VisionOpKind::embedding, name);
    op.h_out = tokens;
    op.extra_params = extra_params;
    push(op);
  }
  /// Nearest-neighbour upsampling by `factor`.
  void resize(const std::string& name, std::int64_t factor) {
    VisionOp op = base(VisionOpKind::resize, name);
    op.h_out = h_ * factor;
    op.w_out = w_ * factor;
    push(op);
  }
  /// torch.cat of maps of the current size into `channels` channels (a copy kernel).
  void concat(const std::string& name, std::int64_t channels) {
    VisionOp op = base(VisionOpKind::copy, name);
    op.c_in = op.c_out = channels;
    push(op);
  }
  /// Sets the current map without an op (flatten to tokens, take the class token).
  void reshape(std::int64_t c, std::int64_t h, std::int64_t w) {
    c_ = c;
    h_ = h;
    w_ = w;
  }

 private:
  VisionOp base(VisionOpKind kind, const std::string& name) const {
    VisionOp op;
    op.kind = kind;
    op.name = name;
    op.c_in = op.c_out = c_;
    op.h_in = op.h_out = h_;
    op.w_in = op.w_out = w_;
    return op;
  }
  void push(const VisionOp& op) {
    g_.ops.push_back(op);
    c_ = op.c_out;
    h_ = op.h_out;
    w_ = op.w_out;
  }
  VisionGraph& g_;
  std::int64_t c_, h_, w_;
};

void build_unet(const VisionArch& a, Builder& b);
void build_fpn_segmentation(const VisionArch& a, Builder& b);

}  // namespace gpuplan::wl::detail
