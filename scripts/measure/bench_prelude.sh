# Sourced by the single-GPU bench scripts (scripts/measure/*_run.sh), from the repo root on the device: builds
# gpuplan-bench for Hopper, prints the GPU, and sets B (the bench) and name (GPU 0's name, for file names).
CUDA_ARCHS=90 bash scripts/calibrate/run_all.sh --build-only >/dev/null 2>&1 || echo build failed
B=build/bench/gpuplan-bench
nvidia-smi --query-gpu=name,uuid,driver_version,clocks.max.sm,power.limit,temperature.gpu --format=csv
name=$(nvidia-smi -i 0 --query-gpu=name --format=csv,noheader | tr ' A-Z' '-a-z' | tr -cd 'a-z0-9-')
