#!/usr/bin/env python3
"""Measure LLM serving latency on one GPU: prefill time and decode-step time of a Llama-3-8B-shaped decoder.

Ground truth for gpuplan's serving (inference latency) model. Self-contained (PyTorch only), inference only
(torch.inference_mode), everything bf16, random weights (normal, std 0.02; norm weights 1), random tokens.

Model (Llama-3-8B shapes by default): hidden 4096, 32 layers, 32 query heads, 8 KV heads, head_dim 128,
intermediate 14336, vocab 128256, RMSNorm (F.rms_norm, eps 1e-5), RoPE (theta 5e5, rotate-half, applied to q and k
in one pass), SwiGLU MLP, untied LM head, no biases. As in serving engines (vLLM), Q/K/V are one fused
[6144, 4096] GEMM and gate/up one fused [28672, 4096] GEMM (same bytes and FLOPs as separate GEMMs, fewer launches).
Everything else is plain PyTorch ops (no custom fused kernels): the kernel count per step is recorded.

KV cache: one preallocated contiguous bf16 buffer, filled once with N(0,1) random values (never zeros); per point
K and V are views [layers, batch, kv_heads, max_ctx, head_dim] into it (max_ctx = context + 64).
KV bytes = 2 * layers * kv_heads * head_dim * 2 B = 128 KiB per token per sequence.

Prefill: one forward pass of `batch` prompts of `prompt` tokens: causal attention through
F.scaled_dot_product_attention(is_causal=True, enable_gqa=True) with only the flash backend enabled (on the fresh
K/V, as engines do for a prompt), K/V (after RoPE) written into the KV cache, LM head on the last token of each
sequence only, greedy argmax. prefill_time_s = median of --prefill-reps CUDA-graph replays of the pass (launch
overhead removed); prefill_time_eager_s = median of eager passes.

Decode step: one new token for each of `batch` sequences that each already hold `context` tokens: embedding,
32 layers (Q/K/V of the one token, RoPE at position `context`, K/V appended into the cache at slot `context`,
attention of the 1 query against the context+1 cached keys, MLP), final norm, LM head, argmax. The attention call
is chosen by a probe (recorded as decode_attention_impl): "sdpa_gqa" = SDPA(q[b,32,1,d], K[b,8,ctx+1,d],
enable_gqa=True) if the flash backend accepts it, else "grouped" = SDPA(q viewed as [b,8,4,d], K[b,8,ctx+1,d])
(a plain non-GQA call that flash takes), else the efficient backend. The step is captured in a CUDA graph
(torch.cuda.CUDAGraph, static buffers, one graph per (batch, context)) and timed by replays:
decode_step_time_s = median of --replays replays after warm-up. The same step run eagerly gives
decode_step_time_eager_s (CPU launch overhead included).

Timing: CUDA events around each replay/pass, the device synchronised after each (a serving loop reads the tokens
back every step); *_host_wall_s = host clock around the call and the synchronisation. nvidia-smi is sampled every
0.5 s during each timed graph sample. The profiler runs only after all timing (one eager pass per point: kernel
names, counts and device time, the attention kernels among them).

Checks (recorded): the decode attention call equals a float32 reference; per point the graph replay's logits equal
the eager pass's logits on the same inputs; decode vs prefill at the same position, in float32 (exact logic check,
with a RoPE-off-by-one negative control) and in bf16 (see check_prefill_vs_decode).

Spread: a sample whose (max - min) / median > --max-spread (default 10 %) is refused and timed again once after
3 s idle (--retries, --retry-pause-s; the refused attempt's times are kept as *_rejected_attempts_times_s); if the
retry is refused too, the point gets status "rejected_spread" (headline numbers withheld, raw times kept; eager
samples get their own eager_status). Python's garbage collector is off inside timed loops. Points whose weights + KV
cache exceed --mem-budget-gb are not run (status "skipped_memory").

Examples:
  python3 serve_step.py                                   # full grid, $OUT/serve_llama3_8b.json
  python3 serve_step.py --smoke                           # four decode and two prefill points
  python3 serve_step.py --decode-batches 1,8 --decode-contexts 1024 --prefill 1x512 --mem-budget-gb 125
"""
import argparse
import gc
import math
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

EPS = 1e-5
ATTN_KEYS = ("flash", "fmha", "attention", "cudnn", "sdpa", "attn", "softmax")
GEMM_KEYS = ("gemm", "xmma", "cutlass", "sm90", "nvjet", "cublas", "matmul")


