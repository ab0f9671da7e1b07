#!/usr/bin/env python3
"""Compressed GEMM paths on one GPU (issue #27 deliverable 5; #21 block-scaled FP8 at DeepSeek-V3 shapes).

y[M, N] = x[M, K] @ W[N, K]^T for the linear layers of Llama-2-7B (N x K = 4096 x 4096, 11008 x 4096, 4096 x 11008,
12288 x 4096) at M = 1 ... 4096 tokens, through each path this PyTorch offers:
  bf16        torch.mm (cuBLAS)
  int8        torch._int_mm (int8 x int8 -> int32, cuBLAS; W8A8 without the scale epilogue)
  fp8_tensor  torch._scaled_mm, e4m3 operands, one scale per tensor, bf16 out
  fp8_row     torch._scaled_mm, per-row (token) x per-column (channel) scales, bf16 out
  sp24_bf16   2:4 semi-structured sparse weight (cuSPARSELt, torch.sparse.to_sparse_semi_structured) x bf16 x
  sp24_int8 / sp24_fp8   the same with int8 / e4m3 operands where this PyTorch supports them
  w4a16       torch._weight_int4pack_mm (int4 weights, group 128, bf16 activations: weight-only quantisation)
and, with --dsv3, block-scaled FP8 (1x128 activation scales, 128x128 weight scales, DeepSeek-V3's recipe) against
fp8_tensor and bf16 at DeepSeek-V3's GEMM shapes.
Each path is checked against a float32 product of the same (dequantised) operands (relative Frobenius error), then
timed with CUDA events after warm-up (median of --reps); operand sets rotate when they would fit in L2. A path that
raises is recorded with its error message. Output: <out-dir>/compress_gemm.json and a table.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

LLAMA7B = [(4096, 4096), (11008, 4096), (4096, 11008), (12288, 4096)]
MS = [1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
DSV3 = [(7168, 2048), (4096, 7168), (2048, 7168), (24576, 1536), (1536, 7168), (7168, 16384), (32768, 512)]
DSV3_MS = [128, 1024, 4096, 16384]
FP8 = torch.float8_e4m3fn
L2 = 50e6


def timed(fn, sets, warmup, reps):
    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    ts = []
    for i in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        args = sets[i % len(sets)]
        s.record()
        fn(*args)
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(ts)


def rel(y, ref):
    y = y.float()
    if not torch.isfinite(y).all():
        return float("nan")
    return float((y - ref).norm() / ref.norm().clamp_min(1e-30))


def prune24(w):
    """Keep the 2 largest |w| of every 4 along K."""
    n, k = w.shape
    g = w.reshape(n, k // 4, 4)
    idx = g.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(g, dtype=torch.bool).scatter_(-1, idx, True)
    return (g * mask).reshape(n, k)


def paths(M, N, K, dev, with_sparse=True, with_int4=True):
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.05
    out = {}
    ref = x.float() @ w.float().t()
    out["bf16"] = (lambda a, b: torch.mm(a, b.t()), [(x, w)], ref)
    # int8 (symmetric, per-tensor scales folded out: the kernel's own time)
    xs = x.abs().max() / 127
    ws = w.abs().max() / 127
    xi = (x / xs).round().clamp(-127, 127).to(torch.int8)
    wi = (w / ws).round().clamp(-127, 127).to(torch.int8)
    ref_i = xi.float() @ wi.float().t()
    out["int8"] = (lambda a, b: torch._int_mm(a, b.t()), [(xi, wi)], ref_i)
    # fp8 tensorwise
    xf, wf = x.to(FP8), w.mul(16).to(FP8)
    one = torch.ones((), device=dev)
    sw = torch.full((), 1 / 16, device=dev)
    ref_f = xf.float() @ (wf.float() / 16).t()
    out["fp8_tensor"] = (lambda a, b: torch._scaled_mm(a, b.t(), scale_a=one, scale_b=sw, out_dtype=torch.bfloat16),
                         [(xf, wf)], ref_f)
    sa = torch.ones(M, 1, device=dev)
    sb = torch.full((1, N), 1 / 16, device=dev)
    out["fp8_row"] = (lambda a, b: torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16),
                      [(xf, wf)], ref_f)
    if with_sparse:
        from torch.sparse import to_sparse_semi_structured
        w24 = prune24(w)
        ref_s = x.float() @ w24.float().t()
        try:
            ws24 = to_sparse_semi_structured(w24)
            out["sp24_bf16"] = (lambda a, b: F.linear(a, b), [(x, ws24)], ref_s)
        except Exception as e:  # noqa: BLE001
            out["sp24_bf16"] = str(e)[:300]
        try:
            wi24 = prune24(wi.float()).to(torch.int8)
            wsi = to_sparse_semi_structured(wi24)
            ref_si = xi.float() @ wi24.float().t()
            out["sp24_int8"] = (lambda a, b: torch.mm(b, a.t()).t(), [(xi, wsi)], ref_si)
        except Exception as e:  # noqa: BLE001
            out["sp24_int8"] = str(e)[:300]
        try:
            wf24 = prune24(wf.float()).to(FP8)
            wsf = to_sparse_semi_structured(wf24)
            ref_sf = xf.float() @ wf24.float().t()
            out["sp24_fp8"] = (lambda a, b: torch._scaled_mm(b, a.t(), scale_a=one, scale_b=one,
                                                             out_dtype=torch.bfloat16).t(), [(xf, wsf)], ref_sf)
        except Exception as e:  # noqa: BLE001
            out["sp24_fp8"] = str(e)[:300]
    if with_int4:
        try:
            g = 128
            wr = w.float().reshape(N, K // g, g)
            mn, mx = wr.amin(-1, keepdim=True), wr.amax(-1, keepdim=True)
            scale = ((mx - mn) / 15).clamp_min(1e-6)
            q = ((wr - mn) / scale).round().clamp(0, 15)
            deq = (q * scale + mn).reshape(N, K)
            qi = q.reshape(N, K).to(torch.int32)
            packed_u8 = (qi[:, ::2] << 4 | qi[:, 1::2]).to(torch.uint8)
            wpk = torch.ops.aten._convert_weight_to_int4pack(packed_u8, 8)
            # tinygemm's zero point: w = (q - 8) * s + z with z = mn + 8 s
            sz = torch.stack([scale.reshape(N, K // g).t(), (mn + 8 * scale).reshape(N, K // g).t()], dim=-1)
            sz = sz.contiguous().to(torch.bfloat16)
            ref4 = x.float() @ deq.t()
            out["w4a16"] = (lambda a, b: torch.ops.aten._weight_int4pack_mm(a, b, g, sz), [(x, wpk)], ref4)
        except Exception as e:  # noqa: BLE001
            out["w4a16"] = str(e)[:300]
    return out


def block_fp8(M, N, K, dev):
    """DeepSeek-V3 fine-grained FP8: activations scaled per 1x128 tile, weights per 128x128 block."""
    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    w = torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.05
    xb = x.float().reshape(M, K // 128, 128)
    sx = (xb.abs().amax(-1) / 448).clamp_min(1e-12)  # [M, K/128]
    xq = (xb / sx[..., None]).to(FP8).reshape(M, K)
    wb = w.float().reshape(N // 128, 128, K // 128, 128)
    sw = (wb.abs().amax(dim=(1, 3)) / 448).clamp_min(1e-12)  # [N/128, K/128]
    wq = (wb / sw[:, None, :, None]).to(FP8).reshape(N, K)
    ref = (xq.float().reshape(M, K // 128, 128) * sx[..., None]).reshape(M, K) @ \
          (wq.float().reshape(N // 128, 128, K // 128, 128) * sw[:, None, :, None]).reshape(N, K).t()
    res = {}
    tries = []
    # layouts PyTorch has accepted for blockwise scaling on sm90 (cuBLAS >= 12.9): scale_a [M, K/128] outer-dim-major
    # (i.e. stored K/128-major: .t().contiguous().t()), scale_b [K/128, N/128] (the transpose of [N/128, K/128]).
    tries.append(("sa_outer_sb_t", lambda: (sx.t().contiguous().t(), sw.t())))
    tries.append(("sa_plain_sb_t", lambda: (sx.contiguous(), sw.t())))
    tries.append(("sa_outer_sb_tc", lambda: (sx.t().contiguous().t(), sw.t().contiguous())))
    for name, mk in tries:
        try:
            a_s, b_s = mk()

            def fn(a, b, a_s=a_s, b_s=b_s):
                return torch._scaled_mm(a, b.t(), scale_a=a_s, scale_b=b_s, out_dtype=torch.bfloat16)
            y = fn(xq, wq)
            e = rel(y, ref)
            res = {"layout": name, "fn": fn, "err": e}
            break
        except Exception as ex:  # noqa: BLE001
            res.setdefault("errors", []).append(f"{name}: {str(ex)[:240]}")
    if "fn" not in res and hasattr(F, "scaled_mm"):
        try:
            from torch.nn.functional import ScalingType, SwizzleType  # noqa: F401

            def fn2(a, b):
                return F.scaled_mm(a, b.t(), sx.t().contiguous().t(), ScalingType.BlockWise1x128,
                                   sw.t(), ScalingType.BlockWise128x128, output_dtype=torch.bfloat16)
            y = fn2(xq, wq)
            res.update({"layout": "F.scaled_mm", "fn": fn2, "err": rel(y, ref)})
        except Exception as ex:  # noqa: BLE001
            res.setdefault("errors", []).append(f"F.scaled_mm: {str(ex)[:240]}")
    return res, (xq, wq)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--dsv3", action="store_true")
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    rec = {"kind": "compress_gemm", "layout": "y[M,N] = x[M,K] @ W[N,K]^T", "records": [], "errors": {}}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    for (N, K) in LLAMA7B:
        for M in MS:
            for name, v in paths(M, N, K, dev).items():
                if isinstance(v, str):
                    rec["errors"].setdefault(name, v)
                    continue
                fn, sets, ref = v
                try:
                    y = fn(*sets[0])
                    err = rel(y, ref)
                    el = sum(t.numel() * t.element_size() for t in sets[0] if isinstance(t, torch.Tensor)
                             and t.layout == torch.strided)
                    reps_sets = sets * 1
                    if el < L2:  # rotate copies so that the weights are not served from L2
                        reps_sets = [tuple(t.clone() if isinstance(t, torch.Tensor) and t.layout == torch.strided
                                           else t for t in sets[0]) for _ in range(max(1, int(2 * L2 / max(el, 1))))]
                        reps_sets = reps_sets[:8]
                    t = timed(fn, reps_sets, a.warmup, a.reps)
                    r = {"path": name, "M": M, "N": N, "K": K, "time_s": t, "rel_err": err,
                         "tflops": 2 * M * N * K / t / 1e12}
                except Exception as ex:  # noqa: BLE001
                    r = {"path": name, "M": M, "N": N, "K": K, "error": str(ex)[:300]}
                rec["records"].append(r)
        torch.cuda.empty_cache()
    if a.dsv3:
        for (N, K) in DSV3:
            for M in DSV3_MS:
                res, ops = block_fp8(M, N, K, dev)
                base = paths(M, N, K, dev, with_sparse=False, with_int4=False)
                for name in ("bf16", "fp8_tensor"):
                    fn, sets, ref = base[name]
                    t = timed(fn, sets, a.warmup, a.reps)
                    rec["records"].append({"path": name, "shape_set": "dsv3", "M": M, "N": N, "K": K, "time_s": t,
                                           "rel_err": rel(fn(*sets[0]), ref), "tflops": 2 * M * N * K / t / 1e12})
                if "fn" in res:
                    t = timed(res["fn"], [ops], a.warmup, a.reps)
                    rec["records"].append({"path": "fp8_block", "shape_set": "dsv3", "layout": res["layout"],
                                           "M": M, "N": N, "K": K, "time_s": t, "rel_err": res["err"],
                                           "tflops": 2 * M * N * K / t / 1e12})
                else:
                    rec["errors"].setdefault("fp8_block", res.get("errors"))
                torch.cuda.empty_cache()
    out_dir = a.out_dir or os.environ.get("OUT", ".")
    with open(os.path.join(out_dir, "compress_gemm.json"), "w") as f:
        json.dump(rec, f, indent=1)
    by = {}
    for r in rec["records"]:
        if "time_s" in r:
            by.setdefault((r.get("shape_set", "llama7b"), r["N"], r["K"], r["M"]), {})[r["path"]] = r["time_s"]
    names = ["bf16", "int8", "fp8_tensor", "fp8_row", "sp24_bf16", "sp24_int8", "sp24_fp8", "w4a16", "fp8_block"]
    print("set      N     K     M  " + " ".join(f"{n:>10s}" for n in names) + "   (us)")
    for (s, N, K, M), d in sorted(by.items()):
        print(f"{s:7s} {N:5d} {K:5d} {M:5d}  " + " ".join(f"{d[n]*1e6:10.1f}" if n in d else f"{'-':>10s}"
                                                         for n in names))
    for k, v in rec["errors"].items():
        print(f"error {k}: {v}")
    bad = [r for r in rec["records"] if "rel_err" in r and not (r["rel_err"] < 0.05)]
    for r in bad[:20]:
        print(f"CHECK {r['path']} M{r['M']} N{r['N']} K{r['K']}: rel_err {r['rel_err']}")


if __name__ == "__main__":
    main()
