#!/usr/bin/env python3
"""Tensor- and expert-parallel serving steps on all GPUs of one host (issue #30, items 2 and 3).

One process per GPU (torchrun --standalone --nproc_per_node=N); any N >= 1 (written for N = 8, rehearsed at 2 and
4). Plain PyTorch (the eager-op style of serve_step.py / serve_moe_step.py), random weights N(0, 0.02), norm weights
1, random tokens, torch.no_grad (not inference_mode: the collectives write in place), everything bf16; no
Megatron, no Transformer Engine.

--model dense (item 2): a Llama-3-70B-shaped decoder (hidden 8192, 64 query / 8 KV heads of 128, SwiGLU 28672,
  vocab 128256, RMSNorm eps 1e-5, RoPE theta 5e5, untied LM head, no biases) with --layers decoder layers (default 20
  of the real 80, so that TP(N/2) replicas fit at N = 4; the layer count is recorded and the validation cases price
  a model file with the same count, data/models/bench-llama3-70b-shape-l20.json).
  Megatron-style tensor parallelism over a group of t ranks: QKV and gate|up are column-parallel (fused GEMMs of the
  rank's heads / columns), O and down are row-parallel, each followed by one all_reduce (sum) of the [tokens, hidden]
  bf16 activations over the group: two all-reduces per layer. KV heads split over the ranks (replicated when t > 8:
  each rank keeps one). Embedding replicated on every rank (a gather; no all-reduce), LM head vocab-parallel
  ([V/t, H] per rank), the fp32 logits of the last token all-gathered over the group, then argmax.
  Phase "tp": t = N, decode steps (one new token per sequence at --context cached tokens) for every batch of
  --decode-batches, each captured as ONE CUDA graph (the NCCL all-reduces inside it) and timed by replays; prefill
  (--prefill BATCHxPROMPT, whole prompt in one pass, causal flash SDPA, LM head on the last token) as a graph too.
  Phase "replicas" (--replicas R, default 2): the N GPUs as R independent TP-(N/R) groups (consecutive ranks), all
  running at once, each serving --replica-batches sequences per step: for the same traffic as TP-N at batch
  R*b, throughput = R*b / step time (both written, with the TP-N point of the same total batch when measured).
--model moe (item 3): a Qwen3-30B-A3B-shaped decoder (hidden 2048, 48 layers, 32 query / 4 KV heads of 128,
  qk-norm, 128 routed SwiGLU experts of width 768, top-8 renormalised, no shared expert, vocab 151936, eps 1e-6,
  RoPE theta 1e6) with attention tensor-parallel over all N ranks (as above) and the experts expert-parallel over
  the same N ranks (E/N experts per rank): per layer the [T, H] normed activations (the same on every rank after the
  attention all-reduce) are split into N row blocks (T padded to a multiple of N with copies of real rows), each
  rank routes its block and dispatches it (--ep-impl static, the default: sync-free, fixed-capacity all_to_all of
  C = rows x top-k slots to every rank, received rows sorted by local expert, one torch._grouped_mm per projection
  over device-side offsets, the reverse all_to_all — see TPModel.moe_static; the whole step is one CUDA graph, as
  low-latency EP kernels run decode; --ep-impl sync: moe_layer.moe_forward, the split sizes copied to the host each
  layer, eager only — the 4-GPU rehearsal measured the host that way, ~170-190 ms a step), then one all_gather
  restores the [T, H] output on every rank. Prefill the same way.

Weights: each tensor is drawn in full from a generator seeded by its place in the model and every rank keeps its
slice, so the sharded model is the same model at every TP size (--check-out saves one prefill's logits: on the CPU in
float32, --cpu, TP 2, 4 and 8, TP4 x 2 and TP/EP 2, 4, 8 reproduce TP 1 to 1e-6, for both models).
Timing: CUDA events around each replay / eager step, the device synchronised after each; per rank the median of
--replays after --warmup; the point's time is the maximum over all ranks of the per-rank medians (a step lasts as
long as its slowest rank; in the replicas phase the slowest replica). Spread (max - min) / median over the slowest
rank's samples is recorded; > --max-spread refuses the sample, which is timed once more after 2 s idle (--retries;
the refused times kept under rejected_attempts); refused again, the point is "rejected_spread" (headline key
withheld, times kept).
Memory: a point whose weights + KV cache would pass --mem-budget-gb per GPU is skipped ("skipped_memory"); the
decision is made identically on every rank, so no rank waits on another in a collective.
The JSON (rank 0) is rewritten after every point, so a time-out keeps the points done. --time-budget-s stops
starting new points (rank 0's clock, agreed through an all_reduce). NVLink multicast must be off (checked).
"""
import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

