#!/usr/bin/env bash
# GEMM depth sweep (gpuplan-bench depth): the reduction length K swept at full-wave output shapes, bf16 and fp8,
# twice (repeatability), then fp8 once more with fast accumulation off (Transformer Engine's dgrad/wgrad setting);
# then the same bf16 K sweep through torch.matmul (the cuBLAS path PyTorch takes), on GPU 0.
# Usage on the device: OUT=$OUT bash scripts/measure/depth_run.sh
set -u
. scripts/measure/bench_prelude.sh
for round in 1 2; do
  echo "=== $(date -u +%T) depth bf16+fp8, round $round, on $name"
  $B depth --device 0 --gemm-dtypes bf16,fp8 --out "$OUT/depth-$round-$name.json" 2>&1 | grep -E "gemm|REJECT|error|wrote"
  echo "=== rc=$?"
done
echo "=== $(date -u +%T) depth fp8, split accumulation, on $name"
$B depth --device 0 --gemm-dtypes fp8 --fp8-split-accumulation --out "$OUT/depth-fp8-split-$name.json" 2>&1 | grep -E "REJECT|error|wrote"
echo "=== $(date -u +%T) torch.matmul bf16 K sweep on $name"
python3 - "$OUT/depth-torch-$name.json" <<'PY'
import json, sys, torch
out = []
torch.manual_seed(0)
for (m, n) in [(8192, 8192), (16384, 2048)]:
    for k in [256, 512, 1024, 2048, 4096, 8192, 16384]:
        sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
        for i in range(10):
            x, w = sets[i % 4]; torch.matmul(x, w.t())
        torch.cuda.synchronize()
        reps = max(20, int(2e13 / (2 * m * n * k)))
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = []
        for r in range(5):
            e0.record()
            for i in range(reps):
                x, w = sets[i % 4]; torch.matmul(x, w.t())
            e1.record(); torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) / 1e3 / reps)
        ts.sort()
        t = ts[len(ts) // 2]
        out.append({"m": m, "n": n, "k": k, "median_s": t, "tflops": 2 * m * n * k / t / 1e12, "runs": ts})
        print(f"torch bf16 {m}x{n}x{k}: {2*m*n*k/t/1e12:.1f} TFLOP/s", flush=True)
json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "rows": out}, open(sys.argv[1], "w"), indent=1)
PY
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv
