#!/usr/bin/env python3
"""One training step of a small MoE decoder on 1-4 GPUs with experts sharded (EP) or replicated (DP) (issue #21 d1).

Ground truth for gpuplan's MoE training model: the step as Megatron-Core runs it without overlap options.
Model: train_step.py's decoder (RMSNorm, RoPE, GQA attention through SDPA flash, untied LM head) with every MLP
replaced by moe_layer.py's MoE layer (router softmax top-k, permute, all-to-all dispatch with the host sync of the
split sizes, torch._grouped_mm SwiGLU experts, all-to-all combine, unpermute; no shared expert, no aux loss, no
token dropping). Qwen3-30B-A3B-shaped MoE (hidden 2048, 128 experts, top-8, expert width 768), attention 16 heads of
128 with 4 KV heads, vocab 32768, --layers decoder layers.
Precision: fp32 master parameters, gradients and AdamW states (fused); bf16 autocast for the dense layers, the expert
weights cast to bf16 at each forward (what autocast does for a linear; _grouped_mm takes bf16 operands).
Parallelism (one process per GPU, torchrun; world W): EP experts per rank = E/EP, ranks in groups of EP consecutive
ranks; the tokens of every rank are its own micro-batch (data parallel over W for the dense parameters).
Gradient synchronisation after backward, not overlapped (Megatron's default, --overlap-grad-reduce off): one
all-reduce of all dense gradients over the W ranks (flattened fp32 buffer), one of the expert gradients over the
W/EP expert-data-parallel ranks (none when EP = W). Then AdamW (fused), then zero_grad.
Timing: CUDA events split each step into forward (incl. loss), backward, grad sync and optimizer; the median of
--steps after --warmup, per rank, then the max over ranks (a step lasts as long as its slowest rank). Peak memory
after warm-up. Writes <name>.json from rank 0.
"""
import argparse
import math
import os
import statistics
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import moe_layer  # noqa: E402
import train_step as ts  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class MoE(nn.Module):
    def __init__(self, a, ep, pg):
        super().__init__()
        self.cfg = {"hidden": a.hidden, "experts": a.experts, "ffn": a.expert_ffn, "topk": a.topk}
        self.ep, self.pg = ep, pg
        el = a.experts // ep
        self.wr = nn.Parameter(torch.randn(a.hidden, a.experts) * a.hidden ** -0.5)
        self.w1 = nn.Parameter(torch.randn(el, a.hidden, 2 * a.expert_ffn) * a.hidden ** -0.5)
        self.w2 = nn.Parameter(torch.randn(el, a.expert_ffn, a.hidden) * a.expert_ffn ** -0.5)
        for p in (self.w1, self.w2):
            p.expert = True

    def forward(self, x):
        b, s, h = x.shape
        P = {"wr": self.wr.to(torch.bfloat16), "w1": self.w1.to(torch.bfloat16), "w2": self.w2.to(torch.bfloat16)}
        rec = moe_layer.Rec(True)  # marks off
        with torch.autocast("cuda", enabled=False):
            y = moe_layer.moe_forward(x.reshape(b * s, h).to(torch.bfloat16), P, self.cfg, self.ep, self.pg, rec)
        return y.view(b, s, h)


class Block(nn.Module):
    def __init__(self, a, ep, pg):
        super().__init__()
        self.attn_norm = ts.RMSNorm(a.hidden)
        self.attn = ts.Attention(a.hidden, a.heads, a.kv_heads)
        self.mlp_norm = ts.RMSNorm(a.hidden)
        self.moe = MoE(a, ep, pg)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.moe(self.mlp_norm(x))


class Model(nn.Module):
    def __init__(self, a, ep, pg):
        super().__init__()
        self.a = a
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList([Block(a, ep, pg) for _ in range(a.layers)])
        self.norm = ts.RMSNorm(a.hidden)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.lm_head.weight, std=0.02)
        for blk in self.layers:
            for lin in (blk.attn.wq, blk.attn.wk, blk.attn.wv, blk.attn.wo):
                nn.init.normal_(lin.weight, std=0.02)

    def forward(self, tokens, targets, cos, sin):
        x = self.embed(tokens).to(torch.bfloat16)
        for layer in self.layers:
            x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _union(intervals):
    """Total length of the union of [start, end) intervals (microseconds): common.interval_union."""
    return common.interval_union(intervals)


