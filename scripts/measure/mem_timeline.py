#!/usr/bin/env python3
"""What is alive at the peak of a training step? Memory timeline of train_step.py's model (same flags, incl. --ddp /
--fsdp under torchrun), for checking gpuplan's memory model term by term.

What it does, for one config:
  1. builds the model, optimizer and (DDP/FSDP2) wrapping exactly as train_step.py does;
  2. runs --warmup steps (the optimizer states exist after the first), then records the CUDA caching allocator's
     history (torch.cuda.memory._record_memory_history, Python stacks) over one more step, with marker allocations
     at the phase boundaries (step start, after forward + loss, after backward, after the optimizer step);
  3. replays the recorded allocations and frees on top of what was live when recording started (the blocks of the
     snapshot taken at the start), and reports:
     - the allocated bytes at each phase boundary and the peak of each phase, and where the step peak lies;
     - the blocks alive at the peak, grouped (a) by the innermost frame in the model scripts and the nearest torch
       function above the allocation, (b) by coarse class: live before the step (parameters, optimizer states,
       leftovers), allocated in the forward, in the backward, in the optimizer step; and blocks whose size equals
       the logits' [tokens, vocab] in fp32 or bf16 are counted apart ("logits-sized").
  max_memory_allocated() of the recorded step is kept beside the replayed peak as a cross-check.

Output: <out-dir>/mem_<name>.json (rank 0; out-dir: --out-dir, else $OUT, else .).
Example: torchrun --standalone --nproc_per_node=2 scripts/measure/mem_timeline.py --fsdp --name llama1b_fsdp2 \\
             --hidden 2048 --layers 16 --heads 32 --kv-heads 8 --intermediate 8192 --vocab 128256 --seq 2048 \\
             --micro-batch 4
"""
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MARK_ELEMS = 7 * 512 + 1  # a block size no model tensor has (bytes rounded up by the allocator, still unique)
OWN_FILES = ("train_step.py", "mem_timeline.py")


def mark_step_start(dev):
    import torch
    return torch.empty(MARK_ELEMS, dtype=torch.uint8, device=dev)


def mark_after_forward(dev):
    import torch
    return torch.empty(MARK_ELEMS, dtype=torch.uint8, device=dev)


def mark_after_backward(dev):
    import torch
    return torch.empty(MARK_ELEMS, dtype=torch.uint8, device=dev)


def mark_after_optimizer(dev):
    import torch
    return torch.empty(MARK_ELEMS, dtype=torch.uint8, device=dev)


MARKERS = ("mark_step_start", "mark_after_forward", "mark_after_backward", "mark_after_optimizer")


def frame_key(frames):
    """(innermost frame in our scripts, nearest torch function above the allocation)."""
    own, tfun = None, None
    for f in frames:  # innermost first
        fn = os.path.basename(f.get("filename", ""))
        if tfun is None and "torch" in f.get("filename", "") and not f.get("name", "").startswith("_"):
            tfun = f"{fn}:{f.get('name')}"
        if fn in OWN_FILES:
            own = f"{fn}:{f.get('line')}:{f.get('name')}"
            break
    return own or "(no script frame: autograd engine / C++)", tfun or "-"


def analyse(snapshot, dev_index, logits_elems):
    trace = snapshot["device_traces"][dev_index]
    # Blocks alive when recording started (parameters, optimizer states, gradients left from the warm-up...): a
    # free of an address not allocated earlier in the trace, or a block still active at the end that the trace never
    # allocated.
    pre, known = {}, set()
    for e in trace:
        if e["action"] == "alloc":
            known.add(e["addr"])
        elif e["action"] == "free_completed":
            if e["addr"] in known:
                known.discard(e["addr"])
            else:
                pre[e["addr"]] = e["size"]
    for seg in snapshot["segments"]:
        if seg.get("device", dev_index) != dev_index:
            continue
        addr = seg["address"]
        for b in seg["blocks"]:  # blocks lie back to back from the segment's address
            if b["state"] == "active_allocated" and addr not in known:
                pre.setdefault(addr, b["size"])
            addr += b["size"]
    base = sum(pre.values())
    live = {addr: (size, "before the step", ("(allocated before recording)", "-")) for addr, size in pre.items()}
    cur = sum(v[0] for v in live.values())
    phase = "before step"
    phase_of_marker = {"mark_step_start": "forward + loss", "mark_after_forward": "backward",
                       "mark_after_backward": "optimizer", "mark_after_optimizer": "after"}
    boundaries, phase_peak = {}, collections.defaultdict(int)
    peak, peak_live, peak_phase = -1, None, None
    for e in trace:
        act = e["action"]
        if act == "alloc":
            names = [f.get("name") for f in e.get("frames", [])]
            mk = next((m for m in MARKERS if m in names), None)
            if mk is not None:
                boundaries[mk] = cur
                phase = phase_of_marker[mk]
                continue
            cls = {"forward + loss": "forward", "backward": "backward", "optimizer": "optimizer"}.get(phase, phase)
            live[e["addr"]] = (e["size"], cls, frame_key(e.get("frames", [])))
            cur += e["size"]
            if cur > phase_peak[phase]:
                phase_peak[phase] = cur
            if cur > peak:
                peak, peak_phase = cur, phase
                peak_live = dict(live)
        elif act == "free_completed":
            v = live.pop(e["addr"], None)
            if v is not None:
                cur -= v[0]
    by_frame, by_class, logits_sized = collections.Counter(), collections.Counter(), collections.Counter()
    for size, cls, key in (peak_live or {}).values():
        by_class[cls] += size
        by_frame[f"{cls} | {key[0]} | {key[1]}"] += size
        for dt, nb in (("fp32", 4), ("bf16", 2)):
            if abs(size - logits_elems * nb) <= 2 * 1024 * 1024:
                logits_sized[f"[tokens, vocab] {dt} ({cls})"] += size
    return {"baseline_bytes_replayed": base, "boundaries_bytes": boundaries, "phase_peak_bytes": dict(phase_peak),
            "peak_bytes_replayed": peak, "peak_phase": peak_phase,
            "peak_live_by_class_bytes": dict(by_class.most_common()),
            "peak_live_top_groups_bytes": dict(by_frame.most_common(30)),
            "peak_live_logits_sized_bytes": dict(logits_sized)}


