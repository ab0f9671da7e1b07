"""Blockwise FP8 activation casts on one GPU: the achieved HBM rate of a 1x128-tile quantise kernel, row-wise and as a
column-wise cast-transpose, against the same GPU's copy rate (issue #21: DeepSeek-V3's per-axis FP8 casts,
docs/deepseek-v3-profile.md; gpuplan prices them at the elementwise streaming rate).

Kernels (Triton, written here; DeepSeek's own kernels are not public):
  row   x [M, K] bf16 -> y [M, K] float8_e4m3fn + s [M, K/128] fp32 (one scale per 1x128 tile along K): the
        per_token_cast_to_fp8 of DeepSeek's profile. Bytes: read 2·M·K, write M·K·(1 + 4/128).
  col   x [M, K] bf16 -> y [K, M] float8_e4m3fn + s [K, M/128] fp32 (tiles of 128 along M, written transposed): the
        per_channel_cast_and_transpose before a wgrad GEMM. Same bytes.
  copy  torch's y.copy_(x) on a bf16 [M, K] tensor (read 2·M·K, write 2·M·K): the streaming reference.
Each kernel is checked against a torch dequantisation (max relative error of the tile-scaled values under 1/16, the
e4m3 step) before it is timed; times are CUDA-event medians over 30 replays of a CUDA graph of 20 calls (no host
launch cost in the time).
Shapes: the GEMM operands of one DeepSeek-V3 MoE layer at 4096 tokens (EP 64: 32768 routed rows per GPU).
Usage: python3 scripts/measure/fp8_block_cast.py --out-dir $OUT    (--dry-run: print the plan, no GPU)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

TILE = 128
FP8_MAX = 448.0
# (name, M, K): rows x columns of the BF16 operand.
SHAPES = [
    ("hidden 4096x7168 (QKV / router / shared expert input)", 4096, 7168),
    ("attention output 4096x16384 (O projection input)", 4096, 16384),
    ("output grad 4096x4096 (shared expert up/gate)", 4096, 4096),
    ("routed rows 32768x7168 (expert down output grad)", 32768, 7168),
    ("routed rows 32768x4096 (expert up/gate output grad)", 32768, 4096),
    ("routed rows 32768x2048 (SwiGLU output)", 32768, 2048),
]


def cast_bytes(m, k):
    """HBM bytes of one pass: read the BF16 source, write FP8 values and one fp32 scale per 128 elements."""
    return 2.0 * m * k + m * k * (1.0 + 4.0 / TILE)


def copy_bytes(m, k):
    return 4.0 * m * k


def kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def row_cast(x, y, s, M, K, BM: tl.constexpr):
        pm = tl.program_id(0)
        pk = tl.program_id(1)
        rows = pm * BM + tl.arange(0, BM)
        cols = pk * 128 + tl.arange(0, 128)
        mask = rows[:, None] < M
        v = tl.load(x + rows[:, None] * K + cols[None, :], mask=mask, other=0.0).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(v), axis=1), 1e-4)
        scale = amax / 448.0
        q = (v / scale[:, None]).to(tl.float8e4nv)
        tl.store(y + rows[:, None] * K + cols[None, :], q, mask=mask)
        tl.store(s + rows * (K // 128) + pk, scale, mask=rows < M)

    @triton.jit
    def col_cast_t(x, y, s, M, K, BK: tl.constexpr):
        pm = tl.program_id(0)
        pk = tl.program_id(1)
        rows = pm * 128 + tl.arange(0, 128)
        cols = pk * BK + tl.arange(0, BK)
        v = tl.load(x + rows[:, None] * K + cols[None, :]).to(tl.float32)
        amax = tl.maximum(tl.max(tl.abs(v), axis=0), 1e-4)
        scale = amax / 448.0
        q = tl.trans((v / scale[None, :]).to(tl.float8e4nv))
        tl.store(y + cols[:, None] * M + rows[None, :], q)
        tl.store(s + cols * (M // 128) + pm, scale)

    def row(xt, torch):
        m, k = xt.shape
        yt = torch.empty((m, k), device=xt.device, dtype=torch.float8_e4m3fn)
        st = torch.empty((m, k // TILE), device=xt.device, dtype=torch.float32)
        grid = (triton.cdiv(m, 32), k // TILE)
        return (lambda: row_cast[grid](xt, yt, st, m, k, BM=32)), yt, st

    def col(xt, torch):
        m, k = xt.shape
        yt = torch.empty((k, m), device=xt.device, dtype=torch.float8_e4m3fn)
        st = torch.empty((k, m // TILE), device=xt.device, dtype=torch.float32)
        grid = (m // TILE, k // 64)
        return (lambda: col_cast_t[grid](xt, yt, st, m, k, BK=64)), yt, st

    return row, col


def check(torch, x, y, s, transposed):
    """Max relative error of the dequantised values against x (tile-scaled: relative to each tile's amax)."""
    xf = x.float().t() if transposed else x.float()
    deq = y.float() * s.repeat_interleave(TILE, dim=1)
    amax = xf.abs().reshape(xf.shape[0], -1, TILE).amax(dim=2).clamp_min(1e-4).repeat_interleave(TILE, dim=1)
    return float(((deq - xf).abs() / amax).max())


def time_us(torch, fn, reps=20, n=30):
    """Median µs per call: `reps` calls captured in a CUDA graph (so the host's launch cost is not timed), the graph
    replayed n times between CUDA events after warm-ups; returns (median, spread)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(n):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / reps)
    med, _, _, spread = common.median_and_spread(times)
    return med, spread


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "."))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.dry_run:
        for name, m, k in SHAPES:
            print(f"{name}: cast {cast_bytes(m, k) / 1e6:.1f} MB, copy {copy_bytes(m, k) / 1e6:.1f} MB")
        return
    import torch

    row, col = kernels()
    dev = torch.device("cuda")
    record = {"what": "blockwise FP8 casts (1x128 tiles) vs copy, Triton, CUDA events", "meta": common.run_metadata(),
              "rows": []}
    for name, m, k in SHAPES:
        torch.manual_seed(0)
        x = torch.randn((m, k), device=dev, dtype=torch.bfloat16)
        z = torch.empty_like(x)
        copy_med, copy_spread = time_us(torch, lambda: z.copy_(x))
        row_entry = {"shape": name, "M": m, "K": k, "copy_us": copy_med, "copy_spread": copy_spread,
                     "copy_GBps": copy_bytes(m, k) / copy_med / 1e3, "cast_bytes": cast_bytes(m, k)}
        for label, make, transposed in (("row", row, False), ("col", col, True)):
            fn, y, s = make(x, torch)
            fn()
            torch.cuda.synchronize()
            err = check(torch, x, y, s, transposed)
            if not err < 1.0 / 16.0:
                row_entry[label + "_error"] = f"dequantised error {err:.4f} over 1/16: not timed"
                continue
            med, spread = time_us(torch, fn)
            row_entry.update({label + "_us": med, label + "_spread": spread, label + "_max_rel_error": err,
                              label + "_GBps": cast_bytes(m, k) / med / 1e3,
                              label + "_vs_copy": (cast_bytes(m, k) / med) / (copy_bytes(m, k) / copy_med)})
        record["rows"].append(row_entry)
        print(row_entry, flush=True)
        del x, z
    common.write_json(record, "fp8_block_cast", args.out_dir)


if __name__ == "__main__":
    main()
