#!/usr/bin/python3
"""Writes the graph-only ONNX test files of tests/fixtures/onnx/ (issue #25): small networks built node by node with
Debian's python3-onnx (`bash scripts/deps.sh fuzz` installs it), with initializers that carry their shapes and no
data (data_location EXTERNAL, pointing at a file that does not exist: the importer needs shapes only).

    /usr/bin/python3 scripts/make_onnx_fixtures.py [OUT_DIR]     (default tests/fixtures/onnx; Debian's Python)

The expected parameter and multiply-accumulate counts of each file are worked out by hand in
tests/vision/test_onnx_import.cpp, not here: this script only states the architecture.
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

OPSET = 17  # LayerNormalization is opset 17 (ONNX 1.12)
F = TensorProto.FLOAT


class Net:
    def __init__(self, name):
        self.name = name
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.n = 0

    def tmp(self, hint):
        self.n += 1
        return f"{hint}_{self.n}"

    def input(self, name, shape):
        self.inputs.append(helper.make_tensor_value_info(name, F, shape))
        return name

    def weight(self, name, dims):
        """An initializer with its shape and no data (weights stripped)."""
        t = TensorProto()
        t.name = name
        t.data_type = F
        t.dims.extend(dims)
        t.data_location = TensorProto.EXTERNAL
        e = t.external_data.add()
        e.key, e.value = "location", "weights-stripped.bin"
        self.inits.append(t)
        return name

    def const(self, value, dtype=F):
        """A constant scalar or int64 vector as a Constant node (not a parameter)."""
        out = self.tmp("const")
        vals = value if isinstance(value, list) else [value]
        dims = [len(vals)] if isinstance(value, list) else []
        self.nodes.append(helper.make_node("Constant", [], [out], value=helper.make_tensor(out, dtype, dims, vals)))
        return out

    def node(self, op, inputs, n_out=1, name=None, **attrs):
        name = name or self.tmp(op.lower())
        outs = [f"{name}_out{i}" if n_out > 1 else f"{name}_out" for i in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    def save(self, out_dir, final, final_shape):
        self.outputs.append(helper.make_tensor_value_info(final, F, final_shape))
        g = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(g, producer_name="gpuplan scripts/make_onnx_fixtures.py",
                              opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        path = os.path.join(out_dir, self.name + ".onnx")
        onnx.save(m, path)
        return path


def conv(net, x, cin, cout, k, stride=1, groups=1, bias=False, name=None):
    name = name or net.tmp("conv")
    ins = [x, net.weight(name + ".weight", [cout, cin // groups, k, k])]
    if bias:
        ins.append(net.weight(name + ".bias", [cout]))
    p = (k - 1) // 2
    return net.node("Conv", ins, name=name, kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p],
                    group=groups)


def bn(net, x, c, name):
    ins = [x] + [net.weight(f"{name}.{w}", [c]) for w in ("weight", "bias", "running_mean", "running_var")]
    return net.node("BatchNormalization", ins, name=name)


def tiny_convnet(out_dir):
    """Conv-BN-ReLU, max pool, a strided conv with bias, global average pool, a linear classifier (Gemm)."""
    n = Net("tiny_convnet")
    x = n.input("image", [1, 3, 32, 32])
    x = conv(n, x, 3, 16, 3, name="conv1")
    x = bn(n, x, 16, "bn1")
    x = n.node("Relu", [x])
    x = n.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = conv(n, x, 16, 32, 3, stride=2, bias=True, name="conv2")
    x = n.node("Relu", [x])
    x = n.node("GlobalAveragePool", [x])
    x = n.node("Flatten", [x], axis=1)
    x = n.node("Gemm", [x, n.weight("fc.weight", [10, 32]), n.weight("fc.bias", [10])], name="fc", transB=1)
    return n.save(out_dir, x, [1, 10])


def depthwise_block(out_dir):
    """A MobileNetV3-style inverted residual: 1×1 expand, ReLU6 (Clip), 3×3 depthwise, hard-swish, squeeze-excitation
    (global pool, two 1×1 convs with bias, hard-sigmoid, scale), 1×1 project, residual add."""
    n = Net("depthwise_block")
    x0 = n.input("x", [1, 32, 56, 56])
    x = conv(n, x0, 32, 128, 1, name="expand")
    x = bn(n, x, 128, "expand_bn")
    x = n.node("Clip", [x, n.const(0.0), n.const(6.0)])
    x = conv(n, x, 128, 128, 3, groups=128, name="dw")
    x = bn(n, x, 128, "dw_bn")
    x = n.node("HardSwish", [x])
    s = n.node("GlobalAveragePool", [x])
    s = conv(n, s, 128, 32, 1, bias=True, name="se.fc1")
    s = n.node("Relu", [s])
    s = conv(n, s, 32, 128, 1, bias=True, name="se.fc2")
    s = n.node("HardSigmoid", [s])
    x = n.node("Mul", [x, s])
    x = conv(n, x, 128, 32, 1, name="project")
    x = bn(n, x, 32, "project_bn")
    x = n.node("Add", [x, x0])
    return n.save(out_dir, x, [1, 32, 56, 56])


def attention_block(out_dir):
    """A pre-norm transformer encoder block over 50 tokens of width 64, 4 heads: LayerNormalization, a packed QKV
    projection (MatMul + bias Add), Split, Reshape/Transpose to heads, QKᵀ MatMul, scale, Softmax, PV MatMul, output
    projection, residual; then a decomposed layer norm (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add) and
    an MLP with GELU written with Erf (Div, Erf, Add, Mul, Mul)."""
    n = Net("attention_block")
    t, d, h, dh, mlp = 50, 64, 4, 16, 256
    x0 = n.input("tokens", [1, t, d])
    x = n.node("LayerNormalization", [x0, n.weight("ln1.weight", [d]), n.weight("ln1.bias", [d])], axis=-1)
    x = n.node("MatMul", [x, n.weight("qkv.weight", [d, 3 * d])])
    x = n.node("Add", [x, n.weight("qkv.bias", [3 * d])])
    q, k, v = n.node("Split", [x, n.const([d, d, d], TensorProto.INT64)], n_out=3, axis=-1)
    heads = n.const([1, t, h, dh], TensorProto.INT64)
    q = n.node("Transpose", [n.node("Reshape", [q, heads])], perm=[0, 2, 1, 3])
    k = n.node("Transpose", [n.node("Reshape", [k, heads])], perm=[0, 2, 3, 1])
    v = n.node("Transpose", [n.node("Reshape", [v, heads])], perm=[0, 2, 1, 3])
    s = n.node("MatMul", [q, k])
    s = n.node("Mul", [s, n.const(0.25)])
    p = n.node("Softmax", [s], axis=-1)
    o = n.node("MatMul", [p, v])
    o = n.node("Reshape", [n.node("Transpose", [o], perm=[0, 2, 1, 3]), n.const([1, t, d], TensorProto.INT64)])
    o = n.node("MatMul", [o, n.weight("proj.weight", [d, d])])
    o = n.node("Add", [o, n.weight("proj.bias", [d])])
    x1 = n.node("Add", [o, x0])
    # Layer norm as opset < 17 exporters write it.
    mu = n.node("ReduceMean", [x1], axes=[-1])
    c = n.node("Sub", [x1, mu])
    var = n.node("ReduceMean", [n.node("Pow", [c, n.const(2.0)])], axes=[-1])
    y = n.node("Div", [c, n.node("Sqrt", [n.node("Add", [var, n.const(1e-6)])])])
    y = n.node("Add", [n.node("Mul", [y, n.weight("ln2.weight", [d])]), n.weight("ln2.bias", [d])])
    y = n.node("Add", [n.node("MatMul", [y, n.weight("fc1.weight", [d, mlp])]), n.weight("fc1.bias", [mlp])])
    g = n.node("Mul", [n.node("Mul", [y, n.node("Add", [n.node("Erf", [n.node("Div", [y, n.const(1.4142135)])]),
                                                        n.const(1.0)])]), n.const(0.5)])
    y = n.node("Add", [n.node("MatMul", [g, n.weight("fc2.weight", [mlp, d])]), n.weight("fc2.bias", [d])])
    x = n.node("Add", [y, x1])
    return n.save(out_dir, x, [1, t, d])


def upsample_block(out_dir):
    """A U-Net decoder step: a 2×2 stride-2 transposed convolution, a nearest-neighbour Resize of the skip branch's
    1×1 projection, Concat, a 3×3 convolution with bias, Sigmoid; plus an average pool."""
    n = Net("upsample_block")
    x = n.input("x", [1, 64, 16, 16])
    up = n.node("ConvTranspose", [x, n.weight("up.weight", [64, 32, 2, 2]), n.weight("up.bias", [32])], name="up",
                kernel_shape=[2, 2], strides=[2, 2])
    side = conv(n, x, 64, 32, 1, name="side")
    side = n.node("Resize", [side, "", n.const([1.0, 1.0, 2.0, 2.0])], mode="nearest")
    y = n.node("Concat", [up, side], axis=1)
    y = conv(n, y, 64, 16, 3, bias=True, name="fuse")
    y = n.node("Sigmoid", [y])
    y = n.node("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])
    return n.save(out_dir, y, [1, 16, 16, 16])


def conv_valid(net, x, cin, cout, k, name):
    """An unpadded convolution with bias (U-Net's)."""
    ins = [x, net.weight(name + ".weight", [cout, cin, k, k]), net.weight(name + ".bias", [cout])]
    return net.node("Conv", ins, name=name, kernel_shape=[k, k], strides=[1, 1], pads=[0, 0, 0, 0])


def unet(out_dir):
    """The U-Net of Ronneberger et al. 2015 (Fig. 1): 572 px, 1 channel in, 2 classes; per level two unpadded 3×3
    convolutions with bias and ReLU, 2×2 max pooling; up: 2×2 stride-2 ConvTranspose with bias, the skip map cropped
    with Slice and concatenated, two unpadded 3×3 convolutions; a final 1×1 convolution (the library's `unet`)."""
    n = Net("unet")
    x = n.input("image", [1, 1, 572, 572])
    widths, cin, skips, h = [64, 128, 256, 512, 1024], 1, [], 572
    for i, c in enumerate(widths):
        x = n.node("Relu", [conv_valid(n, x, cin, c, 3, f"down{i}.conv1")])
        x = n.node("Relu", [conv_valid(n, x, c, c, 3, f"down{i}.conv2")])
        h -= 4
        cin = c
        if i + 1 < len(widths):
            skips.append((x, h))
            x = n.node("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
            h //= 2
    for i in range(len(widths) - 2, -1, -1):
        c = widths[i]
        x = n.node("ConvTranspose", [x, n.weight(f"up{i}.upconv.weight", [cin, c, 2, 2]),
                                     n.weight(f"up{i}.upconv.bias", [c])], name=f"up{i}.upconv",
                   kernel_shape=[2, 2], strides=[2, 2])
        h *= 2
        skip, hs = skips[i]
        off = (hs - h) // 2
        crop = n.node("Slice", [skip, n.const([off, off], TensorProto.INT64), n.const([off + h, off + h], TensorProto.INT64),
                                n.const([2, 3], TensorProto.INT64)])
        x = n.node("Concat", [crop, x], axis=1)
        x = n.node("Relu", [conv_valid(n, x, 2 * c, c, 3, f"up{i}.conv1")])
        x = n.node("Relu", [conv_valid(n, x, c, c, 3, f"up{i}.conv2")])
        h -= 4
        cin = c
    x = conv_valid(n, x, 64, 2, 1, "final")
    return n.save(out_dir, x, [1, 2, h, h])


def group_norm(net, x, c, groups, name):
    """GroupNorm as opset-17 exporters write it: Reshape to (N, groups, -1), InstanceNormalization with constant unit
    scale and zero shift (Constant nodes, not parameters), Reshape back, Mul by the weight and Add the bias (C×1×1
    initializers: the 2·C parameters)."""
    shape = net.node("Shape", [x])
    y = net.node("Reshape", [x, net.const([0, groups, -1], TensorProto.INT64)])
    y = net.node("InstanceNormalization", [y, net.const([1.0] * groups), net.const([0.0] * groups)], epsilon=1e-5)
    y = net.node("Reshape", [y, shape])
    y = net.node("Mul", [y, net.weight(name + ".weight", [c, 1, 1])])
    return net.node("Add", [y, net.weight(name + ".bias", [c, 1, 1])])


def fpn_seg_head(out_dir):
    """The library's `fpn-seg-head` at 800 px: ResNet-50 C2-C5 maps in (256/512/1024/2048 channels at 200, 100, 50,
    25 px), torchvision's FeaturePyramidNetwork (1×1 lateral and 3×3 output convolutions with bias, ×2 nearest
    top-down Resize and Add) and the Panoptic FPN semantic branch (3×3 convolutions to 128 without bias, GroupNorm 32,
    ReLU, ×2 bilinear Resize, the levels summed, a 1×1 predictor to 54 classes with bias, ×4 bilinear Resize)."""
    n = Net("fpn_seg_head")
    chans, sides = [256, 512, 1024, 2048], [200, 100, 50, 25]
    cs = [n.input(f"c{i + 2}", [1, c, s, s]) for i, (c, s) in enumerate(zip(chans, sides))]
    ps = [None] * 4
    last = None
    for i in range(3, -1, -1):
        inner = conv(n, cs[i], chans[i], 256, 1, bias=True, name=f"fpn.inner_blocks.{i}")
        if last is not None:
            up = n.node("Resize", [last, "", n.const([1.0, 1.0, 2.0, 2.0])], mode="nearest")
            inner = n.node("Add", [inner, up])
        last = inner
        ps[i] = conv(n, inner, 256, 256, 3, bias=True, name=f"fpn.layer_blocks.{i}")
    total = None
    for i in range(4):
        y = ps[i]
        for k in range(max(1, i)):
            name = f"sem_seg_head.p{i + 2}.{k}"
            y = conv(n, y, 256 if k == 0 else 128, 128, 3, name=name + ".conv")
            y = n.node("Relu", [group_norm(n, y, 128, 32, name + ".norm")])
            if i > 0:
                y = n.node("Resize", [y, "", n.const([1.0, 1.0, 2.0, 2.0])], mode="linear")
        total = y if total is None else n.node("Add", [total, y])
    y = conv(n, total, 128, 54, 1, bias=True, name="sem_seg_head.predictor")
    y = n.node("Resize", [y, "", n.const([1.0, 1.0, 4.0, 4.0])], mode="linear")
    return n.save(out_dir, y, [1, 54, 800, 800])


def unknown_op(out_dir):
    """A graph with an op the importer does not know (NonMaxSuppression): it must be refused by node and type."""
    n = Net("unknown_op")
    boxes = n.input("boxes", [1, 100, 4])
    scores = n.input("scores", [1, 1, 100])
    sel = n.node("NonMaxSuppression", [boxes, scores], name="nms")
    n.outputs.append(helper.make_tensor_value_info(sel, TensorProto.INT64, [None, 3]))
    g = helper.make_graph(n.nodes, n.name, n.inputs, n.outputs, n.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    path = os.path.join(out_dir, n.name + ".onnx")
    onnx.save(m, path)
    return path


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures",
                                                                  "onnx")
    os.makedirs(out_dir, exist_ok=True)
    for make in (tiny_convnet, depthwise_block, attention_block, upsample_block, unet, fpn_seg_head, unknown_op):
        path = make(out_dir)
        print(f"{os.path.normpath(path)}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
