#!/usr/bin/env python3
"""One MoE layer, forward and forward+backward, at expert-parallel (EP) sizes 1, 2 and 4, with a time breakdown.

For issue #21 (MoE measured end to end). One process per GPU (torchrun). Per rank: T tokens of width h (bf16);
the layer as a permute-then-all-to-all implementation (Megatron's "alltoall" token dispatcher, torchtitan's
grouped-mm experts) runs it, in plain eager PyTorch:
  router     logits = x @ W_r (bf16) -> softmax (fp32) -> top-k -> the k weights renormalised
  permute    stable sort of the T*k expert ids; rows x[sorted // k] in expert order (experts are contiguous over
             the EP ranks, so this is also destination order)
  dispatch   (EP > 1) tokens-per-expert exchanged with an all_to_all_single of E counts and copied to the host (the
             split sizes; a host sync, as in Megatron), then all_to_all_single of the rows
  experts    received rows regrouped by local expert (each group padded to a multiple of 8 rows, at least 8, as
             torchtitan pads for torch._grouped_mm), torch._grouped_mm(x, W_1[E_l, h, 2f]) -> SwiGLU ->
             torch._grouped_mm(., W_2[E_l, f, h]), rows put back in received order
  combine    (EP > 1) the reverse all_to_all_single
  unpermute  rows back in token order, weighted sum over the k rows of each token
Autograd: the all-to-alls are an autograd Function (backward = the reverse all-to-all); _grouped_mm's own
backward when this PyTorch has one (checked at start), else dX by _grouped_mm and dW per expert.
EP 1 / 2 on 4 GPUs: 4 / 2 groups run the same item at once (as data parallelism beside EP would). Routing: random
router weights and inputs, so the load is balanced in expectation (recorded: received rows per rank).
Timing: CUDA events; forward (autograd on, activations kept as for training) and forward+backward, each the
median over --reps of the slowest rank of the group (then the median over the concurrent groups). Breakdown from
events recorded between the stages in forward and by identity autograd markers between them in backward.
Correctness: at start, per EP and config, a small layer (same E and k, small h and f) against a float32
reference with the same routing: output, dX, dW_1, dW_2 (summed over the group's tokens) and dW_r.
Writes $OUT/moe_layer.json from rank 0. NCCL_NVLS_ENABLE=0 is checked.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

CONFIGS = {
    # name: hidden, experts, expert ffn, top-k
    "mixtral_8x7b": dict(hidden=4096, experts=8, ffn=14336, topk=2),
    "qwen3_30b_a3b": dict(hidden=2048, experts=128, ffn=768, topk=8),
}
CHECK = {"mixtral_8x7b": dict(hidden=256, experts=8, ffn=384, topk=2),
         "qwen3_30b_a3b": dict(hidden=128, experts=128, ffn=64, topk=8)}
ALIGN = 8
GMM_MODE = "loop"  # set in main(): "native" (torch._grouped_mm with its autograd), "custom_bwd", or "loop" (CPU)


# ---------------------------------------------------------------------------------------------------------------
class Rec:
    """Named timing marks: CUDA events (or host clock on the CPU). Disabled -> no-ops."""

    def __init__(self, cuda):
        self.cuda = cuda
        self.on = False
        self.marks = {}
        self.extra = {}

    def mark(self, name):
        if not self.on:
            return
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks[name] = e
        else:
            self.marks[name] = time.perf_counter()

    def dt(self, a, b):
        if a not in self.marks or b not in self.marks:
            return None
        x, y = self.marks[a], self.marks[b]
        return (y - x) if isinstance(x, float) else x.elapsed_time(y) * 1e-3


class Marker(torch.autograd.Function):
    """Identity; records a mark when its gradient passes (stage boundaries in backward)."""

    @staticmethod
    def forward(ctx, t, rec, name):
        ctx.rec, ctx.name = rec, name
        return t.view_as(t)

    @staticmethod
    def backward(ctx, g):
        ctx.rec.mark(ctx.name)
        return g, None, None


class A2A(torch.autograd.Function):
    """all_to_all_single of rows; backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, inp, out_splits, in_splits, pg):
        ctx.out_splits, ctx.in_splits, ctx.pg = out_splits, in_splits, pg
        out = inp.new_empty((sum(out_splits), inp.shape[1]))
        dist.all_to_all_single(out, inp.contiguous(), out_splits, in_splits, group=pg)
        return out

    @staticmethod
    def backward(ctx, g):
        gi = g.new_empty((sum(ctx.in_splits), g.shape[1]))
        dist.all_to_all_single(gi, g.contiguous(), ctx.in_splits, ctx.out_splits, group=ctx.pg)
        return gi, None, None, None