def profile_steps(a, model, opt, batches, cos, sin, dense, expert, sync, world, edp, edp_pg, dev, rank):
    """Steps under torch.profiler (CPU + CUDA): per step, the wall time, the time some kernel ran on the GPU (union of
    kernel intervals) and so the GPU-idle time; kernel time by name; the CPU time of the host syncs (cudaStreamSynchronize,
    cudaMemcpy device-to-host of the split sizes) and of kernel launches. From rank 0; every rank runs the steps."""
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    dist.barrier()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for i in range(a.profile_steps):
            inp, tgt = batches[i % 2]
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(inp, tgt, cos, sin)
            loss.backward()
            sync(dense, None, world)
            sync(expert, edp_pg, edp)
            opt.step()
            opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
    if rank != 0:
        return None
    kernels, by_name, runtime = [], {}, {}
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        is_dev = dt is not None and "CUDA" in str(dt)
        iv = e.time_range
        if is_dev:
            kernels.append((iv.start, iv.end))
            k = e.name[:120]
            by_name[k] = by_name.get(k, 0.0) + (iv.end - iv.start)
        elif e.name.startswith("cuda") or e.name.startswith("aten::item") or e.name.startswith("aten::_local_scalar"):
            runtime[e.name] = runtime.get(e.name, 0.0) + (iv.end - iv.start)
    if not kernels:
        return {"error": "no device events"}
    span = max(en for _, en in kernels) - min(st for st, _ in kernels)
    busy = _union(kernels)
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:60]
    return {"steps": a.profile_steps, "gpu_span_us": span, "gpu_busy_us": busy, "gpu_idle_us": span - busy,
            "gpu_busy_frac": busy / span if span > 0 else None, "kernel_count": len(kernels),
            "kernels_top_us": [{"name": k, "us": v} for k, v in top],
            "host_runtime_us": dict(sorted(runtime.items(), key=lambda kv: -kv[1])[:25]),
            "note": "times summed over all profiled steps; one stream of compute plus NCCL's: busy = union over both"}


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--experts", type=int, default=128)
    p.add_argument("--expert-ffn", type=int, default=768)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--seq", type=int, default=4096)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--rope-theta", type=float, default=1e6)
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after the timed steps, run this many steps under torch.profiler (rank 0 writes a summary)")
    p.add_argument("--profile-cuda-only", action="store_true",
                   help="profile with CUDA activity only (no CPU-op tracing): GPU busy/idle and gaps per step")
    p.add_argument("--name", default=None)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    assert world % a.ep == 0 and a.experts % a.ep == 0
    torch.cuda.set_device(lr)
    dev = torch.device("cuda", lr)
    dist.init_process_group("nccl", device_id=dev)
    name = a.name or f"moe_train_L{a.layers}_s{a.seq}_b{a.micro_batch}_ep{a.ep}_w{world}"
    ts.configure_sdpa("flash")
    ts.probe_gqa(a, dev)
    gm = moe_layer.probe_gmm(dev)
    ep_pg, edp_pg = None, None
    for g0 in range(0, world, a.ep):  # EP groups: consecutive ranks
        members = list(range(g0, g0 + a.ep))
        pg = dist.new_group(members) if a.ep > 1 else None
        if rank in members:
            ep_pg = pg
    edp = world // a.ep
    for j in range(a.ep):  # expert-data-parallel groups: the same expert slice on every EP group
        members = list(range(j, world, a.ep))
        pg = dist.new_group(members) if edp > 1 else None
        if rank in members:
            edp_pg = pg
    rec = {"name": name, "kind": "moe_train_step", "status": "started", "world_size": world, "ep": a.ep,
           "expert_dp": edp, "grouped_mm": gm,
           "config": {k: getattr(a, k) for k in ("layers", "hidden", "heads", "kv_heads", "experts", "expert_ffn",
                                                 "topk", "vocab", "seq", "micro_batch", "steps", "warmup")},
           "precision": "fp32 master params, grads, AdamW states (fused); bf16 autocast; expert weights cast to bf16",
           "grad_sync": "after backward, not overlapped: dense grads all-reduced over all ranks (one flat fp32 "
                        "buffer), expert grads over the expert-DP ranks",
           "definitions": {"*_s": "median over steps of the per-rank CUDA-event time, then the max over ranks"}}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    if rank == 0:
        rec["nvidia_smi_before"] = common.nvidia_smi_static(lr)
    try:
        torch.manual_seed(1234)  # dense weights identical on every rank; expert slices differ by rank below
        with torch.device(dev):
            model = Model(a, a.ep, ep_pg)
        with torch.no_grad():  # expert weights: a per-rank draw (timing does not depend on the values)
            g = torch.Generator(device=dev).manual_seed(77 + rank)
            for blk in model.layers:
                blk.moe.w1.copy_(torch.randn(blk.moe.w1.shape, device=dev, generator=g) * a.hidden ** -0.5)
                blk.moe.w2.copy_(torch.randn(blk.moe.w2.shape, device=dev, generator=g) * a.expert_ffn ** -0.5)
        dense = [q for q in model.parameters() if not getattr(q, "expert", False)]
        expert = [q for q in model.parameters() if getattr(q, "expert", False)]
        rec["params_dense"] = sum(q.numel() for q in dense)
        rec["params_expert_local"] = sum(q.numel() for q in expert)
        rec["params_total_model"] = rec["params_dense"] + rec["params_expert_local"] * a.ep
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
        cos, sin = ts.rope_cos_sin(a.seq, a.hidden // a.heads, a.rope_theta, dev, torch.bfloat16)
        gen = torch.Generator(device=dev).manual_seed(1000 + rank)
        batches = []
        for _ in range(2):
            t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=dev, generator=gen)
            batches.append((t[:, :-1].contiguous(), t[:, 1:].contiguous()))

        def sync(params, pg, n):
            if n <= 1:
                return
            grads = [q.grad for q in params]
            flat = torch._utils._flatten_dense_tensors(grads)
            dist.all_reduce(flat, group=pg)
            flat.div_(n)
            for gq, s in zip(grads, torch._utils._unflatten_dense_tensors(flat, grads)):
                gq.copy_(s)

        parts = {"forward": [], "backward": [], "grad_sync": [], "optimizer": [], "step": []}
        losses = []
        for i in range(a.warmup + a.steps):
            if i == a.warmup:
                torch.cuda.synchronize()
                rec["static_bytes_after_warmup"] = torch.cuda.memory_allocated(dev)
                torch.cuda.reset_peak_memory_stats(dev)
                dist.barrier()
                torch.cuda.synchronize()
            ev = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
            inp, tgt = batches[i % 2]
            ev[0].record()
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(inp, tgt, cos, sin)
            ev[1].record()
            loss.backward()
            ev[2].record()
            sync(dense, None, world)
            sync(expert, edp_pg, edp)
            ev[3].record()
            opt.step()
            opt.zero_grad(set_to_none=True)
            ev[4].record()
            losses.append(loss.detach())
            if i >= a.warmup:
                torch.cuda.synchronize()
                for k, (s, e) in zip(("forward", "backward", "grad_sync", "optimizer"), zip(ev[:4], ev[1:])):
                    parts[k].append(s.elapsed_time(e) / 1e3)
                parts["step"].append(ev[0].elapsed_time(ev[4]) / 1e3)
        torch.cuda.synchronize()
        if a.profile_steps > 0 and a.profile_cuda_only:
            state = {"i": 0}

            def one_step():
                inp, tgt = batches[state["i"] % 2]
                state["i"] += 1
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss = model(inp, tgt, cos, sin)
                loss.backward()
                sync(dense, None, world)
                sync(expert, edp_pg, edp)
                opt.step()
                opt.zero_grad(set_to_none=True)
            dist.barrier()
            prof = common.cuda_kernel_profile(one_step, a.profile_steps)
            if rank == 0:
                rec["profile_cuda_only"] = prof
        elif a.profile_steps > 0:
            rec["profile"] = profile_steps(a, model, opt, batches, cos, sin, dense, expert, sync, world, edp, edp_pg,
                                           dev, rank)
        med = torch.tensor([statistics.median(parts[k]) for k in parts], device=dev, dtype=torch.float64)
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
        for k, v in zip(parts, med.tolist()):
            rec[f"{k}_s"] = v
        st = torch.tensor(parts["step"], device=dev, dtype=torch.float64)
        dist.all_reduce(st, op=dist.ReduceOp.MAX)
        rec["step_times_s"] = [round(x, 6) for x in st.tolist()]
        _, lo, hi, spread = common.median_and_spread(st.tolist())
        rec["step_time_spread_frac"] = spread
        rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(dev)
        rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(dev)
        lv = [float(x) for x in torch.stack(losses).float().cpu()]
        rec["losses"] = [round(x, 4) for x in lv]
        rec["status"] = "ok" if all(math.isfinite(x) for x in lv) else "nonfinite_loss"
        rec["tokens_per_step_per_gpu"] = a.seq * a.micro_batch
        if rank == 0:
            print(f"[moe_train {name}] {rec['status']} step {rec['step_s']*1e3:.1f} ms (fwd {rec['forward_s']*1e3:.1f} "
                  f"bwd {rec['backward_s']*1e3:.1f} sync {rec['grad_sync_s']*1e3:.1f} opt {rec['optimizer_s']*1e3:.1f}) "
                  f"spread {spread*100:.1f}% peak {rec['peak_allocated_bytes']/2**30:.1f} GiB "
                  f"loss {lv[0]:.3f}->{lv[-1]:.3f} gmm={gm['mode']}", flush=True)
    except torch.OutOfMemoryError as e:
        rec["status"] = "oom"
        rec["oom_message"] = str(e).splitlines()[0][:300]
        if rank == 0:
            print(f"[moe_train {name}] OOM", flush=True)
    except Exception as e:  # noqa: BLE001
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-2000:]
        print(f"[moe_train {name}] rank {rank} ERROR: {e}", flush=True)
    if rank == 0:
        rec["nvidia_smi_after"] = common.nvidia_smi_static(lr)
        print("wrote", common.write_json(rec, name, a.out_dir), flush=True)
    dist.destroy_process_group()
    return 0 if rec["status"] in ("ok", "oom") else 1


if __name__ == "__main__":
    sys.exit(main())
