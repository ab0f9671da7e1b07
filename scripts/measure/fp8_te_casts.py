"""Transformer Engine's FP8 quantisation kernels as memory-bound passes on one GPU (issue #24: FP8 with TE's casts and
amax passes): the achieved HBM rate of each pass against the same GPU's copy rate, for the per-tensor recipes
(delayed and current scaling) and MXFP8.

Kernels (Triton, written here: Transformer Engine is not installed; each one moves the bytes TE's kernel moves):
  amax     x [M, K] bf16 -> one fp32 amax (per-block max, then an atomic max): current scaling's pass over the tensor
           before its cast (TE nvte_compute_amax). Bytes: read 2·M·K.
  cast     x [M, K] bf16 + fp32 scale -> y [M, K] float8_e4m3fn: the row-wise cast alone (Blackwell, whose FP8 GEMMs
           read either layout, needs no transposed copy). Bytes: read 2·M·K, write M·K.
  cast_t   x -> y [M, K] and y_t [K, M] float8_e4m3fn in one kernel: TE's fused cast-transpose (Hopper's FP8 GEMMs
           take the TN layout only, so the backward reads a transposed copy). Bytes: read 2·M·K, write 2·M·K.
  t8       y [M, K] float8_e4m3fn -> y_t [K, M]: the FP8 transpose TE runs after an FP8 all-gather under sequence
           parallelism and after a norm that wrote FP8 (delayed scaling) on Hopper. Bytes: read M·K, write M·K.
  mx_row   x -> y [M, K] e4m3 + s [M, K/32] E8M0 (uint8): MXFP8 row-wise, a power-of-two scale per 1×32 block.
           Bytes: read 2·M·K, write M·K·(1 + 1/32).
  mx_both  x -> row-wise y, s as mx_row and column-wise y_c [M, K] e4m3 + s_c [M/32, K] (a scale per 32×1 block,
           not transposed) in one kernel: TE's MXFP8 quantise of a tensor the backward also reads. Bytes: read 2·M·K,
           write 2·M·K·(1 + 1/32).
  copy     torch's y.copy_(x) on bf16 [M, K] (read 2·M·K, write 2·M·K): the streaming reference.
Each quantiser is checked against a torch dequantisation (error within 1/16 of its block's amax, the e4m3 step)
before it is timed; amax against torch's; times are CUDA-event medians over 30 replays of a CUDA graph of 20 calls.
Shapes: GEMM operands of a Llama-3-70B layer at TP 4 with 8192 tokens, and of Llama 3 8B at 16384 tokens.
Usage: python3 scripts/measure/fp8_te_casts.py --out-dir $OUT    (--dry-run: print the plan, no GPU)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from fp8_block_cast import time_us  # noqa: E402

BLOCK = 32
# (name, M, K): rows x columns of the BF16 operand.
SHAPES = [
    ("70B TP4 hidden 8192x8192 (QKV / fc1 input after the gather)", 8192, 8192),
    ("70B TP4 fc1 output grad 8192x14336", 8192, 14336),
    ("70B TP4 fc2 input 8192x7168", 8192, 7168),
    ("70B TP4 QKV output grad 8192x2560", 8192, 2560),
    ("8B hidden 16384x4096", 16384, 4096),
    ("8B fc1 output grad 16384x28672", 16384, 28672),
]

# Bytes moved per element of each pass (the model's accounting, quant_recipe.hpp).
PASS_BYTES = {
    "amax": 2.0,
    "cast": 3.0,
    "cast_t": 4.0,
    "t8": 2.0,
    "mx_row": 2.0 + 1.0 + 1.0 / BLOCK,
    "mx_both": 2.0 + 2.0 * (1.0 + 1.0 / BLOCK),
    "copy": 4.0,
}


def kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def amax_k(x, out, N, BN: tl.constexpr):
        offs = tl.program_id(0) * BN + tl.arange(0, BN)
        v = tl.load(x + offs, mask=offs < N, other=0.0).to(tl.float32)
        tl.atomic_max(out, tl.max(tl.abs(v), axis=0))

    @triton.jit
    def cast_k(x, sc, y, N, BN: tl.constexpr):
        offs = tl.program_id(0) * BN + tl.arange(0, BN)
        s = tl.load(sc)
        v = tl.load(x + offs, mask=offs < N, other=0.0).to(tl.float32)
        tl.store(y + offs, (v * s).to(tl.float8e4nv), mask=offs < N)

    @triton.jit
    def cast_t_k(x, sc, y, yt, M, K, BM: tl.constexpr, BK: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.program_id(1) * BK + tl.arange(0, BK)
        s = tl.load(sc)
        v = tl.load(x + rows[:, None] * K + cols[None, :]).to(tl.float32)
        q = (v * s).to(tl.float8e4nv)
        tl.store(y + rows[:, None] * K + cols[None, :], q)
        tl.store(yt + cols[:, None] * M + rows[None, :], tl.trans(q))

    @triton.jit
    def t8_k(y, yt, M, K, BM: tl.constexpr, BK: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.program_id(1) * BK + tl.arange(0, BK)
        q = tl.load(y + rows[:, None] * K + cols[None, :])
        tl.store(yt + cols[:, None] * M + rows[None, :], tl.trans(q))

    @triton.jit
    def e8m0(amax):
        # The power of two that brings the block's amax to at most 448 (OCP MX: scale = 2^ceil(log2(amax / 448))).
        return tl.ceil(tl.log2(tl.maximum(amax, 1e-30) / 448.0))

    @triton.jit
    def mx_k(x, y, s, yc, sc, M, K, BM: tl.constexpr, BK: tl.constexpr, BOTH: tl.constexpr):
        rows = tl.program_id(0) * BM + tl.arange(0, BM)
        cols = tl.program_id(1) * BK + tl.arange(0, BK)
        v = tl.load(x + rows[:, None] * K + cols[None, :]).to(tl.float32)
        # Row-wise: a scale per 1x32 block along K.
        v3 = tl.reshape(v, (BM, BK // 32, 32))
        er = e8m0(tl.max(tl.abs(v3), axis=2))
        q = tl.reshape(v3 * tl.exp2(-er)[:, :, None], (BM, BK)).to(tl.float8e4nv)
        tl.store(y + rows[:, None] * K + cols[None, :], q)
        srows = tl.program_id(0) * BM + tl.arange(0, BM)
        scols = tl.program_id(1) * (BK // 32) + tl.arange(0, BK // 32)
        tl.store(s + srows[:, None] * (K // 32) + scols[None, :], (er + 127.0).to(tl.uint8))
        if BOTH:
            # Column-wise: a scale per 32x1 block along M, same layout as the input.
            c3 = tl.reshape(v, (BM // 32, 32, BK))
            ec = e8m0(tl.max(tl.abs(c3), axis=1))
            qc = tl.reshape(c3 * tl.exp2(-ec)[:, None, :], (BM, BK)).to(tl.float8e4nv)
            tl.store(yc + rows[:, None] * K + cols[None, :], qc)
            crow = tl.program_id(0) * (BM // 32) + tl.arange(0, BM // 32)
            tl.store(sc + crow[:, None] * K + cols[None, :], (ec + 127.0).to(tl.uint8))

    def amax(xt, torch):
        n = xt.numel()
        out = torch.zeros((1,), device=xt.device, dtype=torch.float32)
        grid = (triton.cdiv(n, 8192),)

        # The max is idempotent: replays need no reset (a memset would add a kernel to the time).
        return (lambda: amax_k[grid](xt, out, n, BN=8192)), out

    def cast(xt, scale, torch):
        n = xt.numel()
        y = torch.empty(xt.shape, device=xt.device, dtype=torch.float8_e4m3fn)
        grid = (triton.cdiv(n, 4096),)
        return (lambda: cast_k[grid](xt, scale, y, n, BN=4096)), y

    def cast_t(xt, scale, torch):
        m, k = xt.shape
        y = torch.empty((m, k), device=xt.device, dtype=torch.float8_e4m3fn)
        yt = torch.empty((k, m), device=xt.device, dtype=torch.float8_e4m3fn)
        grid = (m // 64, k // 64)
        return (lambda: cast_t_k[grid](xt, scale, y, yt, m, k, BM=64, BK=64)), y, yt

    def t8(y8, torch):
        m, k = y8.shape
        yt = torch.empty((k, m), device=y8.device, dtype=torch.float8_e4m3fn)
        grid = (m // 64, k // 64)
        return (lambda: t8_k[grid](y8, yt, m, k, BM=64, BK=64)), y8, yt

    def mx(xt, both, torch):
        m, k = xt.shape
        y = torch.empty((m, k), device=xt.device, dtype=torch.float8_e4m3fn)
        s = torch.empty((m, k // BLOCK), device=xt.device, dtype=torch.uint8)
        yc = torch.empty((m, k) if both else (1,), device=xt.device, dtype=torch.float8_e4m3fn)
        sc = torch.empty((m // BLOCK, k) if both else (1,), device=xt.device, dtype=torch.uint8)
        grid = (m // 64, k // 64)
        return (lambda: mx_k[grid](xt, y, s, yc, sc, m, k, BM=64, BK=64, BOTH=both)), y, s, yc, sc

    return amax, cast, cast_t, t8, mx


def block_error(torch, x, deq, along_rows):
    """Max |deq - x| relative to each 32-element block's amax (blocks along K row-wise, along M column-wise)."""
    xf = x.float() if along_rows else x.float().t()
    d = deq if along_rows else deq.t()
    amax = xf.abs().reshape(xf.shape[0], -1, BLOCK).amax(dim=2).clamp_min(1e-30).repeat_interleave(BLOCK, dim=1)
    return float(((d - xf).abs() / amax).max())


