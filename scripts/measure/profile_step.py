#!/usr/bin/env python3
"""Profile real training steps of train_step.py's Llama-style model with torch.profiler: where does the step time go?

Reuses train_step.py as a module (model, weight init, parameter count, SDPA backend choice, GQA probe and its
command-line flags: every train_step.py flag works here with the same meaning), including --ddp/--fsdp under
torchrun: every rank runs the same steps under the profiler, rank 0's trace is analysed and written.

What it does, for one config:
  1. builds the model and fused AdamW exactly as train_step.py does, runs --warmup steps;
  2. reference: --ref-steps unprofiled steps timed with CUDA events (median; profiler overhead check), with
     nvidia-smi sampled every --smi-period-ms in the background;
  3. profile: torch.profiler (CPU + CUDA activities, record_shapes=True), schedule = 1 profiler warm-up step
     (discarded) + --profile-steps active steps, each step bracketed by CUDA events and a record_function
     annotation, nvidia-smi (-lms) sampled in the background; the Chrome trace is exported and analysed.

Analysis (standard library only; also runnable offline on a saved trace with --analyze-trace):
  - every GPU activity (kernel, memcpy, memset) is tied to its launch (CUDA runtime/driver call, by correlation id),
    the launch to the innermost CPU op around it on the same thread (time nesting; "External id" as fallback), and
    to the profiled step whose annotation contains the launch;
  - per step: wall (CUDA events), GPU kernel time (sum of durations), GPU busy (union of kernel/memcpy/memset
    intervals), idle = wall - busy;
  - per step, kernel time by category from the kernel name: memcpy, memset, nccl, flash_fwd / flash_bwd
    ("flash"/"fmha", split on "bwd"/"backward"), optimizer ("multi_tensor", "fused_adam", "adam"), gemm ("gemm",
    "xmma", "cutlass", "sm90", "nvjet", "cublas", "matmul"), elementwise (everything else: elementwise,
    reductions, norms, softmax/cross-entropy, embedding, casts); and by phase (fwd / bwd / optimizer / other, from
    the CPU op stack: an "...Backward..." autograd node -> bwd, "Optimizer..." -> optimizer);
  - GEMMs: M, N, K (and batch) from the input shapes of the nearest aten::mm/addmm/bmm/baddbmm/matmul/linear op
    above the launch; achieved TFLOP/s = 2*B*M*N*K / duration; top 10 by (kernel, shape) and by kernel name;
  - flash attention: achieved TFLOP/s with causal-discounted FLOPs (fwd 2*b*H*s^2*d per layer, bwd 2.5x that);
  - the top 15 elementwise kernels (per-step time, count, mean duration, launching aten op) and the top aten ops
    behind the elementwise time;
  - nvidia-smi samples (SM clock, power, clock-event reasons) min/median/max, reference and profiled windows.

Examples:
  python3 scripts/measure/profile_step.py --name w7b_L8_s4096_b4 --hidden 4096 --layers 8 --heads 32 \
      --kv-heads 32 --intermediate 11008 --vocab 32000 --seq 4096 --micro-batch 4 --trace-dir $OUT
  python3 scripts/measure/profile_step.py --analyze-trace trace_X.json.gz --record profile_X.json  (offline)
Output: <out-dir>/profile_<name>.json (out-dir: --out-dir, else $OUT, else .).
"""
import argparse
import bisect
import collections
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (standard library only)

GEMM_KEYS = ("gemm", "xmma", "cutlass", "sm90", "nvjet", "cublas", "matmul")
FLASH_KEYS = ("flash", "fmha")
OPT_KEYS = ("multi_tensor", "fused_adam", "adam")
CATEGORIES = ("gemm", "flash_fwd", "flash_bwd", "optimizer", "elementwise", "memcpy", "memset", "nccl")
MATMUL_OPS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
              "aten::_scaled_mm")
STEP_TAG = "gpuplan_profiled_step_"
NAME_CHARS = 220


