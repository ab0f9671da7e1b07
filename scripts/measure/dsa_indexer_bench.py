#!/usr/bin/env python3
"""DeepSeek sparse attention's lightning indexer and a gated-DeltaNet decode state update, timed in plain PyTorch on
one GPU (issue #23: plausibility of gpuplan's indexer_cost / gated_delta_state_update_cost, model/src/ops/ops.cpp).

Indexer (DeepSeek-V3.2 / GLM-5 shapes: n_i index heads of d_i = 128, top-k 2048): for Q queries against a context of
S cached keys, the three stages a serving engine runs, each timed alone with CUDA events (median of --reps):
  scores  q[Q*n_i, d_i] @ k[S, d_i]^T in FP8 (torch._scaled_mm, e4m3, per-tensor scales, bf16 out), else bf16;
  reduce  ReLU, then the head-weighted sum over n_i (weights [Q, n_i] fp32) -> index scores [Q, S] fp32;
  topk    torch.topk(index scores, k = 2048) (indices + values).
The stages are unfused (the production kernels - DeepGEMM's fp8_mqa_logits, vLLM's top-k - fuse scores and reduce):
the sum of the three is an upper bound of the fused time, the scores GEMM alone a lower bound of its compute.
Correctness first: the FP8 scores of one small problem against float32 (relative Frobenius error), and the top-k
of a problem with known winners.

Gated DeltaNet decode (Qwen3-Next shapes per GPU: n_v value heads of d_k = d_v = 128): one recurrent step per
sequence, S <- exp(g) S + beta k (v - S^T k)^T ; o = S^T q, for B sequences, state in bf16 or fp32 (read and written
once); bytes counted as 2 x state + the token's q, k, v, o; the achieved bandwidth is what gpuplan's streaming cost
assumes for it.

Writes $OUT/dsa_indexer_bench.json (or into --out-dir).
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
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def fp8_available():
    return hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm") and \
        torch.cuda.get_device_capability() >= (8, 9)


def scores_fn(q, k, fp8):
    """q [M, d], k [S, d] -> [M, S] bf16."""
    if fp8:
        one = torch.ones((), device=q.device, dtype=torch.float32)
        return lambda: torch._scaled_mm(q, k.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    return lambda: q @ k.t()


def check_indexer(fp8):
    torch.manual_seed(1)
    M, S, d = 256, 1024, 128
    qf = torch.randn(M, d, device="cuda") * 0.5
    kf = torch.randn(S, d, device="cuda") * 0.5
    ref = qf @ kf.t()
    if fp8:
        q = qf.to(torch.float8_e4m3fn)
        k = kf.to(torch.float8_e4m3fn)
    else:
        q, k = qf.bfloat16(), kf.bfloat16()
    got = scores_fn(q, k, fp8)().float()
    rel = float((got - ref).norm() / ref.norm())
    # top-k of scores with known winners: positions 7, 70, 700 hold the three largest values of each row.
    x = torch.rand(4, 4096, device="cuda")
    x[:, [7, 70, 700]] = torch.tensor([5.0, 4.0, 3.0], device="cuda")
    idx = torch.topk(x, 3, dim=-1).indices
    topk_ok = bool((idx == torch.tensor([7, 70, 700], device="cuda")).all())
    return {"scores_rel_frobenius_error": rel, "topk_known_winners_ok": topk_ok}


def bench_indexer(heads, head_dim, topk, context, queries, fp8, reps):
    torch.manual_seed(0)
    M = queries * heads
    qf = torch.randn(M, head_dim, device="cuda") * 0.5
    kf = torch.randn(context, head_dim, device="cuda") * 0.5
    if fp8:
        q, k = qf.to(torch.float8_e4m3fn), kf.to(torch.float8_e4m3fn)
    else:
        q, k = qf.bfloat16(), kf.bfloat16()
    del qf, kf
    w = torch.rand(queries, heads, device="cuda", dtype=torch.float32)
    sc = scores_fn(q, k, fp8)
    logits = sc()
    t_scores = timed(sc, reps)

    def reduce():
        return torch.einsum("qhs,qh->qs", torch.relu(logits.view(queries, heads, context)).float(), w)

    index = reduce()
    t_reduce = timed(reduce, reps)
    kk = min(topk, context)
    t_topk = timed(lambda: torch.topk(index, kk, dim=-1), reps)
    flops = 2.0 * M * head_dim * context
    eb = 1 if fp8 else 2
    return {
        "index_heads": heads, "index_head_dim": head_dim, "topk": kk, "context": context, "queries": queries,
        "dtype": "fp8_e4m3" if fp8 else "bf16",
        "scores_s": t_scores, "reduce_s": t_reduce, "topk_s": t_topk,
        "total_unfused_s": t_scores + t_reduce + t_topk,
        "scores_flops": flops, "scores_tflops": flops / t_scores / 1e12,
        "scores_bytes": (M + context) * head_dim * eb + M * context * 2,
        "pairs": queries * context,
        "topk_bytes_read": queries * context * 4,
    }


def bench_gdn_decode(seqs, heads, dk, dv, state_dtype, reps):
    torch.manual_seed(0)
    S = torch.randn(seqs, heads, dk, dv, device="cuda").to(state_dtype) * 0.1
    q = torch.randn(seqs, heads, dk, device="cuda", dtype=torch.bfloat16)
    k = torch.nn.functional.normalize(torch.randn(seqs, heads, dk, device="cuda"), dim=-1).bfloat16()
    v = torch.randn(seqs, heads, dv, device="cuda", dtype=torch.bfloat16)
    g = -torch.rand(seqs, heads, device="cuda")
    beta = torch.rand(seqs, heads, device="cuda")

    def step():
        s = S.float() * torch.exp(g)[..., None, None]
        kv = torch.einsum("bhk,bhkv->bhv", k.float(), s)
        s = s + torch.einsum("bhk,bhv->bhkv", k.float(), beta[..., None] * (v.float() - kv))
        o = torch.einsum("bhk,bhkv->bhv", q.float(), s)
        S.copy_(s.to(state_dtype))
        return o

    t = timed(step, reps)
    sb = S.element_size() * S.numel()
    token_bytes = seqs * heads * (2 * dk + 2 * dv) * 2
    return {"seqs": seqs, "heads": heads, "key_dim": dk, "value_dim": dv, "state_dtype": str(state_dtype),
            "time_s": t, "state_bytes": sb, "bytes_min": 2 * sb + token_bytes,
            "achieved_GBps_min_bytes": (2 * sb + token_bytes) / t / 1e9}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "."))
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    env = {"run": common.run_metadata(), "software": common.software_versions(),
           "device": common.device_properties(), "nvidia_smi": common.nvidia_smi_static(0)}
    fp8 = fp8_available()
    rec = {"kind": "dsa_indexer_gdn_decode_bench", "env": env, "fp8": fp8, "checks": {}, "indexer": [],
           "gdn_decode": []}
    rec["checks"]["fp8"] = check_indexer(fp8) if fp8 else None
    rec["checks"]["bf16"] = check_indexer(False)
    # Indexer: GLM-5 (32 heads) and DeepSeek-V3.2 (64 heads); decode-like (64 queries) and prefill-like chunks,
    # the query count chosen so that the bf16 logits stay <= 2 GiB.
    for heads in (32, 64):
        for context in (8192, 32768, 131072):
            for queries in (64, 1024):
                if queries * heads * context * 2 > 2 * 2**30:
                    continue
                for use_fp8 in ([True, False] if fp8 else [False]):
                    try:
                        rec["indexer"].append(bench_indexer(heads, 128, 2048, context, queries, use_fp8, args.reps))
                    except Exception as e:  # noqa: BLE001 - the record says what failed
                        rec["indexer"].append({"heads": heads, "context": context, "queries": queries,
                                               "fp8": use_fp8, "error": str(e)[:300]})
                    torch.cuda.empty_cache()
    for seqs in (8, 64, 256):
        for dt in (torch.bfloat16, torch.float32):
            rec["gdn_decode"].append(bench_gdn_decode(seqs, 32, 128, 128, dt, args.reps))
    print("wrote", common.write_json(rec, "dsa_indexer_bench", args.out_dir))


if __name__ == "__main__":
    main()