DENSE = dict(hidden=8192, layers=20, heads=64, kv_heads=8, head_dim=128, intermediate=28672, vocab=128256,
             rope_theta=500000.0, eps=1e-5, qk_norm=False)
MOE = dict(hidden=2048, layers=48, heads=32, kv_heads=4, head_dim=128, experts=128, expert_ffn=768, topk=8,
           vocab=151936, rope_theta=1000000.0, eps=1e-6, qk_norm=True)


def parse_list(s):
    return [int(x) for x in str(s).split(",") if x.strip()]


def parse_prefill(s):
    out = []
    for item in str(s).split(","):
        if item.strip():
            b, p = item.lower().split("x")
            out.append((int(b), int(p)))
    return out


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["dense", "moe"], default="dense")
    p.add_argument("--phases", default="tp,replicas", help="dense: comma list of tp, replicas; moe: tp")
    p.add_argument("--layers", type=int, default=None, help="decoder layers (default: dense 20, moe 48)")
    p.add_argument("--context", type=int, default=2048, help="cached tokens per sequence at every decode point")
    p.add_argument("--decode-batches", default="1,2,4,8,16,32,64,128,256")
    p.add_argument("--prefill", default="1x2048,1x8192", help="BATCHxPROMPT list ('' for none)")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--replica-batches", default="32,128", help="sequences per replica per step")
    p.add_argument("--replays", type=int, default=30, help="timed replays (graph) or steps (eager) per point")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--max-spread", type=float, default=0.10)
    p.add_argument("--retries", type=int, default=1, help="re-time a point refused by the spread rule this often")
    p.add_argument("--retry-pause-s", type=float, default=2.0, help="idle time before such a retry")
    p.add_argument("--mem-budget-gb", type=float, default=70.0, help="per GPU: weights + KV cache")
    p.add_argument("--no-graphs", action="store_true", help="time eagerly (graphs are the default)")
    p.add_argument("--ep-impl", choices=["static", "sync"], default="static",
                   help="MoE dispatch: static = fixed-capacity all_to_all, sync-free, CUDA graphs (default); sync = "
                        "moe_layer.moe_forward (split sizes copied to the host each layer: eager only)")
    p.add_argument("--time-budget-s", type=float, default=1e9, help="stop starting new points after this")
    p.add_argument("--profile-replays", type=int, default=0,
                   help="after timing each point, profile this many replays (CUDA activity only; kernels by name)")
    p.add_argument("--name", default=None, help="file name stem (default derived from model, phase and N)")
    p.add_argument("--out-dir", default=None)
    p.add_argument("--check-out", default=None,
                   help="before timing, rank 0 saves the logits of one 1x16 prefill here (torch.save): the same "
                        "seeds give the same model at any TP size, so runs at different N must agree")
    p.add_argument("--cpu", action="store_true",
                   help="gloo, float32, on the CPU, no graphs: checks the script's logic only (tiny --layers)")
    a = p.parse_args(argv)
    a.batches = parse_list(a.decode_batches)
    a.rbatches = parse_list(a.replica_batches)
    a.prefill_cfgs = parse_prefill(a.prefill)
    a.phase_list = [x.strip() for x in a.phases.split(",") if x.strip()]
    bad = [x for x in a.phase_list if x not in ("tp", "replicas")]
    if bad:
        p.error(f"--phases: unknown phase(s) {bad} (tp, replicas)")
    if a.model == "moe" and "replicas" in a.phase_list:
        p.error("--phases replicas is for --model dense only")
    if a.replicas < 1 or a.replays < 3 or a.warmup < 0 or a.context < 1:
        p.error("--replicas >= 1, --replays >= 3, --warmup >= 0, --context >= 1")
    cfg = dict(DENSE if a.model == "dense" else MOE)
    if a.layers is not None:
        if a.layers < 1:
            p.error("--layers must be >= 1")
        cfg["layers"] = a.layers
    if a.cpu:  # the same code paths on a toy shape (head counts keep the GPU configs' TP/KV splits)
        cfg.update(hidden=256, head_dim=16, vocab=1024)
        if a.model == "dense":
            cfg.update(intermediate=512)
        else:
            cfg.update(experts=16, expert_ffn=64)
    a.cfg = cfg
    return a