# ------------------------------------------------------------------------------------------------ nvidia-smi logging
class SmiLog:
    """nvidia-smi --query-gpu=... -lms PERIOD in the background, written to a file; parsed on stop."""

    FIELD_SETS = (
        ["timestamp", "clocks.sm", "power.draw", "power.draw.instant", "clocks_event_reasons.active"],
        ["timestamp", "clocks.sm", "power.draw", "clocks_event_reasons.active"],
        ["timestamp", "clocks.sm", "power.draw"],
    )

    def __init__(self, period_ms, path, gpu=0):
        self.period_ms, self.path, self.gpu = period_ms, path, gpu
        self.proc, self.fields, self.error = None, None, None
        self.t_start = self.t_stop = None

    def start(self):
        for fields in self.FIELD_SETS:
            f = open(self.path, "w")
            try:
                p = subprocess.Popen(["nvidia-smi", "-i", str(self.gpu), "--query-gpu=" + ",".join(fields),
                                      "--format=csv,noheader,nounits", "-lms", str(self.period_ms)],
                                     stdout=f, stderr=subprocess.STDOUT)
            except Exception as e:  # noqa: BLE001
                self.error = str(e)[:200]
                f.close()
                return self
            f.close()
            t0 = time.time()
            while time.time() - t0 < 5:  # wait for the first sample (or a quick exit: a field not supported)
                if p.poll() is not None:
                    break
                if os.path.getsize(self.path) > 0:
                    time.sleep(0.05)
                    break
                time.sleep(0.02)
            if p.poll() is None:
                self.proc, self.fields = p, fields
                self.t_start = time.time()
                return self
            self.error = open(self.path).read()[:200]
        return self

    def stop(self):
        self.t_stop = time.time()
        if self.proc is not None:
            time.sleep(self.period_ms / 1000.0 * 1.5)  # let the last period land
            self.proc.terminate()  # the process this object started, by its handle
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self

    def samples(self):
        if self.fields is None:
            return []
        out = []
        for line in open(self.path).read().splitlines():
            vals = [v.strip() for v in line.split(",")]
            if len(vals) != len(self.fields):
                continue
            row = dict(zip(self.fields, vals))
            try:
                row["_t"] = time.mktime(time.strptime(row["timestamp"].split(".")[0], "%Y/%m/%d %H:%M:%S")) + \
                    float("0." + row["timestamp"].split(".")[1]) if "." in row["timestamp"] else 0.0
            except Exception:  # noqa: BLE001
                row["_t"] = None
            out.append(row)
        return out

    def summary(self, t_from=None, t_to=None):
        rows = self.samples()
        if t_from is not None:
            sel = [r for r in rows if r["_t"] is not None and t_from - 0.05 <= r["_t"] <= t_to + 0.15]
            if len(sel) >= 2:
                rows = sel

        def num(key):
            vals = []
            for r in rows:
                try:
                    vals.append(float(r[key]))
                except (KeyError, ValueError):
                    pass
            if not vals:
                return None
            return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}

        reasons = collections.Counter(r.get("clocks_event_reasons.active") for r in rows
                                      if r.get("clocks_event_reasons.active"))
        return {"n_samples": len(rows), "period_ms": self.period_ms, "fields": self.fields, "error": self.error,
                "sm_clock_MHz": num("clocks.sm"), "power_draw_W": num("power.draw"),
                "power_draw_instant_W": num("power.draw.instant"),
                "clock_event_reasons_active_hex": dict(reasons),
                "sm_clock_MHz_series": [r.get("clocks.sm") for r in rows],
                "power_draw_W_series": [r.get("power.draw") for r in rows]}


# ------------------------------------------------------------------------------------------------------- trace analysis
def categorize(name, cat):
    if cat == "gpu_memcpy":
        return "memcpy"
    if cat == "gpu_memset":
        return "memset"
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if any(k in n for k in FLASH_KEYS):  # before gemm: flash kernel names contain "cutlass::bfloat16_t"
        return "flash_bwd" if ("bwd" in n or "backward" in n) else "flash_fwd"
    if any(k in n for k in OPT_KEYS):
        return "optimizer"
    if any(k in n for k in GEMM_KEYS):
        return "gemm"
    return "elementwise"


def _prod(xs):
    p = 1
    for x in xs:
        p *= int(x)
    return p


def gemm_shape(op_name, dims):
    """(B, M, N, K) from an aten matmul op's input dims, or None."""
    try:
        d = [x for x in dims if isinstance(x, list)]
        if op_name == "aten::mm" or op_name == "aten::_scaled_mm":
            a, b = d[0], d[1]
            return 1, a[0], b[1], a[1]
        if op_name == "aten::addmm":
            a, b = dims[1], dims[2]
            return 1, a[0], b[1], a[1]
        if op_name == "aten::bmm":
            a, b = d[0], d[1]
            return a[0], a[1], b[2], a[2]
        if op_name == "aten::baddbmm":
            a, b = dims[1], dims[2]
            return a[0], a[1], b[2], a[2]
        if op_name == "aten::linear":
            a, w = d[0], d[1]
            return 1, _prod(a[:-1]), w[0], a[-1]
        if op_name == "aten::matmul":
            a, b = d[0], d[1]
            if len(b) == 2:
                return 1, _prod(a[:-1]), b[1], a[-1]
            if len(a) >= 3 and len(b) >= 3:
                return _prod(a[:-2]), a[-2], b[-1], a[-1]
    except (IndexError, TypeError, ValueError):
        return None
    return None


