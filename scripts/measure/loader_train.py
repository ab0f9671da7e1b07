#!/usr/bin/env python3
"""ResNet-50 training fed by a real JPEG data loader (issue #25 d3): does the step time follow
max(GPU step, images / (workers x per-worker loader rate))?

JPEGs: the synthetic photograph-like 500x375 files of dataload_bench.make_jpegs (quality 90), written to a directory
(page cache: no storage limit) and read back by a map-style Dataset: open + PIL decode + RandomResizedCrop(224) +
RandomHorizontalFlip + ToTensor + Normalize (torchvision's ImageNet training transform), one thread per worker.
torch.utils.data.DataLoader(batch_size=B, num_workers=W, pin_memory=True, prefetch_factor=4,
sampling with replacement: one endless epoch, drop_last=True); each batch copied to the GPU non_blocking, channels-last, then the same step as
vision_bench.py --train (bf16 autocast, SGD momentum foreach). For each W: warm-up batches, then the wall time of
--steps steps (torch.cuda.synchronize at the end only: the loader and the GPU overlap as in real training), and
also the loader alone (iterate the DataLoader, no GPU work) and the GPU step alone (a resident batch).
Writes loader_train.json under --out-dir.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from dataload_bench import make_jpegs  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torchvision  # noqa: E402


class JpegDir(torch.utils.data.Dataset):
    def __init__(self, files):
        self.files = files
        self.aug = None

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        import torchvision.transforms as T
        from PIL import Image
        if self.aug is None:
            torch.set_num_threads(1)
            self.aug = T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToTensor(),
                                  T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])])
        with open(self.files[i], "rb") as f:
            im = Image.open(f).convert("RGB")
        return self.aug(im), i % 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4, 8, 15])
    ap.add_argument("--images", type=int, default=2048, help="distinct JPEG files (the epoch is repeated)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--warmup-steps", type=int, default=4)
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    dev = torch.device("cuda", 0)
    torch.backends.cudnn.benchmark = True
    tmp = tempfile.mkdtemp(prefix="jpegs_")
    files = []
    for k, d in enumerate(make_jpegs(a.images)):
        p = os.path.join(tmp, f"{k:06d}.jpg")
        with open(p, "wb") as f:
            f.write(d)
        files.append(p)
    sizes = [os.path.getsize(p) for p in files]
    rec = {"kind": "loader_train", "model": "resnet50", "batch": a.batch, "images": len(files),
           "mean_jpeg_bytes": statistics.mean(sizes), "cpus": os.cpu_count(), "steps": a.steps}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    model = torchvision.models.resnet50(weights=None).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-5, foreach=True)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    # GPU alone (a resident batch)
    x0 = torch.randn(a.batch, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y0 = torch.randint(0, 1000, (a.batch,), device=dev)
    for _ in range(a.warmup_steps):
        step(x0, y0)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step(x0, y0)
    torch.cuda.synchronize()
    rec["gpu_only_step_s"] = (time.perf_counter() - t0) / a.steps
    print(f"gpu only: {rec['gpu_only_step_s']*1e3:.2f} ms/step, {a.batch/rec['gpu_only_step_s']:.0f} img/s", flush=True)
    rec["runs"] = []
    ds = JpegDir(files)
    for w in a.workers:
        if w >= (os.cpu_count() or 1):
            continue
        # one endless epoch (sampling with replacement): no refill bubble at epoch ends
        sampler = torch.utils.data.RandomSampler(ds, replacement=True, num_samples=10**7)
        dl = torch.utils.data.DataLoader(ds, batch_size=a.batch, sampler=sampler, drop_last=True, num_workers=w,
                                         pin_memory=True, prefetch_factor=4)
        n_need = a.warmup_steps + a.steps
        # loader alone
        it = iter(dl)
        for _ in range(a.warmup_steps):
            next(it)
        t0 = time.perf_counter()
        for _ in range(a.steps):
            next(it)
        loader_s = (time.perf_counter() - t0) / a.steps
        # loader feeding the training step
        for k in range(n_need):
            if k == a.warmup_steps:
                torch.cuda.synchronize()
                t0 = time.perf_counter()
            x, y = next(it)
            x = x.to(dev, non_blocking=True).contiguous(memory_format=torch.channels_last)
            y = y.to(dev, non_blocking=True)
            step(x, y)
        torch.cuda.synchronize()
        train_s = (time.perf_counter() - t0) / a.steps
        r = {"workers": w, "loader_only_batch_s": loader_s, "loader_images_per_s": a.batch / loader_s,
             "per_worker_images_per_s": a.batch / loader_s / w, "train_step_s": train_s,
             "train_images_per_s": a.batch / train_s, "gpu_busy_fraction": rec["gpu_only_step_s"] / train_s}
        rec["runs"].append(r)
        print(f"workers {w:2d}: loader {r['loader_images_per_s']:7.0f} img/s ({r['per_worker_images_per_s']:.0f}/worker)"
              f"  train {train_s*1e3:7.2f} ms/step {r['train_images_per_s']:7.0f} img/s"
              f"  GPU busy {100*r['gpu_busy_fraction']:.0f}%", flush=True)
        del dl, it
    with open(os.path.join(a.out_dir, "loader_train.json"), "w") as f:
        json.dump(rec, f, indent=1)


if __name__ == "__main__":
    main()
