"""The graph builders of the default model's int8 weights (``core/embedders/int8_weights.py``):
the query graph (``minilm_query.build_query_graph``) and the quantized model's fold
(``minilm_qdyn.fold_weights``) rewrite only a weight no other node reads, and the graphs they
write run and give the source graph's outputs. Checked on a small graph built here with a weight
read by one MatMul and one read by two (the installed model has none of the second kind)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from gitkb.core.embedders import minilm_qdyn, minilm_query


def _graph(path: Path) -> None:
    rng = np.random.default_rng(7)
    inits = []
    nodes = []

    def weight(name: str) -> str:
        q = rng.integers(-127, 128, size=(64, 32), dtype=np.int8)
        s = (rng.random(32, dtype=np.float32) * 0.01 + 0.001).astype(np.float32)
        inits.extend([numpy_helper.from_array(q, f"{name}_q"), numpy_helper.from_array(s, f"{name}_s")])
        nodes.append(helper.make_node("Cast", [f"{name}_q"], [f"{name}_f"], to=TensorProto.FLOAT))
        nodes.append(helper.make_node("Mul", [f"{name}_f", f"{name}_s"], [f"{name}_w"]))
        return f"{name}_w"

    own = weight("own")
    shared = weight("shared")
    nodes += [
        helper.make_node("MatMul", ["x", own], ["a"], name="mm_own"),
        helper.make_node("MatMul", ["x", shared], ["b"], name="mm_shared_1"),
        helper.make_node("MatMul", ["x", shared], ["c"], name="mm_shared_2"),
        helper.make_node("Sum", ["a", "b", "c"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "t",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _run(path: Path, x: np.ndarray) -> np.ndarray:
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return np.asarray(s.run(None, {"x": x})[0])


def test_only_a_weight_read_once_is_rewritten_and_the_graphs_still_run(tmp_path: Path) -> None:
    src = tmp_path / "src.onnx"
    _graph(src)
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    want = _run(src, x)

    assert minilm_query.build_query_graph(src, tmp_path / "query.onnx") == 1
    ops = [n.op_type for n in onnx.load(str(tmp_path / "query.onnx")).graph.node]
    assert ops.count("MatMulNBits") == 1 and ops.count("MatMul") == 2  # the shared weight kept as it was
    np.testing.assert_allclose(_run(tmp_path / "query.onnx", x), want, rtol=0.05, atol=0.05)

    assert minilm_qdyn.fold_weights(src, tmp_path / "folded.onnx") == 1
    folded = onnx.load(str(tmp_path / "folded.onnx"))
    assert {i.name for i in folded.graph.initializer} >= {"shared_q", "shared_s", "own_w"}
    np.testing.assert_allclose(_run(tmp_path / "folded.onnx", x), want, rtol=1e-5, atol=1e-5)