def _load_trace(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        tr = json.load(f)
    return tr["traceEvents"] if isinstance(tr, dict) else tr


def union_length(intervals):
    tot, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def analyze_trace(path, step_walls_ms, cfg):
    """Summarise a Chrome trace of the profiled steps. Times in the trace are microseconds."""
    evs = _load_trace(path)
    ops = []            # cpu_op / user_annotation: dict(name, ts, end, tid, args)
    launches = {}       # correlation id -> runtime/driver event
    gpu = []            # kernels, memcpy, memset
    step_annos = []     # (ts, end, index)
    gpu_step_annos = []
    for e in evs:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat", "")
        ts = float(e.get("ts", 0.0))
        end = ts + float(e.get("dur", 0.0))
        args = e.get("args") or {}
        name = e.get("name", "")
        if cat in ("cpu_op", "user_annotation"):
            o = {"name": name, "ts": ts, "end": end, "th": (e.get("pid"), e.get("tid")), "args": args,
                 "parent": None}
            ops.append(o)
            if cat == "user_annotation" and name.startswith(STEP_TAG):
                step_annos.append((ts, end, int(name[len(STEP_TAG):])))
        elif cat in ("cuda_runtime", "cuda_driver"):
            c = args.get("correlation")
            if c is not None:
                launches[c] = {"ts": ts, "end": end, "th": (e.get("pid"), e.get("tid")), "name": name, "op": None}
        elif cat in ("kernel", "gpu_memcpy", "gpu_memset"):
            gpu.append({"name": name, "cat": cat, "ts": ts, "end": end, "dur": float(e.get("dur", 0.0)),
                        "corr": args.get("correlation"), "ext": args.get("External id"),
                        "stream": args.get("stream", e.get("tid"))})
        elif cat == "gpu_user_annotation" and name.startswith(STEP_TAG):
            gpu_step_annos.append((ts, end, int(name[len(STEP_TAG):])))

    # CPU op nesting and the innermost op around each launch, per thread (sweep with a stack)
    eps = 1e-3
    by_thread = collections.defaultdict(list)
    for o in ops:
        by_thread[o["th"]].append((o["ts"], 0, -(o["end"] - o["ts"]), id(o), o))
    for l in launches.values():
        by_thread[l["th"]].append((l["ts"], 1, -(l["end"] - l["ts"]), id(l), l))
    for items in by_thread.values():
        items.sort(key=lambda t: (t[0], t[1], t[2]))
        stack = []
        for ts, kind, _, _, x in items:
            while stack and not (ts >= stack[-1]["ts"] - eps and x["end"] <= stack[-1]["end"] + eps):
                stack.pop()
            if kind == 0:
                x["parent"] = stack[-1] if stack else None
                stack.append(x)
            else:
                x["op"] = stack[-1] if stack else None
    ext_map = {}
    for o in ops:
        x = o["args"].get("External id")
        if x is not None and o["name"] and not o["name"].startswith(STEP_TAG):
            ext_map.setdefault(x, o)

    step_annos.sort()
    anno_starts = [a[0] for a in step_annos]

    def step_of_cpu_ts(ts):
        i = bisect.bisect_right(anno_starts, ts + eps) - 1
        if i >= 0 and ts <= step_annos[i][1] + eps:
            return step_annos[i][2]
        return None

    def step_of_gpu_ts(ts):
        for s, e, idx in gpu_step_annos:
            if s - eps <= ts <= e + eps:
                return idx
        return None

    def chain(op):
        while op is not None:
            yield op
            op = op["parent"]

    n_linked = n_op = 0
    for g in gpu:
        l = launches.get(g["corr"])
        op = None
        if l is not None:
            n_linked += 1
            op = l["op"]
            g["step"] = step_of_cpu_ts(l["ts"])
        else:
            g["step"] = None
        if op is None and g["ext"] is not None:
            op = ext_map.get(g["ext"])
        if g["step"] is None:
            g["step"] = step_of_gpu_ts(g["ts"])
        g["op"] = op
        n_op += op is not None
        phase, mm = "other", None
        for o in chain(op):
            nm = o["name"]
            if mm is None and nm in MATMUL_OPS:
                mm = o
            if "Backward" in nm or nm.startswith("autograd::engine"):
                phase = "bwd"
                break
            if nm.startswith("Optimizer."):
                phase = "optimizer"
                break
            if nm.startswith(STEP_TAG) or nm.startswith("ProfilerStep"):
                phase = "fwd"
                break
        g["phase"] = phase
        g["mm"] = mm
        g["category"] = categorize(g["name"], g["cat"])

    # activities not placed by their launch: by the GPU time ranges of the placed ones (latest step begun before)
    rng = {}
    for g in gpu:
        if g["step"] is not None:
            s0, e0 = rng.get(g["step"], (g["ts"], g["end"]))
            rng[g["step"]] = (min(s0, g["ts"]), max(e0, g["end"]))
    starts = sorted((v[0], k) for k, v in rng.items())
    unassigned = [g for g in gpu if g["step"] is None]
    n_fallback = 0
    for g in unassigned:
        cand = [k for s0, k in starts if s0 <= g["ts"] + eps]
        if cand and g["ts"] <= rng[cand[-1]][1] + 50.0:  # within 50 us of that step's last activity
            g["step"] = cand[-1]
            n_fallback += 1
    unassigned = [g for g in gpu if g["step"] is None]
    steps = sorted({g["step"] for g in gpu if g["step"] is not None})
    nsteps = len(steps) if steps else 1
    if not steps:  # no annotation found: treat the whole trace as nsteps = len(walls) steps
        nsteps = max(1, len(step_walls_ms))
        for g in gpu:
            g["step"] = 0
        steps = [0]
    per_step = []
    for i, s in enumerate(steps):
        gs = [g for g in gpu if g["step"] == s]
        kern = [g for g in gs if g["cat"] == "kernel"]
        busy_us = union_length([(g["ts"], g["end"]) for g in gs])
        cats = {c: 0.0 for c in CATEGORIES}
        for g in gs:
            cats[g["category"]] += g["dur"]
        span = (max(g["end"] for g in gs) - min(g["ts"] for g in gs)) if gs else 0.0
        wall = step_walls_ms[i] if i < len(step_walls_ms) and len(steps) == len(step_walls_ms) else None
        per_step.append({
            "step": s, "wall_ms": wall, "gpu_span_ms": span / 1e3,
            "kernel_sum_ms": sum(g["dur"] for g in kern) / 1e3,
            "gpu_activity_sum_ms": sum(g["dur"] for g in gs) / 1e3,
            "gpu_busy_ms": busy_us / 1e3,
            "gpu_idle_ms": (wall - busy_us / 1e3) if wall is not None else None,
            "n_kernels": len(kern), "n_memcpy": sum(g["cat"] == "gpu_memcpy" for g in gs),
            "n_memset": sum(g["cat"] == "gpu_memset" for g in gs),
            "category_ms": {c: v / 1e3 for c, v in cats.items()},
        })

    def mean(key, sub=None):
        vals = [(p[key] if sub is None else p[key][sub]) for p in per_step]
        vals = [v for v in vals if v is not None]
        return statistics.mean(vals) if vals else None

    assigned = [g for g in gpu if g["step"] is not None]
    cat_phase = collections.defaultdict(lambda: collections.defaultdict(float))
    cat_count = collections.Counter()
    for g in assigned:
        cat_phase[g["category"]][g["phase"]] += g["dur"] / 1e3 / nsteps
        cat_count[g["category"]] += 1
    summary = {
        "n_profiled_steps": nsteps,
        "wall_ms": mean("wall_ms"), "gpu_busy_ms": mean("gpu_busy_ms"), "gpu_idle_ms": mean("gpu_idle_ms"),
        "kernel_sum_ms": mean("kernel_sum_ms"), "gpu_activity_sum_ms": mean("gpu_activity_sum_ms"),
        "gpu_span_ms": mean("gpu_span_ms"), "n_kernels": mean("n_kernels"),
        "category_ms": {c: mean("category_ms", c) for c in CATEGORIES},
        "category_kernel_count": {c: cat_count[c] / nsteps for c in CATEGORIES},
        "category_ms_by_phase": {c: dict(cat_phase[c]) for c in CATEGORIES if c in cat_phase},
    }
    if summary["wall_ms"]:
        summary["category_frac_of_wall"] = {c: (v or 0.0) / summary["wall_ms"] for c, v in
                                            summary["category_ms"].items()}

    # GEMMs: by (kernel, shape) and by kernel
    grp = collections.defaultdict(lambda: {"durs": [], "shape": None, "op": None, "phases": collections.Counter(),
                                           "flops": 0.0})
    by_name = collections.defaultdict(lambda: {"durs": [], "shapes": collections.Counter(), "flops": 0.0,
                                               "flops_dur": 0.0})
    gemm_flops = gemm_dur_shaped = gemm_dur = 0.0
    for g in assigned:
        if g["category"] != "gemm":
            continue
        shape, opn = None, None
        if g["mm"] is not None:
            opn = g["mm"]["name"]
            dims = g["mm"]["args"].get("Input Dims")
            if dims:
                shape = gemm_shape(opn, dims)
        flops = 2.0 * _prod(shape) if shape else 0.0
        key = (g["name"], shape)
        r = grp[key]
        r["durs"].append(g["dur"])
        r["shape"], r["op"] = shape, opn
        r["phases"][g["phase"]] += 1
        r["flops"] += flops
        if shape and g["mm"]["args"].get("Input Strides") and "strides" not in r:
            r["strides"] = g["mm"]["args"].get("Input Strides")
        b = by_name[g["name"]]
        b["durs"].append(g["dur"])
        b["shapes"][str(shape)] += 1
        if shape:
            b["flops"] += flops
            b["flops_dur"] += g["dur"]
        gemm_dur += g["dur"]
        if shape:
            gemm_flops += flops
            gemm_dur_shaped += g["dur"]

    def tfs(flops, dur_us):
        return flops / (dur_us * 1e-6) / 1e12 if dur_us > 0 and flops > 0 else None

    top_gemms = []
    for (name, shape), r in sorted(grp.items(), key=lambda kv: -sum(kv[1]["durs"]))[:10]:
        tot = sum(r["durs"])
        e = {"kernel": name[:NAME_CHARS], "ms_per_step": tot / 1e3 / nsteps, "count_per_step": len(r["durs"]) / nsteps,
             "mean_us": tot / len(r["durs"]), "aten_op": r["op"],
             "phases_count_per_step": {k: v / nsteps for k, v in r["phases"].items()}}
        if shape:
            e.update({"B": shape[0], "M": shape[1], "N": shape[2], "K": shape[3],
                      "tflops_per_s": tfs(r["flops"], tot)})
            if "strides" in r:
                e["input_strides"] = r["strides"]
        top_gemms.append(e)
    top_gemm_kernels = []
    for name, b in sorted(by_name.items(), key=lambda kv: -sum(kv[1]["durs"]))[:10]:
        tot = sum(b["durs"])
        top_gemm_kernels.append({"kernel": name[:NAME_CHARS], "ms_per_step": tot / 1e3 / nsteps,
                                 "count_per_step": len(b["durs"]) / nsteps, "mean_us": tot / len(b["durs"]),
                                 "shapes_BMNK_count": dict(b["shapes"]),
                                 "tflops_per_s": tfs(b["flops"], b["flops_dur"])})
    summary["gemm"] = {
        "flops_per_step_from_shapes": gemm_flops / nsteps,
        "time_ms_per_step": gemm_dur / 1e3 / nsteps,
        "time_fraction_with_shapes": gemm_dur_shaped / gemm_dur if gemm_dur else None,
        "achieved_tflops_per_s_shaped": tfs(gemm_flops, gemm_dur_shaped),
        "distinct_kernels": len(by_name),
    }
    summary["top_gemms_by_kernel_and_shape"] = top_gemms
    summary["top_gemm_kernels"] = top_gemm_kernels

    # flash attention: causal-discounted FLOPs
    if cfg:
        b, s, H, L = cfg["micro_batch"], cfg["seq"], cfg["heads"], cfg["layers"]
        d = cfg["hidden"] // cfg["heads"]
        fwd = 2.0 * b * H * s * s * d * L  # 4*b*H*s^2*d halved by the causal mask
        ff, fb = summary["category_ms"]["flash_fwd"], summary["category_ms"]["flash_bwd"]
        summary["flash"] = {"fwd_flops_causal_per_step": fwd, "bwd_flops_causal_per_step": 2.5 * fwd,
                            "fwd_tflops_per_s": fwd / (ff * 1e-3) / 1e12 if ff else None,
                            "bwd_tflops_per_s": 2.5 * fwd / (fb * 1e-3) / 1e12 if fb else None,
                            "note": "fwd FLOPs = 2*b*H*s^2*d per layer (QK^T and PV, causal half); bwd = 2.5x fwd "
                                    "(5 matmuls incl. recomputing P); per step, all layers"}

    # elementwise: top kernels and the aten ops behind them
    ew = collections.defaultdict(lambda: {"durs": [], "ops": collections.Counter(), "phases": collections.Counter()})
    ew_op = collections.defaultdict(lambda: {"dur": 0.0, "n": 0})
    for g in assigned:
        if g["category"] != "elementwise":
            continue
        r = ew[g["name"]]
        r["durs"].append(g["dur"])
        opn = g["op"]["name"] if g["op"] is not None else None
        r["ops"][opn] += 1
        r["phases"][g["phase"]] += 1
        # the aten op behind it: the outermost aten:: op in the chain below the autograd node / module level
        outer = None
        for o in chain(g["op"]):
            if o["name"].startswith("aten::"):
                outer = o["name"]
            elif outer is not None:
                break
        k = f"{outer} [{g['phase']}]"
        ew_op[k]["dur"] += g["dur"]
        ew_op[k]["n"] += 1
    top_ew = []
    for name, r in sorted(ew.items(), key=lambda kv: -sum(kv[1]["durs"]))[:15]:
        tot = sum(r["durs"])
        top_ew.append({"kernel": name[:NAME_CHARS], "ms_per_step": tot / 1e3 / nsteps,
                       "count_per_step": len(r["durs"]) / nsteps, "mean_us": tot / len(r["durs"]),
                       "launching_ops": dict(r["ops"].most_common(3)),
                       "phases_count_per_step": {k: v / nsteps for k, v in r["phases"].items()}})
    summary["top_elementwise_kernels"] = top_ew
    summary["elementwise_distinct_kernels"] = len(ew)
    summary["elementwise_by_outer_aten_op"] = [
        {"op_phase": k, "ms_per_step": v["dur"] / 1e3 / nsteps, "count_per_step": v["n"] / nsteps}
        for k, v in sorted(ew_op.items(), key=lambda kv: -kv[1]["dur"])[:15]]

    # other categories: their kernels
    other = collections.defaultdict(lambda: collections.defaultdict(list))
    for g in assigned:
        if g["category"] not in ("gemm", "elementwise"):
            other[g["category"]][g["name"]].append(g["dur"])
    summary["other_category_kernels"] = {
        c: [{"kernel": n[:NAME_CHARS], "ms_per_step": sum(d) / 1e3 / nsteps, "count_per_step": len(d) / nsteps,
             "mean_us": sum(d) / len(d)} for n, d in sorted(kk.items(), key=lambda kv: -sum(kv[1]))[:6]]
        for c, kk in other.items()}

    summary["per_step"] = per_step
    summary["linkage"] = {"gpu_activities": len(gpu), "linked_to_launch": n_linked, "linked_to_cpu_op": n_op,
                          "unassigned_to_step": len(unassigned),
                          "placed_by_gpu_time_fallback": n_fallback, "step_annotations_cpu": len(step_annos),
                          "step_annotations_gpu": len(gpu_step_annos),
                          "streams": sorted({str(g["stream"]) for g in gpu}),
                          "note": "activities left unassigned are the tail of the discarded profiler warm-up step: "
                                  "the CPU runs about a step ahead, so they ran on the GPU after recording began "
                                  "but were launched before it (no launch record); they are excluded"}
    return summary


# ------------------------------------------------------------------------------------------------------- measurement
def parse():
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--ref-steps", type=int, default=10, help="unprofiled steps timed before profiling")
    p.add_argument("--smi-period-ms", type=int, default=100)
    p.add_argument("--trace-dir", default=None, help="also keep the Chrome trace here (gzip)")
    p.add_argument("--copy-to", default=None, help="also copy profile_<name>.json into this folder")
    p.add_argument("--analyze-trace", default=None, help="offline: analyse this saved trace ...")
    p.add_argument("--record", default=None, help="... into this existing profile_<name>.json (rewritten)")
    mine, rest = p.parse_known_args()
    if mine.analyze_trace:
        return mine, None
    sys.argv = [sys.argv[0]] + rest
    import train_step  # noqa: E402  (imports torch)
    a = train_step.parse()  # train_step.py's flags, same meaning
    return mine, a


def measure(mine, a):
    import torch
    import train_step as ts
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    distributed = a.ddp or a.fsdp
    rank, local_rank = 0, 0
    if distributed:  # under torchrun, one process per GPU; every rank runs the same steps, rank 0 profiles and writes
        import torch.distributed as dist
        rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    torch.manual_seed(1234)
    name = "profile_" + a.name
    rec = {"name": name, "kind": "profile_step", "status": "started",
           "config": {k: getattr(a, k) for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab",
                                                 "seq", "micro_batch", "warmup", "ckpt", "sdpa_backend",
                                                 "optim_impl")},
           "profile_steps": mine.profile_steps, "ref_steps": mine.ref_steps,
           "categories_rule": {"memcpy/memset": "trace category", "nccl": "nccl", "flash_fwd/flash_bwd":
                               list(FLASH_KEYS) + ["split on bwd/backward"], "optimizer": list(OPT_KEYS),
                               "gemm": list(GEMM_KEYS), "elementwise": "everything else (incl. reductions, norms)",
                               "order": "memcpy, memset, nccl, flash, optimizer, gemm, elementwise"},
           "precision": "as train_step.py: bf16 autocast, fp32 master params/grads/AdamW(fused), flash SDPA"}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["parallel"] = "fsdp" if a.fsdp else "ddp" if a.ddp else "none"
    rec["world_size"] = int(os.environ.get("WORLD_SIZE", "1"))
    rec["nvidia_smi_before"] = common.nvidia_smi_static(local_rank)
    rec["sdpa_backends_enabled"] = ts.configure_sdpa(a.sdpa_backend)
    rec["gqa_impl"] = ts.probe_gqa(a, device)
    out_dir = a.out_dir or os.environ.get("OUT") or "."
    os.makedirs(out_dir, exist_ok=True)

    with torch.device(device):
        model = ts.Llama(a)
        ts.init_weights(model)
    rec.update(ts.count_params(model, a))
    model, opts = ts.wrap_parallel(model, a, local_rank)
    rec.update(opts)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=(a.optim_impl == "fused"), foreach=(a.optim_impl == "foreach") or None)
    gen = torch.Generator(device=device)
    gen.manual_seed(1000 + rank)

    def batch():
        t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=device, generator=gen)
        return t[:, :-1].contiguous(), t[:, 1:].contiguous()

    batches = [batch() for _ in range(4)]
    counter = [0]

    def step():  # train_step.py's step (its closure is local to its main()): fwd + bwd + optimizer + zero_grad
        inp, tgt = batches[counter[0] % len(batches)]
        counter[0] += 1
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(inp, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    model.train()
    losses = [step() for _ in range(a.warmup)]
    torch.cuda.synchronize()

    def timed(n, wrap=None):
        st = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        en = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            st[i].record()
            losses.append(step() if wrap is None else wrap(i))
            en[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(st, en)]

    # reference, unprofiled
    smi_ref = SmiLog(mine.smi_period_ms, f"/tmp/profile_step_smi_ref_r{rank}.csv", gpu=local_rank).start()
    t0 = time.time()
    ref = timed(mine.ref_steps)
    t1 = time.time()
    smi_ref.stop()
    rec["reference_unprofiled"] = {"step_times_ms": [round(x, 3) for x in ref], "median_ms": statistics.median(ref),
                                   "min_ms": min(ref), "max_ms": max(ref),
                                   "nvidia_smi": smi_ref.summary(t0, t1)}
    print(f"[profile_step {a.name}] reference median {statistics.median(ref):.1f} ms over {len(ref)} steps",
          flush=True)

    # profiled: 1 profiler warm-up step (discarded) + n active steps
    n = mine.profile_steps
    trace_json = f"/tmp/trace_{a.name}_r{rank}.json"
    sched = schedule(wait=0, warmup=1, active=n, repeat=1)
    st = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    en = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    smi = SmiLog(mine.smi_period_ms, f"/tmp/profile_step_smi_prof_r{rank}.csv", gpu=local_rank).start()
    t_active = None
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True, schedule=sched,
                 on_trace_ready=lambda p: p.export_chrome_trace(trace_json)) as prof:
        for i in range(n + 1):
            if i == 1:
                t_active = time.time()
            st[i].record()
            with record_function(f"{STEP_TAG}{i}"):
                losses.append(step())
            en[i].record()
            if i == n:
                torch.cuda.synchronize()
            prof.step()
    torch.cuda.synchronize()
    t_end = time.time()
    smi.stop()
    walls = [s.elapsed_time(e) for s, e in zip(st, en)]
    active_walls = walls[1:]
    rec["profiled_step_times_ms"] = [round(x, 3) for x in active_walls]
    rec["profiler_warmup_step_ms"] = round(walls[0], 3)
    rec["nvidia_smi_profiled"] = smi.summary(t_active, t_end)
    rec["nvidia_smi_after"] = common.nvidia_smi_static(local_rank)
    lv = [float(x) for x in torch.stack(losses).float().cpu()]
    rec["loss_first"], rec["loss_last"] = lv[0], lv[-1]
    rec["loss_finite"] = all(math.isfinite(x) for x in lv)
    tokens = a.micro_batch * a.seq
    rec["model_flops_per_step"] = 6 * rec["params_total"] * tokens + 12 * a.layers * a.hidden * a.seq * tokens
    rec["matmul_flops_per_step_6NT_nonembedding_plus_head"] = 6 * (rec["params_total"] - rec[
        "params_input_embedding"]) * tokens
    rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated(device)
    if mine.trace_dir:
        os.makedirs(mine.trace_dir, exist_ok=True)
        tgz = os.path.join(mine.trace_dir, f"trace_{a.name}.json.gz")
        with open(trace_json, "rb") as fi, gzip.open(tgz, "wb", compresslevel=6) as fo:
            fo.write(fi.read())
        rec["trace_file"] = os.path.basename(tgz)
    rec["status"] = "measured"
    if distributed:
        import torch.distributed as dist
        dist.barrier()
        if rank != 0:  # rank 0 speaks for the run
            dist.destroy_process_group()
            rec["status"] = "peer"
            return rec
    path = common.write_json(rec, name, out_dir)  # raw numbers first, in case the analysis fails
    try:
        rec["profile"] = analyze_trace(trace_json, active_walls, rec["config"])
        rec["status"] = "ok"
    except Exception:  # noqa: BLE001
        rec["status"] = "analysis_error"
        rec["analysis_error"] = traceback.format_exc()[-3000:]
        print(rec["analysis_error"], flush=True)
    path = common.write_json(rec, name, out_dir)
    if mine.copy_to:
        common.write_json(rec, name, mine.copy_to)
    print(f"[profile_step {a.name}] wrote {path}", flush=True)
    if distributed:
        import torch.distributed as dist
        dist.destroy_process_group()
    return rec


