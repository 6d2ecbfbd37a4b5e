#!/usr/bin/env python3
"""Writes small ONNX seeds for the fuzz_onnx harness into DIR: PyTorch exports of a 1-layer
GPT-2 and Llama (models/onnx_export.py: training exports, opsets 17 and 14, width 16), their
large buffers cut to what 8 tokens read (the causal mask's and the position table's first
rows) so each stays a few kilobytes, and a set of ONNX's own node tests (one op each).
usage: onnx_seeds.py DIR   (/usr/bin/python3: Debian's torch and onnx)"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE_TESTS = "/usr/share/libonnx-testdata/data/node"
NODE_SEEDS = ["test_layer_normalization_4d_axis1", "test_gemm_all_attributes", "test_softmax_axis_1",
              "test_matmul_4d", "test_concat_3d_axis_1", "test_gather_2d_indices", "test_slice_neg_steps",
              "test_reshape_negative_extended_dims", "test_split_variable_parts_2d", "test_where_long_example",
              "test_reduce_sum_keepdims_random", "test_expand_dim_changed", "test_unsqueeze_two_axes",
              "test_tril_neg", "test_sce_NCd1d2d3_sum_weight_high_ii", "test_pow_bcast_array"]


def shrink(path, keep=32):
    """Initializers of more than 4096 elements cut to their first `keep` entries per dimension."""
    model = onnx.load(path)
    for init in model.graph.initializer:
        if int(np.prod(init.dims)) > 4096:
            array = numpy_helper.to_array(init)
            cut = array[tuple(slice(0, min(d, keep)) for d in array.shape)]
            init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(cut), init.name))
    onnx.save(model, path)


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for family in ("gpt2", "llama"):
            for opset in (17, 14):
                path = os.path.join(out, f"{family}_{opset}.onnx")
                subprocess.run([sys.executable, os.path.join(ROOT, "models", "onnx_export.py"), family, path,
                                "--layers", "1", "--batch", "2", "--seq", "8", "--width", "16", "--vocab", "32",
                                "--opset", str(opset)], check=True, cwd=tmp, stdout=subprocess.DEVNULL)
                shrink(path)
    for name in NODE_SEEDS:
        model = os.path.join(NODE_TESTS, name, "model.onnx")
        if os.path.exists(model):
            shutil.copy(model, os.path.join(out, name + ".onnx"))


if __name__ == "__main__":
    main()