def check(torch, x, label, made, scale):
    """The pass's error, computed from the kernel's own output: amax against torch's (relative); a per-tensor cast
    relative to the tensor's amax; an MXFP8 quantisation relative to each 32-element block's amax."""
    made[0]()
    torch.cuda.synchronize()
    ref = float(x.float().abs().max())
    if label == "amax":
        return abs(float(made[1][0]) - ref) / ref
    if label == "t8":
        return 0.0 if torch.equal(made[2].view(torch.uint8).t(), made[1].view(torch.uint8)) else 1.0
    if label in ("cast", "cast_t"):
        s = float(scale[0])
        outs = [made[1]] if label == "cast" else [made[1], made[2].t()]
        return max(float((y.float() / s - x.float()).abs().max()) for y in outs) / ref
    _, y, sr, yc, sc = made
    deq = y.float() * torch.exp2(sr.float() - 127.0).repeat_interleave(BLOCK, dim=1)
    e = block_error(torch, x, deq, True)
    if label == "mx_both":
        deqc = yc.float() * torch.exp2(sc.float() - 127.0).repeat_interleave(BLOCK, dim=0)
        e = max(e, block_error(torch, x, deqc, False))
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "."))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()
    if args.dry_run:
        for name, m, k in SHAPES:
            assert m % 64 == 0 and k % 64 == 0, name
            print(name, {p: round(b * m * k / 1e6, 1) for p, b in PASS_BYTES.items()}, "MB")
        return
    import torch

    amax, cast, cast_t, t8, mx = kernels()
    dev = torch.device("cuda")
    record = {"what": "TE-style FP8 quantisation passes (per-tensor amax, cast, cast-transpose, FP8 transpose; MXFP8 1x32 "
                      "row and row+column) vs copy, Triton, CUDA events", "meta": common.run_metadata(),
              "pass_bytes_per_element": PASS_BYTES, "rows": []}
    for name, m, k in SHAPES:
        torch.manual_seed(0)
        x = torch.randn((m, k), device=dev, dtype=torch.bfloat16)
        z = torch.empty_like(x)
        scale = torch.tensor([448.0 / float(x.float().abs().max())], device=dev, dtype=torch.float32)
        makers = {"amax": lambda: amax(x, torch), "cast": lambda: cast(x, scale, torch),
                  "cast_t": lambda: cast_t(x, scale, torch),
                  "t8": lambda: t8((x.float() * scale).to(torch.float8_e4m3fn), torch),
                  "mx_row": lambda: mx(x, False, torch),
                  "mx_both": lambda: mx(x, True, torch)}
        copy_us, copy_spread = time_us(torch, lambda: z.copy_(x))
        row = {"shape": name, "M": m, "K": k, "copy_us": copy_us, "copy_spread": copy_spread,
               "copy_GBps": PASS_BYTES["copy"] * m * k / copy_us / 1e3}
        for label, make in makers.items():
            try:  # one pass failing (a Triton compile error) must not lose the others
                made = make()
                err = check(torch, x, label, made, scale)
                if not err < 1.0 / 16.0:
                    row[label + "_error"] = f"check error {err:.4f} over 1/16: not timed"
                    continue
                us, spread = time_us(torch, made[0])
            except Exception as e:  # noqa: BLE001 - the record says why
                row[label + "_error"] = f"{type(e).__name__}: {str(e)[:400]}"
                continue
            gbps = PASS_BYTES[label] * m * k / us / 1e3
            row.update({label + "_us": us, label + "_spread": spread, label + "_check_error": err,
                        label + "_GBps": gbps, label + "_vs_copy": gbps / row["copy_GBps"]})
            del made
        record["rows"].append(row)
        print(row, flush=True)
        del x, z
    common.write_json(record, "fp8_te_casts", args.out_dir)


if __name__ == "__main__":
    main()
