"""The LoRA adapter's pieces on one GPU, forward and backward, timed with CUDA events (issues #22/#24: the MLPerf
Llama-2-70B LoRA rows; model/src/train/layer_cost.cpp prices the adapter GEMMs and its elementwise passes).

Shapes: one Llama-2-70B attention block at TP 1, micro-batch 1, 8,192 tokens (MLPerf's MAX_SEQLEN): hidden h = 8192,
fused QKV output n = 10240 (64 query heads + 2 x 8 KV heads of 128), output projection 8192 -> 8192, adapter rank 16,
bf16. The adapter is written here from the pass structure of NeMo's ParallelLinearAdapter (dropout_position 'pre':
dropout on the adapter's input, x.A, .B, times alpha/rank, added to the frozen projection's output); the MLPerf
submission's settings: adapter_dim 16, alpha 32, adapter_dropout 0.1, target_modules ['attention'].

Records (milliseconds, median of --iters after --warmup):
  copy              x.clone() on [8192, 8192] bf16 (the streaming reference: 4 B per element)
  dropout_fwd/bwd   aten native_dropout (output + bool mask) and native_dropout_backward on [8192, 8192] bf16
  scale, add        y * 2.0 and a + b on [8192, 10240] bf16
  gemm_*            the six adapter GEMMs of the QKV adapter (x.A, .B, the two dgrads, the two wgrads)
  base_fwd, base_bwd_dgrad  the frozen QKV projection's bf16 GEMMs (reference)
  module_*          the QKV projection with its adapter through autograd, forward + backward, for dropout 0.1, dropout
                    0 and no adapter (frozen base, input requires grad): the adapter's whole cost is the difference.
Usage: python3 scripts/measure/lora_adapter.py --out-dir $OUT   (one GPU, about 1 minute)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def timed(torch, fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "."))
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--qkv", type=int, default=10240)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--iters", type=int, default=50)
    args = ap.parse_args()
    import torch

    dev = "cuda"
    bf = torch.bfloat16
    m, h, n, r = args.tokens, args.hidden, args.qkv, args.rank
    torch.manual_seed(0)
    x = torch.randn(m, h, device=dev, dtype=bf)
    y = torch.randn(m, n, device=dev, dtype=bf)
    y2 = torch.randn(m, n, device=dev, dtype=bf)
    A = torch.randn(h, r, device=dev, dtype=bf) * 0.01
    B = torch.randn(r, n, device=dev, dtype=bf) * 0.01
    W = torch.randn(h, n, device=dev, dtype=bf) * 0.01
    xr = torch.randn(m, r, device=dev, dtype=bf)
    rec = {"shapes": {"tokens": m, "hidden": h, "qkv_out": n, "rank": r, "dtype": "bf16"}, "ms": {}}
    ms = rec["ms"]
    w, it = args.warmup, args.iters
    ms["copy"] = timed(torch, lambda: x.clone(), w, it)
    out, mask = torch.ops.aten.native_dropout(x, 0.1, True)
    ms["dropout_fwd"] = timed(torch, lambda: torch.ops.aten.native_dropout(x, 0.1, True), w, it)
    ms["dropout_bwd"] = timed(torch, lambda: torch.ops.aten.native_dropout_backward(x, mask, 1.0 / 0.9), w, it)
    rec["mask_dtype"] = str(mask.dtype)
    ms["scale"] = timed(torch, lambda: y * 2.0, w, it)
    ms["add"] = timed(torch, lambda: y + y2, w, it)
    ms["gemm_xA"] = timed(torch, lambda: x @ A, w, it)
    ms["gemm_B"] = timed(torch, lambda: xr @ B, w, it)
    ms["gemm_B_dgrad"] = timed(torch, lambda: y @ B.t(), w, it)
    ms["gemm_A_dgrad"] = timed(torch, lambda: xr @ A.t(), w, it)
    ms["gemm_B_wgrad"] = timed(torch, lambda: xr.t() @ y, w, it)
    ms["gemm_A_wgrad"] = timed(torch, lambda: x.t() @ xr, w, it)
    ms["base_fwd"] = timed(torch, lambda: x @ W, w, it)
    ms["base_bwd_dgrad"] = timed(torch, lambda: y @ W.t(), w, it)

    Ap = torch.nn.Parameter(A.t().contiguous())  # linear_in weight [r, h]
    Bp = torch.nn.Parameter(B.t().contiguous())  # linear_out weight [n, r]
    Wf = W.t().contiguous()                      # frozen base weight [n, h]
    scale = 32.0 / r

    def module(p_drop, adapter):
        xin = x.detach().requires_grad_(True)
        g = torch.randn(m, n, device=dev, dtype=bf)

        def step():
            base = torch.nn.functional.linear(xin, Wf)
            if adapter:
                a = torch.nn.functional.dropout(xin, p_drop, training=True) if p_drop > 0 else xin
                a = torch.nn.functional.linear(torch.nn.functional.linear(a, Ap), Bp) * scale
                base = base + a
            base.backward(g)
            xin.grad = None
            Ap.grad = None
            Bp.grad = None
        return step

    ms["module_adapter_dropout"] = timed(torch, module(0.1, True), w, it)
    ms["module_adapter_nodropout"] = timed(torch, module(0.0, True), w, it)
    ms["module_base_only"] = timed(torch, module(0.0, False), w, it)
    rec["gpu"] = common.nvidia_smi_static(0) if hasattr(common, "nvidia_smi_static") else None
    rec["torch"] = torch.__version__
    os.makedirs(args.out_dir, exist_ok=True)
    import json
    with open(os.path.join(args.out_dir, "lora_adapter.json"), "w") as f:
        json.dump(rec, f, indent=1)
    print(json.dumps(rec, indent=1))


if __name__ == "__main__":
    main()
