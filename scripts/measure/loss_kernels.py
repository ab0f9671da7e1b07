"""The LM loss's cross-entropy kernels on one GPU, forward and backward, timed with CUDA events (issue #24: the
loss-kernel mechanism of model/src/ops/norm_loss.cpp, loss_bytes_per_logit).

Three implementations over the same bf16 logits [T, V] (V = one TP rank's vocabulary shard):
  unfused  the pass structure of Megatron-Core's VocabParallelCrossEntropy without fusion (Megatron-LM's default):
           upcast to fp32, row max, in-place subtract, in-place exp, row sum, in-place divide (forward); the target
           update, in-place scale by the incoming gradient and autograd's cast back to bf16 (backward). Written here
           from that description (one torch op per pass), TP = 1 so the all-reduces are absent.
  compiled cross_entropy of the fp32 upcast under torch.compile (Inductor's fused forward and backward kernels: what a
           fusing compiler makes of the loss).
  torch    torch.nn.functional.cross_entropy on the fp32 upcast (PyTorch's own kernels; the eager baseline).
The model's bytes per logit: unfused 38 forward + 14 backward, a one-pass kernel 6 + 6. The JSON records each time and
the bytes each implies at the measured copy bandwidth, so the pass count can be read back from the measurement.
Usage: python3 scripts/measure/loss_kernels.py --out-dir $OUT
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def unfused_forward_backward(torch, logits, target):
    """One forward + backward of the unfused pass structure; returns the gradient w.r.t. the bf16 logits."""

    class Loss(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, t):
            xf = x.float()                          # a_b + 4
            mx = torch.max(xf, dim=-1)[0]           # 4
            xf -= mx.unsqueeze(-1)                  # 4 + 4
            rows = torch.arange(xf.shape[0], device=xf.device)
            picked = xf[rows, t].clone()            # one per row
            torch.exp(xf, out=xf)                   # 4 + 4
            s = xf.sum(dim=-1)                      # 4
            loss = torch.log(s) - picked
            xf.div_(s.unsqueeze(-1))                # 4 + 4
            ctx.save_for_backward(xf, t)
            return loss

        @staticmethod
        def backward(ctx, g):
            sm, t = ctx.saved_tensors
            rows = torch.arange(sm.shape[0], device=sm.device)
            sm[rows, t] -= 1.0                      # one per row
            sm.mul_(g.unsqueeze(-1))                # 4 + 4
            return sm, None                         # autograd casts to bf16: 4 + a_b

    x = logits.detach().requires_grad_(True)
    Loss.apply(x, target).sum().backward()
    return x.grad


def torch_forward_backward(torch, logits, target):
    x = logits.detach().requires_grad_(True)
    torch.nn.functional.cross_entropy(x.float(), target, reduction="sum").backward()
    return x.grad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", default=os.environ.get("OUT", "/tmp/out"))
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--vocabs", default="32000,128000,128256")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import torch
    dev = torch.device("cuda")
    torch.manual_seed(0)

    timed = common.event_times

    # Copy bandwidth: read + write of a 4 GiB buffer.
    copy_bw, copy = common.copy_bandwidth(dev)

    def ce_sum(x, t):
        return torch.nn.functional.cross_entropy(x.float(), t, reduction="sum")

    ce_compiled = torch.compile(ce_sum)

    def compiled(lg, tg):
        x = lg.detach().requires_grad_(True)
        ce_compiled(x, tg).backward()
        return x.grad
    items = []
    for V in [int(v) for v in args.vocabs.split(",")]:
        T = args.tokens
        logits = (torch.randn(T, V, device=dev) * 2).to(torch.bfloat16)
        target = torch.randint(0, V, (T,), device=dev)
        # Correctness: both gradients against a float64 reference on a slice.
        ref_x = logits[:64].double().requires_grad_(True)
        torch.nn.functional.cross_entropy(ref_x, target[:64], reduction="sum").backward()
        g_unf = unfused_forward_backward(torch, logits, target)[:64].double()
        g_t = torch_forward_backward(torch, logits, target)[:64].double()
        err_unf = float((g_unf - ref_x.grad).norm() / ref_x.grad.norm())
        err_t = float((g_t - ref_x.grad).norm() / ref_x.grad.norm())
        t_unf = timed(lambda: unfused_forward_backward(torch, logits, target), args.reps)
        t_torch = timed(lambda: torch_forward_backward(torch, logits, target), args.reps)
        t_comp = timed(lambda: compiled(logits, target), args.reps)
        n = T * V
        for name, t in (("unfused", t_unf), ("torch", t_torch), ("compiled_torch", t_comp)):
            items.append({"impl": name, "tokens": T, "vocab": V, "logits": n, "fwd_bwd_s": t,
                          "bytes_per_logit_at_copy_bw": t["median"] * copy_bw / n})
        items[-3]["rel_err_grad"] = err_unf
        items[-2]["rel_err_grad"] = err_t
        print(f"V={V:6d}  unfused {t_unf['median']*1e3:7.2f} ms ({t_unf['median']*copy_bw/n:5.1f} B/logit)  "
              f"torch {t_torch['median']*1e3:7.2f} ms ({t_torch['median']*copy_bw/n:5.1f})  "
              f"compiled {t_comp['median']*1e3:7.2f} ms ({t_comp['median']*copy_bw/n:5.1f})  "
              f"err {err_unf:.1e} {err_t:.1e}", flush=True)
        del logits, target
        torch.cuda.empty_cache()
    rec = common.run_metadata()
    rec.update({"name": "loss_kernels", "copy_bandwidth_Bps": copy_bw, "copy_s": copy, "items": items,
                "model_bytes_per_logit": {"unfused": [38, 14], "one_pass": [6, 6], "torch_eager": [14, 22]}})
    common.write_json(rec, "loss_kernels", args.out_dir)
    print(f"copy bandwidth {copy_bw/1e12:.3f} TB/s")


if __name__ == "__main__":
    main()