def _gmm_loop(a, w, offs_h):
    outs, s = [], 0
    for g, e in enumerate(offs_h):
        outs.append(a[s:e] @ w[g])
        s = e
    return torch.cat(outs)


class GMMCustom(torch.autograd.Function):
    """torch._grouped_mm forward; backward dX = _grouped_mm(dY, W^T), dW per expert (mm)."""

    @staticmethod
    def forward(ctx, a, w, offs, offs_h):
        ctx.save_for_backward(a, w, offs)
        ctx.offs_h = offs_h
        return torch._grouped_mm(a, w, offs=offs)

    @staticmethod
    def backward(ctx, g):
        a, w, offs = ctx.saved_tensors
        g = g.contiguous()
        da = torch._grouped_mm(g, w.transpose(-2, -1), offs=offs)
        dw = torch.empty_like(w)
        s = 0
        for i, e in enumerate(ctx.offs_h):
            dw[i] = a[s:e].t() @ g[s:e]
            s = e
        return da, dw, None, None


def gmm(a, w, offs, offs_h):
    if GMM_MODE == "native":
        return torch._grouped_mm(a, w, offs=offs)
    if GMM_MODE == "custom_bwd":
        return GMMCustom.apply(a, w, offs, offs_h)
    return _gmm_loop(a, w, offs_h)


def probe_gmm(dev):
    """Which grouped-GEMM path works here: native _grouped_mm autograd, checked against a float32 loop."""
    global GMM_MODE
    if dev.type != "cuda" or not hasattr(torch, "_grouped_mm"):
        GMM_MODE = "loop"
        return {"mode": GMM_MODE, "why": "no CUDA or no torch._grouped_mm"}
    g = torch.Generator(device=dev).manual_seed(5)
    offs_h = [16, 40, 64, 96]  # groups of 8-aligned sizes, as the layer pads them
    a = torch.randn(96, 128, device=dev, dtype=torch.bfloat16, generator=g).requires_grad_()
    w = (torch.randn(4, 128, 256, device=dev, dtype=torch.bfloat16, generator=g) / 12).requires_grad_()
    gy = torch.randn(96, 256, device=dev, dtype=torch.bfloat16, generator=g)
    offs = torch.tensor(offs_h, device=dev, dtype=torch.int32)
    af, wf = a.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    _gmm_loop(af, wf, offs_h).backward(gy.float())
    notes = {}
    for mode in ("native", "custom_bwd"):
        GMM_MODE = mode
        try:
            a.grad = w.grad = None
            y = gmm(a, w, offs, offs_h)
            y.backward(gy)
            ey = float((y.float() - _gmm_loop(af.detach(), wf.detach(), offs_h)).norm() /
                       _gmm_loop(af.detach(), wf.detach(), offs_h).norm())
            ea = float((a.grad.float() - af.grad).norm() / af.grad.norm())
            ew = float((w.grad.float() - wf.grad).norm() / wf.grad.norm())
            notes[mode] = {"rel_err_y": ey, "rel_err_da": ea, "rel_err_dw": ew}
            if max(ey, ea, ew) < 2e-2:
                return {"mode": mode, "checks": notes}
        except Exception as e:  # noqa: BLE001
            notes[mode] = {"error": str(e)[:300]}
    GMM_MODE = "loop"
    return {"mode": "loop", "checks": notes}


