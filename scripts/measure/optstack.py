#!/usr/bin/env python3
"""The training optimisation stack, measured cumulatively on one GPU (issue #27 deliverable 3).

A GPT-2-small-class decoder (12 layers, hidden 768, 12 heads, FFN 3072, vocab 50257, learned positions, GELU,
LayerNorm, tied embedding; 124M parameters) trained on sequences of --seq tokens, micro-batch --batch, with the
optimisations applied one after another in this order (each stage keeps the previous ones):
  0 baseline      fp32 eager (TF32 off), explicit softmax attention (materialised [b, h, s, s] scores),
                  AdamW with foreach=False (one set of kernels per parameter tensor), DataLoader num_workers=0
                  whose dataset spends --cpu-ms-per-sample of CPU per sample (a tokenise/pack stand-in: a numpy
                  loop calibrated on this host; the measured per-sample cost is recorded)
  1 workers       DataLoader num_workers=--workers, pin_memory, non_blocking copies
  2 amp_bf16      torch.autocast(bfloat16) (fp32 master weights)
  3 flash_attn    F.scaled_dot_product_attention (flash backend)
  4 fused_adamw   AdamW(fused=True)
  5 compile       torch.compile(model) (default mode)
Each stage: --warmup steps, then --steps timed steps (CUDA events around whole steps including the data fetch, so
a starving loader shows), median; peak allocated memory over the timed steps; the loss must stay finite.
Also recorded: the host's measured per-sample CPU cost and the number of CPU cores.
Output: <out-dir>/optstack.json and a table.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STAGES = ["baseline", "workers", "amp_bf16", "flash_attn", "fused_adamw", "compile"]


class Attn(nn.Module):
    flash = False

    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        if Attn.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
            mask = torch.ones(s, s, device=x.device, dtype=torch.bool).triu(1)
            att = att.masked_fill(mask, float("-inf")).softmax(dim=-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attn(d, h)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.hidden)
        self.wpe = nn.Embedding(a.seq, a.hidden)
        self.blocks = nn.ModuleList([Block(a.hidden, a.heads) for _ in range(a.layers)])
        self.ln = nn.LayerNorm(a.hidden)
        self.head = nn.Linear(a.hidden, a.vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, tgt):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), tgt.view(-1))


def burn(ms):
    """CPU work of about `ms` milliseconds (numpy, single thread), returning tokens."""
    end = time.perf_counter() + ms * 1e-3
    acc = np.zeros(256, dtype=np.int64)
    while time.perf_counter() < end:
        acc += np.arange(256, dtype=np.int64) % 7
    return acc


class Tokens(torch.utils.data.Dataset):
    def __init__(self, a, n):
        self.a, self.n = a, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        burn(self.a.cpu_ms_per_sample)
        g = np.random.default_rng(i)
        t = torch.from_numpy(g.integers(0, self.a.vocab, self.a.seq + 1, dtype=np.int64))
        return t[:-1], t[1:]


def run_stage(a, stage_idx, dev):
    on = set(STAGES[1:stage_idx + 1])
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    Attn.flash = "flash_attn" in on
    if Attn.flash:
        torch.backends.cuda.enable_flash_sdp(True)
    model = GPT(a).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=("fused_adamw" in on) or None,
                            foreach=False if "fused_adamw" not in on else None)
    fwd = torch.compile(model) if "compile" in on else model
    workers = a.workers if "workers" in on else 0
    n = (a.warmup + a.steps + 2) * a.batch
    dl = torch.utils.data.DataLoader(Tokens(a, n), batch_size=a.batch, num_workers=workers,
                                     pin_memory=workers > 0, drop_last=True,
                                     persistent_workers=False, prefetch_factor=4 if workers > 0 else None)
    it = iter(dl)
    amp = "amp_bf16" in on

    def step():
        x, y = next(it)
        x, y = x.to(dev, non_blocking=workers > 0), y.to(dev, non_blocking=workers > 0)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = fwd(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    t0 = time.perf_counter()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    torch.cuda.reset_peak_memory_stats(dev)
    times, losses = [], []
    for _ in range(a.steps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        h0 = time.perf_counter()
        s.record()
        losses.append(step())
        e.record()
        e.synchronize()
        times.append((s.elapsed_time(e) * 1e-3, time.perf_counter() - h0))
    lv = [float(x) for x in losses]
    rec = {"stage": STAGES[stage_idx], "applied": [s for s in STAGES[1:stage_idx + 1]], "workers": workers,
           "step_time_s": statistics.median(t[1] for t in times),
           "step_time_events_s": statistics.median(t[0] for t in times),
           "step_times_s": [round(t[1], 6) for t in times],
           "peak_allocated_bytes": torch.cuda.max_memory_allocated(dev),
           "warmup_wall_s": warm_s, "loss_first": lv[0], "loss_last": lv[-1],
           "loss_finite": all(math.isfinite(x) for x in lv)}
    del it, dl, fwd, model, opt
    torch.cuda.empty_cache()
    return rec


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--cpu-ms-per-sample", type=float, default=5.0)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    dev = torch.device("cuda", 0)
    t0 = time.perf_counter()
    for _ in range(50):
        burn(a.cpu_ms_per_sample)
    per_sample = (time.perf_counter() - t0) / 50
    rec = {"kind": "optimisation_stack", "model": "GPT-2-small class (124M, tied embedding)",
           "config": vars(a), "cpu_s_per_sample_measured": per_sample, "host_cpus": os.cpu_count(),
           "timing": "median wall time of whole steps (data fetch + forward + backward + optimizer), host clock "
                     "after the step's end event synchronised; step_time_events_s is the CUDA-event median",
           "stages": []}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    base = None
    for i in range(len(STAGES)):
        try:
            r = run_stage(a, i, dev)
        except Exception as e:  # noqa: BLE001
            r = {"stage": STAGES[i], "error": str(e)[:500]}
        if "step_time_s" in r:
            base = base or r["step_time_s"]
            r["speedup_vs_baseline"] = base / r["step_time_s"]
            print(f"[optstack] {r['stage']:12s} {r['step_time_s']*1e3:8.1f} ms  x{r['speedup_vs_baseline']:.2f}  "
                  f"peak {r['peak_allocated_bytes']/2**30:.2f} GiB  loss {r['loss_first']:.2f}->{r['loss_last']:.2f}",
                  flush=True)
        else:
            print(f"[optstack] {r['stage']}: {r.get('error')}", flush=True)
        rec["stages"].append(r)
    out_dir = a.out_dir or os.environ.get("OUT", ".")
    with open(os.path.join(out_dir, "optstack.json"), "w") as f:
        json.dump(rec, f, indent=1)
    print(f"[optstack] per-sample CPU {per_sample*1e3:.2f} ms, {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    main()
