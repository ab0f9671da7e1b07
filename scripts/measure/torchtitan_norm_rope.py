"""TorchTitan's RMSNorm and RoPE as its Llama runs them, eager and under torch.compile, on one GPU (issue #22: the
TorchTitan rows; model/src/ops/norm_loss.cpp composite_rmsnorm_cost and layer_cost.cpp's fused/eager RoPE counts).

TorchTitan at 9dec370 (pytorch/torchtitan torchtitan/models/norms.py, torchtitan/models/llama/model.py) writes
  RMSNorm  as PyTorch ops: the fp32 upcast, pow, mean, rsqrt, the multiply, the cast back, the weight multiply;
  RoPE     as a complex multiply: view_as_complex of the fp32 upcast, times freqs_cis (complex64), view_as_real,
           the cast back (Inductor has no complex code generation and runs the complex multiply as an ATen op).
Timed here, forward and forward + backward, on the 8B row's shapes (Table 1: local batch 2 × 8,192 tokens, hidden 4,096,
32 query and 8 KV heads of 128):
  norm_composite          the ops above, eager (one kernel each)
  norm_composite_compiled the same function under torch.compile (what the compiled rows' blocks run)
  norm_fused              torch.nn.functional.rms_norm (PyTorch's own kernel)
  rope_complex            the complex form, eager
  rope_complex_compiled   the same under torch.compile
  rope_rotate_half        x·cos + rotate_half(x)·sin, eager (gpuplan's eager count: 11 + 13 accesses per element)
The model's bytes per element (a = 2 B, f = 4 B): composite norm 36 forward + 92 backward, fused norm 4 + 8; RoPE
fused 4 + 4, rotate_half 22 + 26, complex 20 + 20. The JSON records each time and the bytes it implies at the measured
copy bandwidth, so the pass count can be read back.
Usage: python3 scripts/measure/torchtitan_norm_rope.py --out-dir $OUT   (about 1 minute on an H100/H200)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

# Bytes per element that gpuplan prices (forward, backward), for the record.
MODEL_BYTES = {
    "norm_composite": [36, 92], "norm_fused": [4, 8],
    "rope_fused": [4, 4], "rope_rotate_half": [22, 26], "rope_complex": [20, 20],
}


def composite_rms_norm(torch, x, w, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).type_as(x) * w


def complex_rope(torch, x, freqs):
    """x: [b, s, heads, d] bf16; freqs: [s, d/2] complex64."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    f = freqs.view(1, x.shape[1], 1, x.shape[-1] // 2)
    return torch.view_as_real(xc * f).flatten(3).type_as(x)


def rotate_half_rope(torch, x, cos, sin):
    """x: [b, s, heads, d]; cos, sin: [s, d] in x's dtype."""
    h = x.shape[-1] // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), dim=-1)
    return x * cos[None, :, None, :] + rot * sin[None, :, None, :]


def check_shapes(b, s, hidden, heads, kv_heads, d):
    """CPU-side sanity of the arguments (the run's shapes must tile as the model's do)."""
    if heads * d != hidden:
        raise SystemExit(f"heads × head_dim = {heads * d} must equal hidden {hidden}")
    if d % 2 or kv_heads <= 0 or heads % kv_heads:
        raise SystemExit("head_dim must be even and kv_heads must divide heads")
    return {"tokens": b * s, "norm_elements": b * s * hidden, "rope_elements": b * s * (heads + kv_heads) * d}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "/tmp/out"))
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--check-only", action="store_true", help="check the shapes and exit (no GPU)")
    args = ap.parse_args()
    d = args.hidden // args.heads
    sizes = check_shapes(args.batch, args.seq, args.hidden, args.heads, args.kv_heads, d)
    if args.check_only:
        print(sizes)
        return
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)

    timed = common.event_times

    copy_bw, copy = common.copy_bandwidth(dev)

    eps = 1e-5
    B, S, H = args.batch, args.seq, args.hidden
    x = torch.randn(B, S, H, device=dev, dtype=torch.bfloat16)
    w = torch.randn(H, device=dev, dtype=torch.bfloat16)
    gy = torch.randn_like(x)

    def fwd_bwd(fn, inp, grad):
        xi = inp.detach().requires_grad_(True)
        fn(xi).backward(grad)
        return xi.grad

    norm_c = lambda t: composite_rms_norm(torch, t, w, eps)  # noqa: E731
    norm_cc = torch.compile(norm_c)
    norm_f = lambda t: torch.nn.functional.rms_norm(t, (H,), w, eps)  # noqa: E731
    ref = norm_c(x[:4].double()).float()
    errs = {k: float((f(x[:4]).float() - ref).norm() / ref.norm()) for k, f in
            (("norm_composite", norm_c), ("norm_composite_compiled", norm_cc), ("norm_fused", norm_f))}

    items = []

    def record(name, fn, inp, grad, elems):
        with torch.no_grad():
            tf = timed(lambda: fn(inp), args.reps)
        tfb = timed(lambda: fwd_bwd(fn, inp, grad), args.reps)
        bwd = tfb["median"] - tf["median"]
        items.append({"impl": name, "elements": elems, "fwd_s": tf, "fwd_bwd_s": tfb,
                      "fwd_bytes_per_element_at_copy_bw": tf["median"] * copy_bw / elems,
                      "bwd_bytes_per_element_at_copy_bw": bwd * copy_bw / elems, "rel_err": errs.get(name)})
        print(f"{name:26s} fwd {tf['median']*1e3:7.3f} ms ({tf['median']*copy_bw/elems:5.1f} B/el)  "
              f"bwd {bwd*1e3:7.3f} ms ({bwd*copy_bw/elems:5.1f} B/el)", flush=True)

    for name, fn in (("norm_composite", norm_c), ("norm_composite_compiled", norm_cc), ("norm_fused", norm_f)):
        record(name, fn, x, gy, sizes["norm_elements"])
    del x, gy

    heads = args.heads + args.kv_heads  # q and k together, as one [b, s, heads + kv, d] tensor (the same passes)
    q = torch.randn(B, S, heads, d, device=dev, dtype=torch.bfloat16)
    gq = torch.randn_like(q)
    pos = torch.arange(S, device=dev, dtype=torch.float32)
    inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
    ang = torch.outer(pos, inv)
    freqs = torch.polar(torch.ones_like(ang), ang)
    cos = torch.cat((ang.cos(), ang.cos()), dim=-1).to(torch.bfloat16)
    sin = torch.cat((ang.sin(), ang.sin()), dim=-1).to(torch.bfloat16)
    rope_c = lambda t: complex_rope(torch, t, freqs)  # noqa: E731
    rope_cc = torch.compile(rope_c)
    rope_r = lambda t: rotate_half_rope(torch, t, cos, sin)  # noqa: E731
    for name, fn in (("rope_complex", rope_c), ("rope_complex_compiled", rope_cc), ("rope_rotate_half", rope_r)):
        record(name, fn, q, gq, sizes["rope_elements"])

    rec = common.run_metadata()
    rec.update({"name": "torchtitan_norm_rope", "copy_bandwidth_Bps": copy_bw, "copy_s": copy, "shapes": sizes,
                "args": vars(args), "items": items, "model_bytes_per_element": MODEL_BYTES})
    common.write_json(rec, "torchtitan_norm_rope", args.out_dir)
    print(f"copy bandwidth {copy_bw/1e12:.3f} TB/s")


if __name__ == "__main__":
    main()