# ---------------------------------------------------------------------------------------------------------------
def moe_forward(x, P, cfg, ep, pg, rec):
    """One MoE layer on this rank's tokens x[T, h]; P holds wr[h, E], w1[E_l, h, 2f], w2[E_l, f, h]."""
    T, h = x.shape
    E, k = cfg["experts"], cfg["topk"]
    El = E // ep
    rec.mark("f0")
    logits = x @ P["wr"]
    probs = torch.softmax(logits.float(), dim=-1)
    topv, topi = torch.topk(probs, k, dim=-1)
    w = topv / topv.sum(dim=-1, keepdim=True)
    flat = topi.reshape(-1)
    sidx = torch.sort(flat, stable=True)[1]
    counts = torch.bincount(flat, minlength=E)
    xs = x[torch.div(sidx, k, rounding_mode="floor")]
    xs = Marker.apply(xs, rec, "b4")
    rec.extra["topi"] = topi
    rec.mark("f1")
    if ep > 1:
        rc = torch.empty_like(counts)
        dist.all_to_all_single(rc, counts, group=pg)
        counts_h = counts.tolist()
        rc_h = rc.tolist()  # host sync: the split sizes
        in_splits = [sum(counts_h[d * El:(d + 1) * El]) for d in range(ep)]
        out_splits = [sum(rc_h[s * El:(s + 1) * El]) for s in range(ep)]
        C = rc.view(ep, El)
        C_h = [rc_h[s * El:(s + 1) * El] for s in range(ep)]
        rec.mark("f1b")
        xr = A2A.apply(xs, out_splits, in_splits, pg)
    else:
        C = counts.view(1, E)
        C_h = [counts.tolist()]  # host sync (the grouped GEMM's padded sizes), as at EP > 1
        rec.mark("f1b")
        xr = xs
    xr = Marker.apply(xr, rec, "b3")
    rec.mark("f2")
    # regroup received rows (src-major chunks) into padded expert-major groups
    N = xr.shape[0]
    tot_h = [sum(C_h[s][e] for s in range(len(C_h))) for e in range(El)]
    pad_h = [max(ALIGN, (t + ALIGN - 1) // ALIGN * ALIGN) for t in tot_h]
    Npad = sum(pad_h)
    offs_h = []
    acc = 0
    for p_ in pad_h:
        acc += p_
        offs_h.append(acc)
    dev = x.device
    pad = torch.tensor(pad_h, device=dev, dtype=torch.long)
    pad_start = torch.cumsum(pad, 0) - pad
    within = torch.cumsum(C, 0) - C  # [ep, El]: rows of earlier sources in each expert group
    base = (pad_start.unsqueeze(0) + within).reshape(-1)
    Cf = C.reshape(-1)
    chunk_start = torch.cumsum(Cf, 0) - Cf
    chunk_id = torch.repeat_interleave(torch.arange(Cf.numel(), device=dev), Cf, output_size=N)
    dest = base[chunk_id] + torch.arange(N, device=dev) - chunk_start[chunk_id]
    src_idx = torch.full((Npad,), N, device=dev, dtype=torch.long)
    src_idx[dest] = torch.arange(N, device=dev)
    offs = torch.tensor(offs_h, device=dev, dtype=torch.int32)
    xe = torch.cat([xr, xr.new_zeros((1, h))])[src_idx]
    h1 = gmm(xe, P["w1"], offs, offs_h)
    f = h1.shape[1] // 2
    act = F.silu(h1[:, :f]) * h1[:, f:]
    ye = gmm(act, P["w2"], offs, offs_h)
    yr = ye[dest]
    yr = Marker.apply(yr, rec, "b2")
    rec.mark("f3")
    if ep > 1:
        ys = A2A.apply(yr, in_splits, out_splits, pg)
    else:
        ys = yr
    ys = Marker.apply(ys, rec, "b1")
    rec.mark("f4")
    inv = torch.empty_like(sidx)
    inv[sidx] = torch.arange(sidx.numel(), device=dev)
    rows = ys[inv]
    out = (rows.view(T, k, h) * w.to(rows.dtype).unsqueeze(-1)).sum(dim=1)
    rec.mark("f5")
    rec.extra["recv_rows"] = N
    rec.extra["padded_rows"] = Npad
    return out


def reference(x, topi, W, cfg, gy):
    """float32 layer on this rank's tokens with the given routing; returns out and grads (x, w1, w2, wr)."""
    E, k = cfg["experts"], cfg["topk"]
    xf = x.detach().float().requires_grad_()
    wr, w1, w2 = (W[n].detach().float().requires_grad_() for n in ("wr", "w1", "w2"))
    probs = torch.softmax(xf @ wr, dim=-1)
    w = probs.gather(1, topi)
    w = w / w.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(xf)
    f = w1.shape[2] // 2
    for e in range(E):
        t, j = (topi == e).nonzero(as_tuple=True)
        if t.numel() == 0:
            continue
        xe = xf[t]
        hh = xe @ w1[e]
        y = (F.silu(hh[:, :f]) * hh[:, f:]) @ w2[e]
        out = out.index_add(0, t, y * w[t, j].unsqueeze(-1))
    out.backward(gy.float())
    return out.detach(), xf.grad, w1.grad, w2.grad, wr.grad


def rel(a, b):
    return float((a.float() - b.float()).norm() / b.float().norm().clamp_min(1e-30))


def make_params(cfg, ep, me, dev, dt, seed, full=False):
    """Router replicated; experts: the local slice of one global set (full=True: also the whole set)."""
    E, h, f = cfg["experts"], cfg["hidden"], cfg["ffn"]
    El = E // ep
    g = torch.Generator(device=dev).manual_seed(seed)
    wr = (torch.randn(h, E, device=dev, generator=g) / h ** 0.5).to(dt)
    if full:
        w1f = (torch.randn(E, h, 2 * f, device=dev, generator=g) / h ** 0.5).to(dt)
        w2f = (torch.randn(E, f, h, device=dev, generator=g) / f ** 0.5).to(dt)
        w1, w2 = w1f[me * El:(me + 1) * El].clone(), w2f[me * El:(me + 1) * El].clone()
        fullw = {"wr": wr, "w1": w1f, "w2": w2f}
    else:  # only the local experts (a different draw per rank; the values do not matter for timing)
        g2 = torch.Generator(device=dev).manual_seed(seed + 97 * (me + 1))
        w1 = (torch.randn(El, h, 2 * f, device=dev, generator=g2) / h ** 0.5).to(dt)
        w2 = (torch.randn(El, f, h, device=dev, generator=g2) / f ** 0.5).to(dt)
        fullw = None
    P = {"wr": wr.clone().requires_grad_(), "w1": w1.requires_grad_(), "w2": w2.requires_grad_()}
    return P, fullw


def check(cfg, ep, pg, me, rank, dev, dt, T=256):
    rec = Rec(dev.type == "cuda")
    P, W = make_params(cfg, ep, me, dev, dt, seed=11, full=True)
    g = torch.Generator(device=dev).manual_seed(500 + rank)
    x = torch.randn(T, cfg["hidden"], device=dev, generator=g).to(dt).requires_grad_()
    gy = torch.randn(T, cfg["hidden"], device=dev, generator=g).to(dt)
    out = moe_forward(x, P, cfg, ep, pg, rec)
    out.backward(gy)
    ro, rx, rw1, rw2, rwr = reference(x, rec.extra["topi"], W, cfg, gy)
    if ep > 1:  # expert weight grads: every rank of the group sent tokens to every expert
        dist.all_reduce(rw1, group=pg)
        dist.all_reduce(rw2, group=pg)
    El = cfg["experts"] // ep
    sl = slice(me * El, (me + 1) * El)
    errs = {"out": rel(out.detach(), ro), "dx": rel(x.grad, rx), "dw1": rel(P["w1"].grad, rw1[sl]),
            "dw2": rel(P["w2"].grad, rw2[sl]), "dwr": rel(P["wr"].grad, rwr)}
    return errs


def timed_item(cfg, ep, pg, me, rank, world, members_all, T, reps, warmup, dev, dt):
    cuda = dev.type == "cuda"
    rec = Rec(cuda)
    P, _ = make_params(cfg, ep, me, dev, dt, seed=21)
    g = torch.Generator(device=dev).manual_seed(900 + rank)
    x = torch.randn(T, cfg["hidden"], device=dev, generator=g).to(dt).requires_grad_()
    gy = torch.randn(T, cfg["hidden"], device=dev, generator=g).to(dt)

    def zero():
        x.grad = None
        for p_ in P.values():
            p_.grad = None

    for _ in range(warmup):
        zero()
        moe_forward(x, P, cfg, ep, pg, rec).backward(gy)
    if cuda:
        torch.cuda.synchronize()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    if pg is not None:
        dist.barrier(group=pg)
    rec.on = True
    fwd, fb = [], []
    fwd_parts, bwd_parts = [], []
    for _ in range(reps):  # forward only (autograd on: what a training step's forward costs)
        zero()
        rec.marks = {}
        out = moe_forward(x, P, cfg, ep, pg, rec)
        if cuda:
            torch.cuda.synchronize()
        fwd.append(rec.dt("f0", "f5"))
        fwd_parts.append({"router_permute": rec.dt("f0", "f1"), "dispatch_counts_sync": rec.dt("f1", "f1b"),
                          "dispatch_a2a": rec.dt("f1b", "f2"), "experts": rec.dt("f2", "f3"),
                          "combine_a2a": rec.dt("f3", "f4"), "unpermute": rec.dt("f4", "f5")})
        del out
    for _ in range(reps):  # forward + backward
        zero()
        rec.marks = {}
        out = moe_forward(x, P, cfg, ep, pg, rec)
        out.backward(gy)
        rec.mark("end")
        if cuda:
            torch.cuda.synchronize()
        fb.append(rec.dt("f0", "end"))
        bwd_parts.append({"unpermute": rec.dt("f5", "b1"), "combine_a2a": rec.dt("b1", "b2"),
                          "experts": rec.dt("b2", "b3"), "dispatch_a2a": rec.dt("b3", "b4"),
                          "router_permute": rec.dt("b4", "end"), "backward_total": rec.dt("f5", "end")})
    rec.on = False
    peak = torch.cuda.max_memory_allocated() if cuda else None

    def med_parts(lst):
        keys = lst[0].keys()
        return {k_: statistics.median([d[k_] for d in lst]) for k_ in keys}

    mine = {"fwd": fwd, "fb": fb, "fwd_parts": med_parts(fwd_parts), "bwd_parts": med_parts(bwd_parts),
            "recv_rows": rec.extra["recv_rows"], "padded_rows": rec.extra["padded_rows"], "peak_alloc": peak}
    allr = [None] * world
    dist.all_gather_object(allr, mine)
    E, k, h, f = cfg["experts"], cfg["topk"], cfg["hidden"], cfg["ffn"]
    res = {"ep": ep, "tokens_per_rank": T}
    group_meds = {"fwd": [], "fb": []}
    for members in members_all:
        for key in ("fwd", "fb"):
            per_rep_max = [max(allr[r][key][i] for r in members) for i in range(reps)]
            group_meds[key].append(statistics.median(per_rep_max))
    res["forward_s"] = statistics.median(group_meds["fwd"])
    res["forward_backward_s"] = statistics.median(group_meds["fb"])
    res["forward_s_per_group"] = group_meds["fwd"]
    res["forward_backward_s_per_group"] = group_meds["fb"]
    res["backward_s"] = res["forward_backward_s"] - res["forward_s"]

    def mean_over_ranks(key):
        ks = allr[0][key].keys()
        return {k_: sum(allr[r][key][k_] for r in range(world)) / world for k_ in ks}
    res["forward_breakdown_s"] = mean_over_ranks("fwd_parts")
    res["backward_breakdown_s"] = mean_over_ranks("bwd_parts")
    fb_ = res["forward_breakdown_s"]
    bb_ = res["backward_breakdown_s"]
    a2a_f = fb_["dispatch_a2a"] + fb_["combine_a2a"]
    a2a_b = bb_["dispatch_a2a"] + bb_["combine_a2a"]
    res["a2a_share_forward"] = a2a_f / sum(fb_.values())
    res["a2a_share_forward_backward"] = (a2a_f + a2a_b) / (sum(fb_.values()) + bb_["backward_total"])
    res["recv_rows_per_rank"] = [allr[r]["recv_rows"] for r in range(world)]
    res["padded_rows_per_rank"] = [allr[r]["padded_rows"] for r in range(world)]
    res["peak_allocated_bytes_max"] = max((allr[r]["peak_alloc"] or 0) for r in range(world))
    # FLOPs of the expert GEMMs per rank (received rows, unpadded): forward 2*rows*h*3f, backward twice that
    rows_mean = sum(res["recv_rows_per_rank"]) / world
    res["expert_flop_forward_per_rank"] = 2.0 * rows_mean * h * 3 * f
    res["expert_tflops_forward"] = res["expert_flop_forward_per_rank"] / fb_["experts"] / 1e12
    res["expert_tflops_backward"] = 2 * res["expert_flop_forward_per_rank"] / bb_["experts"] / 1e12
    res["a2a_dispatch_bytes_per_rank"] = T * k * h * 2
    return res


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--configs", default="mixtral_8x7b,qwen3_30b_a3b")
    p.add_argument("--tokens", default="2048,4096,8192,16384")
    p.add_argument("--ep", default="1,2,4")
    p.add_argument("--reps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--time-budget-s", type=float, default=1e9)
    p.add_argument("--out-dir", default=None)
    p.add_argument("--name", default="moe_layer")
    p.add_argument("--cpu", action="store_true", help="gloo, float32, on the CPU: checks the script's logic only")
    p.add_argument("--small", action="store_true", help="time the small check configs (CPU test)")
    a = p.parse_args()
    t_start = time.perf_counter()
    if not a.cpu and os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if a.cpu:
        dev, dt = torch.device("cpu"), torch.float32
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(lr)
        dev, dt = torch.device("cuda", lr), torch.bfloat16
        dist.init_process_group("nccl", device_id=dev)
    gm = probe_gmm(dev)
    if rank == 0:
        print("grouped mm:", gm, flush=True)
    eps = [int(v) for v in a.ep.split(",") if world % int(v) == 0]
    groups = {}
    members_all = {}
    for ep in eps:
        members_all[ep] = [list(range(g0, g0 + ep)) for g0 in range(0, world, ep)]
        for members in members_all[ep]:
            pg = dist.new_group(members) if ep > 1 else None
            if rank in members:
                groups[ep] = (pg, members.index(rank))
    rec = {"name": a.name, "kind": "moe_layer", "world_size": world, "dtype": str(dt), "grouped_mm": gm,
           "configs": {c: CONFIGS[c] for c in a.configs.split(",")}, "check_configs": CHECK, "align_rows": ALIGN,
           "units": {"*_s": "seconds", "*_bytes": "bytes", "*_tflops_*": "1e12 FLOP/s",
                     "*_flop_*": "FLOP", "*_rows_*": "token rows (one per token and chosen expert)"},
           "definitions": {
               "forward_s": "median over reps of the slowest rank of an EP group (CUDA events around the layer "
                            "forward, autograd on), then the median over the world/EP concurrent groups",
               "forward_backward_s": "the same around forward + backward(random dY)",
               "backward_s": "forward_backward_s - forward_s",
               "forward_breakdown_s": "per rank median of each stage (events between stages), mean over ranks; "
                                      "dispatch_counts_sync = count exchange + host copy of the split sizes "
                                      "(EP 1: the host copy only)",
               "backward_breakdown_s": "per rank median between autograd markers at the stage boundaries, mean "
                                       "over ranks; router_permute = from the permuted rows' gradient to the end "
                                       "(gather backward, router backward)",
               "a2a_share_*": "(dispatch_a2a + combine_a2a) / sum of stages",
               "expert_tflops_*": "2*rows*h*3f (forward; x2 backward) / the experts stage time, rows = received "
                                  "rows (padding not counted)"},
           "timing": f"{a.warmup} warm-up forward+backward, {a.reps} forward, {a.reps} forward+backward"}
    rec.update(common.run_metadata())
    if not a.cpu:
        rec["software"] = common.software_versions()
        rec["device"] = common.device_properties()
        if rank == 0:
            rec["gpus"] = common.nvidia_smi_static()
    checks, items, failures = [], [], []

    def save():
        if rank == 0:
            rec.update({"checks": checks, "items": items, "failures": failures,
                        "elapsed_s": time.perf_counter() - t_start})
            common.write_json(rec, a.name, a.out_dir)

    for cname in a.configs.split(","):
        for ep in eps:
            pg, me = groups[ep]
            try:
                errs = check(CHECK[cname], ep, pg, me, rank, dev, dt)
                allv = [None] * world
                dist.all_gather_object(allv, errs)
                worst = {k_: max(v[k_] for v in allv) for k_ in errs}
                ok = max(worst.values()) < 5e-2
                checks.append({"config": cname, "ep": ep, "max_rel_err_over_ranks": worst, "pass": ok})
                if rank == 0:
                    print(f"check {cname} EP{ep}: {'pass' if ok else 'FAIL'} " +
                          " ".join(f"{k_}={v:.2e}" for k_, v in worst.items()), flush=True)
            except Exception as e:  # noqa: BLE001
                failures.append({"config": cname, "ep": ep, "what": "check", "error": str(e)[:400]})
                if rank == 0:
                    print("FAILED", failures[-1], flush=True)
    save()
    stopped = False
    smi = common.SmiSampler() if (rank == 0 and not a.cpu) else None  # all GPUs, every 0.5 s
    if smi:
        smi.__enter__()
    for cname in a.configs.split(","):
        cfg = CHECK[cname] if a.small else CONFIGS[cname]
        for ep in eps:
            pg, me = groups[ep]
            for T in [int(v) for v in a.tokens.split(",")]:
                flag = torch.tensor([1.0 if time.perf_counter() - t_start > a.time_budget_s else 0.0], device=dev)
                dist.all_reduce(flag, op=dist.ReduceOp.MAX)
                if flag.item() > 0:
                    stopped = True
                    break
                try:
                    r = timed_item(cfg, ep, pg, me, rank, world, members_all[ep], T, a.reps, a.warmup, dev, dt)
                    r["config"] = cname
                    items.append(r)
                    if rank == 0:
                        fb_, bb_ = r["forward_breakdown_s"], r["backward_breakdown_s"]
                        print(f"{cname:14s} EP{ep} T={T:6d}  fwd {r['forward_s']*1e3:8.2f} ms  fwd+bwd "
                              f"{r['forward_backward_s']*1e3:8.2f} ms | fwd: router+perm {fb_['router_permute']*1e3:.2f}"
                              f" counts {fb_['dispatch_counts_sync']*1e3:.2f} disp {fb_['dispatch_a2a']*1e3:.2f} "
                              f"experts {fb_['experts']*1e3:.2f} comb {fb_['combine_a2a']*1e3:.2f} unperm "
                              f"{fb_['unpermute']*1e3:.2f} | bwd: experts {bb_['experts']*1e3:.2f} a2a "
                              f"{(bb_['dispatch_a2a'] + bb_['combine_a2a'])*1e3:.2f} | a2a share "
                              f"{r['a2a_share_forward_backward']*100:.0f}%  expert TFLOP/s "
                              f"{r['expert_tflops_forward']:.0f}/{r['expert_tflops_backward']:.0f}", flush=True)
                except Exception as e:  # noqa: BLE001
                    failures.append({"config": cname, "ep": ep, "tokens_per_rank": T, "error": str(e)[:400]})
                    if rank == 0:
                        print("FAILED", failures[-1], flush=True)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
            save()
            if stopped:
                break
        if stopped:
            break
    rec["stopped_by_time_budget"] = stopped
    if smi:
        smi.__exit__(None, None, None)
        rec["smi_during_timed_items_all_gpus"] = smi.summary()
    if rank == 0 and not a.cpu:
        rec["gpus_after"] = common.nvidia_smi_static()
    save()
    if rank == 0:
        print(f"done: {len(items)} items, {len(failures)} failures, {time.perf_counter() - t_start:.1f} s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
