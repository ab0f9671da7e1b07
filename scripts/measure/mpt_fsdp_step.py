#!/usr/bin/env python3
"""One training step of an llm-foundry-MPT-shaped decoder (GPT-2 layout) under FSDP1, FSDP2 or on one GPU (issue #24).

Why: gpuplan predicts llm-foundry's published H100 throughput rows (PyTorch FSDP1 FULL_SHARD, activation
checkpointing, "PURE" bf16 mixed precision, 2023 stack) 17-40% too high, its A100 rows 4-19%, while our own PyTorch
FSDP2 steps on 2-4 H100/H200 are within 1-8%. This run separates the candidates on today's stack: FSDP1's own cost
(FlatParameter copies, rate limiter, CPU hooks) against FSDP2, comm-compute interference (GEMM kernels slower beside
NCCL than alone), and GPU idle time (host-bound or exposed collectives), at the published per-GPU recipe.

Model (data/models/llmfoundry-mpt-*.json): pre-LayerNorm with bias (run in bf16: low_precision_layernorm), fused
QKV with bias, causal SDPA (flash backend, FlashAttention-2 generation), output projection with bias, 4x GELU MLP
with biases, learned positions, tied input/output embedding, fp32 loss. Random weights and tokens.
Modes: --mode single | fsdp1 | fsdp2 (torchrun, one process per GPU).
  fsdp1: torch.distributed.fsdp.FullyShardedDataParallel, FULL_SHARD, one unit per block + root, MixedPrecision
         param/reduce/buffer bf16 ("PURE"), limit_all_gathers=True, backward_prefetch=BACKWARD_POST,
         use_orig_params=True (composer's defaults for torch 2.x);
  fsdp2: fully_shard per block + root, MixedPrecisionPolicy(param bf16, reduce bf16).
Activation checkpointing (--ckpt full): each block, non-reentrant. Optimizer: AdamW (fused), fp32 states.

Per mode: step time (CUDA events, median of >= 10 steps, slowest rank), tokens/s/GPU, then a CUDA-only profile of
2 steps (torch.profiler): GPU span, busy, idle, and kernel time by class (gemm, attention, nccl, other) with the
compute-only busy time (union of non-NCCL kernels) - compare it with --mode single at the same per-GPU batch to see
interference. Output: $OUT/<name>.json.
"""
import argparse
import math
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402


class LowPrecisionLayerNorm(nn.LayerNorm):
    def forward(self, x):
        with torch.autocast("cuda", enabled=False):
            return F.layer_norm(x.to(torch.bfloat16), self.normalized_shape, self.weight.to(torch.bfloat16),
                                self.bias.to(torch.bfloat16), self.eps)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.hd = heads, d // heads
        self.norm_1 = LowPrecisionLayerNorm(d)
        self.Wqkv = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d)
        self.norm_2 = LowPrecisionLayerNorm(d)
        self.up_proj = nn.Linear(d, 4 * d)
        self.down_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        b, s, d = x.shape
        qkv = self.Wqkv(self.norm_1(x)).view(b, s, 3, self.heads, self.hd)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out_proj(o.transpose(1, 2).reshape(b, s, d))
        return x + self.down_proj(F.gelu(self.up_proj(self.norm_2(x)), approximate="tanh"))


class MPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.d_model)
        self.wpe = nn.Embedding(a.seq, a.d_model)
        self.blocks = nn.ModuleList([Block(a.d_model, a.heads) for _ in range(a.layers)])
        self.norm_f = LowPrecisionLayerNorm(a.d_model)
        self.ckpt = a.ckpt == "full"

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(torch.arange(s, device=tokens.device))
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if (self.ckpt and self.training) else blk(x)
        logits = F.linear(self.norm_f(x), self.wte.weight)  # tied LM head
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


SHAPES = {  # d_model, heads, layers (llm-foundry yamls; data/models/llmfoundry-mpt-*.json)
    "mpt-760m": (1536, 12, 24), "mpt-1b": (2048, 16, 24), "mpt-3b": (2560, 20, 32), "mpt-7b": (4096, 32, 32),
}


