"""Shared helpers for the measurement scripts in scripts/measure/ (environment capture, JSON output).

Only the Python standard library is imported at module level; torch is imported inside the functions that need it.
"""
import datetime
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time

SMI_STATIC_FIELDS = [
    "name", "driver_version", "memory.total", "clocks.max.sm", "clocks.max.mem",
    "power.limit", "pstate", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw",
]


def _smi(fields, gpu=None):
    cmd = ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
    if gpu is not None:
        cmd.insert(1, "-i")
        cmd.insert(2, str(gpu))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip() or out.stdout.strip())
    rows = []
    for line in out.stdout.strip().splitlines():
        vals = [v.strip() for v in line.split(",")]
        rows.append(dict(zip(fields, vals)))
    return rows


def nvidia_smi_static(gpu=None):
    """name/driver/clocks/temperature/power of the GPU(s), as nvidia-smi reports them (units: MiB, MHz, W, C)."""
    try:
        return _smi(SMI_STATIC_FIELDS, gpu)
    except Exception as e:  # noqa: BLE001 - the record says why
        return [{"error": str(e)[:300]}]


class SmiSampler:
    """Polls nvidia-smi in a thread (SM clock, memory clock, power, temperature, clock-event reasons) while a region runs."""

    def __init__(self, gpu=None, period_s=0.5):
        self.gpu = gpu
        self.period_s = period_s
        self.samples = []
        self._stop = threading.Event()
        self._thread = None
        self.fields = ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_event_reasons.active"]
        try:
            _smi(self.fields, gpu)
        except Exception:  # noqa: BLE001 - older drivers spell the reasons field differently
            self.fields = ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "clocks_throttle_reasons.active"]
            try:
                _smi(self.fields, gpu)
            except Exception:  # noqa: BLE001
                self.fields = ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu"]

    def _run(self):
        while not self._stop.is_set():
            try:
                for row in _smi(self.fields, self.gpu):
                    self.samples.append(row)
            except Exception:  # noqa: BLE001
                pass
            self._stop.wait(self.period_s)

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=30)

    def summary(self):
        def num(key):
            vals = []
            for s in self.samples:
                try:
                    vals.append(float(s[key]))
                except (KeyError, ValueError):
                    pass
            if not vals:
                return None
            return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)}

        reasons = sorted({s.get(f) for s in self.samples for f in self.fields if "reasons" in f} - {None})
        return {
            "n_samples": len(self.samples),
            "sm_clock_MHz": num("clocks.sm"),
            "mem_clock_MHz": num("clocks.mem"),
            "power_draw_W": num("power.draw"),
            "temperature_C": num("temperature.gpu"),
            "clock_event_reasons_active_hex": reasons,
        }


def software_versions():
    import torch

    v = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    try:
        v["nccl"] = ".".join(str(x) for x in torch.cuda.nccl.version())
    except Exception:  # noqa: BLE001
        v["nccl"] = None
    return v


def device_properties():
    import torch

    p = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "name": p.name,
        "total_memory_bytes": p.total_memory,
        "multi_processor_count": p.multi_processor_count,
        "capability": f"{p.major}.{p.minor}",
        "l2_cache_bytes": getattr(p, "L2_cache_size", None),
    }


def run_metadata():
    return {
        "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "argv": sys.argv,
        "env": {k: os.environ.get(k) for k in (
            "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS",
            "CUDA_VISIBLE_DEVICES", "WORLD_SIZE", "PYTORCH_CUDA_ALLOC_CONF") if os.environ.get(k) is not None},
    }


def write_json(record, name, out_dir=None, append_jsonl=None):
    """One pretty JSON per run in out_dir (default $OUT, else the current folder); optionally also one line in a JSONL file."""
    out_dir = out_dir or os.environ.get("OUT") or "."
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{name}.json")
    with open(path, "w") as f:
        json.dump(record, f, indent=1, sort_keys=False)
        f.write("\n")
    if append_jsonl:
        with open(append_jsonl, "a") as f:
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
    return path


def median_and_spread(times):
    med = statistics.median(times)
    return med, min(times), max(times), (max(times) - min(times)) / med if med > 0 else float("inf")


def event_times(fn, reps, warmup=3):
    """fn timed with CUDA events, one call per sample, after `warmup` calls: {median, min, max, spread} in s."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    med, lo, hi, spread = median_and_spread(times)
    return {"median": med, "min": lo, "max": hi, "spread": spread}


def copy_bandwidth(device, reps=10):
    """Copy bandwidth (B/s, read + write) of a 4 GiB fp32 buffer, and its timing record."""
    import torch
    buf = torch.empty(1 << 30, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(buf)
    copy = event_times(lambda: dst.copy_(buf), reps)
    bw = 2 * buf.numel() * 4 / copy["median"]
    del buf, dst
    return bw, copy


def now():
    return time.perf_counter()


def interval_union(intervals):
    """Total length of the union of [start, end) intervals."""
    tot, cur_s, cur_e = 0.0, None, None
    for st, en in sorted(intervals):
        if cur_e is None or st > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = st, en
        else:
            cur_e = max(cur_e, en)
    if cur_e is not None:
        tot += cur_e - cur_s
    return tot


def cuda_kernel_profile(fn, n, top=60):
    """Run fn() n times under torch.profiler with CUDA activity only (no CPU-op tracing, so the host runs at nearly
    its unprofiled pace): per run on average, the GPU span (first kernel start to last kernel end), the busy time
    (union of kernel and memcpy intervals over all streams), the idle gaps (span - busy; the largest ones with the
    kernel that preceded each), and kernel time by name. Times in microseconds."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
    ivs, by_name = [], {}
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is None or "CUDA" not in str(dt):
            continue
        iv = e.time_range
        ivs.append((iv.start, iv.end, e.name[:120]))
        by_name[e.name[:120]] = by_name.get(e.name[:120], 0.0) + (iv.end - iv.start)
    if not ivs:
        return {"error": "no device events"}
    ivs.sort()
    span = ivs[-1][1] - ivs[0][0]
    busy = interval_union([(s, e) for s, e, _ in ivs])
    gaps, cur_e, prev = [], None, None
    for s, e, name in ivs:
        if cur_e is not None and s > cur_e:
            gaps.append((s - cur_e, prev))
        if cur_e is None or e > cur_e:
            cur_e, prev = e, name
    gaps.sort(reverse=True)
    return {"runs": n, "gpu_span_us_per_run": span / n, "gpu_busy_us_per_run": busy / n,
            "gpu_idle_us_per_run": (span - busy) / n, "kernel_count_per_run": len(ivs) / n,
            "largest_gaps_us": [{"us": g, "after": k} for g, k in gaps[:20]],
            "gaps_over_20us_per_run": sum(1 for g, _ in gaps if g > 20) / n,
            "kernels_top_us_per_run": [{"name": k, "us": v / n} for k, v in
                                       sorted(by_name.items(), key=lambda kv: -kv[1])[:top]]}
