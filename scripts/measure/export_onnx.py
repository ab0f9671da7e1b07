#!/usr/bin/env python3
"""Export torchvision models to ONNX graphs without their weights (issue #25 d1: ONNX import test files).

For each model: torchvision constructor with weights=None, eval mode, batch-1 input at the model's resolution,
torch.onnx.export (TorchScript exporter, opset 17). Two variants per model:
  <id>.onnx         training=PRESERVE, no constant folding: BatchNormalization nodes kept (the graph as trained,
                    parameter count comparable with torchvision's num_params)
  <id>-eval.onnx    the exporter's default for eval: Conv+BN folded (the graph an inference engine sees)
Weights are stripped: every floating-point initializer with >= 64 elements keeps its name, dims and data type but
loses its data (raw_data cleared); small initializers (shape constants, scalars) are kept so shape inference still
works. The files are graph-only test fixtures: do not try to run them.
A summary (params from initializer dims, node counts by op type, whether onnx.shape_inference succeeded) goes to
onnx_summary.json.
"""
import argparse
import json
import os
import sys
import time

import onnx
import torch
import torchvision

MODELS = {
    "resnet50": ("resnet50", 224), "resnet101": ("resnet101", 224),
    "efficientnet-b0": ("efficientnet_b0", 224), "efficientnet-b4": ("efficientnet_b4", 380),
    "vit-b-16": ("vit_b_16", 224), "vit-l-16": ("vit_l_16", 224), "convnext-t": ("convnext_tiny", 224),
}
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}


def numel(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def strip(model):
    stripped = 0
    for init in model.graph.initializer:
        if init.data_type in FLOAT_TYPES and numel(init.dims) >= 64:
            init.ClearField("raw_data")
            init.ClearField("float_data")
            init.ClearField("double_data")
            init.ClearField("int32_data")
            stripped += 1
    return stripped


def summarise(model):
    ops = {}
    for n in model.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    params = sum(numel(i.dims) for i in model.graph.initializer if i.data_type in FLOAT_TYPES)
    return {"nodes": len(model.graph.node), "op_types": ops, "initializers": len(model.graph.initializer),
            "float_initializer_elements": params}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    summary = {"torch": torch.__version__, "torchvision": torchvision.__version__, "onnx": onnx.__version__,
               "opset": 17, "models": {}}
    for mid in args.models.split(","):
        ctor, px = MODELS[mid]
        m = getattr(torchvision.models, ctor)(weights=None).eval()
        tv_params = sum(p.numel() for p in m.parameters())
        x = torch.randn(1, 3, px, px)
        rec = {"torchvision_ctor": ctor, "resolution_px": px, "torchvision_num_params": tv_params}
        for variant, kw in (("", dict(training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=False)),
                            ("-eval", dict())):
            path = os.path.join(args.out_dir, f"{mid}{variant}.onnx")
            t0 = time.time()
            try:
                torch.onnx.export(m, (x,), path, opset_version=17, dynamo=False, input_names=["image"],
                                  output_names=["logits"], **kw)
                model = onnx.load(path)
                n = strip(model)
                onnx.save(model, path)
                s = summarise(model)
                try:
                    onnx.shape_inference.infer_shapes(model, strict_mode=True)
                    s["shape_inference"] = "ok"
                except Exception as e:  # noqa: BLE001
                    s["shape_inference"] = f"failed: {e}"[:300]
                s.update({"stripped_initializers": n, "bytes": os.path.getsize(path),
                          "export_s": round(time.time() - t0, 2)})
            except Exception as e:  # noqa: BLE001
                s = {"error": repr(e)[:500]}
            rec["variant" + (variant or "-train")] = s
            print(mid, variant or "-train", json.dumps(s)[:300], flush=True)
        summary["models"][mid] = rec
    with open(os.path.join(args.out_dir, "onnx_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