# ------------------------------------------------------------------------------------------------------------ report
def report(rec):
    p = rec.get("profile")
    name = rec.get("name")
    ref = rec.get("reference_unprofiled", {})
    print(f"\n==== {name}  ref(unprofiled) median {ref.get('median_ms', float('nan')):.1f} ms; profiled "
          f"{rec.get('profiled_step_times_ms')}")
    if not p:
        print("  (no analysis)", rec.get("analysis_error", "")[-500:])
        return
    f = lambda v: "-" if v is None else f"{v:8.2f}"  # noqa: E731
    print(f"  wall {f(p['wall_ms'])} ms | busy {f(p['gpu_busy_ms'])} | idle {f(p['gpu_idle_ms'])} | kernel sum "
          f"{f(p['kernel_sum_ms'])} | span {f(p['gpu_span_ms'])} | kernels/step {p['n_kernels']:.0f}")
    for c in CATEGORIES:
        ph = ", ".join(f"{k} {v:.2f}" for k, v in sorted(p["category_ms_by_phase"].get(c, {}).items()))
        print(f"  {c:12s} {f(p['category_ms'][c])} ms  n/step {p['category_kernel_count'][c]:7.1f}  [{ph}]")
    g = p["gemm"]
    print(f"  GEMM: {g['flops_per_step_from_shapes']/1e12:.2f} TFLOP/step from shapes "
          f"({(g['time_fraction_with_shapes'] or 0)*100:.0f}% of gemm time shaped), "
          f"{g['achieved_tflops_per_s_shaped'] or 0:.0f} TFLOP/s; model 6NT+attn "
          f"{rec['model_flops_per_step']/1e12:.2f} TFLOP")
    for e in p["top_gemms_by_kernel_and_shape"]:
        shp = f"B{e.get('B')} M{e.get('M')} N{e.get('N')} K{e.get('K')}" if "M" in e else "shape ?"
        print(f"   {e['ms_per_step']:7.2f} ms x{e['count_per_step']:5.1f} {e['mean_us']:8.1f} us  {shp:32s} "
              f"{(e.get('tflops_per_s') or 0):5.0f} TF/s {e['phases_count_per_step']} {e['kernel'][:70]}")
    if "flash" in p:
        print(f"  flash fwd {p['flash']['fwd_tflops_per_s'] or 0:.0f} TF/s, bwd {p['flash']['bwd_tflops_per_s'] or 0:.0f}"
              f" TF/s (causal FLOPs)")
    print("  elementwise top:")
    for e in p["top_elementwise_kernels"]:
        print(f"   {e['ms_per_step']:7.2f} ms x{e['count_per_step']:5.1f} {e['mean_us']:8.1f} us {e['phases_count_per_step']} "
              f"{list(e['launching_ops'])[:2]} {e['kernel'][:80]}")
    for key in ("reference_unprofiled",):
        s = rec[key]["nvidia_smi"]
        print(f"  smi ref: n={s['n_samples']} sm {s['sm_clock_MHz']} W {s['power_draw_W']}")
    s = rec["nvidia_smi_profiled"]
    print(f"  smi prof: n={s['n_samples']} sm {s['sm_clock_MHz']} W {s['power_draw_W']} "
          f"inst {s.get('power_draw_instant_W')} reasons {s['clock_event_reasons_active_hex']}")
    print(f"  linkage {p['linkage']}")


def main():
    mine, a = parse()
    if mine.analyze_trace:  # offline re-analysis, no torch needed
        with open(mine.record) as fi:
            rec = json.load(fi)
        rec["profile"] = analyze_trace(mine.analyze_trace, rec["profiled_step_times_ms"], rec["config"])
        rec["status"] = "ok"
        rec.pop("analysis_error", None)
        with open(mine.record, "w") as fo:
            json.dump(rec, fo, indent=1)
            fo.write("\n")
        report(rec)
        return 0
    rec = measure(mine, a)
    if rec["status"] == "peer":
        return 0
    report(rec)
    return 0 if rec["status"] == "ok" else 1


if __name__ == "__main__":
    sys.exit(main())