def offline(argv):
    """--analyze SNAPSHOT.pkl.gz --record mem_X.json: (re)analyse a saved snapshot into its record (no torch)."""
    import gzip
    import json
    import pickle
    snap_path, rec_path = argv[argv.index("--analyze") + 1], argv[argv.index("--record") + 1]
    with gzip.open(snap_path, "rb") as fi:
        snap = pickle.load(fi)
    with open(rec_path) as fi:
        rec = json.load(fi)
    c = rec["config"]
    rec["analysis"] = analyse(snap, 0, c["micro_batch"] * c["seq"] * c["vocab"])
    rec.pop("analysis_error", None)
    with open(rec_path, "w") as fo:
        json.dump(rec, fo, indent=1)
        fo.write("\n")
    return rec


def main():
    if "--analyze" in sys.argv:
        rec = offline(sys.argv)
        print(json.dumps(rec["analysis"], indent=1))
        return 0
    import common
    import torch
    import train_step as ts
    a = ts.parse()
    distributed = a.ddp or a.fsdp
    rank, local_rank, world = 0, 0, 1
    if distributed:
        import torch.distributed as dist
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local_rank = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    dev = torch.device("cuda", local_rank)
    torch.cuda.set_device(dev)
    torch.manual_seed(1234)
    ts.configure_sdpa(a.sdpa_backend)
    ts.probe_gqa(a, dev)
    with torch.device(dev):
        model = ts.Llama(a)
        ts.init_weights(model)
    rec = {"name": "mem_" + a.name, "kind": "mem_timeline", "world_size": world,
           "parallel": "fsdp" if a.fsdp else "ddp" if a.ddp else "none",
           "config": {k: getattr(a, k) for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab",
                                                 "seq", "micro_batch", "ckpt", "sdpa_backend", "optim_impl")}}
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec.update(ts.count_params(model, a))
    model, opts = ts.wrap_parallel(model, a, local_rank)
    rec.update(opts)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=(a.optim_impl == "fused"), foreach=(a.optim_impl == "foreach") or None)
    gen = torch.Generator(device=dev)
    gen.manual_seed(1000 + rank)
    t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=dev, generator=gen)
    inp, tgt = t[:, :-1].contiguous(), t[:, 1:].contiguous()
    marks = []

    def step(mark):
        if mark:
            marks.append(mark_step_start(dev))
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(inp, tgt)
        if mark:
            marks.append(mark_after_forward(dev))
        loss.backward()
        if mark:
            marks.append(mark_after_backward(dev))
        opt.step()
        opt.zero_grad(set_to_none=True)
        if mark:
            marks.append(mark_after_optimizer(dev))
        return loss.detach()

    model.train()
    for _ in range(max(2, a.warmup)):
        step(False)
    torch.cuda.synchronize()
    rec["allocated_before_step"] = torch.cuda.memory_allocated(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    torch.cuda.memory._record_memory_history(max_entries=2_000_000, stacks="python")
    loss = step(True)
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    rec["max_memory_allocated_step"] = torch.cuda.max_memory_allocated(dev)
    rec["allocated_after_step"] = torch.cuda.memory_allocated(dev)
    rec["loss"] = float(loss)
    rec["marker_bytes_each"] = MARK_ELEMS
    tokens = a.micro_batch * a.seq
    rec["tokens_per_micro_batch"] = tokens
    out_dir = a.out_dir or os.environ.get("OUT") or "."
    if rank == 0:  # the raw snapshot too (plain dicts and lists: re-analysable offline without torch)
        import gzip
        import pickle
        with gzip.open(os.path.join(out_dir, f"mem_{a.name}.snapshot.pkl.gz"), "wb", compresslevel=6) as fo:
            pickle.dump({"device_traces": [snap["device_traces"][local_rank]],
                         "segments": [s for s in snap["segments"] if s.get("device", local_rank) == local_rank]}, fo)
    try:
        rec["analysis"] = analyse(snap, local_rank, tokens * a.vocab)
    except Exception:  # noqa: BLE001 - keep the raw numbers
        import traceback
        rec["analysis_error"] = traceback.format_exc()[-3000:]
        print(rec["analysis_error"], flush=True)
    if distributed:
        import torch.distributed as dist
        dist.barrier()
        dist.destroy_process_group()
    if rank == 0:
        path = common.write_json(rec, rec["name"], a.out_dir)
        an = rec.get("analysis")
        if an is None:
            return 1
        gib = 2 ** 30
        print(f"[mem_timeline {a.name}] max_memory_allocated {rec['max_memory_allocated_step']/gib:.2f} GiB, replayed "
              f"peak {an['peak_bytes_replayed']/gib:.2f} GiB in {an['peak_phase']}; before step "
              f"{rec['allocated_before_step']/gib:.2f} GiB", flush=True)
        for k, v in an["peak_live_by_class_bytes"].items():
            print(f"   {v/gib:8.3f} GiB  {k}")
        for k, v in list(an["peak_live_top_groups_bytes"].items())[:15]:
            print(f"   {v/gib:8.3f} GiB  {k}")
        print(f"   logits-sized: {an['peak_live_logits_sized_bytes']}")
        print(f"[mem_timeline {a.name}] wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
