#!/usr/bin/env python3
"""Allocated bytes through one training step, per layer and phase (issue #27 deliverable 1: time-resolved memory).

Builds train_step.py's Llama-like model (same flags), runs --warmup steps so that the optimizer states exist, then
over one more step records torch.cuda.memory_allocated() at every event below (the caching allocator's counter is
kept on the host when a kernel is enqueued, so no synchronisation is needed and the order is the program order):
  step_start; embed_out; layer_fwd_in/out i (forward pre/post hooks of each decoder layer; under --ckpt full the
  forward hooks fire again while the backward recomputes a layer: those are marked recompute=true); head_out (after
  the final norm + LM head: logits alive); loss; layer_bwd_in/out i (full backward pre/post hooks); backward_done;
  optimizer_done; zero_grad_done.
Beside each reading, `peak_since_prev` is torch.cuda.max_memory_allocated() since the previous event (reset at
every event), so transient buffers between two hooks (attention workspaces, the cross-entropy's fp32 logits) are
seen too.
Output: <out-dir>/memseries_<name>.json with the config, the parameter count, the static bytes (params + AdamW
states) and the event list.
Example: python3 scripts/measure/mem_series.py --name l16_b4 --micro-batch 4 --ckpt none
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import train_step as ts  # noqa: E402

import torch  # noqa: E402


def main():
    sys.argv = [sys.argv[0]] + [x for x in sys.argv[1:]]
    a = ts.parse()
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(1234)
    ts.configure_sdpa(a.sdpa_backend)
    ts.probe_gqa(a, device)
    with torch.device(device):
        model = ts.Llama(a)
        ts.init_weights(model)
    params = ts.count_params(model, a)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=(a.optim_impl == "fused"), foreach=(a.optim_impl == "foreach") or None)
    gen = torch.Generator(device=device)
    gen.manual_seed(1000)
    t = torch.randint(0, a.vocab, (a.micro_batch, a.seq + 1), device=device, generator=gen)
    inp, tgt = t[:, :-1].contiguous(), t[:, 1:].contiguous()

    events = []
    state = {"recording": False, "in_backward": False}

    def mark(name, layer=None, **extra):
        if not state["recording"]:
            return
        ev = {"event": name, "allocated": torch.cuda.memory_allocated(device),
              "peak_since_prev": torch.cuda.max_memory_allocated(device)}
        if layer is not None:
            ev["layer"] = layer
        ev.update(extra)
        events.append(ev)
        torch.cuda.reset_peak_memory_stats(device)

    for i, layer in enumerate(model.layers):
        layer.register_forward_pre_hook(lambda m, args, i=i: mark("layer_fwd_in", i, recompute=state["in_backward"]))
        layer.register_forward_hook(lambda m, args, out, i=i: mark("layer_fwd_out", i, recompute=state["in_backward"]))
        layer.register_full_backward_pre_hook(lambda m, go, i=i: mark("layer_bwd_in", i))
        layer.register_full_backward_hook(lambda m, gi, go, i=i: mark("layer_bwd_out", i))
    model.embed.register_forward_hook(lambda m, args, out: mark("embed_out"))
    model.lm_head.register_forward_hook(lambda m, args, out: mark("head_out"))

    def step():
        mark("step_start")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(inp, tgt)
        mark("loss")
        state["in_backward"] = True
        loss.backward()
        state["in_backward"] = False
        mark("backward_done")
        opt.step()
        mark("optimizer_done")
        opt.zero_grad(set_to_none=True)
        mark("zero_grad_done")
        return loss.detach()

    model.train()
    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    static = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    state["recording"] = True
    loss = step()
    torch.cuda.synchronize()
    state["recording"] = False
    peak = max(max(e["allocated"], e["peak_since_prev"]) for e in events)
    rec = {"name": a.name, "kind": "memory_series",
           "config": {k: getattr(a, k) for k in ("hidden", "layers", "heads", "kv_heads", "intermediate", "vocab",
                                                 "seq", "micro_batch", "ckpt", "sdpa_backend", "optim_impl")},
           "precision": "bf16 autocast; fp32 master params, grads and AdamW states; bf16 residual stream; fp32 loss",
           "static_bytes_before_step": static, "peak_allocated_bytes": peak, "loss": float(loss),
           "events": events}
    rec.update(params)
    rec.update(common.run_metadata())
    rec["software"] = common.software_versions()
    rec["device"] = common.device_properties()
    out_dir = a.out_dir or os.environ.get("OUT", ".")
    path = os.path.join(out_dir, f"memseries_{a.name}.json")
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    fwd = [e for e in events if e["event"] == "layer_fwd_out" and not e.get("recompute")]
    step_start = events[0]["allocated"]
    per_layer = (fwd[-1]["allocated"] - fwd[0]["allocated"]) / max(1, len(fwd) - 1) if len(fwd) > 1 else 0
    print(f"[mem_series {a.name}] static {static/2**30:.3f} GiB, step start {step_start/2**30:.3f} GiB, "
          f"peak {peak/2**30:.3f} GiB, per-layer forward growth {per_layer/2**20:.1f} MiB, {len(events)} events "
          f"-> {path}", flush=True)


if __name__ == "__main__":
    main()
