#include "gpuplan/wl/vision.hpp"

#include "vision_builder.hpp"

#include <algorithm>
#include <cmath>

namespace gpuplan::wl {

const char* to_string(VisionFamily f) {
  switch (f) {
    case VisionFamily::resnet: return "resnet";
    case VisionFamily::efficientnet: return "efficientnet";
    case VisionFamily::convnext: return "convnext";
    case VisionFamily::vit: return "vit";
    case VisionFamily::yolov8: return "yolov8";
    case VisionFamily::detr: return "detr";
    case VisionFamily::unet: return "unet";
    case VisionFamily::fpn: return "fpn";
    case VisionFamily::onnx: return "onnx";
  }
  return "?";
}

std::int64_t VisionOp::matmul_weights() const {
  if (kind == VisionOpKind::conv) return c_out * (c_in / groups) * kernel_area();
  if (kind == VisionOpKind::linear) return c_out * c_in;
  return 0;
}

std::int64_t VisionOp::parameters() const {
  switch (kind) {
    case VisionOpKind::conv:
    case VisionOpKind::linear: return matmul_weights() + (bias ? c_out : 0);
    case VisionOpKind::norm: return (norm == VisionNorm::rms ? 1 : 2) * c_out;  // scale (and shift; BN's running
                                                                                  // mean/var are buffers)
    default: return extra_params;
  }
}

std::int64_t VisionOp::macs() const {
  switch (kind) {
    case VisionOpKind::conv: return (transposed ? h_in * w_in : h_out * w_out) * matmul_weights();
    case VisionOpKind::linear: return h_out * w_out * matmul_weights();
    case VisionOpKind::matmul: return h_out * w_out * c_in * c_out;
    case VisionOpKind::attention: {
      // QKᵀ: tokens · kv tokens · hidden; PV: the same (hidden = heads · head_dim = c_out).
      const std::int64_t t = h_in * w_in;
      const std::int64_t s = kv_tokens > 0 ? kv_tokens : t;
      return 2 * t * s * c_out;
    }
    default: return 0;
  }
}

std::int64_t VisionGraph::parameters() const {
  std::int64_t p = 0;
  for (const auto& op : ops) p += op.parameters();
  return p;
}

std::int64_t VisionGraph::macs() const {
  std::int64_t m = 0;
  for (const auto& op : ops) m += op.macs();
  return m;
}

std::int64_t VisionGraph::count(VisionOpKind k) const {
  std::int64_t n = 0;
  for (const auto& op : ops) n += op.kind == k ? 1 : 0;
  return n;
}

std::int64_t make_divisible(double v, std::int64_t divisor) {
  const double d = static_cast<double>(divisor);
  auto nv = static_cast<std::int64_t>(std::floor((v + d / 2.0) / d)) * divisor;
  if (nv < divisor) nv = divisor;
  if (static_cast<double>(nv) < 0.9 * v) nv += divisor;
  return nv;
}

namespace {

using detail::Builder;
using detail::out_size;

std::string idx(const std::string& prefix, std::size_t i) { return prefix + "." + std::to_string(i); }

/// torchvision ResNet (v1.5: the stride sits on the 3×3 conv of the bottleneck; He et al. 2016 Table 1).
void build_resnet(const VisionArch& a, Builder& b) {
  b.conv("conv1", a.stem_width, 7, 2, 1, false);
  b.norm("bn1", VisionNorm::batch);
  b.act("relu", VisionAct::relu);
  b.pool("maxpool", VisionPool::max, 3, 2);
  std::int64_t inplanes = a.stem_width;
  const std::int64_t exp = a.bottleneck ? a.expansion : 1;
  for (std::size_t s = 0; s < a.depths.size(); ++s) {
    const std::int64_t w = a.widths[s];
    for (std::int64_t j = 0; j < a.depths[s]; ++j) {
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(j);
      const std::int64_t stride = (j == 0 && s > 0) ? 2 : 1;
      const std::int64_t in_c = b.c(), in_h = b.h();
      const std::int64_t block_in = b.last();  // the op whose output enters the block
      if (a.bottleneck) {
        b.conv(p + ".conv1", w, 1, 1, 1, false);
        b.norm(p + ".bn1", VisionNorm::batch);
        b.act(p + ".relu1", VisionAct::relu);
        b.conv(p + ".conv2", w, 3, stride, 1, false);
        b.norm(p + ".bn2", VisionNorm::batch);
        b.act(p + ".relu2", VisionAct::relu);
        b.conv(p + ".conv3", w * exp, 1, 1, 1, false);
        b.norm(p + ".bn3", VisionNorm::batch);
      } else {
        b.conv(p + ".conv1", w, 3, stride, 1, false);
        b.norm(p + ".bn1", VisionNorm::batch);
        b.act(p + ".relu1", VisionAct::relu);
        b.conv(p + ".conv2", w, 3, 1, 1, false);
        b.norm(p + ".bn2", VisionNorm::batch);
      }
      std::int64_t skip = block_in;
      if (stride != 1 || inplanes != w * exp) {
        // The projection shortcut reads the block's input.
        const std::int64_t out_c = b.c(), out_h = b.h();
        b.reshape(in_c, in_h, in_h);
        b.conv(p + ".downsample.0", w * exp, 1, stride, 1, false);
        b.norm(p + ".downsample.1", VisionNorm::batch);
        skip = b.last();
        b.reshape(out_c, out_h, out_h);
      }
      b.add(p + ".add", skip);
      b.act(p + ".relu", VisionAct::relu);
      inplanes = w * exp;
    }
  }
  b.pool("avgpool", VisionPool::global_avg);
  b.linear("fc", a.classes, true);
}

/// torchvision EfficientNet (B0 stages of Tan & Le 2019 Table 1; widths × width_mult rounded by make_divisible,
/// repeats ⌈n × depth_mult⌉; MBConv with squeeze-excitation to max(1, in/4) channels; head 4× the last width).
void build_efficientnet(const VisionArch& a, Builder& b) {
  auto ch = [&](std::int64_t c) { return make_divisible(static_cast<double>(c) * a.width_mult, a.divisor); };
  b.conv("features.0.conv", ch(a.stem_channels), 3, 2, 1, false);
  b.norm("features.0.bn", VisionNorm::batch);
  b.act("features.0.silu", VisionAct::silu);
  for (std::size_t s = 0; s < a.stages.size(); ++s) {
    const auto& st = a.stages[s];
    const auto repeats = static_cast<std::int64_t>(std::ceil(static_cast<double>(st.repeats) * a.depth_mult));
    const std::int64_t out = ch(st.out);
    for (std::int64_t j = 0; j < repeats; ++j) {
      const std::string p = "features." + std::to_string(s + 1) + "." + std::to_string(j);
      const std::int64_t in = b.c();
      const std::int64_t stride = j == 0 ? st.stride : 1;
      const std::int64_t block_in = b.last();
      const std::int64_t expanded = make_divisible(static_cast<double>(in * st.expand), a.divisor);
      if (expanded != in) {
        b.conv(p + ".expand", expanded, 1, 1, 1, false);
        b.norm(p + ".expand.bn", VisionNorm::batch);
        b.act(p + ".expand.silu", VisionAct::silu);
      }
      b.conv(p + ".dwconv", expanded, st.kernel, stride, expanded, false);
      b.norm(p + ".dwconv.bn", VisionNorm::batch);
      b.act(p + ".dwconv.silu", VisionAct::silu);
      // Squeeze-excitation: pool to C×1×1, two 1×1 convs with biases, sigmoid, scale the map.
      const std::int64_t squeeze = std::max<std::int64_t>(1, in / a.se_divisor);
      const std::int64_t map_c = b.c(), map_h = b.h();
      b.pool(p + ".se.avgpool", VisionPool::global_avg);
      b.conv(p + ".se.fc1", squeeze, 1, 1, 1, true);
      b.act(p + ".se.silu", VisionAct::silu);
      b.conv(p + ".se.fc2", expanded, 1, 1, 1, true);
      b.act(p + ".se.sigmoid", VisionAct::sigmoid);
      b.reshape(map_c, map_h, map_h);
      b.mul(p + ".se.scale");
      b.conv(p + ".project", out, 1, 1, 1, false);
      b.norm(p + ".project.bn", VisionNorm::batch);
      if (stride == 1 && in == out) b.add(p + ".add", block_in);
    }
  }
  const std::int64_t head = a.head_multiplier * b.c();
  const std::string last = "features." + std::to_string(a.stages.size() + 1);
  b.conv(last + ".conv", head, 1, 1, 1, false);
  b.norm(last + ".bn", VisionNorm::batch);
  b.act(last + ".silu", VisionAct::silu);
  b.pool("avgpool", VisionPool::global_avg);
  b.linear("classifier.1", a.classes, true);
}

/// torchvision ConvNeXt (Liu et al. 2022): a 4×4 stride-4 patchify stem with LayerNorm, blocks of depthwise 7×7 conv,
/// LayerNorm, linear C→4C, GELU, linear 4C→C, layer scale, residual; LayerNorm + 2×2 stride-2 conv between stages.
void build_convnext(const VisionArch& a, Builder& b) {
  b.conv("features.0.conv", a.widths[0], a.patch, a.patch, 1, true, 0);
  b.norm("features.0.norm", VisionNorm::layer);
  for (std::size_t s = 0; s < a.depths.size(); ++s) {
    const std::int64_t c = a.widths[s];
    for (std::int64_t j = 0; j < a.depths[s]; ++j) {
      const std::string p = idx("stage" + std::to_string(s + 1), static_cast<std::size_t>(j));
      const std::int64_t block_in = b.last();
      b.conv(p + ".dwconv", c, a.kernel, 1, c, true);
      b.norm(p + ".norm", VisionNorm::layer);
      b.linear(p + ".pwconv1", a.mlp_ratio * c, true);
      b.act(p + ".gelu", VisionAct::gelu);
      b.linear(p + ".pwconv2", c, true);
      b.mul(p + ".layer_scale", c);
      b.add(p + ".add", block_in);
    }
    if (s + 1 < a.depths.size()) {
      const std::string p = "downsample" + std::to_string(s + 1);
      b.norm(p + ".norm", VisionNorm::layer);
      b.conv(p + ".conv", a.widths[s + 1], 2, 2, 1, true, 0);
    }
  }
  b.pool("avgpool", VisionPool::global_avg);
  b.norm("classifier.0", VisionNorm::layer);
  b.linear("classifier.2", a.classes, true);
}

/// torchvision VisionTransformer (Dosovitskiy et al. 2021): a patch-size stride conv, a class token and learned
/// positions, pre-norm encoder blocks (LayerNorm, multi-head self-attention with a fused QKV projection and biases,
/// LayerNorm, GELU MLP), a final LayerNorm and a linear head on the class token. `a.vit` switches parts off or on for
/// the encoders of multimodal models (SigLIP, CLIP, Llama 4, Qwen2.5-VL) and replaces the head by their tail: merge,
/// norm, projector (VitOptions).
void build_vit(const VisionArch& a, Builder& b) {
  const VitOptions& o = a.vit;
  const VisionNorm nk = o.rms_norm ? VisionNorm::rms : VisionNorm::layer;
  b.conv("conv_proj", a.hidden, a.patch, a.patch, 1, o.patch_bias, 0);
  const std::int64_t side = b.h();
  const std::int64_t patches = side * side;
  const std::int64_t tokens = patches + (o.class_token ? 1 : 0);
  b.reshape(a.hidden, tokens, 1);
  if (o.class_token || o.positions)
    b.embedding("encoder.pos_embedding", tokens,
                (o.class_token ? a.hidden : 0) + (o.positions ? tokens * a.hidden : 0));
  if (o.pre_norm) b.norm("encoder.pre_norm", nk);
  for (std::int64_t l = 0; l < a.layers; ++l) {
    const std::string p = "encoder.layers." + std::to_string(l);
    const std::int64_t block_in = b.last();
    b.norm(p + ".ln_1", nk);
    b.linear(p + ".self_attention.in_proj", 3 * a.hidden, true);
    const bool windowed = o.window > 0 && o.window < tokens &&
                          std::find(o.full_layers.begin(), o.full_layers.end(), l) == o.full_layers.end();
    b.attention(p + ".self_attention", a.hidden, a.heads, windowed ? o.window : 0);
    b.linear(p + ".self_attention.out_proj", a.hidden, true);
    b.add(p + ".add_1", block_in);
    const std::int64_t mid = b.last();
    b.norm(p + ".ln_2", nk);
    if (o.gated_mlp) {
      b.linear(p + ".mlp.gate_up_proj", 2 * a.mlp, true);
      b.act(p + ".mlp.silu", VisionAct::silu);
      b.reshape(a.mlp, tokens, 1);  // silu(gate) · up
      b.linear(p + ".mlp.down_proj", a.hidden, true);
    } else {
      b.linear(p + ".mlp.0", a.mlp, true);
      b.act(p + ".mlp.gelu", VisionAct::gelu);
      b.linear(p + ".mlp.3", a.hidden, true);
    }
    b.add(p + ".add_2", mid);
  }
  if (o.final_norm) b.norm("encoder.ln", nk);
  if (o.classifier) {
    b.reshape(a.hidden, 1, 1);  // the class token
    b.linear("heads.head", a.classes, true);
    return;
  }
  // The multimodal tail: the patches (the class token dropped), merged, normalised and projected.
  b.reshape(a.hidden, patches, 1);
  if (o.merge_norm) b.norm("merger.norm", o.merge_norm_rms ? VisionNorm::rms : VisionNorm::layer);
  if (o.merge > 1) {
    if (o.merge_pool) {
      const auto k = static_cast<std::int64_t>(std::llround(std::sqrt(static_cast<double>(o.merge))));
      b.reshape(a.hidden, side, side);
      b.pool("merger.avg_pool", VisionPool::avg, k, k);
      b.reshape(a.hidden, b.h() * b.h(), 1);
    } else {
      b.reshape(a.hidden * o.merge, patches / o.merge, 1);  // concatenate the channels of `merge` neighbours
    }
  }
  for (std::size_t i = 0; i < o.projector.size(); ++i) {
    if (i > 0) b.act("projector.gelu." + std::to_string(i), VisionAct::gelu);
    b.linear("projector." + std::to_string(i), o.projector[i], o.projector_bias);
  }
}

/// Ultralytics YOLOv8 detection (ultralytics/cfg/models/v8/yolov8.yaml; nn/modules/block.py C2f, SPPF;
/// nn/modules/head.py Detect): channels = make_divisible(min(c, max_channels) · width, 8), repeats = max(round(n ·
/// depth), 1); Conv = conv (no bias) + BN + SiLU; C2f = 1×1 conv to 2c, n bottlenecks (two 3×3 convs, residual in the
/// backbone) on one half, concat of the 2 + n halves, 1×1 conv; SPPF = 1×1 conv, three 5×5 max pools, concat, 1×1
/// conv; the Detect head per level (P3, P4, P5): a box branch (two 3×3 Convs to max(16, C_P3/4, 64), a 1×1 conv with
/// bias to 4 · 16 distribution bins) and a class branch (two 3×3 Convs to max(C_P3, min(classes, 100)), a 1×1 conv
/// with bias to the classes), then the DFL's fixed 1×1 conv (16 → 1, no bias) over the 4 box sides of every anchor.
void build_yolov8(const VisionArch& a, Builder& b) {
  auto ch = [&](std::int64_t c) {
    return make_divisible(static_cast<double>(std::min(c, a.max_channels)) * a.width_mult, 8);
  };
  auto rep = [&](std::int64_t n) {
    return n > 1 ? std::max<std::int64_t>(1, std::llround(static_cast<double>(n) * a.depth_mult)) : n;
  };
  auto conv = [&](const std::string& name, std::int64_t out, std::int64_t k, std::int64_t s) {
    b.conv(name + ".conv", out, k, s, 1, false);
    b.norm(name + ".bn", VisionNorm::batch);
    b.act(name + ".act", VisionAct::silu);
  };
  auto c2f = [&](const std::string& name, std::int64_t out, std::int64_t n, bool shortcut) {
    const std::int64_t c = out / 2, h = b.h();
    conv(name + ".cv1", 2 * c, 1, 1);
    b.reshape(c, h, h);  // chunk(2): the bottlenecks take the second half
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t in = b.last();
      conv(name + ".m." + std::to_string(j) + ".cv1", c, 3, 1);
      conv(name + ".m." + std::to_string(j) + ".cv2", c, 3, 1);
      if (shortcut) b.add(name + ".m." + std::to_string(j) + ".add", in);
    }
    b.concat(name + ".cat", (2 + n) * c);
    conv(name + ".cv2", out, 1, 1);
  };
  struct Map {
    std::int64_t c, h;
  };
  auto at = [&](Map m) { b.reshape(m.c, m.h, m.h); };
  conv("model.0", ch(64), 3, 2);
  conv("model.1", ch(128), 3, 2);
  c2f("model.2", ch(128), rep(3), true);
  conv("model.3", ch(256), 3, 2);
  c2f("model.4", ch(256), rep(6), true);
  const Map p3{b.c(), b.h()};
  conv("model.5", ch(512), 3, 2);
  c2f("model.6", ch(512), rep(6), true);
  const Map p4{b.c(), b.h()};
  conv("model.7", ch(1024), 3, 2);
  c2f("model.8", ch(1024), rep(3), true);
  {  // SPPF
    const std::int64_t c = b.c() / 2;
    conv("model.9.cv1", c, 1, 1);
    for (int j = 0; j < 3; ++j) b.pool("model.9.m." + std::to_string(j), VisionPool::max, 5, 1);
    b.concat("model.9.cat", 4 * c);
    conv("model.9.cv2", ch(1024), 1, 1);
  }
  const Map p5{b.c(), b.h()};
  b.resize("model.10", 2);
  b.concat("model.11", ch(1024) + p4.c);
  c2f("model.12", ch(512), rep(3), false);
  const Map h12{b.c(), b.h()};
  b.resize("model.13", 2);
  b.concat("model.14", ch(512) + p3.c);
  c2f("model.15", ch(256), rep(3), false);
  const Map o3{b.c(), b.h()};
  conv("model.16", ch(256), 3, 2);
  b.concat("model.17", ch(256) + h12.c);
  c2f("model.18", ch(512), rep(3), false);
  const Map o4{b.c(), b.h()};
  conv("model.19", ch(512), 3, 2);
  b.concat("model.20", ch(512) + p5.c);
  c2f("model.21", ch(1024), rep(3), false);
  const Map o5{b.c(), b.h()};
  constexpr std::int64_t reg_max = 16;
  const std::int64_t c2 = std::max({std::int64_t{16}, o3.c / 4, reg_max * 4});
  const std::int64_t c3 = std::max(o3.c, std::min<std::int64_t>(a.classes, 100));
  std::int64_t anchors = 0;
  const Map levels[] = {o3, o4, o5};
  for (std::size_t i = 0; i < 3; ++i) {
    const std::string p = "model.22.";
    const Map m = levels[i];
    anchors += m.h * m.h;
    at(m);
    conv(idx(p + "cv2", i) + ".0", c2, 3, 1);
    conv(idx(p + "cv2", i) + ".1", c2, 3, 1);
    b.conv(idx(p + "cv2", i) + ".2", 4 * reg_max, 1, 1, 1, true);
    at(m);
    conv(idx(p + "cv3", i) + ".0", c3, 3, 1);
    conv(idx(p + "cv3", i) + ".1", c3, 3, 1);
    b.conv(idx(p + "cv3", i) + ".2", a.classes, 1, 1, 1, true);
  }
  // Decoding: the box bins of every anchor, softmax over the 16 bins, the DFL's 1×1 conv (its fixed weights are
  // parameters, as model.parameters() counts them); class scores through a sigmoid.
  b.reshape(4 * reg_max + a.classes, anchors, 1);
  b.concat("model.22.cat", 4 * reg_max + a.classes);
  b.reshape(reg_max, 4 * anchors, 1);
  b.act("model.22.dfl.softmax", VisionAct::sigmoid);
  b.conv("model.22.dfl.conv", 1, 1, 1, 1, false);
  b.reshape(a.classes, anchors, 1);
  b.act("model.22.sigmoid", VisionAct::sigmoid);
}

/// The DETR detection head (Carion et al. 2020; facebookresearch/detr models/detr.py, transformer.py) on a backbone's
/// feature map of `in_channels` × (resolution / patch)²: a 1×1 input projection to `hidden`, `depths[0]` post-norm
/// encoder layers over the map's tokens (the sine position embedding added to queries and keys), `depths[1]` decoder
/// layers over `queries` learned object queries (self-attention, cross-attention to the encoder's tokens, FFN), the
/// decoder's final layer norm, a class head (classes + 1 for "no object") and a 3-layer box MLP. In nn.
/// MultiheadAttention the Q, K, V projections are one in_proj weight (3·hidden²); the cross-attention projects the
/// queries and the encoder tokens (K and V) separately — the same parameters.
void build_detr(const VisionArch& a, Builder& b) {
  const std::int64_t side = a.resolution / a.patch, tokens = side * side, d = a.hidden;
  b.reshape(a.in_channels, side, side);
  b.conv("input_proj", d, 1, 1, 1, true);
  b.reshape(d, tokens, 1);
  auto ffn = [&](const std::string& p) {
    b.linear(p + ".linear1", a.mlp, true);
    b.act(p + ".activation", VisionAct::relu);
    b.linear(p + ".linear2", d, true);
  };
  for (std::int64_t l = 0; l < a.depths[0]; ++l) {
    const std::string p = idx("transformer.encoder.layers", static_cast<std::size_t>(l));
    const std::int64_t in = b.last();
    b.add(p + ".pos", -1);  // q = k = src + pos
    b.linear(p + ".self_attn.in_proj", 3 * d, true);
    b.attention(p + ".self_attn", d, a.heads);
    b.linear(p + ".self_attn.out_proj", d, true);
    b.add(p + ".add1", in);
    b.norm(p + ".norm1", VisionNorm::layer);
    const std::int64_t mid = b.last();
    ffn(p);
    b.add(p + ".add2", mid);
    b.norm(p + ".norm2", VisionNorm::layer);
  }
  const std::int64_t memory = b.last();
  b.reshape(d, a.queries, 1);
  b.embedding("query_embed", a.queries, a.queries * d);
  for (std::int64_t l = 0; l < a.depths[1]; ++l) {
    const std::string p = idx("transformer.decoder.layers", static_cast<std::size_t>(l));
    const std::int64_t in = b.last();
    b.add(p + ".query_pos", -1);
    b.linear(p + ".self_attn.in_proj", 3 * d, true);
    b.attention(p + ".self_attn", d, a.heads);
    b.linear(p + ".self_attn.out_proj", d, true);
    b.add(p + ".add1", in);
    b.norm(p + ".norm1", VisionNorm::layer);
    const std::int64_t q_in = b.last();
    b.add(p + ".query_pos2", -1);
    b.linear(p + ".multihead_attn.q_proj", d, true);
    b.reshape(d, tokens, 1);  // keys (memory + pos) and values (memory) of the encoder's tokens
    b.add(p + ".pos", memory);
    b.linear(p + ".multihead_attn.kv_proj", 2 * d, true);
    b.reshape(d, a.queries, 1);
    b.attention(p + ".multihead_attn", d, a.heads, tokens);
    b.linear(p + ".multihead_attn.out_proj", d, true);
    b.add(p + ".add2", q_in);
    b.norm(p + ".norm2", VisionNorm::layer);
    const std::int64_t mid = b.last();
    ffn(p);
    b.add(p + ".add3", mid);
    b.norm(p + ".norm3", VisionNorm::layer);
  }
  b.norm("transformer.decoder.norm", VisionNorm::layer);
  b.linear("class_embed", a.classes + 1, true);
  b.reshape(d, a.queries, 1);
  b.linear("bbox_embed.layers.0", d, true);
  b.act("bbox_embed.relu0", VisionAct::relu);
  b.linear("bbox_embed.layers.1", d, true);
  b.act("bbox_embed.relu1", VisionAct::relu);
  b.linear("bbox_embed.layers.2", 4, true);
  b.act("bbox_embed.sigmoid", VisionAct::sigmoid);
}

}  // namespace

