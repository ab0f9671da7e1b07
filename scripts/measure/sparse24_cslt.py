#!/usr/bin/env python3
"""2:4 structured sparsity through cuSPARSELt directly (issue #27 deliverable 5).

compress_gemm.py's 2:4 path (to_sparse_semi_structured + F.linear) measured 0.6-1.5 ms at Llama-2-7B shapes where
the dense GEMM takes 0.05-0.56 ms. This script separates the kernel from that path's overheads: the weight is
compressed once (torch._cslt_compress), the best algorithm is searched once per shape (torch._cslt_sparse_mm_search,
where this PyTorch has it) and the product W_sparse[N, K] @ x^T[K, M] is timed alone (torch._cslt_sparse_mm),
bf16 and fp8 e4m3 (bf16 out) and int8 (int32/bf16 out where offered), against the dense cuBLAS product of the same
orientation (W @ x^T). A transposed, contiguous x^T is prepared outside the timed region (a real layer would keep
activations in that layout or pay the transpose: its time is measured too). Checked against float32 products.
Output: <out-dir>/sparse24_cslt.json and a table.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402

SHAPES = [(4096, 4096), (11008, 4096), (4096, 11008), (12288, 4096), (8192, 8192), (28672, 8192)]
MS = [16, 64, 256, 1024, 2048, 4096, 8192]


def timed(fn, warmup=5, reps=30):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e-3)
    return statistics.median(ts)


def prune24(w):
    n, k = w.shape
    g = w.reshape(n, k // 4, 4)
    idx = g.abs().topk(2, dim=-1).indices
    mask = torch.zeros_like(g, dtype=torch.bool).scatter_(-1, idx, True)
    return (g * mask).reshape(n, k)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    rec = {"kind": "sparse24_cslt", "product": "W[N,K] (2:4 along K) @ xT[K,M]", "records": [], "errors": []}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    has_search = hasattr(torch, "_cslt_sparse_mm_search")
    rec["alg_search"] = has_search
    for (N, K) in SHAPES:
        w = prune24(torch.randn(N, K, device=dev, dtype=torch.bfloat16) * 0.05)
        for dt in ("bf16", "fp8", "int8"):
            try:
                if dt == "bf16":
                    wd = w
                elif dt == "fp8":
                    wd = (w * 16).to(torch.float8_e4m3fn)
                else:
                    wd = (w * 2000).round().clamp(-127, 127).to(torch.int8)
                comp = torch._cslt_compress(wd)
            except Exception as e:  # noqa: BLE001
                rec["errors"].append(f"compress {dt} {N}x{K}: {str(e)[:240]}")
                continue
            for M in MS:
                try:
                    x = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
                    if dt == "bf16":
                        xt = x.t().contiguous()
                        kw = {}
                        ref = w.float() @ xt.float()
                        dense = lambda: torch.mm(w, xt)  # noqa: E731
                    elif dt == "fp8":
                        xq = x.to(torch.float8_e4m3fn)
                        xt = xq.t().contiguous()
                        kw = {"out_dtype": torch.bfloat16}
                        ref = wd.float() @ xt.float()
                        one = torch.ones((), device=dev)
                        wdc = wd.contiguous()
                        xtt = xq.contiguous()  # scaled_mm wants column-major second operand
                        dense = lambda: torch._scaled_mm(wdc, xtt.t(), scale_a=one, scale_b=one,  # noqa: E731
                                                         out_dtype=torch.bfloat16)
                    else:
                        xq = (x * 20).round().clamp(-127, 127).to(torch.int8)
                        xt = xq.t().contiguous()
                        kw = {"out_dtype": torch.int32}
                        ref = wd.float() @ xt.float()
                        xtt = xq.contiguous()
                        dense = lambda: torch._int_mm(wd, xtt.t())  # noqa: E731
                    alg = 0
                    if has_search:
                        try:
                            alg = torch._cslt_sparse_mm_search(comp, xt, **kw)
                        except Exception as e:  # noqa: BLE001
                            rec["errors"].append(f"search {dt} {N}x{K} M{M}: {str(e)[:200]}")
                    try:
                        fn = lambda: torch._cslt_sparse_mm(comp, xt, alg_id=alg, **kw)  # noqa: E731
                        y = fn()
                    except Exception as e:  # noqa: BLE001
                        if "out_dtype" in kw and dt == "int8":
                            kw = {"out_dtype": torch.bfloat16}
                            fn = lambda: torch._cslt_sparse_mm(comp, xt, alg_id=alg, **kw)  # noqa: E731
                            y = fn()
                            rec["errors"].append(f"int8 int32-out refused, bf16 out used: {str(e)[:160]}")
                        else:
                            raise
                    err = float((y.float() - ref).norm() / ref.norm())
                    ts = timed(fn)
                    td = timed(dense)
                    tt = timed(lambda: x.t().contiguous())
                    rec["records"].append({"dtype": dt, "M": M, "N": N, "K": K, "sparse_s": ts, "dense_s": td,
                                           "transpose_x_s": tt, "speedup": td / ts, "rel_err": err, "alg_id": alg,
                                           "out_dtype": str(kw.get("out_dtype", "bf16"))})
                except Exception as e:  # noqa: BLE001
                    rec["errors"].append(f"{dt} {N}x{K} M{M}: {str(e)[:240]}")
            torch.cuda.empty_cache()
    out_dir = a.out_dir or os.environ.get("OUT", ".")
    with open(os.path.join(out_dir, "sparse24_cslt.json"), "w") as f:
        json.dump(rec, f, indent=1)
    print("dtype     N     K     M   dense_us  sparse_us  speedup  rel_err")
    for r in rec["records"]:
        print(f"{r['dtype']:5s} {r['N']:5d} {r['K']:5d} {r['M']:5d} {r['dense_s']*1e6:10.1f} {r['sparse_s']*1e6:10.1f}"
              f"  {r['speedup']:6.2f}  {r['rel_err']:.2e}")
    for e in rec["errors"][:30]:
        print("error", e)


if __name__ == "__main__":
    main()
