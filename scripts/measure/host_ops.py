#!/usr/bin/env python3
"""Host (CPU) cost of eager PyTorch per module call, for gpuplan's eager vision passes (issue #25, host-bound small
batches). Tiny tensors, so the GPU is never the bound: the wall time the Python loop takes to issue the calls is the
host's cost.

ops: chains of K modules of one kind (each its own parameters, as in a network), shape-preserving, on tiny maps
(CNN kinds: N 2, C 32, 8 x 8, channels-last; transformer kinds: N 2, 8 tokens, width 64, 4 heads). Three modes:
  infer      bf16 module, eval, torch.inference_mode (vision_bench.py --inference, eager)
  train_fwd  fp32 module, train(), bf16 autocast, autograd recording (vision_bench.py --train's forward)
  train_bwd  y.backward(ones) of that chain (the autograd engine issuing the backward)
Per kind and mode: host wall time per call (median of --reps, perf_counter around the issuing loop, the GPU drained
before), kernels per call (torch.profiler, CUDA activity only) and GPU busy time per call.
In-place activations are measured after a batch norm (the pair as torchvision builds it); the activation's own cost
is the pair's minus the batch norm's.

models: torchvision resnet50 / efficientnet_b4 / vit_b_16 eager at small batches (1, 2, 32 inference; 2, 32 training):
host time of each phase (forward, backward, optimizer step, zero_grad), its kernel count and the phase's CUDA-event
time: the whole-model check of the per-op costs.

optimizers: SGD momentum + weight decay (foreach) and AdamW (fused) step host time over n parameter tensors
(n = 16…512 tensors of 4096 elements): fixed + per-tensor cost.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402
from torchvision.ops import SqueezeExcitation, StochasticDepth  # noqa: E402
from torchvision.ops.misc import Conv2dNormActivation  # noqa: E402

C, HW, N = 32, 8, 2
T, E, HEADS = 8, 64, 4


class Add(nn.Module):
    def __init__(self, shape):
        super().__init__()
        self.register_buffer("skip", torch.randn(shape))

    def forward(self, x):
        return x + self.skip.to(x.dtype)


class Mul(nn.Module):  # a per-channel scale (SE's multiply with a fixed-size scale vector)
    def __init__(self):
        super().__init__()
        self.s = nn.Parameter(torch.randn(1, C, 1, 1))

    def forward(self, x):
        return x * self.s


class MHA(nn.Module):  # as torchvision's EncoderBlock calls it
    def __init__(self):
        super().__init__()
        self.m = nn.MultiheadAttention(E, HEADS, batch_first=True)

    def forward(self, x):
        return self.m(x, x, x, need_weights=False)[0]


def cnn(f):
    return ("cnn", f)


def tok(f):
    return ("tok", f)


KINDS = {
    "conv3x3": cnn(lambda: nn.Conv2d(C, C, 3, padding=1, bias=False)),
    "conv1x1_bias": cnn(lambda: nn.Conv2d(C, C, 1, bias=True)),
    "dwconv3x3": cnn(lambda: nn.Conv2d(C, C, 3, padding=1, groups=C, bias=False)),
    "bn": cnn(lambda: nn.BatchNorm2d(C)),
    "bn_relu_inplace": cnn(lambda: nn.Sequential(nn.BatchNorm2d(C), nn.ReLU(inplace=True))),
    "bn_silu_inplace": cnn(lambda: nn.Sequential(nn.BatchNorm2d(C), nn.SiLU(inplace=True))),
    "conv_bn_relu": cnn(lambda: Conv2dNormActivation(C, C, 3)),
    "add": cnn(lambda: Add((1, C, HW, HW))),
    "mul_channel": cnn(lambda: Mul()),
    "maxpool3x3": cnn(lambda: nn.MaxPool2d(3, 1, 1)),
    "squeeze_excitation": cnn(lambda: SqueezeExcitation(C, 8, activation=nn.SiLU)),
    "stochastic_depth": cnn(lambda: StochasticDepth(0.2, "row")),
    "linear": tok(lambda: nn.Linear(E, E)),
    "layernorm": tok(lambda: nn.LayerNorm(E)),
    "gelu": tok(lambda: nn.GELU()),
    "dropout0": tok(lambda: nn.Dropout(0.0)),
    "add_tokens": tok(lambda: Add((1, T, E))),
    "mha": tok(lambda: MHA()),
}


def count_kernels(fn):
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    n, busy = 0, 0.0
    for e in prof.events():
        dt = getattr(e, "device_type", None)
        if dt is not None and "CUDA" in str(dt):
            n += 1
            busy += e.time_range.end - e.time_range.start
    return n, busy


def host_time(fn, reps, pre=None):
    ts = []
    for _ in range(reps):
        state = pre() if pre else None
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn(state)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        ts.append(t1 - t0)
    return statistics.median(ts), min(ts)


def op_kind(name, a, dev):
    shape_kind, make = KINDS[name]
    k = a.chain
    shape = (N, C, HW, HW) if shape_kind == "cnn" else (N, T, E)
    rec = {"kind": name, "chain": k, "input_shape": list(shape)}
    for mode in ("infer", "train"):
        mods = nn.Sequential(*[make() for _ in range(k)]).to(dev)
        if shape_kind == "cnn":
            mods = mods.to(memory_format=torch.channels_last)
        if mode == "infer":
            mods = mods.eval().to(torch.bfloat16)
            x = torch.randn(shape, device=dev, dtype=torch.bfloat16)
            if shape_kind == "cnn":
                x = x.contiguous(memory_format=torch.channels_last)

            def fwd(_s):
                with torch.inference_mode():
                    mods(x)
            for _ in range(3):
                fwd(None)
            med, lo = host_time(fwd, a.reps)
            kern, busy = count_kernels(lambda: fwd(None))
            rec["infer"] = {"host_us_per_call": 1e6 * med / k, "host_min_us_per_call": 1e6 * lo / k,
                            "kernels_per_call": kern / k, "gpu_busy_us_per_call": busy / k}
        else:
            mods = mods.train()
            for mod in mods.modules():  # residual adds of two 16-bit maps, as in the networks under autocast
                if isinstance(mod, Add):
                    mod.skip = mod.skip.to(torch.bfloat16)
            x0 = torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)

            out = {}

            def inp():
                out.pop("y", None)  # free the last graph outside the timed region
                x = x0.clone()  # not a leaf: in-place ops are legal on it
                if shape_kind == "cnn":
                    x = x.contiguous(memory_format=torch.channels_last)
                return x

            def fwd(x):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    out["y"] = mods(x)

            def pre_bwd():
                fwd(inp())
                torch.cuda.synchronize()
                return torch.ones_like(out["y"])

            def bwd(g):
                out["y"].backward(g)

            for _ in range(3):
                fwd(inp())
                out["y"].backward(torch.ones_like(out["y"]))
            med, lo = host_time(fwd, a.reps, inp)
            xk = inp()
            kern, busy = count_kernels(lambda: fwd(xk))
            rec["train_fwd"] = {"host_us_per_call": 1e6 * med / k, "host_min_us_per_call": 1e6 * lo / k,
                                "kernels_per_call": kern / k, "gpu_busy_us_per_call": busy / k}
            med, lo = host_time(bwd, a.reps, pre_bwd)
            g = pre_bwd()
            kern, busy = count_kernels(lambda: bwd(g))
            rec["train_bwd"] = {"host_us_per_call": 1e6 * med / k, "host_min_us_per_call": 1e6 * lo / k,
                                "kernels_per_call": kern / k, "gpu_busy_us_per_call": busy / k}
            mods.zero_grad(set_to_none=True)
        del mods
    print(f"op {name:20s} " + "  ".join(
        f"{m} {rec[m]['host_us_per_call']:6.1f} us {rec[m]['kernels_per_call']:4.1f} kern (gpu {rec[m]['gpu_busy_us_per_call']:5.1f})"
        for m in ("infer", "train_fwd", "train_bwd")), flush=True)
    return rec


MODELS = {"resnet50": 224, "efficientnet_b4": 380, "vit_b_16": 224}


def model_host(name, a, dev):
    res = MODELS[name]
    is_cnn = not name.startswith("vit")
    out = {"model": name, "resolution": res, "inference": [], "training": []}
    m = getattr(torchvision.models, name)(weights=None).to(dev)
    if is_cnn:
        m = m.to(memory_format=torch.channels_last)
    mi = m.eval().to(torch.bfloat16)
    for b in a.infer_batches:
        x = torch.randn(b, 3, res, res, device=dev, dtype=torch.bfloat16)
        if is_cnn:
            x = x.contiguous(memory_format=torch.channels_last)

        def fwd(_s):
            with torch.inference_mode():
                mi(x)
        for _ in range(3):
            fwd(None)
        med, lo = host_time(fwd, a.reps)
        kern, busy = count_kernels(lambda: fwd(None))
        out["inference"].append({"batch": b, "host_s": med, "host_min_s": lo, "kernels": kern, "gpu_busy_us": busy})
        print(f"model {name} infer b={b}: host {med*1e3:.2f} ms, {kern} kernels, gpu busy {busy/1e3:.2f} ms", flush=True)
    del mi, m
    torch.cuda.empty_cache()
    for b in a.train_batches:
        m = getattr(torchvision.models, name)(weights=None).to(dev)
        if is_cnn:
            m = m.to(memory_format=torch.channels_last)
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, foreach=True)
        else:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
        loss_fn = nn.CrossEntropyLoss()
        x = torch.randn(b, 3, res, res, device=dev)
        if is_cnn:
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (b,), device=dev)
        st = {}

        def zero(_s=None):
            opt.zero_grad(set_to_none=True)

        def fwd(_s=None):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                st["loss"] = loss_fn(m(x), y)

        def bwd(_s=None):
            st["loss"].backward()

        def step(_s=None):
            opt.step()
        for _ in range(4):
            zero(); fwd(); bwd(); step()
        torch.cuda.synchronize()
        rec = {"batch": b, "parameter_tensors": sum(1 for _ in m.parameters())}
        for ph, fn, pre in (("zero_grad", zero, lambda: (fwd(), bwd())), ("forward", fwd, lambda: (zero(), st.pop("loss", None))),
                            ("backward", bwd, lambda: (zero(), fwd())), ("optimizer", step, lambda: (zero(), fwd(), bwd()))):
            med, lo = host_time(fn, a.reps, pre)
            if pre:
                pre()
            kern, busy = count_kernels(fn)
            # the phase's GPU timeline (CUDA events), as vision_bench.py times it
            if pre:
                pre()
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record(); fn(); e1.record(); torch.cuda.synchronize()
            rec[ph] = {"host_s": med, "host_min_s": lo, "kernels": kern, "gpu_busy_us": busy,
                       "event_s": e0.elapsed_time(e1) / 1e3}
        out["training"].append(rec)
        print(f"model {name} train b={b}: " + "  ".join(
            f"{ph} host {rec[ph]['host_s']*1e3:.2f} ms ({rec[ph]['kernels']} kern, event {rec[ph]['event_s']*1e3:.2f})"
            for ph in ("zero_grad", "forward", "backward", "optimizer")), flush=True)
        del m, opt, x, y, st
        torch.cuda.empty_cache()
    return out


def optimizers(a, dev):
    rows = []
    for n in (16, 64, 256, 512):
        for kind in ("sgd_foreach", "adamw_fused"):
            ps = [nn.Parameter(torch.randn(4096, device=dev)) for _ in range(n)]
            for p in ps:
                p.grad = torch.randn_like(p)
            if kind == "sgd_foreach":
                opt = torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=5e-5, foreach=True)
            else:
                opt = torch.optim.AdamW(ps, lr=1e-4, weight_decay=0.05, fused=True)
            for _ in range(3):
                opt.step()
            med, lo = host_time(lambda _s: opt.step(), a.reps)
            kern, busy = count_kernels(opt.step)
            rows.append({"optimizer": kind, "tensors": n, "elements_each": 4096, "host_s": med, "host_min_s": lo,
                         "kernels": kern, "gpu_busy_us": busy})
            print(f"optimizer {kind} n={n}: host {med*1e6:.0f} us, {kern} kernels", flush=True)
            del opt, ps
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--chain", type=int, default=64)
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--infer-batches", type=int, nargs="+", default=[1, 2, 32])
    p.add_argument("--train-batches", type=int, nargs="+", default=[2, 32])
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    rec = {"kind": "host_ops", "torchvision": torchvision.__version__, "cpu_count": os.cpu_count()}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    try:
        with open("/proc/cpuinfo") as f:
            rec["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        rec["cpu_model"] = None
    rec["ops"] = []
    for k in a.kinds:
        try:
            rec["ops"].append(op_kind(k, a, dev))
        except Exception as e:  # noqa: BLE001 - keep the other kinds
            rec["ops"].append({"kind": k, "error": repr(e)[:300]})
            print(f"op {k} failed: {e!r}", flush=True)
    rec["models"] = []
    for mname in a.models:
        try:
            rec["models"].append(model_host(mname, a, dev))
        except Exception as e:  # noqa: BLE001
            rec["models"].append({"model": mname, "error": repr(e)[:300]})
            print(f"model {mname} failed: {e!r}", flush=True)
        torch.cuda.empty_cache()
    try:
        rec["optimizers"] = optimizers(a, dev)
    except Exception as e:  # noqa: BLE001
        rec["optimizers"] = {"error": repr(e)[:300]}
    print("wrote", common.write_json(rec, "vision_host_ops", a.out_dir), flush=True)


if __name__ == "__main__":
    main()
