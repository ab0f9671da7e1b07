#!/usr/bin/env python3
"""Measure one training step of a Llama-style decoder on real GPUs: step time, tokens/s, model TFLOP/s, peak memory.

Ground truth for gpuplan's training model. Self-contained (PyTorch only): RMSNorm, RoPE, GQA attention through
F.scaled_dot_product_attention(is_causal=True) restricted to the flash backend, SwiGLU MLP, untied LM head, no
dropout, random weights, random token batches, bf16 autocast with fp32 master parameters, AdamW(fused=True).
Optional full activation checkpointing (each decoder layer), DDP or FSDP2 (full shard, one process per GPU, NCCL,
started with torchrun).

Timing: CUDA events around each step (forward + backward + optimizer step + zero_grad) after the warm-up steps;
the median of >= 10 steps is reported, and the run is refused (status "rejected_spread", no headline numbers)
when (max - min) / median exceeds --max-spread (default 10 %). Peak memory: torch.cuda.reset_peak_memory_stats()
after warm-up, then max_memory_allocated / max_memory_reserved over the timed steps. An out-of-memory error is
recorded as a result (status "oom") with the peak reached before it.

Model FLOPs per step per GPU = 6*N*T + 12*L*h*s*T (N: all parameters, input embedding and LM head included;
T: tokens per step per GPU; L layers; h hidden; s sequence length; the causal mask is not discounted and
recomputation is not counted). Achieved model TFLOP/s per GPU = that / step time.

Examples:
  python3 train_step.py --name llama1b_s2048_b4 --hidden 2048 --layers 16 --heads 32 --kv-heads 8 \
      --intermediate 8192 --vocab 128256 --seq 2048 --micro-batch 4
  torchrun --standalone --nproc_per_node=2 train_step.py --ddp ...    (or --fsdp)
  python3 train_step.py --sanity      (small model, fixed batch: loss must be finite and fall)
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

FLOPS_FORMULA = ("model_flops_per_step_per_gpu = 6*N*T + 12*L*h*s*T; N = all parameters (input embedding and untied "
                 "LM head included), T = tokens per step per GPU = micro_batch*seq, L = layers, h = hidden, "
                 "s = seq; causal mask not discounted, activation recomputation not counted")


# ----------------------------------------------------------------------------------------------------------------- model
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight.to(x.dtype), self.eps)


def rope_cos_sin(seq, head_dim, theta, device, dtype):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    t = torch.arange(seq, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x, cos, sin):
    d = x.shape[-1] // 2
    x1, x2 = x[..., :d], x[..., d:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class Attention(nn.Module):
    gqa_mode = "enable_gqa"  # set to "repeat_kv" by the probe when SDPA's enable_gqa path is not available

    def __init__(self, hidden, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.wq = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_heads == self.heads:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif Attention.gqa_mode == "enable_gqa":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            rep = self.heads // self.kv_heads
            o = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1),
                                               is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.attn_norm = RMSNorm(a.hidden)
        self.attn = Attention(a.hidden, a.heads, a.kv_heads)
        self.mlp_norm = RMSNorm(a.hidden)
        self.mlp = MLP(a.hidden, a.intermediate)

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.embed = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList([Block(a) for _ in range(a.layers)])
        self.norm = RMSNorm(a.hidden)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
        self.ckpt = a.ckpt == "full"
        self._rope = {}  # plain attribute, not a buffer: DDP/FSDP leave it alone

    def forward(self, tokens, targets):
        s = tokens.shape[1]
        key = (s, tokens.device)
        if key not in self._rope:
            self._rope[key] = rope_cos_sin(s, self.a.hidden // self.a.heads, self.a.rope_theta, tokens.device,
                                           torch.bfloat16)
        cos, sin = self._rope[key]
        x = self.embed(tokens).to(torch.bfloat16)  # residual stream in bf16
        for layer in self.layers:
            if self.ckpt and self.training:
                x = checkpoint(layer, x, cos, sin, use_reentrant=False)
            else:
                x = layer(x, cos, sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))  # autocast: fp32 loss


def init_weights(model):
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)


def count_params(model, a):
    total = sum(p.numel() for p in model.parameters())
    emb = model.embed.weight.numel()
    head = model.lm_head.weight.numel()
    per_layer = sum(p.numel() for p in model.layers[0].parameters()) if a.layers else 0
    hd = a.hidden // a.heads
    analytic = (2 * a.vocab * a.hidden + a.hidden + a.layers * (
        2 * a.hidden + a.hidden * a.heads * hd * 2 + 2 * a.hidden * a.kv_heads * hd + 3 * a.hidden * a.intermediate))
    assert total == analytic, (total, analytic)
    return {"params_total": total, "params_input_embedding": emb, "params_lm_head": head,
            "params_per_layer": per_layer, "params_non_embedding": total - emb}


# ------------------------------------------------------------------------------------------------------------ helpers
def configure_sdpa(backend):
    """Restrict SDPA to one backend globally (so recomputation in backward uses it too)."""
    b = torch.backends.cuda
    b.enable_flash_sdp(backend in ("flash", "any"))
    b.enable_mem_efficient_sdp(backend in ("efficient", "any"))
    b.enable_math_sdp(backend in ("math", "any"))
    if hasattr(b, "enable_cudnn_sdp"):
        b.enable_cudnn_sdp(backend in ("cudnn", "any"))
    return {"flash": b.flash_sdp_enabled(), "mem_efficient": b.mem_efficient_sdp_enabled(),
            "math": b.math_sdp_enabled(), "cudnn": b.cudnn_sdp_enabled() if hasattr(b, "cudnn_sdp_enabled") else None}


def probe_gqa(a, device):
    """Use SDPA's enable_gqa=True if the enabled backend takes it, else repeat K/V (recorded)."""
    if a.kv_heads == a.heads:
        return "mha"
    hd = a.hidden // a.heads
    q = torch.randn(1, a.heads, 128, hd, device=device, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(1, a.kv_heads, 128, hd, device=device, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(1, a.kv_heads, 128, hd, device=device, dtype=torch.bfloat16, requires_grad=True)
    try:
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).sum().backward()
        Attention.gqa_mode = "enable_gqa"
    except Exception as e:  # noqa: BLE001
        print(f"[train_step] enable_gqa not usable ({str(e).splitlines()[0][:200]}); repeating K/V", flush=True)
        Attention.gqa_mode = "repeat_kv"
    return Attention.gqa_mode


def attention_kernels_seen(step_fn):
    """Run one step under the profiler; return the names of the attention kernels that ran."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step_fn()
            torch.cuda.synchronize()
        names = sorted({e.key for e in prof.key_averages()})
        keys = ("flash", "fmha", "attention", "cudnn", "sdpa", "attn")
        hits = [n for n in names if any(k in n.lower() for k in keys)]
        return [n[:140] for n in hits][:8]
    except torch.OutOfMemoryError:
        raise
    except Exception as e:  # noqa: BLE001
        return [f"profiler failed: {str(e)[:200]}"]


def backend_from_kernels(names):
    low = " ".join(names).lower()
    if "profiler failed" in low or not names:
        return None
    if "flash" in low:
        return "flash"
    if "cudnn" in low:
        return "cudnn"
    if "fmha" in low or "efficient" in low:
        return "efficient"
    return "unknown"


def wrap_parallel(model, a, local_rank):
    """DDP or FSDP2 (each decoder layer + root, bf16 params, fp32 reduce) as the measured runs use; returns
    (model, options to record)."""
    if a.ddp:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True, broadcast_buffers=False)
        return model, {"ddp_options": {"gradient_as_bucket_view": True, "bucket_cap_mb": 25, "grad_dtype": "fp32"}}
    if a.fsdp:
        try:
            from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import MixedPrecisionPolicy, fully_shard
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mp_policy=mp)
        fully_shard(model, mp_policy=mp)
        return model, {"fsdp_options": {"api": "FSDP2 fully_shard", "units": "each decoder layer + root",
                                        "reshard_after_forward": True, "param_dtype": "bf16", "reduce_dtype": "fp32"}}
    return model, {}


# --------------------------------------------------------------------------------------------------------------- main
def parse():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--name", default=None, help="run name (JSON file name)")
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--vocab", type=int, default=128256)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--micro-batch", type=int, default=1)
    p.add_argument("--steps", type=int, default=12, help="timed steps (>= 10)")
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--ckpt", choices=["none", "full"], default="none", help="activation checkpointing, per layer")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ddp", action="store_true", help="DistributedDataParallel (torchrun, one process per GPU)")
    g.add_argument("--fsdp", action="store_true", help="FSDP2 fully_shard per layer + root (full shard)")
    p.add_argument("--sdpa-backend", choices=["flash", "efficient", "cudnn", "math", "any"], default="flash")
    p.add_argument("--optim-impl", choices=["fused", "foreach"], default="fused")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--rope-theta", type=float, default=500000.0)
    p.add_argument("--fixed-batch", action="store_true", help="one fixed batch for every step (loss must fall)")
    p.add_argument("--sanity", action="store_true",
                   help="small model, fixed batch, lr 1e-3, 30 steps: checks the loss is finite and falls")
    p.add_argument("--max-spread", type=float, default=0.10)
    p.add_argument("--peak-tflops", type=float, default=989.4, help="dense bf16 peak for MFU (H100/H200 SXM)")
    p.add_argument("--out-dir", default=None, help="folder for <name>.json (default $OUT, else .)")
    p.add_argument("--append-jsonl", default=None, help="also append the record as one line to this file")
    p.add_argument("--no-smi", action="store_true")
    a = p.parse_args()
    if a.sanity:
        a.hidden, a.layers, a.heads, a.kv_heads, a.intermediate, a.vocab = 512, 4, 8, 4, 1536, 32000
        a.seq, a.micro_batch, a.steps, a.warmup, a.lr, a.fixed_batch = 512, 8, 30, 2, 1e-3, True
        a.max_spread = float("inf")  # not a timing run
    assert a.hidden % a.heads == 0 and a.heads % a.kv_heads == 0
    if a.name is None:
        par = "fsdp" if a.fsdp else "ddp" if a.ddp else "single"
        a.name = (f"{'sanity_' if a.sanity else ''}h{a.hidden}_L{a.layers}_s{a.seq}_b{a.micro_batch}"
                  f"_{a.ckpt}ckpt_{par}")
    return a


def main():
    a = parse()
    distributed = a.ddp or a.fsdp
    rank, world, local_rank = 0, 1, 0
    if distributed:
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    torch.manual_seed(1234)  # same weights on every rank

    rec = {
        "name": a.name, "kind": "train_step", "status": "started",
        "config": {k: getattr(a, k) for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab",
                                              "seq", "micro_batch", "steps", "warmup", "ckpt", "lr", "rope_theta",
                                              "fixed_batch", "sanity", "sdpa_backend", "optim_impl")},
        "parallel": "fsdp" if a.fsdp else "ddp" if a.ddp else "none", "world_size": world,
        "precision": "bf16 autocast; fp32 master params, grads and AdamW states; bf16 residual stream; fp32 loss",
        "flops_formula": FLOPS_FORMULA, "peak_tflops_ref": a.peak_tflops,
    }
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    if rank == 0 and not a.no_smi:
        rec["nvidia_smi_before"] = common.nvidia_smi_static(local_rank)
    rec["sdpa_backends_enabled"] = configure_sdpa(a.sdpa_backend)
    rec["gqa_impl"] = probe_gqa(a, device)

    def log(msg):
        if rank == 0:
            print(f"[train_step {a.name}] {msg}", flush=True)

    model = opt = None
    losses = []
    phase = "build"
    try:
        with torch.device(device):
            model = Llama(a)
            init_weights(model)
        rec.update(count_params(model, a))
        rec["param_bytes_after_init"] = torch.cuda.memory_allocated(device)
        log(f"N = {rec['params_total']:,} params; gqa={rec['gqa_impl']}")
        model, opts = wrap_parallel(model, a, local_rank)
        rec.update(opts)
        rec["param_bytes_after_wrap"] = torch.cuda.memory_allocated(device)
        opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                                fused=(a.optim_impl == "fused"), foreach=(a.optim_impl == "foreach") or None)
        rec["optimizer"] = f"torch.optim.AdamW({a.optim_impl})"

        gen = torch.Generator(device=device)
        gen.manual_seed(1000 + rank)

        def batch():
            t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=device, generator=gen)
            return t[:, :-1].contiguous(), t[:, 1:].contiguous()

        fixed = batch() if a.fixed_batch else None
        batches = [batch() for _ in range(4)] if not a.fixed_batch else None
        counter = [0]

        def step():
            if fixed is not None:
                inp, tgt = fixed
            else:
                inp, tgt = batches[counter[0] % len(batches)]
            counter[0] += 1
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(inp, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        model.train()
        phase = "warmup"
        for i in range(a.warmup):
            losses.append(step())
        torch.cuda.synchronize()
        rec["static_bytes_after_warmup"] = torch.cuda.memory_allocated(device)  # params + optimizer states (+ DDP)
        torch.cuda.reset_peak_memory_stats(device)
        sampler = common.SmiSampler(local_rank) if (rank == 0 and not a.no_smi) else None
        if distributed:  # start the timed steps together on every rank (else the first step waits for the late rank)
            import torch.distributed as dist
            dist.barrier()
            torch.cuda.synchronize()

        phase = "timed"
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(a.steps)]
        if sampler:
            sampler.__enter__()
        try:
            for i in range(a.steps):
                starts[i].record()
                losses.append(step())
                ends[i].record()
            torch.cuda.synchronize()
        finally:
            if sampler:
                sampler.__exit__(None, None, None)
                rec["nvidia_smi_during_timed_steps"] = sampler.summary()
        times = [s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends)]
        if distributed:
            import torch.distributed as dist
            t = torch.tensor(times, device=device, dtype=torch.float64)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)  # a step lasts as long as its slowest rank
            times = t.tolist()
        rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        lv = [float(x) for x in torch.stack(losses).float().cpu()]
        rec["losses"] = [round(x, 4) for x in lv]
        rec["loss_finite"] = all(math.isfinite(x) for x in lv)
        rec["loss_first"], rec["loss_last"] = lv[0], lv[-1]
        rec["loss_expected_initial_ln_vocab"] = math.log(a.vocab)
        rec["loss_decreased"] = lv[-1] < lv[0]

        # one more step, after the timed ones and the memory readings, under the profiler: which attention kernels ran
        phase = "profile"
        rec["attention_kernels"] = attention_kernels_seen(step)
        rec["sdpa_backend_ran"] = backend_from_kernels(rec["attention_kernels"])

        med, tmin, tmax, spread = common.median_and_spread(times)
        rec["step_times_s"] = [round(x, 6) for x in times]
        rec["step_time_min_s"], rec["step_time_max_s"], rec["step_time_spread_frac"] = tmin, tmax, spread
        tokens = a.micro_batch * a.seq
        flops = 6 * rec["params_total"] * tokens + 12 * a.layers * a.hidden * a.seq * tokens
        rec["tokens_per_step_per_gpu"] = tokens
        rec["model_flops_per_step_per_gpu"] = flops
        ok = rec["loss_finite"] and (not a.fixed_batch or rec["loss_decreased"])
        if a.sanity:
            rec["status"] = "sanity_pass" if ok and lv[-1] < 0.9 * lv[0] else "sanity_fail"
        elif not rec["loss_finite"]:
            rec["status"] = "nonfinite_loss"
        elif spread > a.max_spread or len(times) < 10:
            rec["status"] = "rejected_spread"
            rec["note"] = (f"refused: step-time spread (max-min)/median = {spread:.3f} > {a.max_spread} "
                           f"(or fewer than 10 steps); headline numbers withheld, raw times kept")
        else:
            rec["status"] = "ok"
        if rec["status"] == "ok":  # a sanity run is not a timing run: no headline numbers
            rec["step_time_s"] = med
            rec["tokens_per_s_per_gpu"] = tokens / med
            rec["tokens_per_s"] = tokens * world / med
            rec["model_tflops_per_s_per_gpu"] = flops / med / 1e12
            rec["mfu_vs_peak"] = rec["model_tflops_per_s_per_gpu"] / a.peak_tflops
        log(f"status={rec['status']} step={med*1e3:.1f} ms (spread {spread*100:.1f}%) "
            f"tok/s/gpu={tokens/med:,.0f} TFLOP/s/gpu={flops/med/1e12:.1f} "
            f"peak alloc={rec['peak_allocated_bytes']/2**30:.2f} GiB reserved={rec['peak_reserved_bytes']/2**30:.2f} GiB "
            f"loss {lv[0]:.3f}->{lv[-1]:.3f} sdpa={rec['sdpa_backend_ran']}")
    except torch.OutOfMemoryError as e:
        rec["status"] = "oom"
        rec["oom_phase"] = phase
        rec["oom_message"] = str(e).splitlines()[0][:300]
        rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
        rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved(device)
        rec["note"] = ("out of memory; peak_* are the peaks reached before the failure, counted from process "
                       "start" + (" (reset after warm-up)" if phase == "timed" else ""))
        log(f"OOM in {phase}: {rec['oom_message']}")
    except Exception as e:  # noqa: BLE001 - record, then fail loudly
        rec["status"] = "error"
        rec["error"] = traceback.format_exc()[-2000:]
        log(f"ERROR: {e}")
    finally:
        if rank == 0 and not a.no_smi:
            rec["nvidia_smi_after"] = common.nvidia_smi_static(local_rank)
        if rank == 0:
            path = common.write_json(rec, a.name, a.out_dir, a.append_jsonl)
            print(f"[train_step {a.name}] wrote {path}", flush=True)
        if distributed:
            import torch.distributed as dist
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001
                pass
    return 0 if rec["status"] in ("ok", "sanity_pass", "oom", "rejected_spread") else 1


if __name__ == "__main__":
    sys.exit(main())
