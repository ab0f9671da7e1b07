#!/usr/bin/env python3
"""Measure MoE serving latency on one GPU: CUDA-graph decode steps and eager prefill of a Qwen3-30B-A3B-shaped
decoder (issue #21, item 1). The dense counterpart is serve_step.py; helpers (SDPA backend choice, timing loop,
CUDA-graph capture, profiler summary) are imported from it, so the eager-op style is the same.

Model (Qwen3-30B-A3B config, Qwen/Qwen3-30B-A3B config.json): hidden 2048, 48 layers, 32 query heads, 4 KV heads,
head_dim 128 (explicit: 32 x 128 = 4096 != hidden), every layer MoE: 128 routed SwiGLU experts of width 768,
top-8 with the top-k weights renormalised (norm_topk_prob), no shared expert, vocab 151936, untied LM head,
RMSNorm eps 1e-6, qk-norm (RMSNorm over head_dim on q and k before RoPE), RoPE theta 1e6, no biases.
Random bf16 weights N(0, 0.02) (norm weights 1), random tokens; torch.inference_mode.

Per layer: RMSNorm -> fused QKV GEMM [(32+2*4)*128, 2048] -> qk-norm (F.rms_norm over head_dim, times the
per-head weight) -> RoPE (rotate-half, q and k in one pass, as serve_step.py) -> K/V copied into the cache ->
attention (prefill: SDPA causal, enable_gqa, flash; decode: the serve_step.py probe's choice) -> O GEMM -> residual
-> RMSNorm -> MoE: router GEMM [128, 2048] (bf16) -> softmax (fp32) -> top-8 -> renormalise -> stable sort of the
T*8 expert ids (argsort) -> tokens-per-expert by scatter_add (no host sync) -> rows gathered in expert order ->
ONE torch._grouped_mm for gate+up (W1 [E, 2*768, 2048], passed transposed) over int32 offsets = cumsum(counts)
(experts with no token are empty groups: the kernel does no work for them) -> SwiGLU -> ONE torch._grouped_mm for
down (W2 [E, 2048, 768], transposed) -> rows back in token order -> weighted sum over the 8 -> residual.
Everything is sync-free, so the whole decode step is captured in one CUDA graph (per batch, context).
If this PyTorch's _grouped_mm refuses unpadded groups (probe at start), groups are padded to 8 rows on device.

Memory: bf16 weights are 61 GB, so on an 80 GB H100 the KV cache cannot hold every point with distinct per-layer
buffers. The KV pool is sized to what is left (--kv-pool-gb); a point whose per-layer K+V slot times 48 layers does
not fit uses n_slots < 48 distinct slots, layer i on slot i % n_slots (recorded per point as kv_layer_slots). The
bytes read per step are unchanged; every slot is >= 0.5 GB (>> 50 MB L2), so reuse across layers cannot be served
from L2. Points where n_slots = 48 are exact.

Decode step = one token for each of B sequences holding C tokens: embedding, 48 layers, final norm, LM head,
argmax; captured in a CUDA graph, timed by replays (CUDA events, device synchronised after each, median; spread rule
and one retry as serve_step.py). Eager step timed too. Prefill: one sequence of P tokens, eager only (no graph),
LM head on the last token. Checks: the grouped MoE vs a float32 per-expert loop on the same routing; per decode
point graph replay logits vs the eager logits; per point the experts touched per layer (from the eager step).

Examples:
  python3 serve_moe_step.py                          # B 1..256 x C 1024,4096, prefill 1024,4096; $OUT/serve_qwen3_30b_a3b.json
  python3 serve_moe_step.py --layers 4 --smoke       # quick check
"""
import argparse
import gc
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import serve_step as ss  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class MoEModel:
    def __init__(self, a, device):
        self.a = a
        self.H, self.L, self.NH, self.KVH, self.D = a.hidden, a.layers, a.heads, a.kv_heads, a.head_dim
        self.G = self.NH // self.KVH
        self.E, self.K, self.I, self.V = a.experts, a.topk, a.expert_intermediate, a.vocab
        self.eps = a.eps
        self.align = 1
        self.collect = None  # list: per layer experts touched (eager only)
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
                "qk_norm": torch.ones(self.NH + self.KVH, self.D, device=device, dtype=dt),  # q_norm, k_norm per head
                "wo": rnd(self.H, self.NH * self.D),
                "mlp_norm": torch.ones(self.H, device=device, dtype=dt),
                "wr": rnd(self.E, self.H),
                "w1": rnd(self.E, 2 * self.I, self.H),   # gate | up, per expert [2I, H] (nn.Linear layout)
                "w2": rnd(self.E, self.H, self.I),       # down, per expert [H, I]
            })
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, self.D, 2, device=device, dtype=torch.float32) / self.D))
        t = torch.arange(a.max_positions, device=device, dtype=torch.float32)
        f = torch.outer(t, inv)
        self.cos = torch.cat((f.cos(), f.cos()), dim=-1).to(dt)
        self.sin = torch.cat((-f.sin(), f.sin()), dim=-1).to(dt)
        self.decode_attn = "sdpa_gqa"

    def params(self):
        per_layer = sum(t.numel() for k, t in self.layers[0].items() if k != "qk_norm")
        # qk_norm stored per head here; the real model has one [D] vector each for q and k
        per_layer_real = per_layer + 2 * self.D
        total = self.embed.numel() + self.lm_head.numel() + self.final_norm.numel() + self.L * per_layer_real
        expert = 3 * self.H * self.I
        dense_per_layer = per_layer_real - self.E * expert
        return {"params_total": total, "params_input_embedding": self.embed.numel(),
                "params_lm_head": self.lm_head.numel(), "params_per_layer": per_layer_real,
                "params_per_expert": expert, "params_dense_per_layer": dense_per_layer,
                "params_active_per_token": total - self.L * (self.E - self.K) * expert,
                "weights_bytes": 2 * total, "weights_bytes_non_embedding": 2 * (total - self.embed.numel())}

    def attention_decode(self, q, k, v):
        if self.decode_attn == "sdpa_gqa":
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        b = q.shape[0]
        qg = q.reshape(b, self.KVH, self.G, self.D)
        return F.scaled_dot_product_attention(qg, k, v).reshape(b, self.NH, 1, self.D)

    def moe(self, x, w):
        """x [T, H] -> [T, H]: router, top-k, one grouped GEMM per projection over the experts' token groups."""
        T = x.shape[0]
        E, K = self.E, self.K
        probs = torch.softmax(F.linear(x, w["wr"]).float(), dim=-1)
        topv, topi = torch.topk(probs, K, dim=-1)
        topv = topv / topv.sum(dim=-1, keepdim=True)
        flat = topi.reshape(-1)
        sidx = torch.argsort(flat, stable=True)
        counts = torch.zeros(E, device=x.device, dtype=torch.int64).scatter_add_(0, flat, torch.ones_like(flat))
        if self.collect is not None:
            self.collect.append(int((counts > 0).sum()))
        tok = torch.div(sidx, K, rounding_mode="floor")
        if self.align == 1:
            offs = torch.cumsum(counts, 0).to(torch.int32)
            xs = x[tok]
            h1 = torch._grouped_mm(xs, w["w1"].transpose(-2, -1), offs=offs)
            act = F.silu(h1[:, :self.I]) * h1[:, self.I:]
            ye = torch._grouped_mm(act, w["w2"].transpose(-2, -1), offs=offs)   # [T*K, H], sorted order
        else:  # groups padded to `align` rows on device; static row count T*K + E*(align-1)
            A = self.align
            N = T * K
            pad = (counts + A - 1) // A * A
            pstart = torch.cumsum(pad, 0) - pad
            cstart = torch.cumsum(counts, 0) - counts
            se = flat[sidx]                                                       # expert of each sorted row
            dest = pstart[se] + torch.arange(N, device=x.device) - cstart[se]
            npad = N + E * (A - 1)
            src = torch.full((npad,), T, device=x.device, dtype=torch.int64)
            src[dest] = tok
            xp = torch.cat([x, x.new_zeros((1, self.H))])[src]
            offs = torch.cumsum(pad, 0).to(torch.int32)
            h1 = torch._grouped_mm(xp, w["w1"].transpose(-2, -1), offs=offs)
            act = F.silu(h1[:, :self.I]) * h1[:, self.I:]
            ye = torch._grouped_mm(act, w["w2"].transpose(-2, -1), offs=offs)[dest]
        inv = torch.empty_like(sidx)
        inv[sidx] = torch.arange(sidx.numel(), device=x.device)
        rows = ye[inv].view(T, K, self.H)
        return (rows * topv.to(rows.dtype).unsqueeze(-1)).sum(dim=1)

    def layer(self, x, w, cos, sin, kc, vc, start, prefill):
        b, s, _ = x.shape
        nq, nkv = self.NH * self.D, self.KVH * self.D
        h = F.rms_norm(x, (self.H,), w["attn_norm"], self.eps)
        qkv = F.linear(h, w["wqkv"])
        qk = qkv[..., :nq + nkv].view(b, s, self.NH + self.KVH, self.D)
        qk = F.rms_norm(qk, (self.D,), None, self.eps) * w["qk_norm"]
        qk = ss.Model.rope_qk(None, qk, cos, sin)
        q = qk[:, :, :self.NH].transpose(1, 2)
        k = qk[:, :, self.NH:].transpose(1, 2)
        v = qkv[..., nq + nkv:].view(b, s, self.KVH, self.D).transpose(1, 2)
        kc[:, :, start:start + s].copy_(k)
        vc[:, :, start:start + s].copy_(v)
        if prefill:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            o = self.attention_decode(q, kc[:, :, :start + s], vc[:, :, :start + s])
        x = x + F.linear(o.transpose(1, 2).reshape(b, s, nq), w["wo"])
        h = F.rms_norm(x, (self.H,), w["mlp_norm"], self.eps)
        return x + self.moe(h.reshape(b * s, self.H), w).view(b, s, self.H)

    def forward(self, tokens, kv, start, prefill):
        """kv: list of (K, V) per layer, each [b, KVH, max_ctx, D] (may repeat: aliased slots)."""
        s = tokens.shape[1]
        cos, sin = self.cos[start:start + s].unsqueeze(1), self.sin[start:start + s].unsqueeze(1)
        x = F.embedding(tokens, self.embed)
        for i, w in enumerate(self.layers):
            x = self.layer(x, w, cos, sin, kv[i][0], kv[i][1], start, prefill)
        logits = F.linear(F.rms_norm(x[:, -1, :], (self.H,), self.final_norm, self.eps), self.lm_head)
        return logits, torch.argmax(logits, dim=-1)


