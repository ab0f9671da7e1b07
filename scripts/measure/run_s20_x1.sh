#!/usr/bin/env bash
# Session 20, one H100: lora's adapter timing, then the lead's eager-host check (host_llm_decode.sh).
set -u
mkdir -p "$OUT/lora" "$OUT/lead"
t0=$(date +%s)
timeout 120 python3 scripts/measure/lora_adapter.py --out-dir "$OUT/lora" > "$OUT/lora/stdout.txt" 2>&1
echo "lora rc=$? $(( $(date +%s) - t0 )) s"
t1=$(date +%s)
OUT="$OUT/lead" timeout 340 bash scripts/measure/host_llm_decode.sh
echo "lead rc=$? $(( $(date +%s) - t1 )) s"
ls -la "$OUT"/*