# ----------------------------------------------------------------------------------------------------------------- model
class Model:
    """Weights as plain bf16 tensors; forward() serves both prefill (S tokens from position 0) and decode (1 token).
    forward(..., ref32=True) runs the same code in float32 (weights cast layer by layer, SDPA math backend): the
    reference for the correctness checks."""

    def __init__(self, a, device):
        self.a = a
        self.H, self.L, self.NH, self.KVH = a.hidden, a.layers, a.heads, a.kv_heads
        self.D = a.hidden // a.heads
        self.G = a.heads // a.kv_heads
        self.I, self.V = a.intermediate, a.vocab
        dt = torch.bfloat16

        def rnd(*shape):
            t = torch.empty(*shape, device=device, dtype=dt)
            t.normal_(0.0, 0.02)
            return t

        qkv_out = (self.NH + 2 * self.KVH) * self.D
        self.embed = rnd(self.V, self.H)
        self.lm_head = rnd(self.V, self.H)
        self.final_norm = torch.ones(self.H, device=device, dtype=dt)
        self.layers = []
        for _ in range(self.L):
            self.layers.append({
                "attn_norm": torch.ones(self.H, device=device, dtype=dt),
                "wqkv": rnd(qkv_out, self.H),
                "wo": rnd(self.H, self.NH * self.D),
                "mlp_norm": torch.ones(self.H, device=device, dtype=dt),
                "wgu": rnd(2 * self.I, self.H),
                "wdown": rnd(self.H, self.I),
            })
        # RoPE (rotate-half form): x*cos + rotate_half(x)*sin = x*cos + swap_halves(x)*sin_signed
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, self.D, 2, device=device, dtype=torch.float32) / self.D))
        t = torch.arange(a.max_positions, device=device, dtype=torch.float32)
        f = torch.outer(t, inv)
        self.cos32 = torch.cat((f.cos(), f.cos()), dim=-1)
        self.sin32 = torch.cat((-f.sin(), f.sin()), dim=-1)
        self.cos, self.sin = self.cos32.to(dt), self.sin32.to(dt)
        self.decode_attn = "sdpa_gqa"

    def params(self):
        per_layer = sum(t.numel() for t in self.layers[0].values())
        total = self.embed.numel() + self.lm_head.numel() + self.final_norm.numel() + self.L * per_layer
        analytic = (2 * self.V * self.H + self.H + self.L * (
            2 * self.H + self.H * self.NH * self.D * 2 + 2 * self.H * self.KVH * self.D + 3 * self.H * self.I))
        assert total == analytic, (total, analytic)
        return {"params_total": total, "params_input_embedding": self.embed.numel(),
                "params_lm_head": self.lm_head.numel(), "params_per_layer": per_layer,
                "weights_bytes": 2 * total, "weights_bytes_non_embedding": 2 * (total - self.embed.numel())}

    def rope_qk(self, qk, cos, sin):
        """qk [b, s, NH+KVH, D] (a view of the fused QKV output); cos/sin [s, 1, D]. One pass for q and k:
        flip the halves (one copy), then qk*cos + flipped*sin (mul + addcmul)."""
        b, s, n, d = qk.shape
        swapped = qk.view(b, s, n, 2, d // 2).flip(3).view(b, s, n, d)
        return torch.addcmul(qk * cos, swapped, sin)

    def attention_decode(self, q, k, v):
        """q [b, NH, 1, D]; k, v [b, KVH, n, D] (strided views of the cache) -> [b, NH, 1, D]."""
        if self.decode_attn == "sdpa_gqa":
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        b = q.shape[0]
        qg = q.reshape(b, self.KVH, self.G, self.D)  # query head h = kv * G + g uses kv head kv (= h // G)
        return F.scaled_dot_product_attention(qg, k, v).reshape(b, self.NH, 1, self.D)

    def layer(self, x, w, cos, sin, kc, vc, start, prefill, cast):
        b, s, _ = x.shape
        nq, nkv = self.NH * self.D, self.KVH * self.D
        h = F.rms_norm(x, (self.H,), cast(w["attn_norm"]), EPS)
        qkv = F.linear(h, cast(w["wqkv"]))
        qk = self.rope_qk(qkv[..., :nq + nkv].view(b, s, self.NH + self.KVH, self.D), cos, sin)
        q = qk[:, :, :self.NH].transpose(1, 2)                       # [b, NH, s, D]
        k = qk[:, :, self.NH:].transpose(1, 2)                       # [b, KVH, s, D]
        v = qkv[..., nq + nkv:].view(b, s, self.KVH, self.D).transpose(1, 2)
        kc[:, :, start:start + s].copy_(k)
        vc[:, :, start:start + s].copy_(v)
        if prefill:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            o = self.attention_decode(q, kc[:, :, :start + s], vc[:, :, :start + s])
        x = x + F.linear(o.transpose(1, 2).reshape(b, s, nq), cast(w["wo"]))
        h = F.rms_norm(x, (self.H,), cast(w["mlp_norm"]), EPS)
        g, u = F.linear(h, cast(w["wgu"])).split(self.I, dim=-1)
        return x + F.linear(F.silu(g) * u, cast(w["wdown"]))

    def forward(self, tokens, kc, vc, start, prefill, ref32=False, rope_shift=0):
        """tokens [b, s] at positions start..start+s-1; kc/vc [L, b, KVH, max_ctx, D]. Returns (logits of the last
        token [b, V], argmax [b]). ref32: float32 reference (kc/vc must be float32); rope_shift: negative control."""
        s = tokens.shape[1]
        assert prefill or s == 1
        cast = (lambda t: t.float()) if ref32 else (lambda t: t)
        cos_t, sin_t = (self.cos32, self.sin32) if ref32 else (self.cos, self.sin)
        p0 = start + rope_shift
        cos, sin = cos_t[p0:p0 + s].unsqueeze(1), sin_t[p0:p0 + s].unsqueeze(1)   # [s, 1, D]
        x = F.embedding(tokens, self.embed)
        x = cast(x)
        for i, w in enumerate(self.layers):
            x = self.layer(x, w, cos, sin, kc[i], vc[i], start, prefill, cast)
        logits = F.linear(F.rms_norm(x[:, -1, :], (self.H,), cast(self.final_norm), EPS), cast(self.lm_head))
        return logits, torch.argmax(logits, dim=-1)


class KVPool:
    """One flat random bf16 buffer; per configuration K and V are views [L, b, KVH, max_ctx, D] into it."""

    def __init__(self, m, max_elems, device):
        self.m = m
        self.buf = torch.empty(max_elems, device=device, dtype=torch.bfloat16)
        self.buf.normal_(0.0, 1.0)

    def views(self, b, max_ctx):
        n = self.m.L * b * self.m.KVH * max_ctx * self.m.D
        assert 2 * n <= self.buf.numel(), (2 * n, self.buf.numel())
        shape = (self.m.L, b, self.m.KVH, max_ctx, self.m.D)
        return self.buf[:n].view(shape), self.buf[n:2 * n].view(shape)


def kv_elems(m, b, max_ctx):
    return 2 * m.L * b * m.KVH * max_ctx * m.D


# ------------------------------------------------------------------------------------------------------------ helpers
def configure_sdpa(backends):
    b = torch.backends.cuda
    b.enable_flash_sdp("flash" in backends)
    b.enable_mem_efficient_sdp("efficient" in backends)
    b.enable_math_sdp("math" in backends)
    if hasattr(b, "enable_cudnn_sdp"):
        b.enable_cudnn_sdp("cudnn" in backends)
    return {"flash": b.flash_sdp_enabled(), "mem_efficient": b.mem_efficient_sdp_enabled(),
            "math": b.math_sdp_enabled(), "cudnn": b.cudnn_sdp_enabled() if hasattr(b, "cudnn_sdp_enabled") else None}


def kernels_of(fn):
    """Run fn once under torch.profiler (CUDA activity); return kernel statistics and the attention kernels."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        agg = {}
        try:  # every device-side event (kernel, memcpy, memset) with its own duration
            from torch.autograd import DeviceType
            for e in prof.events():
                if e.device_type != DeviceType.CPU:
                    n, us = agg.get(e.name, (0, 0.0))
                    agg[e.name] = (n + 1, us + float(e.time_range.elapsed_us()))
        except Exception:  # noqa: BLE001 - fall back to names and counts only
            agg = {e.key: (int(e.count), 0.0) for e in prof.key_averages()}
        rows = sorted(((k, n, us) for k, (n, us) in agg.items()), key=lambda r: -r[2])
        attn = [r for r in rows if any(k in r[0].lower() for k in ATTN_KEYS)]
        gemm = [r for r in rows if any(k in r[0].lower() for k in GEMM_KEYS) and r not in attn]
        return {
            "n_kernels": sum(r[1] for r in rows),
            "kernel_time_sum_s": sum(r[2] for r in rows) / 1e6,
            "attention_kernels": [{"name": r[0][:160], "count": r[1], "time_s": r[2] / 1e6} for r in attn][:8],
            "attention_time_s": sum(r[2] for r in attn) / 1e6,
            "gemm_time_s": sum(r[2] for r in gemm) / 1e6,
            "gemm_kernels": sorted({r[0][:100] for r in gemm})[:12],
            "top_kernels": [{"name": r[0][:100], "count": r[1], "time_s": r[2] / 1e6} for r in rows[:15]],
            # every kernel, by name: which ops a layer runs (the serving op list's kernel count is checked on it)
            "all_kernels": [{"name": r[0][:160], "count": r[1], "time_s": r[2] / 1e6} for r in rows],
        }
    except torch.OutOfMemoryError:
        raise
    except Exception as e:  # noqa: BLE001
        return {"error": f"profiler failed: {str(e)[:300]}"}


def backend_from_kernels(names):
    low = " ".join(names).lower()
    if not names:
        return None
    if "flash" in low:
        return "flash"
    if "cudnn" in low:
        return "cudnn"
    if "fmha" in low or "efficient" in low:
        return "efficient"
    return "unknown"


def time_device(fn, reps, warmup):
    """CUDA events around each call, device synchronised after each; returns (device times s, host wall times s)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    dev, wall = [], []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        fn()
        e.record()
        e.synchronize()
        wall.append(time.perf_counter() - t0)
        dev.append(s.elapsed_time(e) / 1e3)
    return dev, wall


def rel_err(a, b):
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def smi_sampler(a):
    return None if a.no_smi else common.SmiSampler(0, period_s=0.5)


def parse_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def parse_prefill(s):
    out = []
    for item in s.split(","):
        if item.strip():
            b, p = item.lower().split("x")
            out.append((int(b), int(p)))
    return out


# ------------------------------------------------------------------------------------------------------------- probes
def probe_decode_attention(m, device, log):
    """Pick the decode attention call: SDPA enable_gqa on flash, else the grouped view on flash, else efficient.
    Each candidate is checked against a float32 reference; the first good one wins (kernel names are read
    after all timing, in the profiling phase)."""
    b, ctx, maxc = 4, 1000, 1064
    kc = torch.randn(b, m.KVH, maxc, m.D, device=device, dtype=torch.bfloat16)
    vc = torch.randn_like(kc)
    q = torch.randn(b, 1, m.NH, m.D, device=device, dtype=torch.bfloat16).transpose(1, 2)  # decode layout
    k, v = kc[:, :, :ctx], vc[:, :, :ctx]
    kr = k.float().repeat_interleave(m.G, dim=1)
    vr = v.float().repeat_interleave(m.G, dim=1)
    ref = torch.softmax(q.float() @ kr.transpose(-1, -2) / math.sqrt(m.D), dim=-1) @ vr
    tried = []
    chosen = None
    for impl, backends in (("sdpa_gqa", ("flash",)), ("grouped", ("flash",)), ("grouped", ("efficient",)),
                           ("sdpa_gqa", ("efficient",))):
        configure_sdpa(backends)
        m.decode_attn = impl
        entry = {"impl": impl, "backends": list(backends)}
        try:
            o = m.attention_decode(q, k, v)
            torch.cuda.synchronize()
            entry["rel_err_vs_fp32"] = rel_err(o, ref)
            entry["ok"] = entry["rel_err_vs_fp32"] < 1e-2
        except Exception as e:  # noqa: BLE001
            entry["ok"] = False
            entry["error"] = str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]
        tried.append(entry)
        log(f"probe decode attention {impl} on {backends}: {entry.get('ok')} "
            f"{entry.get('rel_err_vs_fp32', entry.get('error'))}")
        if entry["ok"] and chosen is None:
            chosen = (impl, backends)
    if chosen is None:
        raise RuntimeError(f"no decode attention path works: {tried}")
    # micro-timing of both call forms where they work (one layer's attention, b=64, ctx=4096), for the record
    micro = {}
    try:
        b2, c2 = 64, 4096
        kc2 = torch.randn(b2, m.KVH, c2 + 64, m.D, device=device, dtype=torch.bfloat16)
        vc2 = torch.randn_like(kc2)
        q2 = torch.randn(b2, 1, m.NH, m.D, device=device, dtype=torch.bfloat16).transpose(1, 2)
        for e in tried:
            if e["ok"]:
                configure_sdpa(tuple(e["backends"]))
                m.decode_attn = e["impl"]
                dev, _ = time_device(lambda: m.attention_decode(q2, kc2[:, :, :c2 + 1], vc2[:, :, :c2 + 1]), 20, 3)
                byt = 2 * b2 * m.KVH * (c2 + 1) * m.D * 2
                micro[f"{e['impl']}/{'+'.join(e['backends'])}"] = {
                    "time_s": statistics.median(dev), "kv_bytes_read": byt,
                    "bytes_per_s": byt / statistics.median(dev)}
        del kc2, vc2, q2
    except Exception as e:  # noqa: BLE001
        micro["error"] = str(e)[:300]
    m.decode_attn = chosen[0]
    enabled = configure_sdpa(chosen[1])
    probe_inputs = (q, k, v)
    return {"candidates": tried, "chosen_impl": chosen[0], "chosen_backends": list(chosen[1]),
            "sdpa_backends_enabled_for_decode": enabled,
            "micro_timing_one_layer_b64_ctx4096": micro}, probe_inputs


# ---------------------------------------------------------------------------------------------------------------- main
def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default="serve_llama3_8b", help="JSON file name (without .json)")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--layers", type=int, default=32)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=14336)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--decode-batches", default="1,2,4,8,16,32,64,128,256")
    p.add_argument("--decode-contexts", default="1024,2048,4096,8192")
    p.add_argument("--prefill", default="1x128,1x512,1x1024,1x2048,1x4096,1x8192,2x2048,4x2048,8x1024,8x2048,16x1024",
                   help="comma-separated BATCHxPROMPT")
    p.add_argument("--decode-points", default=None,
                   help="BATCHxCONTEXT list: run these decode points instead of the batches x contexts grid")
    p.add_argument("--eager-decode", default="all", help="'all', 'none' or BATCHxCONTEXT list for eager timing")
    p.add_argument("--replays", type=int, default=40, help="timed graph replays per decode point (>= 20)")
    p.add_argument("--replay-warmup", type=int, default=10)
    p.add_argument("--eager-reps", type=int, default=20)
    p.add_argument("--prefill-reps", type=int, default=10)
    p.add_argument("--prefill-warmup", type=int, default=3)
    p.add_argument("--prefill-eager-reps", type=int, default=5)
    p.add_argument("--no-profile", action="store_true", help="skip the profiling phase after the timing")
    p.add_argument("--mem-budget-gb", type=float, default=70.0,
                   help="weights + KV cache must fit in this many GB (1e9 B), else skipped_memory")
    p.add_argument("--max-spread", type=float, default=0.10)
    p.add_argument("--retries", type=int, default=1, help="re-time a sample refused by the spread rule this often")
    p.add_argument("--retry-pause-s", type=float, default=3.0, help="idle time before such a retry")
    p.add_argument("--time-budget-s", type=float, default=400.0,
                   help="stop starting new points after this many seconds (status skipped_time); JSON is written "
                        "after every point anyway")
    p.add_argument("--smoke", action="store_true", help="decode b{1,64} x c{1024,4096}, prefill 1x512 and 4x2048")
    p.add_argument("--out-dir", default=None, help="folder for <name>.json (default $OUT, else .)")
    p.add_argument("--no-smi", action="store_true")
    a = p.parse_args()
    if a.smoke:
        a.decode_batches, a.decode_contexts, a.prefill, a.replays = "1,64", "1024,4096", "1x512,4x2048", 20
    a.batches, a.contexts, a.prefill_cfgs = parse_list(a.decode_batches), parse_list(a.decode_contexts), \
        parse_prefill(a.prefill)
    a.ctx_pad = 64
    a.max_positions = max(a.contexts + [p for _, p in a.prefill_cfgs]
                          + [c for _, c in parse_prefill(a.decode_points or "")] + [512]) + a.ctx_pad
    assert a.hidden % a.heads == 0 and a.heads % a.kv_heads == 0
    return a


