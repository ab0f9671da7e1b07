#!/usr/bin/env python3
"""Eager PyTorch kernels of a fixed-capacity MoE prefill: HBM-bound or SM-issue-bound? (issue #21, session 33).

The TP2/EP2 Qwen3-30B-A3B-shaped prefill on two H200s (serve_tp2_ep2_qwen3_30b_a3b_prefill_profile_tp.json) and the
TP4/EP4 one on four H100s (serve_moe_tp4_ep4_profile_graph_tp.json) run PyTorch's index_put of whole rows and
TensorIterator's non-vectorised elementwise_kernel<128, 4> (SiLU of a strided half, the gate product of two strided
halves, the combine's scale of each row by a broadcast weight) at the same absolute rate on both GPUs, although the
H200 streams 1.43x faster: a rate set by the SMs' instruction issue (both have 132 SMs at 1980 MHz boost). This
script times each class alone on one GPU at the 4K prefill's shapes (rows of 2048 bf16, expert width 768, 4096 x 8
slots, 16384 routed rows), with vectorised HBM-bound controls (contiguous add, copy, row gather), first on every SM,
then on fewer SMs through a CUDA green context (torch.cuda.green_contexts, where this PyTorch has it): an issue-bound
kernel slows in proportion to the SMs taken away, an HBM-bound one hardly until few SMs remain.

Per row: seconds per call (median of --trials windows of --reps calls), elements, bytes read + written, GB/s, and
elements per SM per cycle at the SM clock nvidia-smi reports during the window (and at the 1980 MHz boost).

Usage (device, one GPU, ~1 min): python3 scripts/measure/issue_bound_kernels.py --out-dir $OUT
CPU check: python3 scripts/measure/issue_bound_kernels.py --dry
"""
import argparse
import json
import os
import statistics
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def build_cases(torch, dev, tokens, topk, ep, hidden, ffn):
    """name -> (fn, class, elements, bytes read + written)."""
    import torch.nn.functional as F
    bf = torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(7)
    slots = tokens * topk          # fixed-capacity slots a rank receives (ep x its tokens/ep x k)
    routed = tokens * topk // ep   # token-expert pairs a rank routes
    e = 2
    buf = torch.zeros(slots, hidden, device=dev, dtype=bf)
    rows = torch.randn(routed, hidden, device=dev, dtype=bf, generator=g)
    idx_routed = torch.randperm(slots, device=dev, generator=g)[:routed]
    idx_all = torch.randperm(slots, device=dev, generator=g)
    big = torch.randn(slots, hidden, device=dev, dtype=bf, generator=g)
    out_big = torch.empty_like(big)
    hgate = torch.randn(slots, 2 * ffn, device=dev, dtype=bf, generator=g)
    act = torch.empty(slots, ffn, device=dev, dtype=bf)
    w = torch.rand(routed, 1, device=dev, dtype=bf, generator=g)
    y = torch.randn(routed, hidden, device=dev, dtype=bf, generator=g)
    y2 = torch.randn(routed, hidden, device=dev, dtype=bf, generator=g)
    out_y = torch.empty_like(y)
    gidx = torch.randperm(routed, device=dev, generator=g)
    half = hgate[:, :ffn]
    other = hgate[:, ffn:]

    def index_put_routed():
        buf[idx_routed] = rows

    def index_put_all():
        out_big[idx_all] = big

    def silu_strided():
        torch.ops.aten.silu.out(half, out=act) if hasattr(torch.ops.aten.silu, "out") else F.silu(half)

    def gate_product():
        torch.mul(half, other, out=act)

    def scale_broadcast():
        torch.mul(y, w, out=out_y)

    def add_contiguous():
        torch.add(y, y2, out=out_y)

    def copy_contiguous():
        out_big.copy_(big)

    def gather_rows():
        torch.index_select(y, 0, gidx, out=out_y)

    n_r, n_s = routed * hidden, slots * hidden
    n_a = slots * ffn
    return {
        "index_put_routed_rows": (index_put_routed, "issue?", n_r, n_r * 2 * e + routed * 8),
        "index_put_all_slots": (index_put_all, "issue?", n_s, n_s * 2 * e + slots * 8),
        "silu_strided_half": (silu_strided, "issue?", n_a, n_a * 2 * e),
        "gate_product_strided": (gate_product, "issue?", n_a, n_a * 3 * e),
        "scale_by_row_weight": (scale_broadcast, "issue?", n_r, n_r * 2 * e + routed * e),
        "add_contiguous": (add_contiguous, "hbm (control)", n_r, n_r * 3 * e),
        "copy_contiguous": (copy_contiguous, "hbm (control)", n_s, n_s * 2 * e),
        "gather_rows": (gather_rows, "hbm (control)", n_r, n_r * 2 * e + routed * 8),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--ep", type=int, default=2)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--ffn", type=int, default=768)
    p.add_argument("--sms", default="0,66,33", help="green-context SM counts (0: the whole GPU, no green context)")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--trials", type=int, default=5)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--name", default="issue_bound_kernels")
    p.add_argument("--dry", action="store_true")
    a = p.parse_args()
    sms_list = [int(x) for x in a.sms.split(",") if x.strip()]
    if a.dry:
        slots = a.tokens * a.topk
        print(json.dumps({"args": vars(a), "slots": slots, "routed": slots // a.ep,
                          "classes": ["index_put_routed_rows", "index_put_all_slots", "silu_strided_half",
                                      "gate_product_strided", "scale_by_row_weight", "add_contiguous",
                                      "copy_contiguous", "gather_rows"]}))
        return
    import torch
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    rec = {"name": a.name, "kind": "issue_bound_kernels", **common.run_metadata(), "args": vars(a),
           "software": common.software_versions(), "device": common.device_properties(),
           "nvidia_smi_before": common.nvidia_smi_static(0), "rows": [], "errors": []}
    total_sms = rec["device"]["multi_processor_count"]
    cases = build_cases(torch, dev, a.tokens, a.topk, a.ep, a.hidden, a.ffn)
    for fn, *_ in cases.values():
        fn()
    torch.cuda.synchronize()

    def window(fn, stream):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            s.record(stream)
            for _ in range(a.reps):
                fn()
            e.record(stream)
        torch.cuda.synchronize()
        return s.elapsed_time(e) / 1e3 / a.reps

    def run_set(n_sms, stream):
        used = n_sms or total_sms
        with common.SmiSampler(gpu=0, period_s=0.2) as sampler:
            for name, (fn, cls, elements, nbytes) in cases.items():
                with torch.cuda.stream(stream):
                    fn()
                torch.cuda.synchronize()
                ts = [window(fn, stream) for _ in range(a.trials)]
                t = statistics.median(ts)
                rec["rows"].append({"kernel": name, "class": cls, "sms": used, "green_context": bool(n_sms),
                                    "time_s": t, "times_s": ts, "elements": elements, "bytes": nbytes,
                                    "GBps": nbytes / t / 1e9,
                                    "elements_per_sm_cycle_at_1980MHz": elements / t / (used * 1.98e9)})
                print(f"{name:24} {used:4d} SMs  {t*1e6:9.1f} us  {nbytes/t/1e9:8.1f} GB/s  "
                      f"{elements/t/(used*1.98e9):6.3f} el/SM/cycle@1980", flush=True)
        rec.setdefault("nvidia_smi_during", {})[str(used)] = sampler.summary()

    for n in sms_list:
        try:
            if n == 0:
                run_set(0, torch.cuda.current_stream())
                continue
            from torch.cuda import green_contexts as gc  # noqa: PLC0415
            try:
                ctx = gc.GreenContext.create(num_sms=n, device_id=0)
            except TypeError:
                ctx = gc.GreenContext.create(n, 0)
            if hasattr(ctx, "Stream"):
                run_set(n, ctx.Stream())
            else:
                ctx.set_context()
                try:
                    run_set(n, torch.cuda.Stream(device=dev))
                finally:
                    ctx.pop_context()
        except Exception as ex:  # noqa: BLE001 - the record says why
            rec["errors"].append({"sms": n, "error": repr(ex)[:400], "trace": traceback.format_exc()[-1500:]})
            print(f"green context {n} SMs: {ex!r}", flush=True)
    rec["nvidia_smi_after"] = common.nvidia_smi_static(0)
    print(common.write_json(rec, a.name, a.out_dir))


if __name__ == "__main__":
    main()
