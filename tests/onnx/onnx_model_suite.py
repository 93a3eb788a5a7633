"""Run ONNX's model test cases (``onnx.backend.test.loader.load_model_tests(kind="real")``)
through webnn_gpu.onnx.backend.

The installed ``onnx`` package ships the models of these cases (resnet50, densenet121,
inception v1 and v2, squeezenet, shufflenet, vgg19, zfnet512, bvlc_alexnet) as its
``data/light`` files: each network's graph with small generated weights, and its expected
output for the input ONNX's runner makes (``Runner.generate_dummy_data(..., random=False)``:
``arange(n) / n`` in the input's shape). A case runs as ``BackendTest`` runs it: that input,
the expected output, the case's own ``rtol``/``atol``. A model the importer or the device
refuses with ``NotSupportedError`` is *excluded* (with the reason).
"""

from __future__ import annotations

import functools
import os

import numpy as np


@functools.lru_cache(maxsize=1)
def model_cases():
    """The ``real`` model cases whose model file is in the installed onnx package, by model name."""
    import onnx
    from onnx.backend.test.loader import load_model_tests

    root = os.path.dirname(os.path.dirname(onnx.__file__))
    cases = {}
    for case in load_model_tests(kind="real"):
        if case.url and case.url.startswith("onnx/backend/test/data/light/"):
            path = os.path.join(root, case.url)
            if os.path.exists(path):
                cases[case.model_name] = (case, path)
    return cases


def run_model_case(case, path) -> tuple[str, str]:
    """Run one model case: ("pass" | "fail" | "excluded", detail)."""
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.runner import Runner

    from webnn_gpu.errors import NotSupportedError
    from webnn_gpu.onnx import backend

    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    inputs = [Runner.generate_dummy_data(x, seed=0, name=case.model_name, random=False)
              for x in model.graph.input if x.name not in inits]
    prefix = os.path.splitext(path)[0]
    expected = []
    for i in range(len(model.graph.output)):
        t = onnx.TensorProto()
        with open(f"{prefix}_output_{i}.pb", "rb") as f:
            t.ParseFromString(f.read())
        expected.append(numpy_helper.to_array(t))
    try:
        got = backend.prepare(model).run(inputs)
    except NotSupportedError as exc:
        return "excluded", str(exc).splitlines()[-1].strip()[:300]
    for i, (g, e) in enumerate(zip(got, expected)):
        try:
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=case.rtol, atol=case.atol)
        except AssertionError as exc:
            return "fail", f"output {i}: {str(exc).strip()[:300]}"
    return "pass", ""