std::string vision_input_problem(const VisionArch& a, std::int64_t resolution) {
  if (resolution < 1) return "the input size must be at least 1 px";
  if (a.family == VisionFamily::onnx)
    return "an imported ONNX graph has the input size it was exported with; export it again at " +
           std::to_string(resolution) + " px";
  if (a.family == VisionFamily::vit && a.patch > 0 && resolution % a.patch != 0)
    return "a ViT takes a multiple of its patch size (" + std::to_string(a.patch) + " px), not " +
           std::to_string(resolution) + " px";
  if (a.family == VisionFamily::fpn && !a.widths.empty()) {
    const std::int64_t coarsest = std::int64_t{4} << (a.widths.size() - 1);
    if (resolution % coarsest != 0)
      return "an FPN head on " + std::to_string(a.widths.size()) + " maps takes a multiple of the coarsest stride (" +
             std::to_string(coarsest) + " px), not " + std::to_string(resolution) + " px";
  }
  const VisionGraph g = build_vision_graph(a, resolution);
  if (a.family == VisionFamily::unet)
    for (const auto& op : g.ops)
      if (op.kind == VisionOpKind::pool && (op.h_in % 2 != 0 || op.h_in < 2))
        return "at " + std::to_string(resolution) + " px U-Net's '" + op.name + "' pools a " + std::to_string(op.h_in) +
               " px map: every pooled map must be even (572 px is the paper's size)";
  for (const auto& op : g.ops)
    if (op.h_out < 1 || op.w_out < 1 || op.c_out < 1)
      return "at " + std::to_string(resolution) + " px the feature map vanishes at '" + op.name + "' (" +
             std::to_string(op.h_out) + "×" + std::to_string(op.w_out) + "): the input is too small for this network";
  return "";
}

VisionGraph build_vision_graph(const VisionArch& a, std::int64_t resolution) {
  VisionGraph g;
  g.id = a.id;
  g.family = a.family;
  g.resolution = resolution > 0 ? resolution : a.resolution;
  Builder b(g, a.in_channels, g.resolution, g.resolution);
  switch (a.family) {
    case VisionFamily::resnet: build_resnet(a, b); break;
    case VisionFamily::efficientnet: build_efficientnet(a, b); break;
    case VisionFamily::convnext: build_convnext(a, b); break;
    case VisionFamily::vit: build_vit(a, b); break;
    case VisionFamily::yolov8: build_yolov8(a, b); break;
    case VisionFamily::detr: build_detr(a, b); break;
    case VisionFamily::unet: detail::build_unet(a, b); break;
    case VisionFamily::fpn: detail::build_fpn_segmentation(a, b); break;
    case VisionFamily::onnx: break;  // an imported op list is read, not built (wl_io::import_onnx_vision)
  }
  return g;
}

}  // namespace gpuplan::wl