def kv_views(m, pool, b, max_ctx):
    """Per-layer (K, V) views; as many distinct slots as the pool holds (<= L), layer i on slot i % n."""
    slot = 2 * b * m.KVH * max_ctx * m.D
    n = min(m.L, pool.numel() // slot)
    if n < 1:
        return None, 0
    shape = (b, m.KVH, max_ctx, m.D)
    slots = [(pool[j * slot: j * slot + slot // 2].view(shape), pool[j * slot + slot // 2: (j + 1) * slot].view(shape))
             for j in range(n)]
    return [slots[i % n] for i in range(m.L)], n


def check_moe(m, device, log):
    """Grouped MoE (both row alignments) vs a float32 per-expert loop on the same routing, T = 5 and 300."""
    out = {}
    w = m.layers[0]
    for T in (5, 300):
        x = torch.randn(T, m.H, device=device, dtype=torch.bfloat16)
        probs = torch.softmax(F.linear(x, w["wr"]).float(), dim=-1)
        topv, topi = torch.topk(probs, m.K, dim=-1)
        topv = topv / topv.sum(dim=-1, keepdim=True)
        ref = torch.zeros(T, m.H, device=device)
        xf = x.float()
        for e in topi.unique().tolist():
            tt, kk = (topi == e).nonzero(as_tuple=True)
            h1 = xf[tt] @ w["w1"][e].float().t()
            y = (F.silu(h1[:, :m.I]) * h1[:, m.I:]) @ w["w2"][e].float().t()
            ref.index_add_(0, tt, y * topv[tt, kk].unsqueeze(-1))
        for A in (1, 8):
            m.align = A
            try:
                y = m.moe(x, w)
                torch.cuda.synchronize()
                out[f"T{T}_align{A}_rel_err"] = ss.rel_err(y, ref)
            except Exception as e:  # noqa: BLE001
                out[f"T{T}_align{A}_error"] = str(e).splitlines()[0][:300] if str(e) else repr(e)[:300]
    ok1 = all(out.get(f"T{T}_align1_rel_err", 1.0) < 2e-2 for T in (5, 300))
    ok8 = all(out.get(f"T{T}_align8_rel_err", 1.0) < 2e-2 for T in (5, 300))
    m.align = 1 if ok1 else (8 if ok8 else 0)
    out["chosen_align"] = m.align
    out["pass"] = m.align > 0
    log(f"check grouped MoE vs float32 loop: {out}")
    if not out["pass"]:
        raise RuntimeError(f"grouped MoE check failed: {out}")
    return out


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default="serve_qwen3_30b_a3b")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=48)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--experts", type=int, default=128)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--expert-intermediate", type=int, default=768)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--rope-theta", type=float, default=1e6)
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--decode-batches", default="1,2,4,8,16,32,64,128,256")
    p.add_argument("--decode-contexts", default="1024,4096")
    p.add_argument("--prefill", default="1024,4096", help="prompt lengths (one sequence each), eager")
    p.add_argument("--replays", type=int, default=40)
    p.add_argument("--replay-warmup", type=int, default=10)
    p.add_argument("--eager-reps", type=int, default=10)
    p.add_argument("--prefill-reps", type=int, default=7)
    p.add_argument("--kv-pool-gb", type=float, default=0.0, help="KV pool size (0: free memory minus --reserve-gb)")
    p.add_argument("--reserve-gb", type=float, default=5.0)
    p.add_argument("--max-spread", type=float, default=0.10)
    p.add_argument("--retry-pause-s", type=float, default=2.0)
    p.add_argument("--time-budget-s", type=float, default=380.0)
    p.add_argument("--no-profile", action="store_true")
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--out-dir", default=None)
    p.add_argument("--no-smi", action="store_true")
    a = p.parse_args()
    if a.smoke:
        a.decode_batches, a.decode_contexts, a.prefill, a.replays = "1,64", "1024", "1024", 20
    a.batches = ss.parse_list(a.decode_batches)
    a.contexts = ss.parse_list(a.decode_contexts)
    a.prefills = ss.parse_list(a.prefill)
    a.ctx_pad = 64
    a.max_positions = max(a.contexts + a.prefills + [512]) + a.ctx_pad
    return a