def wrap(model, a):
    if a.mode == "fsdp1":
        from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel as FSDP, MixedPrecision
        from torch.distributed.fsdp import ShardingStrategy
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        mp = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)
        model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, mixed_precision=mp,
                     auto_wrap_policy=ModuleWrapPolicy({Block}), backward_prefetch=BackwardPrefetch.BACKWARD_POST,
                     limit_all_gathers=True, use_orig_params=True, device_id=torch.cuda.current_device())
        return model, {"api": "FSDP1 FullyShardedDataParallel", "sharding": "FULL_SHARD", "units": "each block + root",
                       "mixed_precision": "param/reduce/buffer bf16 (PURE)", "limit_all_gathers": True,
                       "backward_prefetch": "BACKWARD_POST", "use_orig_params": True}
    if a.mode == "fsdp2":
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
        for blk in model.blocks:
            fully_shard(blk, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        return model, {"api": "FSDP2 fully_shard", "units": "each block + root", "param_dtype": "bf16",
                       "reduce_dtype": "bf16", "reshard_after_forward": True}
    return model, {}


def classify(name):
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if "flash" in n or "fmha" in n or "attention" in n:
        return "attention"
    if any(k in n for k in ("gemm", "cutlass", "xmma", "nvjet", "sm90_", "sm80_", "ampere_", "cublas")):
        return "gemm"
    return "other"


def profile_classes(fn, n):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    ivs = []
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        ivs.append((e.time_range.start, e.time_range.end, classify(e.name)))
    if not ivs:
        return {"error": "no device events"}
    ivs.sort()
    span = ivs[-1][1] - ivs[0][0]
    out = {"runs": n, "span_us": span / n, "busy_us": common.interval_union([(s, e) for s, e, _ in ivs]) / n,
           "compute_busy_us": common.interval_union([(s, e) for s, e, c in ivs if c != "nccl"]) / n,
           "nccl_busy_us": common.interval_union([(s, e) for s, e, c in ivs if c == "nccl"]) / n}
    out["idle_us"] = out["span_us"] - out["busy_us"]
    for c in ("gemm", "attention", "nccl", "other"):
        out[c + "_kernel_us"] = sum(e - s for s, e, k in ivs if k == c) / n
    # GEMM time while a NCCL kernel runs vs not: split each GEMM interval by overlap with the NCCL union
    nccl = sorted((s, e) for s, e, c in ivs if c == "nccl")
    merged = []
    for s, e in nccl:
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    import bisect
    starts = [m[0] for m in merged]
    over = 0.0
    for s, e, c in ivs:
        if c != "gemm":
            continue
        i = max(0, bisect.bisect_right(starts, s) - 1)
        while i < len(merged) and merged[i][0] < e:
            over += max(0.0, min(e, merged[i][1]) - max(s, merged[i][0]))
            i += 1
    out["gemm_kernel_us_beside_nccl"] = over / n
    out["kernels_per_run"] = len(ivs) / n
    return out


def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", choices=sorted(SHAPES), default="mpt-1b")
    p.add_argument("--mode", choices=["single", "fsdp1", "fsdp2"], default="single")
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=50368)
    p.add_argument("--micro-batch", type=int, default=14)
    p.add_argument("--ckpt", choices=["none", "full"], default="full")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--profile-steps", type=int, default=2)
    p.add_argument("--name", default=None)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    a.d_model, a.heads, a.layers = SHAPES[a.shape]
    if a.name is None:
        a.name = f"mptfsdp_{a.shape}_s{a.seq}_b{a.micro_batch}_{a.ckpt}ckpt_{a.mode}"
    return a


