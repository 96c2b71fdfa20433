"""Build a cross-encoder-shaped ONNX model offline from the MiniLM bi-encoder on disk.

No real cross-encoder can be downloaded here, so the fastembed reranker is tested on this stand-in:
it takes a tokenized (query, document) pair exactly as a cross-encoder does (``input_ids``,
``attention_mask``, ``token_type_ids``), encodes each side with MiniLM, and answers one logit per pair,
``10 * (cosine - 0.3)``. fastembed loads and runs it through the same code path as a real reranker.
Needs the ``onnx`` package (a dev dependency)."""

from __future__ import annotations

import shutil
from pathlib import Path

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json", "vocab.txt")


def build_pair_cross_encoder(bi_encoder_dir: Path, out_dir: Path) -> Path:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    inner = onnx.load(str(bi_encoder_dir / "model.onnx"))
    graph = inner.graph
    renamed = {"input_ids": "pair_ids", "attention_mask": "side_mask", "token_type_ids": "side_types"}
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]

    def const(name: str, value: np.ndarray) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(value, name))

    head = [
        const("one_i", np.array(1, dtype=np.int64)),
        const("zero_i", np.array(0, dtype=np.int64)),
        const("axis1", np.array([1], dtype=np.int64)),
        const("minus_one", np.array([-1], dtype=np.int64)),
        const("pair_shape", np.array([2, -1, 384], dtype=np.int64)),
        const("centre", np.array(0.3, dtype=np.float32)),
        const("scale", np.array(10.0, dtype=np.float32)),
        # The query side is type 0, the document side type 1: one MiniLM pass over both, side by side.
        helper.make_node("Sub", ["one_i", "token_type_ids"], ["is_query"]),
        helper.make_node("Mul", ["attention_mask", "is_query"], ["query_mask"]),
        helper.make_node("Mul", ["attention_mask", "token_type_ids"], ["document_mask"]),
        helper.make_node("Concat", ["input_ids", "input_ids"], ["pair_ids"], axis=0),
        helper.make_node("Concat", ["query_mask", "document_mask"], ["side_mask"], axis=0),
        helper.make_node("Mul", ["pair_ids", "zero_i"], ["side_types"]),
    ]
    tail = [
        helper.make_node("Cast", ["side_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "minus_one"], ["mask_3d"]),
        helper.make_node("Mul", ["last_hidden_state", "mask_3d"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask_3d", "axis1"], ["counts"], keepdims=0),
        helper.make_node("Div", ["summed", "counts"], ["mean"]),
        helper.make_node("ReduceL2", ["mean"], ["norm"], axes=[1], keepdims=1),
        helper.make_node("Div", ["mean", "norm"], ["unit"]),
        helper.make_node("Reshape", ["unit", "pair_shape"], ["sides"]),
        helper.make_node("Gather", ["sides", "zero_i"], ["query_vec"], axis=0),
        helper.make_node("Gather", ["sides", "one_i"], ["document_vec"], axis=0),
        helper.make_node("Mul", ["query_vec", "document_vec"], ["products"]),
        helper.make_node("ReduceSum", ["products", "axis1"], ["cosine"], keepdims=1),
        helper.make_node("Sub", ["cosine", "centre"], ["centred"]),
        helper.make_node("Mul", ["centred", "scale"], ["logits"]),
    ]
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    merged = helper.make_graph(head + list(graph.node) + tail, "pair_cross_encoder", inputs, [output],
                               initializer=list(graph.initializer))
    model = helper.make_model(merged, opset_imports=list(inner.opset_import), ir_version=inner.ir_version)
    onnx.checker.check_model(model)

    out_dir.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(out_dir / "model.onnx"))
    for name in TOKENIZER_FILES:
        if (bi_encoder_dir / name).is_file():
            shutil.copyfile(bi_encoder_dir / name, out_dir / name)
    return out_dir
