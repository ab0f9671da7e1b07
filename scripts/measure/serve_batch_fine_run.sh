# Session 31 (2026-11-29), nvidia-h200: the Llama-3-8B decode step at every batch 112-144 and every second batch
# 240-264 (context 1024, CUDA graphs): is measured throughput strictly monotone in batch at one-row steps (#27)?
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 scripts/measure/serve_step.py --name serve_llama3_8b_batch_fine --decode-points 112x1024,113x1024,114x1024,115x1024,116x1024,117x1024,118x1024,119x1024,120x1024,121x1024,122x1024,123x1024,124x1024,125x1024,126x1024,127x1024,128x1024,129x1024,130x1024,131x1024,132x1024,133x1024,134x1024,135x1024,136x1024,137x1024,138x1024,139x1024,140x1024,141x1024,142x1024,143x1024,144x1024,240x1024,242x1024,244x1024,246x1024,248x1024,250x1024,252x1024,254x1024,256x1024,258x1024,260x1024,262x1024,264x1024 --prefill 1x128 --eager-decode none --no-profile --replays 30 --time-budget-s 300 --out-dir $OUT > $OUT/log_serve_batch_fine.txt 2>&1; echo rc=$?
python3 - <<'PY'
import json, os
d = json.load(open(os.path.join(os.environ["OUT"], "serve_llama3_8b_batch_fine.json")))
prev = None
for p in d["decode_points"]:
    t = p.get("decode_step_time_s") or p.get("timing", {}).get("decode_step_time_s")
    if t is None:
        t = sorted(p["decode_step_times_s"])[len(p["decode_step_times_s"]) // 2]
    tps = p["batch"] / t
    print(p["batch"], f"{t*1e3:.3f} ms", f"{tps:.0f} tok/s", "" if prev is None else f"{tps/prev:.3f}")
    prev = tps
PY
