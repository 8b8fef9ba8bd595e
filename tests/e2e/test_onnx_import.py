#!/usr/bin/env python3
"""tools/onnx_import.py: small ONNX graphs built with onnx.helper, covering every supported op
and option, imported and run on the CPU engine, against onnxruntime on the same input.

Models (random weights, odd sizes):
  convnet      opset 13, dynamic batch: Conv with asymmetric pads / stride / dilation, grouped
               (depthwise) Conv with auto_pad SAME_UPPER and one with SAME_LOWER,
               BatchNormalization, Relu, Clip as relu6 (constant inputs) and with a min only,
               MaxPool with pads + ceil_mode, AveragePool with count_include_pad 1 and 0, LRN,
               Add, Concat, GlobalAveragePool, Flatten, Gemm (transB, alpha, beta), Dropout,
               MatMul + Add, Identity, Softmax.
  legacy_ops   opset 9, batch fixed at 1: Clip with attributes, a Constant-node weight,
               x.view(x.size(0), -1) as Shape -> Gather -> Unsqueeze -> Concat -> Reshape
               (constant-folded), Gemm with transB 0 and a broadcast scalar C, MatMul without
               Add, Dropout with a ratio attribute, BatchNormalization after a linear.
  reductions   opset 18: ReduceMean over H, W with axes as an input and keepdims 0, Clip with
               min 0 only (imported as relu).
  ceil_pools   MaxPool / AveragePool with ceil_mode and padding on sizes where the last window
               would start in the right padding (dropped, as in PyTorch and onnxruntime's
               kernels; onnx's own shape inference still counts it, so the output dims are
               left symbolic here).
Pass: CPU rel L2 <= 1e-5 vs onnxruntime for each; batch 3 where the batch is dynamic.
Bad inputs -- an unsupported op, an unsupported attribute value, a dynamic spatial dimension,
a corrupt protobuf, a missing file -- each give exit 1, one `error:` line naming the node and
op where there is one, and no output files.  Skipped when onnx or onnxruntime is missing.
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e_util as util  # noqa: E402

TOLERANCE = 1e-5


def build_models(onnx, helper, numpy_helper, np, rng):
    from onnx import TensorProto

    def init(name, shape, scale=None, positive=False):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        value = rng.uniform(-1, 1, shape) * (scale if scale else np.sqrt(3.0 / fan_in))
        if positive:
            value = np.abs(value) + 0.5
        return numpy_helper.from_array(value.astype(np.float32), name)

    def const(name, value, dtype=np.float32):
        return numpy_helper.from_array(np.array(value, dtype=dtype), name)

    def bn_inits(prefix, c):
        return [init(f"{prefix}.w", [c], 1.0, positive=True), init(f"{prefix}.b", [c], 0.3),
                init(f"{prefix}.m", [c], 0.3), init(f"{prefix}.v", [c], 0.5, positive=True)]

    def model(name, nodes, inits, in_dims, out_dims, opset):
        graph = helper.make_graph(nodes, name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_dims)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_dims)],
                                  initializer=inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m

    N = helper.make_node
    models = {}
    # --- convnet: [N, 3, 17, 15] ---------------------------------------------------------
    nodes = [
        N("Conv", ["x", "c1.w", "c1.b"], ["c1"], name="conv1", pads=[0, 1, 2, 1],
          strides=[2, 1], dilations=[1, 2]),                              # -> [8, 9, 13]
        N("BatchNormalization", ["c1", "bn1.w", "bn1.b", "bn1.m", "bn1.v"], ["bn1"],
          name="bn1", epsilon=1e-3),
        N("Relu", ["bn1"], ["r1"], name="relu1"),
        N("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1], ceil_mode=1),                                # -> [8, 5, 7]
        N("Conv", ["p1", "dw.w"], ["dw"], name="dw", group=8, auto_pad="SAME_UPPER",
          strides=[2, 2]),                                                # -> [8, 3, 4]
        N("Clip", ["dw", "zero", "six"], ["dw6"], name="dw_relu6"),
        N("Conv", ["dw6", "pw.w", "pw.b"], ["pw"], name="pw"),
        N("Add", ["pw", "dw6"], ["res"], name="residual"),
        N("Conv", ["res", "lo.w"], ["lo"], name="conv_lower", auto_pad="SAME_LOWER"),  # 6 ch
        N("Clip", ["lo", "minus_half", ""], ["lo_c"], name="clip_min_only"),
        N("Concat", ["res", "lo_c"], ["cat"], name="cat", axis=1),        # -> [14, 3, 4]
        N("AveragePool", ["cat"], ["a1"], name="avg_incl", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
          count_include_pad=1),
        N("LRN", ["a1"], ["lrn"], name="lrn", size=3, alpha=0.5, beta=0.75, bias=2.0),
        N("AveragePool", ["lrn"], ["a2"], name="avg_excl", kernel_shape=[2, 2], strides=[2, 2],
          pads=[1, 1, 1, 1]),                                             # -> [14, 2, 3]
        N("GlobalAveragePool", ["a2"], ["gap"], name="gap"),
        N("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        N("Gemm", ["flat", "fc1.w", "fc1.b"], ["fc1"], name="fc1", transB=1, alpha=0.5, beta=2.0),
        N("Relu", ["fc1"], ["fc1r"], name="fc1_relu"),
        N("Dropout", ["fc1r"], ["drop"], name="drop"),
        N("MatMul", ["drop", "fc2.w"], ["mm"], name="fc2"),
        N("Add", ["mm", "fc2.b"], ["fc2"], name="fc2_bias"),
        N("Identity", ["fc2"], ["ident"], name="ident"),
        N("Softmax", ["ident"], ["y"], name="prob", axis=1),
    ]
    inits = [init("c1.w", [8, 3, 3, 3]), init("c1.b", [8], 0.3), *bn_inits("bn1", 8),
             init("dw.w", [8, 1, 3, 3], 1.5), const("zero", 0.0), const("six", 6.0),
             init("pw.w", [8, 8, 1, 1]), init("pw.b", [8], 0.3), init("lo.w", [6, 8, 2, 2]),
             const("minus_half", -0.5), init("fc1.w", [11, 14]), init("fc1.b", [11], 0.3),
             init("fc2.w", [11, 5]), init("fc2.b", [5], 0.3)]
    models["convnet"] = (model("convnet", nodes, inits, ["N", 3, 17, 15], ["N", 5], 13), 3)

    # --- legacy_ops: opset 9, [1, 4, 6, 7] -------------------------------------------------
    nodes = [
        N("Constant", [], ["cw"], name="conv_weight_constant",
          value=init("cw_value", [5, 4, 3, 3])),
        N("Conv", ["x", "cw"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        N("Clip", ["c"], ["cc"], name="clip_attrs", min=-0.4, max=0.6),
        N("MaxPool", ["cc"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),  # [5,3,3]
        N("Shape", ["p"], ["shape"], name="shape"),
        N("Gather", ["shape", "index0"], ["batch"], name="gather", axis=0),
        N("Unsqueeze", ["batch"], ["batch1"], name="unsqueeze", axes=[0]),
        N("Concat", ["batch1", "minus_one"], ["target"], name="target", axis=0),
        N("Reshape", ["p", "target"], ["flat"], name="view"),
        N("Gemm", ["flat", "g.w", "g.c"], ["g"], name="gemm_scalar_c", transB=0, beta=0.5),
        N("BatchNormalization", ["g", "bn.w", "bn.b", "bn.m", "bn.v"], ["gb"], name="bn"),
        N("Dropout", ["gb"], ["d"], name="dropout", ratio=0.3),
        N("MatMul", ["d", "m.w"], ["m"], name="matmul_no_add"),
        N("Softmax", ["m"], ["y"], name="softmax"),
    ]
    inits = [const("index0", 0, np.int64), const("minus_one", [-1], np.int64),
             init("g.w", [45, 7]), const("g.c", [0.25]), *bn_inits("bn", 7), init("m.w", [7, 4])]
    models["legacy_ops"] = (model("legacy_ops", nodes, inits, [1, 4, 6, 7], [1, 4], 9), 1)

    # --- ceil_pools: [N, 2, 7, 9] ----------------------------------------------------------
    nodes = [
        N("MaxPool", ["x"], ["mp"], name="max_ceil", kernel_shape=[2, 3], strides=[2, 2],
          pads=[1, 1, 1, 1], ceil_mode=1),
        N("AveragePool", ["mp"], ["ap"], name="avg_ceil", kernel_shape=[3, 3], strides=[2, 2],
          pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1),
        N("AveragePool", ["x"], ["ap2"], name="avg_ceil_excl", kernel_shape=[2, 2],
          strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        N("Flatten", ["ap"], ["f1"], name="flat1"),
        N("Flatten", ["ap2"], ["f2"], name="flat2"),
        N("Concat", ["f1", "f2"], ["y"], name="both", axis=1),
    ]
    models["ceil_pools"] = (model("ceil_pools", nodes, [], ["N", 2, 7, 9], ["N", "F"], 13), 2)

    # --- reductions: opset 18, what newer exporters emit for a global average pool ----------
    nodes = [
        N("Conv", ["x", "r.w", "r.b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        N("Clip", ["c", "zero"], ["cr"], name="relu_as_clip"),
        N("ReduceMean", ["cr", "hw"], ["gap"], name="mean_hw", keepdims=0),
        N("Gemm", ["gap", "fc.w", "fc.b"], ["y"], name="fc", transB=1),
    ]
    inits = [init("r.w", [6, 3, 3, 3]), init("r.b", [6], 0.3), const("zero", 0.0),
             const("hw", [-2, -1], np.int64), init("fc.w", [4, 6]), init("fc.b", [4], 0.3)]
    models["reductions"] = (model("reductions", nodes, inits, ["N", 3, 9, 8], ["N", 4], 18), 2)
    return models


def bad_models(onnx, helper, numpy_helper, np):
    from onnx import TensorProto

    def one(name, node, inits=(), in_dims=("N", 2, 6, 6)):
        graph = helper.make_graph(
            [node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_dims))],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=list(inits))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m

    weight = numpy_helper.from_array(np.ones((2, 2, 3, 3), np.float32), "w")
    return {
        "unsupported op": (one("sig", helper.make_node("Sigmoid", ["x"], ["y"], name="gate")),
                           ["node 'gate' (Sigmoid)", "not supported", "supported: Conv"]),
        "unsupported attribute value": (
            one("dil", helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2],
                                        dilations=[2, 2])),
            ["node 'mp' (MaxPool)", "dilations [2, 2]"]),
        "unknown attribute": (
            one("attr", helper.make_node("Relu", ["x"], ["y"], name="r", alpha=0.1)),
            ["node 'r' (Relu)", "attribute 'alpha' is not supported"]),
        "even LRN size": (
            one("lrn", helper.make_node("LRN", ["x"], ["y"], name="norm", size=4)),
            ["node 'norm' (LRN)", "size 4"]),
        "dynamic spatial dims": (
            one("dyn", helper.make_node("Conv", ["x", "w"], ["y"], name="c"), [weight],
                ("N", 2, "H", "W")),
            ["dynamic dimensions", "--input-shape"]),
    }


def main() -> int:
    args, work = util.setup(__doc__.split("\n")[0])
    try:
        import onnx
        import onnxruntime
        from onnx import helper, numpy_helper
    except ImportError as exc:
        util.skip(f"onnx / onnxruntime not installed ({exc}): pip install onnx onnxruntime")
    import numpy as np

    tool = os.path.join(args.source_dir, "tools", "onnx_import.py")
    rng = np.random.default_rng(args.seed)
    failures = []

    def import_model(onnx_path, yaml_path, *extra):
        return subprocess.run([sys.executable, tool, onnx_path, "-o", yaml_path, *extra],
                              capture_output=True, text=True, timeout=300)

    for name, (model, batch) in build_models(onnx, helper, numpy_helper, np, rng).items():
        onnx_path = os.path.join(work, f"{name}.onnx")
        onnx.save(model, onnx_path)
        yaml_path = os.path.join(work, f"{name}.yaml")
        result = import_model(onnx_path, yaml_path)
        if result.returncode != 0:
            failures.append(f"{name}: import failed: {result.stderr.strip()}")
            print(f"{name}: import FAILED: {result.stderr.strip()}", flush=True)
            continue
        x = rng.standard_normal([batch] + [d.dim_value for d in
                                           model.graph.input[0].type.tensor_type.shape.dim][1:])
        x = x.astype(np.float32)
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # ceil_pools' symbolic output dims draw a warning
        session = onnxruntime.InferenceSession(model.SerializeToString(), options,
                                               providers=["CPUExecutionProvider"])
        expected = session.run(None, {"x": x})[0]
        input_path = os.path.join(work, f"{name}.x.npy")
        output_path = os.path.join(work, f"{name}.y.npy")
        np.save(input_path, x)
        util.run_cli(args.cli, "run", yaml_path, "--input", input_path, "--output", output_path,
                     "--device", "cpu")
        error = util.rel_l2(np.load(output_path), expected)
        verdict = "ok" if error <= TOLERANCE else "FAIL"
        print(f"{name:12s} cpu fp32 vs onnxruntime: rel L2 {error:.3e} (tolerance "
              f"{TOLERANCE:.0e}, batch {batch}) {verdict}", flush=True)
        if not error <= TOLERANCE:
            failures.append(f"{name}: rel L2 {error:.3e}")

    bad_dir = os.path.join(work, "bad")
    os.makedirs(bad_dir)
    cases = bad_models(onnx, helper, numpy_helper, np)
    corrupt = os.path.join(bad_dir, "corrupt.onnx")
    with open(os.path.join(work, "convnet.onnx"), "rb") as handle:
        whole = handle.read()
    with open(corrupt, "wb") as handle:
        handle.write(whole[: len(whole) // 3])
    files = {"corrupt protobuf": (corrupt, ["not a readable ONNX model"]),
             "missing file": (os.path.join(bad_dir, "absent.onnx"), ["no such file"])}
    for what, (model, expected) in cases.items():
        path = os.path.join(bad_dir, f"{model.graph.name}.onnx")
        onnx.save(model, path)
        files[what] = (path, expected)
    for what, (path, expected) in files.items():
        yaml_path = os.path.join(bad_dir, "out.yaml")
        result = import_model(path, yaml_path)
        lines = result.stderr.strip().splitlines()
        leftovers = [n for n in os.listdir(bad_dir) if not n.endswith(".onnx")]
        ok = (result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error:")
              and all(part in lines[0] for part in expected) and not leftovers)
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {lines} leftovers {leftovers}", flush=True)
        if not ok:
            failures.append(f"bad input '{what}': exit {result.returncode}, {lines}, "
                            f"leftovers {leftovers}")
    # The dynamic model imports once its spatial size is fixed.
    fixed = import_model(files["dynamic spatial dims"][0], os.path.join(work, "dyn.yaml"),
                         "--input-shape", "2,6,6")
    if fixed.returncode != 0:
        failures.append(f"--input-shape did not fix the dynamic model: {fixed.stderr.strip()}")

    if failures:
        util.fail("; ".join(failures))
    print("PASS")
    return util.PASS


if __name__ == "__main__":
    sys.exit(main())