def main():
    a = parse()
    t0 = time.perf_counter()
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(1234)

    def log(msg):
        print(f"[serve_moe {time.perf_counter() - t0:7.1f}s] {msg}", flush=True)

    rec = {
        "name": a.name, "kind": "serve_step", "status": "started",
        "model": {"hidden": a.hidden, "layers": a.layers, "heads": a.heads, "kv_heads": a.kv_heads,
                  "head_dim": a.head_dim, "experts": a.experts, "topk": a.topk,
                  "expert_intermediate": a.expert_intermediate, "shared_experts": 0, "vocab": a.vocab,
                  "rope_theta": a.rope_theta, "norm": f"RMSNorm eps {a.eps:g}, qk-norm", "mlp": "MoE SwiGLU experts",
                  "lm_head": "untied", "router": "bf16 GEMM, fp32 softmax, top-k, renormalised",
                  "experts_impl": "one torch._grouped_mm per projection (gate+up fused, down) over int32 offsets",
                  "fused_gemms": "QKV fused; expert gate|up fused",
                  "shape_of": "Qwen3-30B-A3B" if (a.layers, a.hidden, a.experts) == (48, 2048, 128) else "custom"},
        "precision": "bf16 weights, activations, KV cache and logits; router softmax fp32; inference_mode; "
                     "random weights N(0, 0.02)",
        "units": {"*_time_s": "seconds", "*_bytes": "bytes", "kv_bytes_per_token_per_sequence": "bytes"},
        "config": {k: getattr(a, k) for k in ("batches", "contexts", "prefills", "replays", "replay_warmup",
                                              "eager_reps", "prefill_reps", "kv_pool_gb", "reserve_gb",
                                              "max_spread", "ctx_pad", "smoke")},
        "timing": ("CUDA events around each replay/pass, device synchronised after each; decode: one CUDA graph per "
                   "(batch, context), median of replays after warm-up; eager decode and prefill: eager PyTorch, "
                   "median after warm-up"),
        "kv_bytes_per_token_per_sequence": 2 * a.layers * a.kv_heads * a.head_dim * 2,
    }
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    if not a.no_smi:
        rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    rec["decode_points"], rec["prefill_points"] = [], []

    def save():
        return common.write_json(rec, a.name, a.out_dir)

    try:
        with torch.inference_mode():
            body(a, rec, device, log, save, t0)
        rec["status"] = "done"
    except Exception as e:  # noqa: BLE001
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-3000:]
        log(f"ERROR: {e}")
    finally:
        if not a.no_smi:
            rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
        rec["wall_s"] = time.perf_counter() - t0
        rec["summary"] = ss.summarize(rec)
        path = save()
        ss.print_summary(rec)
        for p in rec["decode_points"]:
            if "experts_touched_per_layer_mean" in p:
                print(f"b={p['batch']:>3} ctx={p['context_tokens']}: experts touched/layer mean "
                      f"{p['experts_touched_per_layer_mean']:.1f}, kv slots {p.get('kv_layer_slots')}")
        log(f"wrote {path}")
    return 0 if rec["status"] == "done" else 1


