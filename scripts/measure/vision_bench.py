#!/usr/bin/env python3
"""Vision models on one GPU or under DDP (issue #25 d2): inference latency and training step time, as ground truth for
gpuplan's vision workloads.

Models: torchvision resnet50 (224 px), efficientnet_b4 (380 px, torchvision's eval resolution), vit_b_16 (224 px),
random initialisation (weights=None: the time does not depend on the values; inputs are random normal, never zeros).
Synthetic data already on the GPU: no decode, no loader (the data pipeline is a separate term).

Inference (--inference): the model cast to bf16 (or fp16) and channels-last (CNNs), eval mode, torch.inference_mode,
cudnn.benchmark on; batch 1..256; "eager" (one Python launch per op) and "graph" (the whole forward captured once in
a CUDA graph and replayed). Median of --reps CUDA-event-timed forwards after warm-up.
Training (--train): fp32 weights with bf16 autocast (AMP), channels-last, SGD momentum 0.9 (CNNs) or AdamW (ViT),
cross-entropy on 1000 classes, zero_grad(set_to_none) + forward + backward + optimizer step; CUDA events split the
step into forward (incl. loss), backward and optimizer; median of --steps after --warmup-steps; peak allocated memory.
Under torchrun (WORLD_SIZE > 1) the training model is wrapped in DDP (default 25 MiB buckets) and --batch is per GPU.
A per-kernel profile (torch.profiler, one forward at batch 64) is kept for each model with --profile.
--profile-train: one training step per model (after warm-up) under torch.profiler, forward, backward and optimizer
each in its own profiler session, so each phase's kernels (name, count, device time) are kept apart, with the phase's
CUDA-event time beside its summed kernel time (the difference: GPU idle, e.g. waiting for the CPU to launch).
Batch per model from --profile-train-batch (default: resnet50 256, vit_b_16 256, efficientnet_b4 64); under torchrun
the model is wrapped in DDP as in --train and rank 0's profile is kept.
Writes vision_<mode>.json records under --out-dir.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402

MODELS = {"resnet50": 224, "efficientnet_b4": 380, "vit_b_16": 224}


def build(name):
    return getattr(torchvision.models, name)(weights=None)


def timed(fn, reps, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ts = [s.elapsed_time(e) / 1e3 for s, e in ev]
    return statistics.median(ts), min(ts), max(ts)


def inference(a, dev, results):
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float16
    for name in a.models:
        res = MODELS[name]
        cnn = not name.startswith("vit")
        model = build(name).to(dev).eval().to(dt)
        if cnn:
            model = model.to(memory_format=torch.channels_last)
        params = sum(p.numel() for p in model.parameters())
        for b in a.batches:
            x = torch.randn(b, 3, res, res, device=dev, dtype=dt)
            if cnn:
                x = x.contiguous(memory_format=torch.channels_last)
            rec = {"model": name, "resolution": res, "batch": b, "dtype": a.dtype, "channels_last": cnn,
                   "parameters": params}
            try:
                with torch.inference_mode():
                    out = model(x)
                    torch.cuda.synchronize()
                    assert torch.isfinite(out.float()).all(), "non-finite output"
                    med, lo, hi = timed(lambda: model(x), a.reps, 5)
                rec["eager"] = {"latency_median_s": med, "latency_min_s": lo, "latency_max_s": hi,
                                "images_per_s": b / med}
                # CUDA graph of the whole forward (static input buffer)
                static_x = x.clone()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s), torch.inference_mode():
                    for _ in range(3):
                        model(static_x)
                torch.cuda.current_stream().wait_stream(s)
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g), torch.inference_mode():
                    static_out = model(static_x)
                g.replay()
                torch.cuda.synchronize()
                assert torch.isfinite(static_out.float()).all(), "non-finite graph output"
                med, lo, hi = timed(g.replay, a.reps, 5)
                rec["graph"] = {"latency_median_s": med, "latency_min_s": lo, "latency_max_s": hi,
                                "images_per_s": b / med}
                del g, static_out, static_x
                print(f"infer {name:16s} b={b:4d} eager {rec['eager']['latency_median_s']*1e3:8.3f} ms  "
                      f"graph {rec['graph']['latency_median_s']*1e3:8.3f} ms  "
                      f"{rec['graph']['images_per_s']:9.0f} img/s", flush=True)
            except torch.cuda.OutOfMemoryError as e:
                rec["status"] = "oom"
                rec["error"] = str(e).splitlines()[0][:200]
                print(f"infer {name} b={b} OOM", flush=True)
            results.append(rec)
            del x
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


def train(a, dev, results, rank, world):
    for name in a.models:
        res = MODELS[name]
        cnn = not name.startswith("vit")
        for b in a.train_batches:
            torch.manual_seed(1234 + rank)
            model = build(name).to(dev)
            if cnn:
                model = model.to(memory_format=torch.channels_last)
            params = sum(p.numel() for p in model.parameters())
            if world > 1:
                model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
            if cnn:
                opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, foreach=True)
                opt_name = "SGD momentum 0.9, foreach"
            else:
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
                opt_name = "AdamW fused"
            loss_fn = nn.CrossEntropyLoss()
            xs = [torch.randn(b, 3, res, res, device=dev) for _ in range(2)]
            if cnn:
                xs = [x.contiguous(memory_format=torch.channels_last) for x in xs]
            ys = [torch.randint(0, 1000, (b,), device=dev) for _ in range(2)]
            rec = {"model": name, "resolution": res, "batch_per_gpu": b, "gpus": world, "dtype": "amp_bf16",
                   "channels_last": cnn, "optimizer": opt_name, "parameters": params,
                   "ddp": world > 1}
            torch.cuda.reset_peak_memory_stats()
            try:
                times = {"step": [], "forward": [], "backward": [], "optimizer": []}
                for i in range(a.warmup_steps + a.steps):
                    e0, e1, e2, e3 = (torch.cuda.Event(enable_timing=True) for _ in range(4))
                    x, y = xs[i % 2], ys[i % 2]
                    e0.record()
                    opt.zero_grad(set_to_none=True)
                    with torch.autocast("cuda", dtype=torch.bfloat16):
                        loss = loss_fn(model(x), y)
                    e1.record()
                    loss.backward()
                    e2.record()
                    opt.step()
                    e3.record()
                    torch.cuda.synchronize()
                    if not torch.isfinite(loss):
                        raise RuntimeError("non-finite loss")
                    if i >= a.warmup_steps:
                        times["forward"].append(e0.elapsed_time(e1) / 1e3)
                        times["backward"].append(e1.elapsed_time(e2) / 1e3)
                        times["optimizer"].append(e2.elapsed_time(e3) / 1e3)
                        times["step"].append(e0.elapsed_time(e3) / 1e3)
                for k, v in times.items():
                    rec[f"{k}_median_s"] = statistics.median(v)
                rec["step_min_s"] = min(times["step"])
                rec["step_max_s"] = max(times["step"])
                rec["images_per_s_per_gpu"] = b / rec["step_median_s"]
                rec["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
                rec["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
                if rank == 0:
                    print(f"train {name:16s} b={b:4d} x{world} step {rec['step_median_s']*1e3:8.2f} ms "
                          f"(fwd {rec['forward_median_s']*1e3:.2f} bwd {rec['backward_median_s']*1e3:.2f} "
                          f"opt {rec['optimizer_median_s']*1e3:.2f})  {rec['images_per_s_per_gpu']:7.0f} img/s/GPU  "
                          f"peak {rec['peak_allocated_bytes']/2**30:.1f} GiB", flush=True)
            except torch.cuda.OutOfMemoryError as e:
                rec["status"] = "oom"
                rec["error"] = str(e).splitlines()[0][:200]
                if rank == 0:
                    print(f"train {name} b={b} OOM", flush=True)
            results.append(rec)
            del model, opt, xs, ys
            torch.cuda.empty_cache()


def profile(a, dev, out):
    dt = torch.bfloat16
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprof
    for name in a.models:
        res = MODELS[name]
        cnn = not name.startswith("vit")
        model = build(name).to(dev).eval().to(dt)
        x = torch.randn(64, 3, res, res, device=dev, dtype=dt)
        if cnn:
            model = model.to(memory_format=torch.channels_last)
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.inference_mode():
            for _ in range(5):
                model(x)
            torch.cuda.synchronize()
            with tprof(activities=[ProfilerActivity.CUDA]) as prof:
                model(x)
                torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            t = getattr(e, "self_device_time_total", None)
            if t is None:
                t = getattr(e, "self_cuda_time_total", 0)
            if t and t > 0:
                rows.append({"kernel": e.key[:200], "count": e.count, "self_device_time_us": t})
        rows.sort(key=lambda r: -r["self_device_time_us"])
        out.append({"model": name, "batch": 64, "dtype": "bf16", "kernels": rows[:80],
                    "total_device_time_us": sum(r["self_device_time_us"] for r in rows)})
        print(f"profile {name}: {len(rows)} kernel names, total {out[-1]['total_device_time_us']/1e3:.2f} ms", flush=True)
        del model, x
        torch.cuda.empty_cache()


PROFILE_TRAIN_BATCH = {"resnet50": 256, "vit_b_16": 256, "efficientnet_b4": 64}


def _kernel_rows(prof):
    rows = []
    for e in prof.key_averages():
        t = getattr(e, "self_device_time_total", None)
        if t is None:
            t = getattr(e, "self_cuda_time_total", 0)
        if t and t > 0:
            rows.append({"kernel": e.key[:200], "count": e.count, "self_device_time_us": t})
    rows.sort(key=lambda r: -r["self_device_time_us"])
    return rows


def profile_train(a, dev, out, rank, world):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as tprof
    for name in a.models:
        res = MODELS[name]
        cnn = not name.startswith("vit")
        b = a.profile_train_batch or PROFILE_TRAIN_BATCH[name]
        torch.manual_seed(1234 + rank)
        model = build(name).to(dev)
        if cnn:
            model = model.to(memory_format=torch.channels_last)
        if world > 1:
            model = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index])
        if cnn:
            opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, foreach=True)
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.05, fused=True)
        loss_fn = nn.CrossEntropyLoss()
        x = torch.randn(b, 3, res, res, device=dev)
        if cnn:
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (b,), device=dev)
        state = {}

        def fwd():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                state["loss"] = loss_fn(model(x), y)

        phases = [("forward", fwd), ("backward", lambda: state["loss"].backward()), ("optimizer", opt.step)]
        for _ in range(5):
            for _, fn in phases:
                fn()
        torch.cuda.synchronize()
        rec = {"model": name, "resolution": res, "batch_per_gpu": b, "gpus": world, "dtype": "amp_bf16",
               "channels_last": cnn, "ddp": world > 1, "phases": {}}
        for ph, fn in phases:
            if world > 1:
                torch.distributed.barrier()
            torch.cuda.synchronize()
            with tprof(activities=[ProfilerActivity.CUDA]) as prof:
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn()
                e1.record()
                torch.cuda.synchronize()
            rows = _kernel_rows(prof)
            rec["phases"][ph] = {"event_time_s": e0.elapsed_time(e1) / 1e3,
                                 "kernel_time_s": sum(r["self_device_time_us"] for r in rows) / 1e6,
                                 "kernels": sum(r["count"] for r in rows), "rows": rows[:150]}
        out.append(rec)
        if rank == 0:
            print("profile-train " + name + " b=" + str(b) + " x" + str(world) + " " + "  ".join(
                ph + " " + format(v["event_time_s"] * 1e3, ".2f") + " ms (kernels " +
                format(v["kernel_time_s"] * 1e3, ".2f") + " ms, " + str(v["kernels"]) + ")"
                for ph, v in rec["phases"].items()), flush=True)
        del model, opt, x, y, state
        torch.cuda.empty_cache()


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--inference", action="store_true")
    p.add_argument("--train", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--profile-train", action="store_true")
    p.add_argument("--profile-train-batch", type=int, default=None)
    p.add_argument("--dtype", choices=["bf16", "fp16"], default="bf16")
    p.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64, 128, 256])
    p.add_argument("--train-batches", type=int, nargs="+", default=[32, 64, 128, 256])
    p.add_argument("--reps", type=int, default=30)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup-steps", type=int, default=5)
    p.add_argument("--name", default=None)
    p.add_argument("--out-dir", default=None)
    a = p.parse_args()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if world > 1:
        torch.distributed.init_process_group("nccl", device_id=dev)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    rec = {"kind": "vision_bench", "torchvision": torchvision.__version__}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    rec["nvidia_smi_before"] = common.nvidia_smi_static()
    with common.SmiSampler(local) as sampler:
        if a.inference:
            rec["inference"] = []
            inference(a, dev, rec["inference"])
        if a.profile:
            rec["profiles"] = []
            profile(a, dev, rec["profiles"])
        if a.profile_train:
            rec["train_profiles"] = []
            profile_train(a, dev, rec["train_profiles"], rank, world)
        if a.train:
            rec["training"] = []
            train(a, dev, rec["training"], rank, world)
    rec["nvidia_smi_during"] = sampler.summary()
    rec["nvidia_smi_after"] = common.nvidia_smi_static()
    name = a.name or ("vision_" + "_".join(k for k in ("inference", "train", "profile", "profile_train") if getattr(a, k)))
    rec["name"] = name
    if rank == 0:
        print("wrote", common.write_json(rec, name, a.out_dir), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