def main():
    a = parse()
    t_start = time.perf_counter()
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(1234)

    def log(msg):
        print(f"[serve_step {time.perf_counter() - t_start:7.1f}s] {msg}", flush=True)

    rec = {
        "name": a.name, "kind": "serve_step", "status": "started",
        "model": {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "kv_heads": a.kv_heads,
                  "head_dim": a.hidden // a.heads, "intermediate": a.intermediate, "vocab": a.vocab,
                  "rope_theta": a.rope_theta, "norm": "RMSNorm eps 1e-5", "mlp": "SwiGLU", "lm_head": "untied",
                  "fused_gemms": "QKV [6144,4096] and gate_up [28672,4096] fused, as in vLLM",
                  "shape_of": "Llama-3-8B"},
        "precision": "bf16 weights, activations, KV cache and logits; inference_mode; random weights N(0, 0.02)",
        "config": {k: getattr(a, k) for k in ("batches", "contexts", "decode_points", "prefill_cfgs", "eager_decode",
                                              "replays",
                                              "replay_warmup", "eager_reps", "prefill_reps", "prefill_warmup", "prefill_eager_reps",
                                              "mem_budget_gb", "max_spread", "retries", "retry_pause_s", "ctx_pad",
                                              "smoke")},
        "timing": ("CUDA events around each pass/replay, device synchronised after each; decode: one CUDA graph per "
                   "(batch, context), median of replays after warm-up; eager decode and prefill: eager PyTorch, "
                   "median after warm-up"),
        "kv_bytes_per_token_per_sequence": 2 * a.layers * a.kv_heads * (a.hidden // a.heads) * 2,
    }
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    if not a.no_smi:
        rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    rec["decode_points"], rec["prefill_points"] = [], []

    def save():
        return common.write_json(rec, a.name, a.out_dir)

    run_sampler = None if a.no_smi else common.SmiSampler(0, period_s=2.0)
    if run_sampler:
        run_sampler.__enter__()
    try:
        with torch.inference_mode():
            body(a, rec, device, log, save, t_start)
        rec["status"] = "done"
    except Exception as e:  # noqa: BLE001 - record, then fail loudly
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-3000:]
        log(f"ERROR: {e}")
    finally:
        if run_sampler:
            run_sampler.__exit__(None, None, None)
            rec["nvidia_smi_during_run"] = run_sampler.summary()
        if not a.no_smi:
            rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
        rec["wall_s"] = time.perf_counter() - t_start
        rec["summary"] = summarize(rec)
        path = save()
        print_summary(rec)
        log(f"wrote {path}")
    return 0 if rec["status"] == "done" else 1


