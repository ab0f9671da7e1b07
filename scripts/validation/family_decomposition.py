#!/usr/bin/env python3
"""Decompose every published training case of one accuracy family into step shares and regress the signed error.

For each case of data/validation/training_cases.json that `gpuplan validate` evaluates, the case's own scenario is run
through `gpuplan train --no-calibration --format json` (the built-in defaults validate uses) and its step is split
into the breakdown's shares (GEMM, attention, elementwise, embedding + loss, recompute, bubble, optimizer, offload)
and the exposed communication per dimension (TP, CP, EP, DP, PP). The family is the regime `train` reports (GPU
generation x dense/MoE, as validate groups them). The signed error (positive = the model is optimistic) is then
regressed on each share and on the recipe's knobs, one at a time: slope and Pearson r. With --needed it also prints,
per case, the factor one term alone would need to close the error, and that factor's spread over the cases.

Usage (from the repository root):
  python3 scripts/validation/family_decomposition.py --gpuplan build/rel/cli/gpuplan --family "Blackwell dense" \
      [--exclude REGEX] [--rows] [--needed]
"""
import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

SHARES = ["gemm", "attention", "elementwise", "embedding_loss", "recompute", "bubble", "optimizer", "offload"]
COMMS = ["tp", "cp", "ep", "dp", "pp"]
KNOBS = ["tp", "cp", "pp", "vp", "micro_batches", "log2_gpus", "log2_h", "fp8", "mxfp8", "fp4", "grace"]


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    try:  # train exits non-zero on a plan that does not fit but still prints its JSON
        return json.loads(out.stdout)
    except json.JSONDecodeError:
        sys.exit(f"{' '.join(cmd)}: exit {out.returncode}\n{out.stderr}")


def hidden_size(cache, model_id):
    """h from the model library file (data/models/<id>.json, Hugging Face config keys); 1 when absent."""
    if model_id not in cache:
        path = os.path.join("data", "models", model_id + ".json")
        h = 1
        if os.path.exists(path):
            cfg = json.load(open(path)).get("config", {})
            h = cfg.get("hidden_size") or cfg.get("d_model") or cfg.get("n_embd") or 1
        cache[model_id] = h
    return cache[model_id]


def fit(xs, ys):
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    if sxx == 0 or syy == 0:
        return None
    return sxy / sxx, sxy / math.sqrt(sxx * syy)


NEEDED = ["ep_exposed", "gemm", "attention", "elementwise", "embedding_loss"]


