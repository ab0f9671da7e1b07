#!/usr/bin/env python3
"""Image-loading throughput for the vision data pipeline (issue #25 d3): JPEG decode + ImageNet training
augmentation per CPU core, its scaling over worker processes, and batched GPU (nvJPEG) decode.

Inputs are synthetic JPEGs made here (no dataset on the lent machine): 500x375 px (ImageNet's typical size; its
average is about 400x350 and the mean file ~110 KB), smooth colour fields plus texture and edges so the entropy (and
so the decode work) is photograph-like, encoded by torchvision.io.encode_jpeg at quality 90. The file sizes are
recorded; a natural-image set would differ by the ratio of its mean file size.

Pipelines timed per image (one thread per process: torch.set_num_threads(1)):
  pil:   PIL.Image.open + convert RGB (libjpeg-turbo via Pillow) -> RandomResizedCrop(224) -> RandomHorizontalFlip
         -> ToTensor -> Normalize  (torchvision's classic ImageNet training loader)
  tvio:  torchvision.io.decode_jpeg (CPU) -> v2.RandomResizedCrop(224, antialias) -> flip -> float + normalize
  decode_only_pil / decode_only_tvio: decode alone
Scaling: the pil pipeline in 1, 2, 4, 8, N worker processes (multiprocessing, each its own share of images).
GPU: torchvision.io.decode_jpeg(list, device="cuda") batches of 64/256 -> images/s, plus GPU RandomResizedCrop.
Writes dataload.json.
"""
import argparse
import io
import json
import multiprocessing as mp
import os
import platform
import statistics
import time

import torch
import torchvision
from torchvision.io import decode_jpeg, encode_jpeg
from torchvision.transforms import v2

MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


def make_jpegs(n, w=500, h=375, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    yy = torch.linspace(0, 1, h).view(h, 1)
    xx = torch.linspace(0, 1, w).view(1, w)
    for i in range(n):
        a = torch.rand(3, 4, generator=g)
        img = torch.stack([a[c, 0] + a[c, 1] * xx + a[c, 2] * yy + 0.3 * torch.sin((xx * 7 + yy * 3) * (a[c, 3] * 20))
                           for c in range(3)])
        img = img + 0.08 * torch.randn(3, h, w, generator=g)  # texture
        k = int(torch.randint(20, 60, (1,), generator=g))
        img[:, (h // 3):(h // 3 + k), (w // 4):(w // 4 + 2 * k)] += 0.5  # an object with edges
        img = (img.clamp(0, 1.5) / 1.5 * 255).to(torch.uint8)
        out.append(encode_jpeg(img, quality=90).numpy().tobytes())
    return out


def pipe_pil(data, aug):
    from PIL import Image
    im = Image.open(io.BytesIO(data)).convert("RGB")
    return aug(im)


def worker_pil(args):
    jpegs, reps = args
    torch.set_num_threads(1)
    import torchvision.transforms as T
    aug = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                     T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    t0 = time.perf_counter()
    n = 0
    for _ in range(reps):
        for d in jpegs:
            pipe_pil(d, aug)
            n += 1
    return n, time.perf_counter() - t0


def per_image(fn, jpegs, reps=3):
    fn(jpegs[0])
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for d in jpegs:
            fn(d)
        times.append((time.perf_counter() - t0) / len(jpegs))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--images", type=int, default=256)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    jpegs = make_jpegs(args.images)
    sizes = [len(d) for d in jpegs]
    rec = {"host": {"cpu": platform.processor(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "torch": torch.__version__, "torchvision": torchvision.__version__},
           "images": {"count": len(jpegs), "width": 500, "height": 375, "quality": 90,
                      "mean_bytes": statistics.mean(sizes), "min_bytes": min(sizes), "max_bytes": max(sizes)}}
    try:
        with open("/proc/cpuinfo") as f:
            rec["host"]["cpu_model"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except Exception:  # noqa: BLE001
        pass
    import torchvision.transforms as T
    from PIL import Image
    import PIL
    rec["host"]["pillow"] = PIL.__version__
    aug = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                     T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
    aug2 = v2.Compose([v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()])
    as_t = [torch.frombuffer(bytearray(d), dtype=torch.uint8) for d in jpegs]
    single = {}
    single["decode_only_pil_s"] = per_image(lambda d: Image.open(io.BytesIO(d)).convert("RGB"), jpegs)
    single["pil_s"] = per_image(lambda d: pipe_pil(d, aug), jpegs)
    idx = {id(d): t for d, t in zip(jpegs, as_t)}
    single["decode_only_tvio_s"] = per_image(lambda d: decode_jpeg(idx[id(d)]), jpegs)
    single["tvio_s"] = per_image(
        lambda d: ((aug2(decode_jpeg(idx[id(d)])).float() / 255 - MEAN) / STD), jpegs)
    rec["one_core_seconds_per_image"] = single
    rec["one_core_images_per_s"] = {k.replace("_s", ""): 1.0 / v for k, v in single.items()}
    print(json.dumps(rec["one_core_images_per_s"]), flush=True)
    scaling = []
    ncpu = os.cpu_count() or 1
    for w in sorted({1, 2, 4, 8, ncpu}):
        if w > ncpu:
            continue
        share = [jpegs[i::w] for i in range(w)]
        ctx = mp.get_context("fork")
        with ctx.Pool(w) as pool:
            pool.map(worker_pil, [(s[:4], 1) for s in share])  # warm
            t0 = time.perf_counter()
            reps = max(2, 96 * w // len(jpegs))
            res = pool.map(worker_pil, [(s, reps) for s in share])
            wall = time.perf_counter() - t0
        n = sum(r[0] for r in res)
        scaling.append({"workers": w, "images": n, "wall_s": wall, "images_per_s": n / wall,
                        "per_worker_images_per_s": n / wall / w})
        print("workers", w, round(n / wall, 1), "img/s", flush=True)
    rec["pil_scaling"] = scaling
    if torch.cuda.is_available():
        gpu = {"device": torch.cuda.get_device_name(0)}
        for b in (64, 256):
            batch = [as_t[i % len(as_t)] for i in range(b)]
            for _ in range(3):
                out = decode_jpeg(batch, device="cuda")
            torch.cuda.synchronize()
            times = []
            for _ in range(10):
                t0 = time.perf_counter()
                out = decode_jpeg(batch, device="cuda")
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            med = statistics.median(times)
            gpu[f"decode_batch{b}_images_per_s"] = b / med
            crop = v2.RandomResizedCrop(224, antialias=True)
            t0 = time.perf_counter()
            for im in out:
                ((crop(im).float() / 255 - MEAN.cuda()) / STD.cuda())
            torch.cuda.synchronize()
            gpu[f"decode_plus_aug_batch{b}_images_per_s"] = b / (med + time.perf_counter() - t0)
        rec["gpu_nvjpeg"] = gpu
        print(json.dumps(gpu), flush=True)
    with open(os.path.join(args.out_dir, "dataload.json"), "w") as f:
        json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