def body(a, rec, device, log, save, t0):
    m = MoEModel(a, device)
    torch.cuda.synchronize()
    rec.update(m.params())
    W = rec["weights_bytes"]
    per_tok = rec["kv_bytes_per_token_per_sequence"]
    log(f"weights: {rec['params_total']:,} params ({rec['params_active_per_token']:,} active/token), "
        f"{W / 1e9:.2f} GB; allocated {torch.cuda.memory_allocated() / 1e9:.2f} GB; KV {per_tok} B/token/sequence")

    ss.configure_sdpa(("flash",))
    rec["decode_attention_probe"], _ = ss.probe_decode_attention(m, device, log)
    rec["decode_attention_impl"] = m.decode_attn
    dec_backends = tuple(rec["decode_attention_probe"]["chosen_backends"])
    rec["check_moe"] = check_moe(m, device, log)
    rec["moe_row_align"] = m.align
    torch.cuda.empty_cache()

    free, total = torch.cuda.mem_get_info()
    pool_bytes = int(a.kv_pool_gb * 1e9) if a.kv_pool_gb > 0 else int(free - a.reserve_gb * 1e9)
    need = max([2 * m.L * b * m.KVH * (c + a.ctx_pad) * m.D * 2 for b in a.batches for c in a.contexts]
               + [2 * m.L * m.KVH * (p + a.ctx_pad) * m.D * 2 for p in a.prefills])
    pool_bytes = max(0, min(pool_bytes, need)) // 4 * 4
    pool = torch.empty(pool_bytes // 2, device=device, dtype=torch.bfloat16)
    pool.normal_(0.0, 1.0)
    torch.cuda.synchronize()
    rec["kv_pool_bytes"] = pool_bytes
    rec["gpu_memory_free_before_pool_bytes"], rec["gpu_memory_total_bytes"] = free, total
    log(f"KV pool {pool_bytes / 1e9:.2f} GB (free was {free / 1e9:.2f} GB); allocated "
        f"{torch.cuda.memory_allocated() / 1e9:.2f} GB")
    save()

    def timed(fn, reps, warmup, pt, prefix):
        for attempt in range(2):
            gc.disable()
            try:
                dev, wall = ss.time_device(fn, reps, warmup)
            finally:
                gc.enable()
            med, tmin, tmax, spread = common.median_and_spread(dev)
            if spread <= a.max_spread or attempt == 1:
                break
            pt.setdefault(f"{prefix}_rejected_attempts_times_s", []).append([round(x, 7) for x in dev])
            time.sleep(a.retry_pause_s)
        pt[f"{prefix}_attempts"] = attempt + 1
        pt[f"{prefix}_times_s"] = [round(x, 7) for x in dev]
        pt[f"{prefix}_time_min_s"], pt[f"{prefix}_time_max_s"] = tmin, tmax
        pt[f"{prefix}_time_spread_frac"] = spread
        pt[f"{prefix}_host_wall_s"] = statistics.median(wall)
        return med, spread

    # ---- decode grid (CUDA graphs), context-major so C=1024 is complete first
    ss.configure_sdpa(dec_backends)
    for c in a.contexts:
        for b in a.batches:
            pt = {"batch": b, "context_tokens": c, "max_ctx_tokens": c + a.ctx_pad, "kv_bytes": b * c * per_tok,
                  "kv_bytes_read_per_step": b * (c + 1) * per_tok, "weights_bytes": W,
                  "decode_attention_impl": m.decode_attn}
            rec["decode_points"].append(pt)
            if time.perf_counter() - t0 > a.time_budget_s:
                pt["status"] = "skipped_time"
                continue
            try:
                kv, nslots = kv_views(m, pool, b, c + a.ctx_pad)
                pt["kv_layer_slots"] = nslots
                pt["kv_layers_distinct"] = nslots == m.L
                if kv is None:
                    pt["status"] = "skipped_memory"
                    continue
                static_tok = torch.randint(0, m.V, (b, 1), device=device)

                def step():
                    return m.forward(static_tok, kv, c, False)

                m.collect = []
                eager_logits = step()[0].clone()
                touched = m.collect
                m.collect = None
                pt["experts_touched_per_layer"] = touched
                pt["experts_touched_per_layer_mean"] = sum(touched) / len(touched)
                try:
                    g, outs = ss.capture(step)
                except Exception as e:  # noqa: BLE001 - keep the eager timing of this point
                    pt["graph_error"] = traceback.format_exc()[-1500:]
                    log(f"decode b={b} ctx={c}: CUDA graph capture failed: {e}")
                    med_e, spr_e = timed(step, a.eager_reps, 3, pt, "decode_step_eager")
                    pt["decode_step_time_eager_median_s"] = med_e
                    pt["status"] = "graph_failed"
                    log(f"decode b={b} ctx={c}: eager {med_e * 1e3:.2f} ms (spread {spr_e * 100:.1f}%)")
                    raise
                g.replay()
                torch.cuda.synchronize()
                pt["graph_vs_eager_bitwise_equal"] = bool(torch.equal(outs[0], eager_logits))
                pt["graph_vs_eager_rel_err"] = ss.rel_err(outs[0], eager_logits)
                pt["graph_vs_eager_argmax_equal"] = bool(torch.equal(outs[1], torch.argmax(eager_logits, dim=-1)))
                check_ok = pt["graph_vs_eager_rel_err"] < 1e-3 and pt["graph_vs_eager_argmax_equal"]
                med, spread = timed(g.replay, a.replays, a.replay_warmup, pt, "decode_step")
                del g, outs
                med_e, spr_e = timed(step, a.eager_reps, 3, pt, "decode_step_eager")
                pt["eager_status"] = "rejected_spread" if spr_e > a.max_spread else "ok"
                pt["decode_step_time_eager_median_s"] = med_e
                if pt["eager_status"] == "ok":
                    pt["decode_step_time_eager_s"] = med_e
                # bytes: dense weights + touched experts + LM head + KV (input embedding rows negligible)
                touched_w = 2 * rec["params_per_expert"] * sum(touched)
                dense_w = 2 * (m.L * rec["params_dense_per_layer"] + rec["params_lm_head"])
                pt["min_bytes_per_step"] = dense_w + touched_w + pt["kv_bytes_read_per_step"]
                if not check_ok:
                    pt["status"] = "check_failed"
                elif spread > a.max_spread:
                    pt["status"] = "rejected_spread"
                    pt["decode_step_time_median_s"] = med
                else:
                    pt["status"] = "ok"
                    pt["decode_step_time_s"] = med
                    pt["decode_tokens_per_s"] = b / med
                    pt["achieved_bytes_per_s"] = pt["min_bytes_per_step"] / med
                log(f"decode b={b} ctx={c}: {pt['status']} graph {med * 1e3:.3f} ms (spread {spread * 100:.1f}%) "
                    f"eager {med_e * 1e3:.2f} ms experts/layer {pt['experts_touched_per_layer_mean']:.1f} "
                    f"kv slots {nslots} {pt['min_bytes_per_step'] / med / 1e12:.2f} TB/s "
                    f"graph==eager:{pt['graph_vs_eager_bitwise_equal']}")
                del eager_logits
            except torch.OutOfMemoryError as e:
                pt["status"] = "oom"
                pt["error"] = str(e).splitlines()[0][:300]
                log(f"decode b={b} ctx={c}: OOM")
            except Exception as e:  # noqa: BLE001
                if pt.get("status") != "graph_failed":
                    pt["status"] = "error"
                pt["error"] = traceback.format_exc()[-1500:]
                log(f"decode b={b} ctx={c}: ERROR {e}")
            m.collect = None
            torch.cuda.empty_cache()
            save()

    # ---- prefill: one sequence, eager only
    ss.configure_sdpa(("flash",))
    for P in a.prefills:
        pt = {"batch": 1, "prompt_tokens": P, "tokens": P, "kv_bytes": P * per_tok, "weights_bytes": W,
              "timing": "eager (no CUDA graph)"}
        rec["prefill_points"].append(pt)
        if time.perf_counter() - t0 > a.time_budget_s + 60:
            pt["status"] = "skipped_time"
            continue
        try:
            kv, nslots = kv_views(m, pool, 1, P + a.ctx_pad)
            pt["kv_layer_slots"] = nslots
            toks = torch.randint(0, m.V, (1, P), device=device)
            m.collect = []
            m.forward(toks, kv, 0, True)
            pt["experts_touched_per_layer_mean"] = sum(m.collect) / len(m.collect)
            m.collect = None
            med, spread = timed(lambda: m.forward(toks, kv, 0, True), a.prefill_reps, 2, pt, "prefill_eager")
            active = rec["params_active_per_token"] - rec["params_input_embedding"] - rec["params_lm_head"]
            flops = 2 * active * P + 2 * m.H * m.V + 2 * m.L * P * P * m.NH * m.D
            pt["model_flops"] = flops
            pt["eager_status"] = "rejected_spread" if spread > a.max_spread else "ok"
            pt["status"] = pt["eager_status"]
            pt["prefill_time_eager_median_s"] = med
            if pt["status"] == "ok":
                pt["prefill_time_eager_s"] = med
                pt["prefill_tokens_per_s"] = P / med
                pt["model_tflops_per_s"] = flops / med / 1e12
            log(f"prefill P={P}: {pt['status']} eager {med * 1e3:.2f} ms (spread {spread * 100:.1f}%) "
                f"{flops / med / 1e12:.0f} TFLOP/s")
        except torch.OutOfMemoryError as e:
            pt["status"] = "oom"
            pt["error"] = str(e).splitlines()[0][:300]
            log(f"prefill P={P}: OOM")
        except Exception as e:  # noqa: BLE001
            pt["status"] = "error"
            pt["error"] = traceback.format_exc()[-1500:]
            log(f"prefill P={P}: ERROR {e}")
        m.collect = None
        torch.cuda.empty_cache()
        save()

    # ---- profile one eager decode step at two batches (after all timing)
    if a.no_profile:
        return
    ss.configure_sdpa(dec_backends)
    for pt in rec["decode_points"]:
        if pt.get("status") not in ("ok", "rejected_spread") or pt["batch"] not in (1, 64) \
                or pt["context_tokens"] != a.contexts[0]:
            continue
        b, c = pt["batch"], pt["context_tokens"]
        kv, _ = kv_views(m, pool, b, c + a.ctx_pad)
        tok = torch.randint(0, m.V, (b, 1), device=device)
        m.forward(tok, kv, c, False)
        pt["profile_one_eager_step"] = ss.kernels_of(lambda: m.forward(tok, kv, c, False))
        save()
    log("profiling done")


if __name__ == "__main__":
    sys.exit(main())
