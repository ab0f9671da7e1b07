#!/usr/bin/env python3
"""How much slower compute kernels run while a collective runs beside them, by kernel class (issue #21/#24).

gpuplan prices communication hidden behind compute with one "GEMM loss" (the calibration's collective-beside-compute
item: a GEMM beside an all_reduce). A training step overlaps its collectives with every kind of kernel, and a
memory-bound kernel competes with the collective for what the collective also uses (SMs, HBM bandwidth for the bytes
sent and received), so its loss need not be a GEMM's. This script measures, on each of 2+ GPUs of one host:

  t_alone   : a kernel repeated R times on a compute stream, nothing else running (median of trials)
  t_beside  : the same, while a comm stream runs back-to-back collectives for longer than the compute window
  loss      = t_beside / t_alone - 1

for kernel classes at DeepSeek-V3-like shapes (4096 tokens, hidden 7168, bf16): a bf16 GEMM, a streaming add, RMSNorm,
SwiGLU, a per-token-group (1x128) FP8 quantisation (Triton) and a transpose; beside NCCL all_to_all_single and
all_reduce, with NCCL's CTA count free and pinned to 20 (DeepSeek-V3's 20 communication SMs, arXiv:2412.19437
§3.2.2). The comm stream's own achieved bandwidth is recorded too.

Usage (device): NCCL_NVLS_ENABLE=0 torchrun --nproc_per_node=2 scripts/measure/beside_comm.py --out-dir $OUT
        (CPU logic check): python3 scripts/measure/beside_comm.py --dry
Writes $OUT/beside_comm.json (rank 0) and prints a table.
Status: written in session 25 (2026-11-29) when only one-GPU machines were lent; not yet run on GPUs. The one-GPU
stand-in, scripts/measure/beside_sms.py, was run (data/validation/measured/h200-sxm-141gb/beside_sms*.json).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def kernels(torch, dev, tokens, hidden, ffn):
    """name -> (callable, bytes moved, flops) at the shapes given."""
    import torch.nn.functional as F
    bf = torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(1234)
    x = torch.randn(tokens, hidden, device=dev, dtype=bf, generator=g)
    y = torch.randn(tokens, hidden, device=dev, dtype=bf, generator=g)
    out = torch.empty_like(x)
    w = torch.randn(ffn, hidden, device=dev, dtype=bf, generator=g) * 0.02
    nw = torch.ones(hidden, device=dev, dtype=bf)
    gu = torch.randn(tokens, 2 * ffn, device=dev, dtype=bf, generator=g)
    e = x.element_size()
    ks = {
        "gemm_bf16": (lambda: torch.matmul(x, w.t()), (tokens * hidden + ffn * hidden + tokens * ffn) * e,
                      2.0 * tokens * hidden * ffn),
        "add": (lambda: torch.add(x, y, out=out), 3 * tokens * hidden * e, tokens * hidden),
        "rmsnorm": (lambda: F.rms_norm(x, (hidden,), nw, 1e-6), 2 * tokens * hidden * e, 4.0 * tokens * hidden),
        "swiglu": (lambda: F.silu(gu[:, :ffn]) * gu[:, ffn:], (2 * tokens * ffn + 2 * tokens * ffn + tokens * ffn) * e,
                   6.0 * tokens * ffn),
        "transpose": (lambda: x.t().contiguous(), 2 * tokens * hidden * e, 0.0),
    }
    q = quantiser(torch, dev)
    if q is not None:
        qo = torch.empty(tokens, hidden, device=dev, dtype=torch.float8_e4m3fn)
        qs = torch.empty(tokens, hidden // 128, device=dev, dtype=torch.float32)
        ks["fp8_quant_1x128"] = (lambda: q(x, qo, qs), tokens * hidden * (e + 1) + qs.numel() * 4, 3.0 * tokens * hidden)
    return ks


def quantiser(torch, dev):
    """A per-token-group (1 x 128) FP8 E4M3 quantisation in Triton: amax per group, scale, cast."""
    try:
        import triton
        import triton.language as tl
    except Exception:  # noqa: BLE001
        return None

    @triton.jit
    def _q(x_ptr, q_ptr, s_ptr, n_groups, GROUP: tl.constexpr, ROWS: tl.constexpr):
        pid = tl.program_id(0)
        g = pid * ROWS + tl.arange(0, ROWS)
        mask_g = g < n_groups
        offs = g[:, None] * GROUP + tl.arange(0, GROUP)[None, :]
        v = tl.load(x_ptr + offs, mask=mask_g[:, None], other=0.0).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(v), axis=1), 1e-4)
        scale = amax / 448.0
        qv = (v / scale[:, None]).to(tl.float8e4nv)
        tl.store(q_ptr + offs, qv, mask=mask_g[:, None])
        tl.store(s_ptr + g, scale, mask=mask_g)

    def run(x, qo, qs):
        n_groups = x.numel() // 128
        rows = 16
        _q[(triton.cdiv(n_groups, rows),)](x, qo, qs, n_groups, GROUP=128, ROWS=rows)
        return qo

    return run


def check_quantiser(torch, dev):
    q = quantiser(torch, dev)
    if q is None:
        return {"skipped": "triton unavailable"}
    x = torch.randn(64, 1024, device=dev, dtype=torch.bfloat16) * 3
    qo = torch.full((64, 1024), float("nan"), device=dev).to(torch.float8_e4m3fn)
    qs = torch.full((64, 8), float("nan"), device=dev)
    q(x, qo, qs)
    ref_s = x.float().view(64, 8, 128).abs().amax(-1).clamp_min(1e-4) / 448.0
    deq = qo.float().view(64, 8, 128) * qs.view(64, 8, 1)
    rel = (deq - x.float().view(64, 8, 128)).norm() / x.float().norm()
    ok = bool(torch.isfinite(deq).all()) and float((qs - ref_s).abs().max()) < 1e-6 and float(rel) < 0.05
    return {"scale_max_abs_diff": float((qs - ref_s).abs().max()), "dequant_rel_err": float(rel), "ok": ok}


def time_repeat(torch, stream, fn, reps):
    """Event-timed span of reps back-to-back launches of fn on stream (ms)."""
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(stream):
        s.record(stream)
        for _ in range(reps):
            fn()
        e.record(stream)
    return s, e


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--ffn", type=int, default=2048)
    p.add_argument("--comm-mib", type=int, default=64, help="bytes per collective call (MiB)")
    p.add_argument("--reps", type=int, default=40, help="kernel launches per timed window")
    p.add_argument("--trials", type=int, default=7)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--collectives", default="alltoall,allreduce",
                   help="comma list of alltoall, allreduce, reduce_scatter, all_gather")
    p.add_argument("--pins", default="free,20", help="comma list: free (NCCL's own CTA count) and/or a CTA count")
    p.add_argument("--dry", action="store_true", help="check the argument handling and exit (no GPU)")
    a = p.parse_args()
    if a.dry:
        print(json.dumps(vars(a)))
        return
    import torch
    import torch.distributed as dist
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(lr)
    dev = torch.device("cuda", lr)
    record = {"meta": common.run_metadata() if rank == 0 else None, "args": vars(a), "world": world}
    record["quantiser_check"] = check_quantiser(torch, dev)
    ks = kernels(torch, dev, a.tokens, a.hidden, a.ffn)
    comp = torch.cuda.Stream(device=dev)
    comm_s = torch.cuda.Stream(device=dev)
    n = a.comm_mib * 2**20 // 2
    buf_in = torch.randn(n, device=dev, dtype=torch.bfloat16)
    buf_out = torch.empty_like(buf_in)
    shard = torch.empty(n // world, device=dev, dtype=torch.bfloat16)
    results = []
    variants = [(c, None) for c in a.collectives.split(",")]
    for c, _ in variants:
        if c not in ("alltoall", "allreduce", "reduce_scatter", "all_gather"):
            sys.exit(f"--collectives: unknown collective {c!r}")
    # NCCL reads NCCL_MIN_CTAS / NCCL_MAX_CTAS per communicator at creation: two process groups, one pinned to 20.
    for name, fn_k in ks.items():
        for _ in range(3):
            fn_k[0]()
    torch.cuda.synchronize()
    for pin in a.pins.split(","):
        os.environ.pop("NCCL_MIN_CTAS", None)
        os.environ.pop("NCCL_MAX_CTAS", None)
        if pin != "free":
            os.environ["NCCL_MIN_CTAS"] = pin
            os.environ["NCCL_MAX_CTAS"] = pin
        pg = dist.new_group(list(range(world)), backend="nccl")

        def coll(kind):
            if kind == "alltoall":
                dist.all_to_all_single(buf_out, buf_in, group=pg)
            elif kind == "reduce_scatter":
                dist.reduce_scatter_tensor(shard, buf_in, group=pg)
            elif kind == "all_gather":
                dist.all_gather_into_tensor(buf_out, shard, group=pg)
            else:
                dist.all_reduce(buf_in, group=pg)
        for kind, _ in variants:
            with torch.cuda.stream(comm_s):
                for _ in range(3):
                    coll(kind)
            torch.cuda.synchronize()
            # The collective alone: its own time per call.
            s, e = time_repeat(torch, comm_s, lambda: coll(kind), 10)
            torch.cuda.synchronize()
            t_coll = s.elapsed_time(e) / 10
            for kname, (fn, nbytes, flops) in ks.items():
                alone, beside = [], []
                for _ in range(a.trials):
                    dist.barrier(group=pg)
                    torch.cuda.synchronize()
                    s, e = time_repeat(torch, comp, fn, a.reps)
                    torch.cuda.synchronize()
                    alone.append(s.elapsed_time(e) / a.reps)
                    # Enough collectives to outlast the compute window twice over, then the window.
                    calls = max(4, int(2 * alone[-1] * a.reps / max(t_coll, 1e-3)) + 2)
                    # Every rank must issue the same number of collectives: agree on the largest.
                    agree = torch.tensor([calls], device=dev, dtype=torch.int64)
                    dist.all_reduce(agree, op=dist.ReduceOp.MAX, group=pg)
                    calls = int(agree.item())
                    dist.barrier(group=pg)
                    torch.cuda.synchronize()
                    with torch.cuda.stream(comm_s):
                        cs, ce = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        cs.record(comm_s)
                        for _ in range(calls):
                            coll(kind)
                        ce.record(comm_s)
                    time.sleep(0.002)  # let the first collectives start
                    s, e = time_repeat(torch, comp, fn, a.reps)
                    torch.cuda.synchronize()
                    beside.append(s.elapsed_time(e) / a.reps)
                    comm_span = cs.elapsed_time(ce)
                ta, tb = statistics.median(alone), statistics.median(beside)
                row = {"pin_ctas": pin, "collective": kind, "kernel": kname, "t_alone_ms": ta, "t_beside_ms": tb,
                       "loss": tb / ta - 1, "alone_trials_ms": alone, "beside_trials_ms": beside,
                       "bytes": nbytes, "flops": flops, "achieved_alone_GBps": nbytes / ta / 1e6,
                       "collective_ms_per_call": t_coll, "collective_MiB": a.comm_mib,
                       "comm_span_last_trial_ms": comm_span, "comm_calls_last_trial": calls}
                results.append(row)
                if rank == 0:
                    print(f"{pin:>4} {kind:9} {kname:16} alone {ta*1e3:8.1f} us  beside {tb*1e3:8.1f} us  "
                          f"loss {tb/ta-1:+.3f}  ({nbytes/ta/1e6:7.0f} GB/s alone; coll {t_coll:.3f} ms/call)",
                          flush=True)
    gathered = [None] * world
    dist.all_gather_object(gathered, results)
    if rank == 0:
        record["per_rank"] = gathered
        common.write_json(record, os.environ.get("BESIDE_COMM_NAME", "beside_comm"), a.out_dir)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    if "--dry" not in sys.argv:
        import torch.distributed as _d
        import torch as _t
        _d.init_process_group("nccl", device_id=_t.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))))
    main()