def needed_factors(rows, fitted):
    """The factor on one term that alone would make the model's step the measured one. With throughput metrics the
    signed error e = predicted / measured - 1 is also measured step / model step - 1, so the missing time is e of the
    model's step and the term's factor is 1 + e / share; "uniform" scales the whole step (1 + e)."""
    print("| case | signed | uniform | " + " | ".join(NEEDED) + " |")
    print("| --- | ---: | ---: |" + " ---: |" * len(NEEDED))
    for cid, err, f in sorted(rows, key=lambda r: r[1]):
        cells = [f"{1 + err / f[k]:.2f}" if f[k] >= 0.02 else "—" for k in NEEDED]
        print(f"| {cid} | {100 * err:+.1f}% | {1 + err:.2f} | " + " | ".join(cells) + " |")
    print()
    print("| term | cases (share >= 0.02) | median factor | min | max | max/min |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for k in ["uniform"] + NEEDED:
        ks = sorted(1 + r[1] if k == "uniform" else 1 + r[1] / r[2][k]
                    for r in fitted if k == "uniform" or r[2][k] >= 0.02)
        if not ks:
            continue
        n = len(ks)
        med = ks[n // 2] if n % 2 else (ks[n // 2 - 1] + ks[n // 2]) / 2
        print(f"| {k} | {n} | {med:.2f} | {ks[0]:.2f} | {ks[-1]:.2f} | {ks[-1] / ks[0]:.2f} |")
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpuplan", default="build/rel/cli/gpuplan")
    ap.add_argument("--family", required=True, help='e.g. "Blackwell dense", "Ampere dense", "Blackwell moe"')
    ap.add_argument("--exclude", default=None, help="regex of case ids left out of the regression (rows still shown)")
    ap.add_argument("--rows", action="store_true", help="print the per-case shares")
    ap.add_argument("--needed", action="store_true",
                    help="per case, the factor one term alone would need to close the case's error: k = 1 + signed / "
                         "share (signed = the case's optimism as a share of the model's step), and its spread over "
                         "the regressed cases; a missing mechanism that scales one term gives a tight spread")
    a = ap.parse_args()

    val = run([a.gpuplan, "validate", "--format", "json"])["training_cases.json"]["cases"]
    cases = {c["id"]: c for c in json.load(open("data/validation/training_cases.json"))["cases"]}
    models = {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in val:
            if v.get("error") is None or v["id"] not in cases or "scenario" not in cases[v["id"]]:
                continue
            sc = cases[v["id"]]["scenario"]
            path = os.path.join(tmp, "s.json")
            with open(path, "w") as f:
                json.dump(sc, f)
            t = run([a.gpuplan, "train", "--scenario", path, "--no-calibration", "--format", "json"])
            band = t.get("band", {})
            # the case's own regime; where its band pooled up, the fallback note names it ("train X has fewer ...")
            own = re.match(r"(train .*?) has fewer", band.get("fallback") or "")
            regime = own.group(1) if own else band.get("regime", "")
            if not regime.startswith("train " + a.family):
                continue
            step = t["step_time_s"]
            f = {k: t["breakdown"][k + "_s"] / step for k in SHARES}
            for d in COMMS:
                f[d + "_exposed"] = t["comm"][d]["exposed_s"] / step
            lay = t["layout"]
            f.update(tp=lay["tp"], cp=lay["cp"], pp=lay["pp"], vp=lay["virtual_stages"],
                     micro_batches=lay["micro_batches"], log2_gpus=math.log2(t["gpus"]),
                     fp8=float(sc.get("precision") == "fp8"), mxfp8=float(sc.get("fp8_recipe") == "mxfp8"),
                     fp4=float(sc.get("precision") in ("fp4", "nvfp4")), grace=float(t["gpu"].startswith("gb")))
            f["log2_h"] = math.log2(hidden_size(models, sc["model"]))
            err = v["error"] if v["metric"] != "step_time_s" else -v["error"]
            rows.append((v["id"], err, f))

    if not rows:
        sys.exit(f"no evaluated case in family {a.family!r}")
    if a.rows:
        cols = SHARES[:5] + [d + "_exposed" for d in COMMS] + ["bubble"]
        print("| case | signed | " + " | ".join(cols) + " | TP | CP | PP | VP | mb |")
        print("| --- | ---: |" + " ---: |" * (len(cols) + 5))
        for cid, err, f in sorted(rows, key=lambda r: r[1]):
            print(f"| {cid} | {100 * err:+.1f}% | " + " | ".join(f"{f[c]:.2f}" for c in cols) +
                  f" | {f['tp']} | {f['cp']} | {f['pp']} | {f['vp']} | {f['micro_batches']} |")
        print()
    fitted = [r for r in rows if not (a.exclude and re.search(a.exclude, r[0]))]
    if a.needed:
        needed_factors(rows, fitted)
    ys = [r[1] for r in fitted]
    med = sorted(ys)[len(ys) // 2] if len(ys) % 2 else sum(sorted(ys)[len(ys) // 2 - 1:len(ys) // 2 + 1]) / 2
    print(f"{a.family}: {len(rows)} cases, {len(fitted)} regressed, median signed {100 * med:+.1f}%")
    print("| feature | mean | slope | r |")
    print("| --- | ---: | ---: | ---: |")
    for k in SHARES + [d + "_exposed" for d in COMMS] + KNOBS:
        xs = [r[2][k] for r in fitted]
        s = fit(xs, ys)
        if s:
            print(f"| {k} | {sum(xs) / len(xs):.3f} | {s[0]:+.3f} | {s[1]:+.2f} |")


if __name__ == "__main__":
    main()
