#!/usr/bin/env python3
"""Grouped-GEMM backward and the fused AdamW step on one GPU (issue #21: the parts the MoE training step misses).

1. torch._grouped_mm for the Qwen3-30B-A3B expert shapes (hidden 2048, expert width 768: up W1[E, 2048, 1536],
   down W2[E, 768, 2048]) with E in {32, 128} experts and 256..2048 rows per expert (equal groups, offsets int32):
   forward; backward of the data gradient only (W frozen); of the weight gradient only (X frozen); both. bf16,
   random normal inputs, CUDA events, median of --reps after warm-up. FLOPs: 2*rows*K*N per expert per product.
2. torch.optim.AdamW(fused=True) and (foreach=True) over fp32 parameters of 0.2..3 B elements in 64 tensors with fp32
   gradients: the time of opt.step(); bytes moved counted as read p, g, m, v and write p, m, v = 28 B per parameter.
Writes moe_kernels_bwd.json under --out-dir.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402


def timed(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) / 1e3 for s, e in ev]
    return statistics.median(ts), min(ts), max(ts)


def grouped(a, dev, out):
    for name, k, n in (("up", 2048, 1536), ("down", 768, 2048)):
        for experts in a.experts:
            for rows in a.rows:
                m = experts * rows
                offs = torch.arange(rows, m + 1, rows, device=dev, dtype=torch.int32)
                x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
                w = torch.randn(experts, k, n, device=dev, dtype=torch.bfloat16) / k ** 0.5
                dy = torch.randn(m, n, device=dev, dtype=torch.bfloat16)
                flop = 2 * m * k * n
                r = {"layer": name, "experts": experts, "rows_per_expert": rows, "K": k, "N": n, "flop_per_product": flop}
                r["forward_s"] = timed(lambda: torch._grouped_mm(x, w, offs=offs), a.reps)[0]
                for mode, gx, gw in (("dgrad", True, False), ("wgrad", False, True), ("both", True, True)):
                    xx = x.detach().requires_grad_(gx)
                    ww = w.detach().requires_grad_(gw)
                    y = torch._grouped_mm(xx, ww, offs=offs)

                    def bwd(y=y, xx=xx, ww=ww):
                        xx.grad = None  # no accumulation kernel: each timed backward writes fresh gradients
                        ww.grad = None
                        y.backward(dy, retain_graph=True)
                    r[f"backward_{mode}_s"] = timed(bwd, a.reps)[0]
                    xx.grad = None
                    ww.grad = None
                for key in ("forward_s", "backward_dgrad_s", "backward_wgrad_s"):
                    r[key.replace("_s", "_tflops")] = flop / r[key] / 1e12
                out.append(r)
                print(f"gmm {name:4s} E={experts:3d} rows={rows:5d} fwd {r['forward_s']*1e6:8.1f} us "
                      f"({r['forward_tflops']:5.0f} TF/s) dgrad {r['backward_dgrad_s']*1e6:8.1f} "
                      f"({r['backward_dgrad_tflops']:5.0f}) wgrad {r['backward_wgrad_s']*1e6:8.1f} "
                      f"({r['backward_wgrad_tflops']:5.0f}) both {r['backward_both_s']*1e6:8.1f}", flush=True)
                del x, w, dy
                torch.cuda.empty_cache()


def adamw(a, dev, out):
    for total in (0.2e9, 0.5e9, 1e9, 2e9, 3e9):
        n = int(total // 64)
        for impl in ("fused", "foreach"):
            ps = [torch.nn.Parameter(torch.randn(n, device=dev)) for _ in range(64)]
            for p_ in ps:
                p_.grad = torch.randn(n, device=dev)
            opt = torch.optim.AdamW(ps, lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1,
                                    fused=(impl == "fused"), foreach=(impl == "foreach") or None)
            med, lo, hi = timed(opt.step, max(5, a.reps // 2), warmup=2)
            params = n * 64
            r = {"impl": impl, "params": params, "step_s": med, "step_min_s": lo, "step_max_s": hi,
                 "ns_per_param": med / params * 1e9, "bytes_counted_per_param": 28,
                 "achieved_TBps_28B": 28 * params / med / 1e12}
            out.append(r)
            print(f"adamw {impl:7s} {params/1e9:4.1f} B params {med*1e3:8.2f} ms  {r['ns_per_param']:6.2f} ns/param "
                  f"{r['achieved_TBps_28B']:5.2f} TB/s", flush=True)
            del ps, opt
            torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--experts", type=lambda v: [int(x) for x in v.split(",")], default=[32, 128])
    p.add_argument("--rows", type=lambda v: [int(x) for x in v.split(",")], default=[256, 512, 1024, 2048],
                   help="token rows per expert")
    p.add_argument("--skip-adamw", action="store_true")
    p.add_argument("--name", default="moe_kernels_bwd")
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    rec = {"name": "moe_kernels_bwd", "kind": "moe_kernels_bwd"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static(0)
    with common.SmiSampler(0) as sampler:
        rec["grouped_mm"] = []
        grouped(a, dev, rec["grouped_mm"])
        rec["adamw"] = []
        if not a.skip_adamw:
            adamw(a, dev, rec["adamw"])
    rec["nvidia_smi_during"] = sampler.summary()
    print("wrote", common.write_json(rec, a.name, a.out_dir), flush=True)


if __name__ == "__main__":
    main()
