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


def now():
    return time.perf_counter()
