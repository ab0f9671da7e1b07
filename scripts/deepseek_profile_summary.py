#!/usr/bin/env python3
"""Summarise DeepSeek's public DualPipe training profile (deepseek-ai/profile-data, train.json) by kernel category.

The trace is one overlapped pair of a forward and a backward chunk of DualPipe, 4 MoE layers per chunk, EP64, TP1,
4K tokens per micro-batch, balanced routing, no PP communication (the repository's README), on NVIDIA H800s
(deviceProperties). This script reads the PyTorch-profiler JSON and prints, as JSON: the GPUs' deviceProperties, each
CUDA stream's kernel span and busy time, and the compute stream's kernel time by category (total and per MoE layer,
forward + backward). Usage: deepseek_profile_summary.py train.json  (docs/deepseek-v3-profile.md uses its output).
With --kernels it prints instead a Markdown table of every kernel of the pair, grouped by name and stream: calls and
microseconds per MoE layer, the category, and the op of gpuplan's training op graph that prices it (KERNEL_OPS; "none"
where no op does): docs/deepseek-v3-profile.md, "Every kernel of the pair".
"""
import collections
import json
import sys


def category(name: str) -> str:
    if "grouped_gemm" in name and "transpose" not in name and "fill_tensormaps" not in name:
        return "fp8 GEMM (grouped)"
    if "xmma_gemm" in name:
        return "bf16 GEMM (cuBLAS)"
    if "flash" in name.lower():
        return "attention (flash)"
    if "dpsk::ep::" in name:
        return "all-to-all (dispatch, combine, notify)"
    if "cast" in name or "transpose" in name or "expand_to_fused" in name:
        return "fp8 quantise / transpose"
    if "layer_norm" in name:
        return "RMSNorm"
    if "swiglu" in name:
        return "SwiGLU"
    if "reduce_fused" in name:
        return "combine reduction"
    if "rotary" in name:
        return "rotary"
    return "other (routing, copies, elementwise)"


# The op of gpuplan's training layer (model/src/train/layer_cost.cpp, names as `gpuplan train --explain` prints them)
# that prices each kernel of DeepSeek's pair, first match wins; what each kernel is follows from its name, grid and
# place in the sequence (forward chunk and backward chunk interleaved on stream 7).
KERNEL_OPS = [
    (r"m_grouped_fp8_ptp128c", "expert up/gate, expert down (forward, dgrad): routed experts, grouped"),
    (r"fp8_dptp128c_acc", "every '... wgrad (+= gradient buffer)' (FP32 accumulation into the gradient)"),
    (r"fp8_ptp128c", "QKV projection, output projection, shared expert (forward, dgrad; MLA up-projection recompute)"),
    (r"xmma_gemm_bf16", "router, router dgrad, router wgrad (priced as FP8 GEMMs with casts; DeepSeek runs the gate in BF16)"),
    (r"FlashAttnBwdPreprocess|FlashAttnBwdPostprocess", "attention (flash bwd) (its pre- and post-processing kernels, inside the priced backward)"),
    (r"FlashAttnBwd<", "attention (flash bwd)"),
    (r"compute_attn_ws", "attention (flash fwd)"),
    (r"swiglu_forward_with_weight_and_per_token_cast", "expert activation + expert down fp8 cast (fused: SwiGLU, routing weight, 1x128 cast)"),
    (r"swiglu_and_per_channel_cast_and_transpose", "none (shared expert SwiGLU recompute fused with its column-wise cast)"),
    (r"swiglu_forward_backward_with_weight|swiglu_weight_backward|swiglu_backward", "expert activation bwd"),
    (r"per_token_cast_to_fp8_with_fp8_special_fmt", "none (attention output stored in E5M6, §3.3.3)"),
    (r"per_token_cast_back_special_fmt", "none (E5M6 attention output read back to BF16)"),
    (r"per_token_cast_to_fp8_with_channels", "'... fp8 blockwise cast' (row-wise 1x128 tiles: GEMM inputs forward, output gradients for dgrad)"),
    (r"per_channel_cast_and_transpose", "'... fp8 blockwise cast' (its column-wise half, written in the forward) and '... cast bwd'"),
    (r"batched_transpose", "'... weight transpose' (FP8 weight, 128x128 tiles)"),
    (r"utils::transpose", "none (the operands' scale tensors transposed for the GEMM, per GEMM)"),
    (r"expand_to_fused_with_scales|get_fused_mapping|clean_and_count_expert", "token permute/unpermute"),
    (r"reduce_fused_impl", "token permute/unpermute (the weighted sum over top-k)"),
    (r"cast_back_impl", "none (FP8 rows dequantised to BF16)"),
    (r"ln_fwd_kernel.*7168u|ln_bwd_kernel.*7168u|ln_bwd_finalize.*7168u", "input norm, post-attention norm (+ bwd, + recompute)"),
    (r"layer_norm::", "none (MLA's q_a / kv_a latent norms, 1536 and 512 wide)"),
    (r"rotary_kernel", "rotary"),
    (r"_copy_tensor_kernel|elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::direct_copy", "none (MLA: nope and rope parts of q, k concatenated for the attention kernel, and split back)"),
    (r"CUDAFunctor_add<c10::BFloat16>", "residual add (DeepSeek fuses the forward add into the norm)"),
    (r"gatherTopK|topk_sum|sigmoid|aux_fi|unique_group|scatter_gather|Distribution", "none (router: sigmoid, group-limited top-k, auxiliary statistics)"),
    (r"dpsk::ep::", "ep (all-to-all): dispatch / combine (communication stream)"),
]