def main():
    a = parse()
    dist_on = a.mode != "single"
    rank, world, local = 0, 1, 0
    if dist_on:
        import torch.distributed as dist
        rank, world, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    torch.manual_seed(1234)
    b = torch.backends.cuda
    b.enable_flash_sdp(True), b.enable_mem_efficient_sdp(False), b.enable_math_sdp(False)
    if hasattr(b, "enable_cudnn_sdp"):
        b.enable_cudnn_sdp(False)
    rec = {"name": a.name, "kind": "mpt_fsdp_step", "status": "started", "world_size": world,
           "config": {k: getattr(a, k) for k in ("shape", "mode", "d_model", "heads", "layers", "seq", "vocab",
                                                 "micro_batch", "ckpt", "steps", "warmup")},
           "precision": "bf16 autocast, bf16 LayerNorm, fp32 loss; FSDP params bf16 for compute, fp32 sharded master"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    try:
        with torch.device(dev):
            model = MPT(a)
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
        rec["params_total"] = sum(p.numel() for p in model.parameters())
        model, rec["fsdp_options"] = wrap(model, a)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.0, fused=True)
        gen = torch.Generator(device=dev)
        gen.manual_seed(1000 + rank)
        batches = []
        for _ in range(2):
            t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=dev, generator=gen)
            batches.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))
        cnt = [0]

        def step():
            inp, tgt = batches[cnt[0] % 2]
            cnt[0] += 1
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(inp, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        model.train()
        losses = [step() for _ in range(a.warmup)]
        torch.cuda.synchronize()
        if dist_on:
            torch.distributed.barrier()
            torch.cuda.synchronize()
        st = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        en = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        for i in range(a.steps):
            st[i].record()
            losses.append(step())
            en[i].record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / 1e3 for s, e in zip(st, en)]
        if dist_on:
            t = torch.tensor(times, device=dev, dtype=torch.float64)
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
            times = t.tolist()
        rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
        lv = [float(x) for x in torch.stack(losses).float().cpu()]
        rec["loss_first"], rec["loss_last"], rec["loss_finite"] = lv[0], lv[-1], all(math.isfinite(x) for x in lv)
        med, tmin, tmax, spread = common.median_and_spread(times)
        rec["step_times_s"] = [round(x, 6) for x in times]
        rec["step_time_s"], rec["step_time_spread_frac"] = med, spread
        tokens = a.micro_batch * a.seq
        rec["tokens_per_s_per_gpu"] = tokens / med
        rec["status"] = "ok" if rec["loss_finite"] and spread <= 0.10 else "rejected_spread"
        try:
            rec["profile"] = profile_classes(step, a.profile_steps)
        except Exception as e:  # noqa: BLE001
            rec["profile"] = {"error": str(e)[:300]}
        if rank == 0:
            pr = rec["profile"]
            print(f"[mpt_fsdp {a.name}] status={rec['status']} step={med*1e3:.1f} ms spread={spread*100:.1f}% "
                  f"tok/s/gpu={tokens/med:,.0f} busy={pr.get('busy_us', 0)/1e3:.1f} ms "
                  f"compute_busy={pr.get('compute_busy_us', 0)/1e3:.1f} ms idle={pr.get('idle_us', 0)/1e3:.1f} ms "
                  f"gemm={pr.get('gemm_kernel_us', 0)/1e3:.1f} ms (beside nccl {pr.get('gemm_kernel_us_beside_nccl', 0)/1e3:.1f}) "
                  f"nccl={pr.get('nccl_busy_us', 0)/1e3:.1f} ms", flush=True)
    except torch.OutOfMemoryError as e:
        rec["status"] = "oom"
        rec["oom_message"] = str(e).splitlines()[0][:300]
    except Exception as e:  # noqa: BLE001
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-2000:]
        print(f"[mpt_fsdp {a.name}] ERROR {e}", flush=True)
    finally:
        if rank == 0:
            print(f"[mpt_fsdp] wrote {common.write_json(rec, a.name, a.out_dir)}", flush=True)
        if dist_on:
            try:
                torch.distributed.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass
    return 0 if rec["status"] in ("ok", "oom", "rejected_spread") else 1


if __name__ == "__main__":
    sys.exit(main())