def body(a, rec, device, log, save, t_start):
    budget = a.mem_budget_gb * 1e9
    m = Model(a, device)
    torch.cuda.synchronize()
    rec.update(m.params())
    W = rec["weights_bytes"]
    per_tok = rec["kv_bytes_per_token_per_sequence"]
    log(f"weights: {rec['params_total']:,} params, {W / 1e9:.2f} GB; KV {per_tok} B/token/sequence")

    # ---- probes: prefill attention on flash with GQA, decode attention choice (no profiler before the timing)
    configure_sdpa(("flash",))
    try:
        q = torch.randn(1, m.NH, 256, m.D, device=device, dtype=torch.bfloat16)
        k = torch.randn(1, m.KVH, 256, m.D, device=device, dtype=torch.bfloat16)
        F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        torch.cuda.synchronize()
        rec["prefill_attention_probe"] = "flash accepts causal GQA (enable_gqa=True)"
    except Exception as e:  # noqa: BLE001
        rec["prefill_attention_probe"] = f"flash refused causal GQA: {str(e)[:300]}"
        raise
    rec["decode_attention_probe"], probe_inputs = probe_decode_attention(m, device, log)
    rec["decode_attention_impl"] = m.decode_attn
    dec_backends = tuple(rec["decode_attention_probe"]["chosen_backends"])

    def set_prefill_backends():
        configure_sdpa(("flash",))

    def set_decode_backends():
        configure_sdpa(dec_backends)

    # ---- correctness, before the big KV pool exists (the float32 reference needs room)
    rec["check_prefill_vs_decode"] = check_prefill_vs_decode(m, device, a, set_prefill_backends, set_decode_backends,
                                                             log)
    torch.cuda.empty_cache()
    save()

    # ---- which points fit; size the KV pool for the largest
    dec_cfgs = ([(b, c) for b, c in parse_prefill(a.decode_points)] if a.decode_points
                else [(b, c) for c in a.contexts for b in a.batches])
    fits = {(b, c): W + b * c * per_tok <= budget for b, c in dec_cfgs}
    pre_fits = {(b, p): W + b * p * per_tok <= budget for b, p in a.prefill_cfgs}
    max_elems = max([kv_elems(m, b, c + a.ctx_pad) for (b, c), ok in fits.items() if ok]
                    + [kv_elems(m, b, p + a.ctx_pad) for (b, p), ok in pre_fits.items() if ok] + [1])
    pool = KVPool(m, max_elems, device)
    torch.cuda.synchronize()
    rec["kv_pool_bytes"] = 2 * max_elems
    log(f"KV pool {2 * max_elems / 1e9:.2f} GB (random N(0,1)); allocated {torch.cuda.memory_allocated() / 1e9:.2f} GB")

    def timed(fn, reps, warmup, pt, prefix, sample_smi):
        """Time fn; write <prefix>_times_s, spread, host wall into pt; return (median, spread). A sample over the
        spread limit is retried (--retries times, after --retry-pause-s idle); the refused attempts are kept in
        <prefix>_rejected_attempts_times_s."""
        for attempt in range(a.retries + 1):
            smp = smi_sampler(a) if sample_smi else None
            if smp:
                smp.__enter__()
            gc.disable()
            try:
                dev, wall = time_device(fn, reps, warmup)
            finally:
                gc.enable()
                if smp:
                    smp.__exit__(None, None, None)
                    pt[f"nvidia_smi_during_{prefix}"] = smp.summary()
            med, tmin, tmax, spread = common.median_and_spread(dev)
            if spread <= a.max_spread or attempt == a.retries:
                break
            pt.setdefault(f"{prefix}_rejected_attempts_times_s", []).append([round(x, 7) for x in dev])
            time.sleep(a.retry_pause_s)
        pt[f"{prefix}_attempts"] = attempt + 1
        pt[f"{prefix}_times_s"] = [round(x, 7) for x in dev]
        pt[f"{prefix}_time_min_s"], pt[f"{prefix}_time_max_s"] = tmin, tmax
        pt[f"{prefix}_time_spread_frac"] = spread
        pt[f"{prefix}_host_wall_s"] = statistics.median(wall)
        return med, spread

    # ---- prefill grid: CUDA graph replays (headline) and eager passes
    set_prefill_backends()
    for b, P in a.prefill_cfgs:
        pt = {"batch": b, "prompt_tokens": P, "tokens": b * P, "kv_bytes": b * P * per_tok, "weights_bytes": W}
        rec["prefill_points"].append(pt)
        if not pre_fits[(b, P)]:
            pt["status"] = "skipped_memory"
            continue
        if time.perf_counter() - t_start > a.time_budget_s:
            pt["status"] = "skipped_time"
            continue
        try:
            torch.cuda.reset_peak_memory_stats()
            kc, vc = pool.views(b, P + a.ctx_pad)
            toks = torch.randint(0, m.V, (b, P), device=device)

            def run_prefill():
                return m.forward(toks, kc, vc, 0, True)

            eager_logits = run_prefill()[0].clone()
            g, outs = capture(run_prefill)
            g.replay()
            torch.cuda.synchronize()
            pt["graph_vs_eager_bitwise_equal"] = bool(torch.equal(outs[0], eager_logits))
            pt["graph_vs_eager_rel_err"] = rel_err(outs[0], eager_logits)
            med, spread = timed(g.replay, a.prefill_reps, a.prefill_warmup, pt, "prefill", True)
            del g, outs
            med_e, spr_e = timed(run_prefill, a.prefill_eager_reps, 2, pt, "prefill_eager", False)
            pt["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            # FLOPs: 2 * decoder-layer params * tokens + LM head on b tokens + causal attention
            # (QK^T and PV: 4 * s^2 * h per layer per sequence, halved for the causal mask)
            flops = 2 * m.L * rec["params_per_layer"] * b * P + 2 * m.H * m.V * b + 2 * m.L * b * P * P * m.H
            pt["model_flops"] = flops
            if pt["graph_vs_eager_rel_err"] > 1e-3:
                pt["status"] = "check_failed"
            elif spread > a.max_spread:
                pt["status"] = "rejected_spread"
                pt["note"] = f"refused: (max-min)/median = {spread:.3f} > {a.max_spread}; raw times kept"
            else:
                pt["status"] = "ok"
                pt["prefill_time_s"] = med
                pt["prefill_tokens_per_s"] = b * P / med
                pt["model_tflops_per_s"] = flops / med / 1e12
            pt["eager_status"] = "rejected_spread" if spr_e > a.max_spread else "ok"
            if pt["eager_status"] == "ok":
                pt["prefill_time_eager_s"] = med_e
            log(f"prefill b={b} P={P}: {pt['status']} graph {med * 1e3:.2f} ms (spread {spread * 100:.1f}%) "
                f"eager {med_e * 1e3:.2f} ms (spread {spr_e * 100:.1f}%) {flops / med / 1e12:.0f} TFLOP/s "
                f"graph==eager:{pt['graph_vs_eager_bitwise_equal']}")
            del eager_logits, toks
        except torch.OutOfMemoryError as e:
            pt["status"] = "oom"
            pt["error"] = str(e).splitlines()[0][:300]
            log(f"prefill b={b} P={P}: OOM")
        except Exception as e:  # noqa: BLE001
            pt["status"] = "error"
            pt["error"] = traceback.format_exc()[-1500:]
            log(f"prefill b={b} P={P}: ERROR {e}")
        torch.cuda.empty_cache()
        save()

    # ---- decode grid: CUDA graph replays (headline) and eager steps
    set_decode_backends()
    eager_set = None
    if a.eager_decode not in ("all", "none"):
        eager_set = set(parse_prefill(a.eager_decode))
    for b, c in dec_cfgs:
        kvb = b * c * per_tok
        pt = {"batch": b, "context_tokens": c, "max_ctx_tokens": c + a.ctx_pad, "kv_bytes": kvb,
              "kv_bytes_read_per_step": b * (c + 1) * per_tok, "weights_bytes": W,
              "decode_attention_impl": m.decode_attn}
        rec["decode_points"].append(pt)
        if not fits[(b, c)]:
            pt["status"] = "skipped_memory"
            pt["note"] = f"weights + KV = {(W + kvb) / 1e9:.1f} GB > budget {a.mem_budget_gb} GB"
            continue
        if time.perf_counter() - t_start > a.time_budget_s:
            pt["status"] = "skipped_time"
            continue
        try:
            torch.cuda.reset_peak_memory_stats()
            kc, vc = pool.views(b, c + a.ctx_pad)
            static_tok = torch.randint(0, m.V, (b, 1), device=device)

            def step():
                return m.forward(static_tok, kc, vc, c, False)

            eager_logits = step()[0].clone()
            g, outs = capture(step)
            g.replay()
            torch.cuda.synchronize()
            pt["graph_vs_eager_bitwise_equal"] = bool(torch.equal(outs[0], eager_logits))
            pt["graph_vs_eager_rel_err"] = rel_err(outs[0], eager_logits)
            pt["graph_vs_eager_argmax_equal"] = bool(torch.equal(outs[1], torch.argmax(eager_logits, dim=-1)))
            check_ok = pt["graph_vs_eager_rel_err"] < 1e-3 and pt["graph_vs_eager_argmax_equal"]
            med, spread = timed(g.replay, a.replays, a.replay_warmup, pt, "decode_step", True)
            del g, outs
            if a.eager_decode == "all" or (eager_set is not None and (b, c) in eager_set):
                med_e, spr_e = timed(step, a.eager_reps, 3, pt, "decode_step_eager", False)
                pt["eager_status"] = "rejected_spread" if spr_e > a.max_spread else "ok"
                pt["decode_step_time_eager_median_s"] = med_e
                if pt["eager_status"] == "ok":
                    pt["decode_step_time_eager_s"] = med_e
            pt["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
            min_bytes = rec["weights_bytes_non_embedding"] + b * m.H * 2 + pt["kv_bytes_read_per_step"]
            pt["min_bytes_per_step"] = min_bytes
            if not check_ok:
                pt["status"] = "check_failed"
            elif spread > a.max_spread or a.replays < 20:
                pt["status"] = "rejected_spread"
                pt["note"] = f"refused: (max-min)/median = {spread:.3f} > {a.max_spread}; raw times kept"
            else:
                pt["status"] = "ok"
                pt["decode_step_time_s"] = med
                pt["decode_tokens_per_s"] = b / med
                pt["achieved_bytes_per_s"] = min_bytes / med
            eager_txt = (f" eager {pt['decode_step_time_eager_median_s'] * 1e3:.2f} ms "
                         f"({pt['eager_status']}, spread {pt['decode_step_eager_time_spread_frac'] * 100:.0f}%)"
                         if "decode_step_time_eager_median_s" in pt else "")
            log(f"decode b={b} ctx={c}: {pt['status']} graph {med * 1e3:.3f} ms (spread {spread * 100:.1f}%)"
                f"{eager_txt} {min_bytes / med / 1e12:.2f} TB/s graph==eager:{pt['graph_vs_eager_bitwise_equal']}")
            del eager_logits
        except torch.OutOfMemoryError as e:
            pt["status"] = "oom"
            pt["error"] = str(e).splitlines()[0][:300]
            log(f"decode b={b} ctx={c}: OOM")
        except Exception as e:  # noqa: BLE001
            pt["status"] = "error"
            pt["error"] = traceback.format_exc()[-1500:]
            log(f"decode b={b} ctx={c}: ERROR {e}")
        torch.cuda.empty_cache()
        save()

    # ---- profiling phase, after all timing (the profiler is never switched on before or during a timed region)
    if a.no_profile:
        return
    log("profiling: one eager pass per point (kernel names, counts, device time)")
    q, k, v = probe_inputs
    for e in rec["decode_attention_probe"]["candidates"]:
        if e.get("ok"):
            configure_sdpa(tuple(e["backends"]))
            m.decode_attn = e["impl"]
            prof = kernels_of(lambda: m.attention_decode(q, k, v))
            e["kernels"] = [x["name"] for x in prof.get("attention_kernels", [])] or prof.get("error")
    m.decode_attn = rec["decode_attention_impl"]
    set_prefill_backends()
    for pt in rec["prefill_points"]:
        if pt.get("status") not in ("ok", "rejected_spread", "check_failed"):
            continue
        b, P = pt["batch"], pt["prompt_tokens"]
        kc, vc = pool.views(b, P + a.ctx_pad)
        toks = torch.randint(0, m.V, (b, P), device=device)
        m.forward(toks, kc, vc, 0, True)
        prof = kernels_of(lambda: m.forward(toks, kc, vc, 0, True))
        pt["profile_one_eager_pass"] = prof
        pt["attention_backend_ran"] = backend_from_kernels([x["name"] for x in prof.get("attention_kernels", [])])
    set_decode_backends()
    for pt in rec["decode_points"]:
        if pt.get("status") not in ("ok", "rejected_spread", "check_failed"):
            continue
        b, c = pt["batch"], pt["context_tokens"]
        kc, vc = pool.views(b, c + a.ctx_pad)
        static_tok = torch.randint(0, m.V, (b, 1), device=device)
        m.forward(static_tok, kc, vc, c, False)
        prof = kernels_of(lambda: m.forward(static_tok, kc, vc, c, False))
        pt["profile_one_eager_step"] = prof
        pt["attention_backend_ran"] = backend_from_kernels([x["name"] for x in prof.get("attention_kernels", [])])
    torch.cuda.synchronize()
    log("profiling done")


def check_prefill_vs_decode(m, device, a, set_prefill_backends, set_decode_backends, log):
    """Decode path vs prefill path at the same position, in bf16 and against a float32 reference of the same code.

    b=2 sequences of P=256 random tokens. ref32 = float32 prefill of all P tokens (last-token logits).
    - fp32 decode: float32 prefill of P-1 tokens, then one float32 decode step at position P-1: must equal ref32
      (to float32 rounding): this checks the decode logic (cache append, RoPE position, GQA head mapping, mask).
    - negative control: the same float32 decode step with RoPE off by one position: must be far from ref32.
    - bf16 prefill of P tokens vs ref32 (the bf16 noise level of this random-weight 32-layer model), bf16 decode
      (eager and CUDA graph) vs ref32 and vs the bf16 prefill."""
    out = {"batch": 2, "prompt_tokens": 256}
    try:
        b, P = 2, 256
        toks = torch.randint(0, m.V, (b, P), device=device)
        shape = (m.L, b, m.KVH, P + a.ctx_pad, m.D)
        kc32, vc32 = torch.empty(shape, device=device), torch.empty(shape, device=device)
        kc16 = torch.empty(shape, device=device, dtype=torch.bfloat16)
        vc16 = torch.empty_like(kc16)
        configure_sdpa(("math",))
        ref32 = m.forward(toks, kc32, vc32, 0, True, ref32=True)[0].clone()
        kc32.normal_()
        vc32.normal_()  # poison: the decode must only read what the P-1 prefill wrote
        m.forward(toks[:, :P - 1], kc32, vc32, 0, True, ref32=True)
        kc32[:, :, :, P - 1:].normal_()
        vc32[:, :, :, P - 1:].normal_()
        dec32 = m.forward(toks[:, P - 1:], kc32, vc32, P - 1, False, ref32=True)[0].clone()
        neg32 = m.forward(toks[:, P - 1:], kc32, vc32, P - 1, False, ref32=True, rope_shift=1)[0].clone()
        out["fp32_decode_vs_fp32_prefill_rel_err"] = rel_err(dec32, ref32)
        out["fp32_negative_control_rope_off_by_one_rel_err"] = rel_err(neg32, ref32)
        out["ref32_logits_rms"] = float(ref32.pow(2).mean().sqrt())
        del kc32, vc32, dec32, neg32
        set_prefill_backends()
        kc16.normal_()
        vc16.normal_()
        pre16, pre16_tok = m.forward(toks, kc16, vc16, 0, True)
        pre16 = pre16.clone()
        m.forward(toks[:, :P - 1], kc16, vc16, 0, True)
        kc16[:, :, :, P - 1:].normal_()
        vc16[:, :, :, P - 1:].normal_()
        set_decode_backends()
        dec16, dec16_tok = m.forward(toks[:, P - 1:], kc16, vc16, P - 1, False)
        dec16 = dec16.clone()
        static_tok = toks[:, P - 1:].clone()
        g, outs = capture(lambda: m.forward(static_tok, kc16, vc16, P - 1, False))
        g.replay()
        torch.cuda.synchronize()
        out["bf16_prefill_vs_ref32_rel_err"] = rel_err(pre16, ref32)
        out["bf16_decode_eager_vs_ref32_rel_err"] = rel_err(dec16, ref32)
        out["bf16_decode_graph_vs_ref32_rel_err"] = rel_err(outs[0], ref32)
        out["bf16_decode_vs_bf16_prefill_rel_err"] = rel_err(dec16, pre16)
        out["bf16_decode_vs_bf16_prefill_max_abs_diff"] = float((dec16.float() - pre16.float()).abs().max())
        out["bf16_decode_graph_vs_eager_bitwise_equal"] = bool(torch.equal(outs[0], dec16))
        out["argmax_bf16_decode_eq_bf16_prefill_frac"] = float((dec16_tok == pre16_tok).float().mean())
        out["argmax_bf16_decode_eq_ref32_frac"] = float((dec16_tok == ref32.argmax(-1)).float().mean())
        floor = out["bf16_prefill_vs_ref32_rel_err"]
        out["pass"] = bool(out["fp32_decode_vs_fp32_prefill_rel_err"] < 1e-3
                           and out["fp32_negative_control_rope_off_by_one_rel_err"] > 0.05
                           and out["bf16_decode_eager_vs_ref32_rel_err"] < 2 * floor + 0.02
                           and out["bf16_decode_graph_vs_ref32_rel_err"] < 2 * floor + 0.02
                           and out["bf16_decode_vs_bf16_prefill_rel_err"] < 0.1)
        out["pass_rule"] = ("fp32 decode vs fp32 prefill < 1e-3; rope-off-by-one control > 0.05; bf16 decode (eager, "
                            "graph) vs ref32 < 2 * (bf16 prefill vs ref32) + 0.02; bf16 decode vs bf16 prefill < 0.1")
        del g, outs, kc16, vc16
    except Exception:  # noqa: BLE001
        out["pass"] = False
        out["error"] = traceback.format_exc()[-1500:]
    log(f"check prefill vs decode: {out}")
    return out


def capture(fn):
    """Warm fn up on a side stream, then capture it in a CUDA graph; returns (graph, static outputs)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = fn()
    torch.cuda.synchronize()
    return g, outs


# ------------------------------------------------------------------------------------------------------------ summary
def summarize(rec):
    s = {"decode_step_time_ms": {}, "decode_step_time_eager_ms": {}, "decode_step_time_eager_median_ms_incl_rejected": {},
         "prefill_time_ms": {}, "prefill_time_eager_ms": {}, "decode_status": {}, "prefill_status": {}}
    kernels = set()
    ratios = []
    for p in rec.get("decode_points", []):
        key = f"b{p['batch']}_ctx{p['context_tokens']}"
        s["decode_status"][key] = p.get("status") + (f" (eager {p['eager_status']})" if "eager_status" in p else "")
        if "decode_step_time_s" in p:
            s["decode_step_time_ms"][key] = round(p["decode_step_time_s"] * 1e3, 4)
        if "decode_step_time_eager_s" in p:
            s["decode_step_time_eager_ms"][key] = round(p["decode_step_time_eager_s"] * 1e3, 4)
        if "decode_step_time_eager_median_s" in p:
            s["decode_step_time_eager_median_ms_incl_rejected"][key] = round(p["decode_step_time_eager_median_s"] * 1e3, 3)
            if "decode_step_time_s" in p:
                ratios.append(p["decode_step_time_eager_median_s"] / p["decode_step_time_s"])
        for k in p.get("profile_one_eager_step", {}).get("attention_kernels", []):
            kernels.add("decode: " + k["name"][:120])
    for p in rec.get("prefill_points", []):
        key = f"b{p['batch']}_p{p['prompt_tokens']}"
        s["prefill_status"][key] = p.get("status") + (f" (eager {p['eager_status']})" if "eager_status" in p else "")
        if "prefill_time_s" in p:
            s["prefill_time_ms"][key] = round(p["prefill_time_s"] * 1e3, 4)
        if "prefill_time_eager_s" in p:
            s["prefill_time_eager_ms"][key] = round(p["prefill_time_eager_s"] * 1e3, 4)
        for k in p.get("profile_one_eager_pass", {}).get("attention_kernels", []):
            kernels.add("prefill: " + k["name"][:120])
    s["attention_kernels"] = sorted(kernels)
    if ratios:
        s["decode_eager_median_over_graph_ratio"] = {"min": min(ratios), "median": statistics.median(ratios),
                                                     "max": max(ratios)}
    s["check_prefill_vs_decode_pass"] = rec.get("check_prefill_vs_decode", {}).get("pass")
    pts = rec.get("decode_points", []) + rec.get("prefill_points", [])
    s["graph_vs_eager_all_bitwise_equal"] = all(p.get("graph_vs_eager_bitwise_equal", True) for p in pts)
    return s


def print_summary(rec):
    pts = rec.get("decode_points", [])
    ctxs = sorted({p["context_tokens"] for p in pts})
    bs = sorted({p["batch"] for p in pts})
    if pts:
        print("decode step ms: CUDA graph (eager median; * = eager sample rejected by the spread rule); "
              "rows batch, columns context")
        print("batch " + "".join(f"{c:>22}" for c in ctxs))
        for b in bs:
            cells = []
            for c in ctxs:
                p = next((x for x in pts if x["batch"] == b and x["context_tokens"] == c), None)
                if p is None:
                    cells.append("")
                elif "decode_step_time_s" in p:
                    e = p.get("decode_step_time_eager_median_s")
                    star = "*" if p.get("eager_status") == "rejected_spread" else ""
                    cells.append(f"{p['decode_step_time_s'] * 1e3:.3f}" + (f" ({e * 1e3:.2f}{star})" if e else ""))
                else:
                    cells.append(p.get("status", "?"))
            print(f"{b:>5} " + "".join(f"{x:>22}" for x in cells))
    for p in rec.get("prefill_points", []):
        t, te = p.get("prefill_time_s"), p.get("prefill_time_eager_s")
        print(f"prefill b={p['batch']:>3} P={p['prompt_tokens']:>5}: "
              + (f"{t * 1e3:9.3f} ms  {p.get('model_tflops_per_s', 0):6.1f} TFLOP/s" if t else p.get("status", "?"))
              + (f"   eager {te * 1e3:9.3f} ms" if te else f"   eager {p.get('eager_status', '-')}"))
    print("summary:", {k: v for k, v in rec.get("summary", {}).items()
                       if k in ("attention_kernels", "decode_eager_median_over_graph_ratio",
                                "check_prefill_vs_decode_pass", "graph_vs_eager_all_bitwise_equal")}, flush=True)


if __name__ == "__main__":
    sys.exit(main())
