# Session 32 (issue #27), nvidia-h200-x2: where the TP 2 Llama-3-70B-shape decode step's time goes at one-row batch
# steps (measured_batch_steps.json, own-h200-sxm-141gb-x2-tp2-l20: the model is -14% at batch 143-211).
#  1. node_serve_step.py, the same decoder, context and CUDA graph as the batch-step run, at batch 35, 128, 143, 176,
#     177, 256, 257, each point's replays profiled (kernels by name: GEMMs, cuDNN attention, NCCL all-reduce, norms),
#     with the SM clock and power sampled every 100 ms beside it (nvsmi_decode.csv).
#  2. gemm_graph_sweep.py --layer-set llama3-70b-tp2 on GPU 0: the four per-GPU GEMM shapes alone in CUDA graphs at
#     every M 112-300 (+ the cuBLAS kernel per M from the trace part).
# CPU check: OUT=/tmp/x bash scripts/measure/tp2_decode_decompose_run.sh --dry
set -u
mkdir -p "$OUT"
if [ "${1:-}" = "--dry" ]; then
  python3 scripts/measure/gemm_graph_sweep.py --dry --layer-set llama3-70b-tp2 --dtypes bf16 --only staircase trace
  echo "would run: torchrun --nproc_per_node=2 scripts/measure/node_serve_step.py --model dense --phases tp --context 2048 --decode-batches 35,128,143,176,177,256,257 --prefill '' --profile-replays 3"
  exit 0
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
Q=index,name,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$Q --format=csv > $OUT/nvsmi_before.csv
nvidia-smi --query-gpu=timestamp,$Q --format=csv -lms 100 > $OUT/nvsmi_decode.csv 2>&1 &
SMI=$!
timeout 100 torchrun --standalone --nproc_per_node=2 scripts/measure/node_serve_step.py --model dense --phases tp \
  --context 2048 --decode-batches 35,128,143,176,177,256,257 --prefill '' --replays 30 --profile-replays 3 \
  --name serve_tp2_llama3_70b_l20_decompose --out-dir $OUT > $OUT/log_tp2_decompose.txt 2>&1; echo "decode rc=$?"
kill $SMI
CUDA_VISIBLE_DEVICES=0 timeout 75 python3 scripts/measure/gemm_graph_sweep.py --layer-set llama3-70b-tp2 \
  --dtypes bf16 --only staircase trace --out-dir $OUT > $OUT/log_gemm_graph_70b_tp2.txt 2>&1; echo "gemm rc=$?"
nvidia-smi --query-gpu=$Q --format=csv > $OUT/nvsmi_after.csv
tail -3 $OUT/log_tp2_decompose.txt $OUT/log_gemm_graph_70b_tp2.txt
