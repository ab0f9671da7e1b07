"""Kernel classes of a profiled step and the in-graph timeline by class (issue #27: per-kernel-class fixed costs).

Pure Python (no torch): kernel_class_cost.py records the device events, this module classifies them and sums them
up, so that the logic can be checked on a machine without a GPU (python3 kernel_classes.py --self-test).

Classes, as gpuplan's serving model prices kernels (OpClass / PassItem::Kind):
  gemm          dense GEMMs (cuBLAS nvjet/sm90 kernels, CUTLASS non-grouped) and cuBLAS's split-K reduce
  grouped_gemm  CUTLASS grouped GEMMs (torch._grouped_mm: GroupProblemShape)
  grouped_prep  the grouped GEMM's device-side problem descriptors (prepare_grouped_gemm_data)
  attention     flash / fmha / cuDNN attention kernels (split-KV and its combine)
  norm          layer-norm / RMS-norm kernels
  copy          memcpy / memset nodes
  elementwise   everything else (pointwise, reductions, sorts, top-k, scans, gathers, index_put)
"""
import statistics

CLASSES = ("gemm", "grouped_gemm", "grouped_prep", "attention", "norm", "copy", "elementwise")


def classify(name):
    n = name.lower()
    if "prepare_grouped_gemm" in n:
        return "grouped_prep"
    if "groupproblem" in n or "grouped" in n and ("gemm" in n or "cutlass" in n):
        return "grouped_gemm"
    if "flash" in n or "fmha" in n or "cudnn" in n or "attention" in n:
        return "attention"
    if n.startswith("memcpy") or n.startswith("memset"):
        return "copy"
    if "splitkreduce" in n or "nvjet" in n or "gemm" in n or "xmma" in n or "cutlass" in n or "cublas" in n \
            or "sm90_" in n or "matmul" in n:
        return "gemm"
    if "layer_norm" in n or "rms_norm" in n or "rmsnorm" in n:
        return "norm"
    return "elementwise"


def timeline(events, runs=1):
    """events: (start_us, end_us, name) of every device event of `runs` replays of one graph, one stream. Per run:
    the span, and per class the count, the busy time (sum of durations) and the idle time before each kernel of the
    class (from the previous event's end, 0 when they overlap; the first event of each run has none). Times in us."""
    ev = sorted(events)
    by = {c: {"count": 0, "busy_us": 0.0, "gap_before_us": 0.0, "durations_us": []} for c in CLASSES}
    names = {}
    prev_end = None
    per_run = max(1, len(ev) // max(1, runs))
    for i, (s, e, name) in enumerate(ev):
        c = classify(name)
        d = by[c]
        d["count"] += 1
        d["busy_us"] += e - s
        d["durations_us"].append(e - s)
        first_of_run = i % per_run == 0
        if prev_end is not None and not first_of_run:
            d["gap_before_us"] += max(0.0, s - prev_end)
        prev_end = e if prev_end is None or first_of_run else max(prev_end, e)
        k = name[:160]
        x = names.setdefault(k, {"class": c, "count": 0, "busy_us": 0.0})
        x["count"] += 1
        x["busy_us"] += e - s
    out = {"runs": runs, "events_per_run": len(ev) / runs, "classes": {}}
    spans = []
    for r in range(runs):
        chunk = ev[r * per_run:(r + 1) * per_run]
        if chunk:
            spans.append(max(x[1] for x in chunk) - chunk[0][0])
    out["span_us_per_run"] = statistics.median(spans) if spans else 0.0
    for c, d in by.items():
        if d["count"] == 0:
            continue
        out["classes"][c] = {
            "count_per_run": d["count"] / runs,
            "busy_us_per_run": d["busy_us"] / runs,
            "gap_before_us_per_run": d["gap_before_us"] / runs,
            "duration_median_us": statistics.median(d["durations_us"]),
            "duration_min_us": min(d["durations_us"]),
            # in-graph cost per kernel of the class: its duration plus the idle time before it
            "per_kernel_us": (d["busy_us"] + d["gap_before_us"]) / d["count"],
        }
    out["kernels"] = sorted(({"name": k, "class": v["class"], "count_per_run": v["count"] / runs,
                              "busy_us_per_run": v["busy_us"] / runs} for k, v in names.items()),
                            key=lambda r: -r["busy_us_per_run"])
    return out


def intercept(points):
    """Least-squares line t = t0 + bytes / bw through (bytes, seconds); returns (t0_s, bw_Bps) or None."""
    if len(points) < 2:
        return None
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    t0 = my - slope * mx
    return t0, (1.0 / slope if slope > 0 else float("inf"))


def _self_test():
    assert classify("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT") == "gemm"
    assert classify("void cublasLt::splitKreduce_kernel<32, 16, int, float>") == "gemm"
    assert classify("_ZN7cutlass13device_kernelIN2at4cuda6detail25enable_3x_kernel_for_sm9xINS_4gemm6kernel13"
                    "GemmUniversalINS5_17GroupProblemShape") == "grouped_gemm"
    assert classify("void at::cuda::detail::prepare_grouped_gemm_data<cutlass::bfloat16_t>") == "grouped_prep"
    assert classify("void pytorch_flash::flash_fwd_splitkv_combine_kernel<Flash_fwd_kernel_traits<128>>") == "attention"
    assert classify("void (anonymous namespace)::softmax_warp_forward<float, float, float, 7>") == "elementwise"
    assert classify("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16>") == "norm"
    assert classify("Memcpy DtoD (Device -> Device)") == "copy"
    assert classify("void at::native::radixSortKVInPlace<-2, -1, 16, 2, long>") == "elementwise"
    # two runs of: gemm 10 us, gap 1, norm 2 us, gap 0.5, attention 5 us; 100 us between the runs (not a gap)
    ev = []
    for base in (0.0, 120.0):
        ev += [(base, base + 10, "nvjet_x"), (base + 11, base + 13, "rms_norm_kernel"),
               (base + 13.5, base + 18.5, "flash_fwd_kernel")]
    t = timeline(ev, runs=2)
    assert t["events_per_run"] == 3 and abs(t["span_us_per_run"] - 18.5) < 1e-9, t
    assert t["classes"]["gemm"]["gap_before_us_per_run"] == 0.0
    assert abs(t["classes"]["norm"]["per_kernel_us"] - 3.0) < 1e-9
    assert abs(t["classes"]["attention"]["per_kernel_us"] - 5.5) < 1e-9
    t0, bw = intercept([(0.0, 2e-6), (1e9, 2e-6 + 1e9 / 4e12), (2e9, 2e-6 + 2e9 / 4e12)])
    assert abs(t0 - 2e-6) < 1e-12 and abs(bw / 4e12 - 1) < 1e-9
    print("kernel_classes self-test: ok")


if __name__ == "__main__":
    _self_test()