def gpuplan_op(name: str, stream: int = 7) -> str:
    import re
    if stream != 7 and "per_token_cast_to_fp8_with_channels" in name:
        return "none (the T tokens quantised before the FP8 dispatch, on the dispatch's SMs; inside 'ep (all-to-all)')"
    for pattern, op in KERNEL_OPS:
        if re.search(pattern, name):
            return op
    return "none (small PyTorch elementwise, copies, fills, reductions)"


def short(name: str) -> str:
    import re
    n = re.sub(r"\(.*", "", name).replace("void ", "").replace("cutlass::device_kernel<", "")
    n = n.replace("dpsk::grouped_gemm::cuda::", "").replace("at::native::", "")
    width = re.search(r"Kernel_traits(?:_finalize)?<(\d+)u|, (\d+)u, ", name) if "layer_norm" in name else None
    n = n[:60] + (f" (width {width.group(1) or width.group(2)})" if width else "")
    return n.replace("|", "/")


def kernel_table(path: str, layers: int = 4) -> None:
    trace = json.load(open(path))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    rows = collections.defaultdict(lambda: [0, 0.0])
    for e in kernels:
        key = (e["tid"], short(e["name"]), category(e["name"]), gpuplan_op(e["name"], e["tid"]))
        rows[key][0] += 1
        rows[key][1] += e["dur"]
    # Kernels under 15 µs per layer are summed into one row per stream (PyTorch's small elementwise kernels, fills).
    small = collections.defaultdict(lambda: [0, 0.0])
    print("| stream | kernel | calls / layer | µs / layer | category | gpuplan op |")
    print("| ---: | --- | ---: | ---: | --- | --- |")
    unpriced = 0.0
    for (tid, name, cat, op), (n, us) in sorted(rows.items(), key=lambda x: (x[0][0] != 7, -x[1][1])):
        if tid == 7 and op.startswith("none"):
            unpriced += us
        if us / layers < 15:
            small[tid][0] += n
            small[tid][1] += us
            continue
        print(f"| {tid} | `{name}` | {n / layers:g} | {us / layers:.0f} | {cat} | {op} |")
    for tid, (n, us) in sorted(small.items()):
        print(f"| {tid} | {n / layers:g} kernels under 15 µs each per layer | {n / layers:g} | {us / layers:.0f} | "
              f"mostly other | none (router statistics, fills, small reductions) |")
    print(f"\nCompute stream (7), kernels with no gpuplan op: {unpriced / layers:.0f} µs per MoE layer.")


def main(path: str, layers: int = 4) -> None:
    trace = json.load(open(path))
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    streams = collections.defaultdict(list)
    for e in kernels:
        streams[e["tid"]].append(e)
    out = {"source": path, "devices": [{k: d[k] for k in ("name", "totalGlobalMem", "numSms")}
                                       for d in trace.get("deviceProperties", [])], "streams": {}}
    for tid, ks in sorted(streams.items()):
        ks.sort(key=lambda e: e["ts"])
        span = ks[-1]["ts"] + ks[-1]["dur"] - ks[0]["ts"]
        busy = sum(e["dur"] for e in ks)
        by = collections.defaultdict(float)
        for e in ks:
            by[category(e["name"])] += e["dur"]
        out["streams"][str(tid)] = {
            "kernels": len(ks), "span_ms": span / 1e3, "busy_ms": busy / 1e3,
            "by_category_ms": {c: round(v / 1e3, 3) for c, v in sorted(by.items(), key=lambda x: -x[1])},
            "by_category_per_layer_ms": {c: round(v / 1e3 / layers, 3) for c, v in sorted(by.items(), key=lambda x: -x[1])},
        }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[2] == "--kernels":
        kernel_table(sys.argv[1])
    else:
        main(sys.argv[1])