def stem(a, phase, world):
    if a.name:
        return f"{a.name}_{phase}"
    if a.model == "dense":
        L = a.cfg["layers"]
        if phase == "tp":
            return f"serve_tp{world}_llama3_70b_l{L}"
        return f"serve_tp{world // a.replicas}x{a.replicas}_llama3_70b_l{L}"
    return f"serve_tp{world}_ep{world}_qwen3_30b_a3b" + ("" if a.cfg["layers"] == 48 else f"_l{a.cfg['layers']}")


# ---------------------------------------------------------------------------------------------------------------------
def main():
    a = parse()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0" and not a.cpu:
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (NVLink multicast stays off)")
    import torch
    import torch.distributed as dist

    rank, world, lr = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["LOCAL_RANK"])
    if a.cpu:
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(lr)
        dev = torch.device("cuda", lr)
        dist.init_process_group("nccl", device_id=dev)
    t0 = time.perf_counter()
    try:
        for phase in a.phase_list:
            run_phase(a, phase, rank, world, dev, t0)
            gc.collect()
            if not a.cpu:
                torch.cuda.empty_cache()
    finally:
        dist.barrier()
        dist.destroy_process_group()


def run_phase(a, phase, rank, world, dev, t0):
    import torch
    import torch.distributed as dist

    R = a.replicas if phase == "replicas" else 1
    if world % R != 0:
        if rank == 0:
            print(f"[node_serve] phase {phase}: world {world} not divisible by {R} replicas, skipped", flush=True)
        return
    t = world // R
    groups = []
    for g0 in range(0, world, t):
        members = list(range(g0, g0 + t))
        groups.append((members, dist.new_group(members) if t > 1 else None))  # every rank creates every group
    gi = rank // t
    members, pg = groups[gi]
    me = rank - members[0]
    cfg = a.cfg
    name = stem(a, phase, world)
    batches = a.rbatches if phase == "replicas" else a.batches
    rec = {"name": name, "kind": "node_serve_step", "model_shape": a.model, "phase": phase, "status": "started",
           "world_size": world, "tp": t, "ep": t if a.model == "moe" else 1, "replicas": R, "config": cfg,
           "layers": cfg["layers"], "context_tokens": a.context,
           "model_file": (f"bench-llama3-70b-shape-l{cfg['layers']}" if a.model == "dense"
                          else ("qwen3-30b-a3b" if cfg["layers"] == 48 else None)),
           "timing": (f"per rank: median of {a.replays} replays/steps after {a.warmup} warm-ups, CUDA events, device "
                      "synchronised after each; the point's time = max over all ranks of the per-rank medians"),
           "parallelism": ("Megatron-style TP: column-parallel QKV and gate|up, row-parallel O and down + all_reduce "
                           "each; vocab-parallel LM head + all_gather of fp32 logits; embedding replicated"
                           + ("; experts EP over the same ranks: row blocks, all_to_all dispatch/combine "
                              "(moe_layer.moe_forward), all_gather of the block outputs" if a.model == "moe" else "")),
           "points": []}
    rec.update(common.run_metadata())
    if rank == 0 and not a.cpu:
        rec["software"] = common.software_versions()
        rec["device"] = common.device_properties()
        rec["nvidia_smi_before"] = common.nvidia_smi_static()
        try:
            rec["topology"] = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True,
                                             timeout=20).stdout
        except Exception as e:  # noqa: BLE001
            rec["topology"] = f"error: {e}"

    def log(msg):
        if rank == 0:
            print(f"[node_serve {time.strftime('%H:%M:%S', time.gmtime())}] {name}: {msg}", flush=True)

    def save():
        if rank == 0:
            common.write_json(rec, name, a.out_dir)

    def agree_max(vals):
        x = torch.tensor(vals, device=dev, dtype=torch.float64)
        dist.all_reduce(x, op=dist.ReduceOp.MAX)
        return x.tolist()

    def out_of_time():
        return agree_max([1.0 if (rank == 0 and time.perf_counter() - t0 > a.time_budget_s) else 0.0])[0] > 0

    try:
        with torch.no_grad():
            m = TPModel(cfg, a.model, t, me, pg, dev, DTYPE(a), max_pos=a.context + 64 +
                        max([p for _, p in a.prefill_cfgs] + [0]))
        if a.check_out:
            with torch.no_grad():
                kc, vc = (torch.zeros(m.L, 1, m.kvh, 16, m.D, device=dev, dtype=DTYPE(a)) for _ in range(2))
                tok = torch.arange(16, device=dev).view(1, 16) * 7 % m.V
                logits, _ = m.forward(tok, kc, vc, 0, True)
            if rank == 0:
                torch.save(logits.float().cpu(), f"{a.check_out}.{phase}.pt")
        rec["weights_bytes_per_gpu"] = m.weight_bytes
        rec["params_total_model"] = m.params_total
        rec["kv_bytes_per_token_per_gpu"] = m.kv_token_bytes
        if a.model == "moe":
            import moe_layer
            rec["grouped_mm"] = moe_layer.probe_gmm(dev)
        log(f"t={t} R={R} me={me} weights {m.weight_bytes / 1e9:.2f} GB/GPU, KV {m.kv_token_bytes} B/token/GPU")
        budget = a.mem_budget_gb * 1e9
        pool_tokens = 0
        for b in batches:
            if m.weight_bytes + m.kv_token_bytes * b * (a.context + 64) <= budget:
                pool_tokens = max(pool_tokens, b * (a.context + 64))
        for b, s in a.prefill_cfgs if phase == "tp" else []:
            if m.weight_bytes + m.kv_token_bytes * b * (s + 64) <= budget:
                pool_tokens = max(pool_tokens, b * (s + 64))
        with torch.no_grad():
            pool = torch.empty(pool_tokens * m.kv_token_bytes // 2, device=dev, dtype=DTYPE(a))
            pool.normal_(0.0, 1.0)
        warm = torch.ones(1024, device=dev)
        if pg is not None:
            dist.all_reduce(warm, group=pg)  # the communicator exists before any graph capture
        sync(dev)
        m.ep_impl = a.ep_impl
        rec["ep_impl"] = a.ep_impl
        if a.model == "moe" and not a.cpu:
            # does _grouped_mm take offsets that end before the last row (the empty slots)? else they join the last
            # expert's group (computed, never read)
            try:
                xa = torch.randn(32, 64, device=dev, dtype=torch.bfloat16)
                wa = torch.randn(2, 64, 16, device=dev, dtype=torch.bfloat16)
                ya = torch._grouped_mm(xa, wa, offs=torch.tensor([8, 24], device=dev, dtype=torch.int32))
                ok = float((ya[:24].float() - torch.cat((xa[:8] @ wa[0], xa[8:24] @ wa[1])).float()).abs().max()) < 0.5
            except Exception as e:  # noqa: BLE001
                ok = False
                rec["grouped_mm_short_offsets_error"] = f"{type(e).__name__}: {str(e)[:200]}"
            m.tail_in_last_group = not agree_max([0.0 if ok else 1.0])[0] == 0.0
            rec["moe_empty_slots_in_last_group"] = m.tail_in_last_group
        use_graphs = not a.no_graphs and not a.cpu and not (a.model == "moe" and a.ep_impl == "sync")
        items = [("decode", b, a.context) for b in batches]
        if phase == "tp":
            items += [("prefill", b, s) for b, s in a.prefill_cfgs]
        for kind, b, s in items:
            if out_of_time():
                log("time budget spent: remaining points not run")
                rec["stopped_by_time_budget"] = True
                break
            pt = {"kind": kind, "batch": b, ("context_tokens" if kind == "decode" else "prompt_tokens"): s}
            need = m.weight_bytes + m.kv_token_bytes * b * (s + 64)
            if need > budget:
                pt["status"] = "skipped_memory"
                pt["need_bytes_per_gpu"] = need
                rec["points"].append(pt)
                save()
                continue
            try:
                with torch.no_grad():
                    res = time_point(m, kind, b, s, pool, dev, a, use_graphs, agree_max)
                pt.update(res)
                if R > 1 and kind == "decode" and pt.get("step_time_s"):
                    pt["total_batch"] = R * b
                    pt["throughput_tokens_per_s"] = R * b / pt["step_time_s"]
                elif kind == "decode" and pt.get("step_time_s"):
                    pt["throughput_tokens_per_s"] = b / pt["step_time_s"]
            except Exception as e:  # noqa: BLE001 - recorded; the shell's timeout covers a rank left in a collective
                pt["status"] = "error"
                pt["error"] = f"{type(e).__name__}: {str(e)[:400]}"
                log(traceback.format_exc())
            rec["points"].append(pt)
            shown = pt.get("step_time_s") or pt.get("prefill_time_s") or pt.get("step_time_s_unaccepted") or \
                pt.get("prefill_time_s_unaccepted") or 0.0
            log(f"{kind} b={b} s={s}: {pt.get('status')} {1e3 * shown:.3f} ms (graph={pt.get('cuda_graph')}, "
                f"attempts {pt.get('attempts')})")
            save()
        rec["status"] = "done"
    except Exception as e:  # noqa: BLE001
        rec["status"] = "error"
        rec["error"] = f"{type(e).__name__}: {str(e)[:600]}"
        log(traceback.format_exc())
    if rank == 0:
        rec["nvidia_smi_after"] = common.nvidia_smi_static() if not a.cpu else []
        rec["wall_s"] = time.perf_counter() - t0
    save()


# ---------------------------------------------------------------------------------------------------------------------
class TPModel:
    """The rank's shard of the decoder (see the module docstring). forward(tokens, kc, vc, start, prefill)."""

    def __init__(self, cfg, kind, t, me, pg, dev, dt, max_pos):
        import torch

        self.cfg, self.kind, self.t, self.me, self.pg = cfg, kind, t, me, pg
        self.ep_impl = "static"
        self.tail_in_last_group = False
        H, NH, KVH, D = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
        assert NH % t == 0, f"{NH} query heads do not split over {t} ranks"
        assert KVH % t == 0 or t % KVH == 0, f"{KVH} KV heads vs {t} ranks"
        self.H, self.D, self.L, self.V = H, D, cfg["layers"], cfg["vocab"]
        self.nh = NH // t
        self.kvh = max(1, KVH // t)
        assert cfg["vocab"] % t == 0
        self.vl = cfg["vocab"] // t

        seed = [0]

        def rnd(*shape, dim=None, lo=0, hi=0):
            """N(0, 0.02) from a generator seeded by the weight's place in the model, so every rank draws the same
            full tensor and keeps its slice [lo, hi) along dim: the sharded model is the unsharded one."""
            seed[0] += 1
            g = torch.Generator(device=dev).manual_seed(seed[0])
            x = torch.empty(*shape, device=dev, dtype=dt)
            x.normal_(0.0, 0.02, generator=g)
            return x if dim is None else x.narrow(dim, lo, hi - lo).clone()

        def ones(n):
            return torch.ones(n, device=dev, dtype=dt)

        self.embed = rnd(self.V, H)
        self.lm_head = rnd(self.V, H, dim=0, lo=me * self.vl, hi=(me + 1) * self.vl)
        self.final_norm = ones(H)
        self.layers = []
        kv0 = (me * self.nh) // (NH // KVH)  # the first KV head of the rank's query heads (GQA grouping)
        if kind == "dense":
            assert cfg["intermediate"] % t == 0
            self.il = cfg["intermediate"] // t
        else:
            import moe_layer

            assert cfg["experts"] % t == 0
            self.moe_cfg = {"hidden": H, "experts": cfg["experts"], "ffn": cfg["expert_ffn"], "topk": cfg["topk"]}
            self.rec = moe_layer.Rec(dev.type == "cuda")  # marks off
            El, f = cfg["experts"] // t, cfg["expert_ffn"]
        for _ in range(self.L):
            # column-parallel: the rank's query heads, its KV heads, its gate and up columns (fused); row-parallel:
            # the matching input columns of O and down
            wq = rnd(NH * D, H, dim=0, lo=me * self.nh * D, hi=(me + 1) * self.nh * D)
            wk = rnd(KVH * D, H, dim=0, lo=kv0 * D, hi=(kv0 + self.kvh) * D)
            wv = rnd(KVH * D, H, dim=0, lo=kv0 * D, hi=(kv0 + self.kvh) * D)
            w = {"attn_norm": ones(H), "wqkv": torch.cat((wq, wk, wv)),
                 "wo": rnd(H, NH * D, dim=1, lo=me * self.nh * D, hi=(me + 1) * self.nh * D), "mlp_norm": ones(H)}
            del wq, wk, wv
            if cfg["qk_norm"]:
                w["q_norm"], w["k_norm"] = ones(D), ones(D)
            if kind == "dense":
                I, lo, hi = cfg["intermediate"], me * self.il, (me + 1) * self.il
                w["wgu"] = torch.cat((rnd(I, H, dim=0, lo=lo, hi=hi), rnd(I, H, dim=0, lo=lo, hi=hi)))
                w["wdown"] = rnd(H, I, dim=1, lo=lo, hi=hi)
            else:
                # moe_layer.moe_forward's layout: x @ wr [h, E]; x @ w1[g] [h, 2f]; act @ w2[g] [f, h]; the rank
                # holds experts [me*El, (me+1)*El) (contiguous, as moe_forward routes them)
                E = cfg["experts"]
                w["moe"] = {"wr": rnd(H, E), "w1": rnd(E, H, 2 * f, dim=0, lo=me * El, hi=(me + 1) * El),
                            "w2": rnd(E, f, H, dim=0, lo=me * El, hi=(me + 1) * El)}
            self.layers.append(w)
        n = sum(x.numel() for x in (self.embed, self.lm_head, self.final_norm))
        for w in self.layers:
            for k, v in w.items():
                n += sum(x.numel() for x in v.values()) if k == "moe" else v.numel()
        self.weight_bytes = 2 * n  # bf16 (the --cpu check runs float32 but counts as bf16)
        # the whole model's parameters (KV heads counted once, the replicated embedding once)
        per_layer_attn = H * NH * D * 2 + 2 * H * KVH * D + 2 * H + (2 * D if cfg["qk_norm"] else 0)
        if kind == "dense":
            per_layer_mlp = 3 * H * cfg["intermediate"]
        else:
            per_layer_mlp = H * cfg["experts"] + 3 * cfg["experts"] * H * cfg["expert_ffn"]
        self.params_total = 2 * self.V * H + H + self.L * (per_layer_attn + per_layer_mlp)
        self.kv_token_bytes = 2 * self.L * self.kvh * D * 2
        inv = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, D, 2, device=dev, dtype=torch.float32) / D))
        fr = torch.outer(torch.arange(max_pos, device=dev, dtype=torch.float32), inv)
        self.cos = torch.cat((fr.cos(), fr.cos()), dim=-1).to(dt)
        self.sin = torch.cat((-fr.sin(), fr.sin()), dim=-1).to(dt)

    def all_reduce(self, x):
        import torch.distributed as dist

        if self.t > 1:
            dist.all_reduce(x, group=self.pg)
        return x

    def layer(self, x, w, cos, sin, kc, vc, start, prefill):
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F

        b, s, H = x.shape
        D, nh, kvh, eps = self.D, self.nh, self.kvh, self.cfg["eps"]
        nq, nkv = nh * D, kvh * D
        h = F.rms_norm(x, (H,), w["attn_norm"], eps)
        qkv = F.linear(h, w["wqkv"])
        qk = qkv[..., :nq + nkv].view(b, s, nh + kvh, D)
        if self.cfg["qk_norm"]:
            qk = torch.cat((F.rms_norm(qk[:, :, :nh], (D,), w["q_norm"], eps),
                            F.rms_norm(qk[:, :, nh:], (D,), w["k_norm"], eps)), dim=2)
        swapped = qk.view(b, s, nh + kvh, 2, D // 2).flip(3).view(b, s, nh + kvh, D)
        qk = torch.addcmul(qk * cos, swapped, sin)
        q = qk[:, :, :nh].transpose(1, 2)
        k = qk[:, :, nh:].transpose(1, 2)
        v = qkv[..., nq + nkv:].view(b, s, kvh, D).transpose(1, 2)
        kc[:, :, start:start + s].copy_(k)
        vc[:, :, start:start + s].copy_(v)
        if prefill:
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            o = F.scaled_dot_product_attention(q, kc[:, :, :start + s], vc[:, :, :start + s], enable_gqa=True)
        x = x + self.all_reduce(F.linear(o.transpose(1, 2).reshape(b, s, nq), w["wo"]))
        h = F.rms_norm(x, (H,), w["mlp_norm"], eps)
        if self.kind == "dense":
            g, u = F.linear(h, w["wgu"]).split(self.il, dim=-1)
            return x + self.all_reduce(F.linear(F.silu(g) * u, w["wdown"]))
        import moe_layer

        T = b * s
        flat = h.reshape(T, H)
        Tp = -(-T // self.t) * self.t
        if Tp > T:  # pad with copies of real rows (zero rows would all route to the same experts)
            flat = torch.cat((flat, flat[torch.arange(Tp - T, device=flat.device) % T]))
        blk = Tp // self.t
        mine = flat[self.me * blk:(self.me + 1) * blk]
        if self.ep_impl == "static":
            y = self.moe_static(mine, w["moe"])
        else:
            y = moe_layer.moe_forward(mine, w["moe"], self.moe_cfg, self.t, self.pg, self.rec)
        if self.t > 1:
            full = y.new_empty(Tp, H)
            dist.all_gather_into_tensor(full, y.contiguous(), group=self.pg)
        else:
            full = y
        return x + full[:T].view(b, s, H)

    def moe_static(self, x, P):
        """x [Tb, H] (this rank's row block) -> [Tb, H] without a host sync, so the step can be one CUDA graph:
        router (softmax fp32, top-k, renormalised); every rank sends C = Tb*k fixed slots to every rank (its pairs
        sorted by destination rank, the rest zero rows with expert id -1: a fixed-capacity all_to_all of rows and one
        of the local expert ids); the receiver sorts its t*C rows by local expert (empty slots last), ONE
        torch._grouped_mm per projection over int32 offsets = cumsum(counts) (rows past the last offset are not
        computed and never read back), SwiGLU, rows back in received order, the reverse all_to_all, and the sender
        takes its own slots back and sums each token's k rows weighted."""
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        import moe_layer

        Tb, H = x.shape
        E, k, t = self.moe_cfg["experts"], self.moe_cfg["topk"], self.t
        El, C, dev = E // t, Tb * k, x.device
        probs = torch.softmax((x @ P["wr"]).float(), dim=-1)
        topv, topi = torch.topk(probs, k, dim=-1)
        topv = topv / topv.sum(dim=-1, keepdim=True)
        e = topi.reshape(-1)                                            # [C] pair -> expert
        dst = torch.div(e, El, rounding_mode="floor")
        order = torch.argsort(dst, stable=True)
        cnt = torch.zeros(t, device=dev, dtype=torch.int64).scatter_add_(0, dst, torch.ones_like(dst))
        ds = dst[order]
        slot = ds * C + torch.arange(C, device=dev) - (torch.cumsum(cnt, 0) - cnt)[ds]
        send = x.new_zeros(t * C, H)
        send[slot] = x[torch.div(order, k, rounding_mode="floor")]
        meta = torch.full((t * C,), -1, device=dev, dtype=torch.int64)
        meta[slot] = e[order] % El
        if t > 1:
            recv, rmeta = torch.empty_like(send), torch.empty_like(meta)
            dist.all_to_all_single(recv, send, group=self.pg)
            dist.all_to_all_single(rmeta, meta, group=self.pg)
        else:
            recv, rmeta = send, meta
        # empty slots sort last: past the last offset, or (tail_in_last_group) computed with the last expert
        key = torch.where(rmeta >= 0, rmeta, torch.full_like(rmeta, El - 1 if self.tail_in_last_group else El))
        so = torch.argsort(key, stable=True)
        counts = torch.zeros(El + 1, device=dev, dtype=torch.int64).scatter_add_(0, key, torch.ones_like(key))[:El]
        offs = torch.cumsum(counts, 0).to(torch.int32)
        xs = recv[so]
        if dev.type == "cuda":
            h1 = torch._grouped_mm(xs, P["w1"], offs=offs)
        else:  # the CPU check: the loop over the groups (host-side offsets)
            h1 = torch.zeros(xs.shape[0], P["w1"].shape[2], dtype=xs.dtype)
            h1[:int(offs[-1])] = moe_layer._gmm_loop(xs, P["w1"], offs.tolist())
        f = h1.shape[1] // 2
        act = F.silu(h1[:, :f]) * h1[:, f:]
        if dev.type == "cuda":
            ye = torch._grouped_mm(act, P["w2"], offs=offs)
        else:
            ye = torch.zeros(act.shape[0], H, dtype=act.dtype)
            ye[:int(offs[-1])] = moe_layer._gmm_loop(act, P["w2"], offs.tolist())
        yr = torch.empty_like(ye)
        yr[so] = ye                                                     # back in received order
        if t > 1:
            back = torch.empty_like(yr)
            dist.all_to_all_single(back, yr, group=self.pg)
        else:
            back = yr
        rows = torch.empty(C, H, device=dev, dtype=x.dtype)
        rows[order] = back[slot]                                        # pair order again
        return (rows.view(Tb, k, H) * topv.to(rows.dtype).unsqueeze(-1)).sum(dim=1)

    def forward(self, tokens, kc, vc, start, prefill):
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F

        b, s = tokens.shape
        cos, sin = self.cos[start:start + s].unsqueeze(1), self.sin[start:start + s].unsqueeze(1)
        x = F.embedding(tokens, self.embed)
        for i, w in enumerate(self.layers):
            x = self.layer(x, w, cos, sin, kc[i], vc[i], start, prefill)
        logits = F.linear(F.rms_norm(x[:, -1, :], (self.H,), self.final_norm, self.cfg["eps"]), self.lm_head).float()
        if self.t > 1:
            allv = logits.new_empty(self.t * b, self.vl)
            dist.all_gather_into_tensor(allv, logits.contiguous(), group=self.pg)
            logits = allv.view(self.t, b, self.vl).permute(1, 0, 2).reshape(b, self.V)
        return logits, torch.argmax(logits, dim=-1)


def DTYPE(a):
    import torch

    return torch.float32 if a.cpu else torch.bfloat16


def sync(dev):
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize()


def kv_views(m, pool, b, max_ctx):
    n = m.L * b * m.kvh * max_ctx * m.D
    assert 2 * n <= pool.numel(), (2 * n, pool.numel())
    shape = (m.L, b, m.kvh, max_ctx, m.D)
    return pool[:n].view(shape), pool[n:2 * n].view(shape)


def time_point(m, kind, b, s, pool, dev, a, use_graphs, agree_max):
    """One decode or prefill point; returns the point's record (times are the slowest rank's)."""
    import torch

    prefill = kind == "prefill"
    kc, vc = kv_views(m, pool, b, s + 64)
    g = torch.Generator(device=dev).manual_seed(1234 + b + s)  # the same tokens on every rank of a group
    tokens = torch.randint(0, m.V, (b, s if prefill else 1), device=dev, generator=g)
    start = 0 if prefill else s

    def step():
        return m.forward(tokens, kc, vc, start, prefill)[1]

    graph = None
    res = {"status": "ok"}
    if use_graphs:
        ok = 1.0
        try:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(2):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                step()
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            ok = 0.0
            graph = None
            res["graph_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if agree_max([1.0 - ok])[0] > 0:  # any rank failed: every rank times eagerly
            graph = None
            torch.cuda.synchronize()
    fn = graph.replay if graph is not None else step
    res["cuda_graph"] = graph is not None
    cuda = dev.type == "cuda"
    key = "step_time_s" if kind == "decode" else "prefill_time_s"
    for attempt in range(1 + a.retries):
        if attempt:  # the previous sample was refused on some rank: idle, then time it once more (every rank)
            res.setdefault("rejected_attempts", []).append(
                {"rank_times_s": res["rank_times_s"], "max_spread_over_ranks": res["max_spread_over_ranks"],
                 key + "_unaccepted": res[key + "_unaccepted"]})
            time.sleep(a.retry_pause_s)
        gc.disable()
        try:
            for _ in range(a.warmup):
                fn()
            sync(dev)
            times, walls = [], []
            for _ in range(a.replays):
                w0 = time.perf_counter()
                if cuda:
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn()
                    e1.record()
                    e1.synchronize()
                    times.append(e0.elapsed_time(e1) / 1e3)
                else:
                    fn()
                    times.append(time.perf_counter() - w0)
                walls.append(time.perf_counter() - w0)
        finally:
            gc.enable()
        med = statistics.median(times)
        spread = (max(times) - min(times)) / med
        peak = torch.cuda.max_memory_allocated(dev) / 1e9 if cuda else 0.0
        world_meds = agree_max([med, statistics.median(walls), spread, peak])
        res.update({"rank_times_s": times, "rank_median_s": med, "rank_spread": spread,
                    "host_wall_median_s": world_meds[1], "max_spread_over_ranks": world_meds[2],
                    "peak_allocated_GB_max_over_ranks": world_meds[3], "attempts": attempt + 1})
        if world_meds[2] > a.max_spread:  # the same decision on every rank (world maximum)
            res["status"] = "rejected_spread"
            res[key + "_unaccepted"] = world_meds[0]
        else:
            res["status"] = "ok"
            res.pop(key + "_unaccepted", None)
            res[key] = world_meds[0]
            break
    if a.profile_replays > 0 and cuda:
        prof = common.cuda_kernel_profile(fn, a.profile_replays)
        res["profile_cuda_only"] = prof if dev.index in (0, None) else {"rank": dev.index, "kept": "rank 0 only"}
    del graph
    return res


if __name__ == "__main__":
    main()
