"""``webnn_gpu.tflite.reader`` reads Tensor, Buffer and Operator tables directly (struct reads of
the flatbuffer): every field it takes must equal what the ``tflite`` package's generated
accessors give, on models written by ``tests/model/tflite_maker.py`` (names, shapes, signatures,
constants, quantization, sparse constants, custom options, absent fields), and a damaged file
must stay a ``DataError``. No GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))

import tflite  # noqa: E402

from tflite_maker import ModelMaker  # noqa: E402
from webnn_gpu.errors import DataError  # noqa: E402
from webnn_gpu.tflite.reader import read_model  # noqa: E402


def _model() -> bytes:
    rng = np.random.default_rng(3)
    m = ModelMaker()
    x = m.input([1, 4, 4, 3], name="image")
    w = m.const(rng.standard_normal((8, 1, 1, 3)).astype(np.float32), name="weights")
    bias = m.const(rng.standard_normal(8).astype(np.float16), name="")
    q = m.const(rng.integers(-5, 5, (8,)).astype(np.int8), name="q", quant=([0.5], [1], 0))
    sparse = m.sparse_const(np.array([[0, 1.5, 0, 0], [2, 0, 0, 3]], np.float32), name="sp")
    y = m.op("CONV_2D", [x, w, -1], [1, 4, 4, 8], options={"strideH": 1, "strideW": 1})
    z = m.op("Cube", [y, bias, q, sparse], [1, 4, 4, 8], custom_options=b"\x01\x02\x03")
    m.output(z)
    return m.finish()


def _reference(data: bytes):
    """Tensors and operators read with the generated accessors."""
    model = tflite.Model.GetRootAsModel(data, 0)
    sub = model.Subgraphs(0)
    tensors = []
    for i in range(sub.TensorsLength()):
        t = sub.Tensors(i)
        shape = tuple(int(v) for v in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        sig = None if t.ShapeSignatureIsNone() else tuple(int(v) for v in t.ShapeSignatureAsNumpy())
        name = t.Name().decode() if t.Name() is not None else ""
        raw = None
        if t.Buffer() > 0:
            b = model.Buffers(t.Buffer())
            raw = b.DataAsNumpy().tobytes() if b.DataLength() else None
        tensors.append((name, shape, sig, int(t.Type()), raw, t.Sparsity() is not None))
    ops = []
    for i in range(sub.OperatorsLength()):
        o = sub.Operators(i)
        ops.append((int(o.OpcodeIndex()), tuple(int(v) for v in o.InputsAsNumpy()),
                    tuple(int(v) for v in o.OutputsAsNumpy()),
                    o.CustomOptionsAsNumpy().tobytes() if o.CustomOptionsLength() else None))
    return tensors, ops


def test_direct_reads_equal_the_generated_accessors():
    data = _model()
    info = read_model(data)
    tensors, ops = _reference(data)
    assert len(info.tensors) == len(tensors) and len(info.operators) == len(ops)
    types = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    for t, (name, shape, sig, type_code, raw, sparse) in zip(info.tensors, tensors):
        assert (t.name, t.shape, t.shape_signature, t.type_name) == (name, shape, sig, types[type_code])
        if raw is not None and not sparse:
            assert t.data is not None and t.data.tobytes() == raw
        elif not sparse:
            assert t.data is None
    by_name = {t.name: t for t in info.tensors}
    np.testing.assert_array_equal(by_name["sp"].data, [[0, 1.5, 0, 0], [2, 0, 0, 3]])
    quant = by_name["q"].quantization
    assert quant is not None and quant.scale.tolist() == [0.5] and quant.zero_point.tolist() == [1]
    assert by_name["weights"].quantization is None
    for op, (code, ins, outs, custom) in zip(info.operators, ops):
        assert (op.inputs, op.outputs, op.custom_options) == (ins, outs, custom)
    assert [op.name for op in info.operators] == ["CONV_2D", "Cube"]
    conv = info.operators[0].options(tflite.Conv2DOptions)  # options still read lazily
    assert conv is not None and conv.StrideH() == 1


def test_model_fields_equal_the_generated_accessors():
    """The Model, OperatorCode and SubGraph tables are read directly too."""
    data = _model()
    info = read_model(data)
    model = tflite.Model.GetRootAsModel(data, 0)
    sub = model.Subgraphs(0)
    assert (info.version, info.description) == (model.Version(), model.Description().decode())
    assert info.inputs == tuple(sub.InputsAsNumpy().tolist()) and info.outputs == tuple(sub.OutputsAsNumpy().tolist())
    assert info.subgraph_count == model.SubgraphsLength() and info.name == (sub.Name() or b"").decode()
    names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
    for op in info.operators:
        code = model.OperatorCodes(sub.Operators(op.index).OpcodeIndex())
        custom = code.CustomCode()
        assert (op.opcode, op.custom_code, op.version) == (
            names[max(code.BuiltinCode(), code.DeprecatedBuiltinCode())],
            custom.decode() if custom is not None else None, code.Version())


def test_reading_imports_only_the_schema_classes_it_uses():
    """The tflite package itself (its ~190 modules) is not imported by a load: only the modules
    of the classes used (enums, option tables), and they read the same values."""
    import subprocess

    code = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[1] / "model")!r})
from tflite_maker import ModelMaker
assert "tflite" not in sys.modules
import numpy as np
from webnn_gpu.tflite.reader import _fb, read_model
m = ModelMaker()
x = m.input([1, 4, 4, 3], name="image")
w = m.const(np.ones((8, 1, 1, 3), np.float32), name="weights")
q = m.const(np.ones(8, np.int8), name="q", quant=([0.5], [1], 0))
sp = m.sparse_const(np.array([[0, 1.5, 0, 0], [2, 0, 0, 3]], np.float32), name="sp")
m.output(m.op("CONV_2D", [x, w, -1], [1, 4, 4, 8], options={{"strideH": 2, "strideW": 1}}),
         m.op("ADD", [q, sp], [2, 4]))
data = m.finish()
mods = set(sys.modules)
info = read_model(data)
assert info.operators[0].options(_fb.Conv2DOptions).StrideH() == 2
by_name = {{t.name: t for t in info.tensors}}
assert by_name["q"].quantization.scale.tolist() == [0.5]
np.testing.assert_array_equal(by_name["sp"].data, [[0, 1.5, 0, 0], [2, 0, 0, 3]])
assert "tflite" not in sys.modules, "the whole package was imported"
print(len([m for m in set(sys.modules) - mods if "_schema" in m or m.startswith("tflite")]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip().splitlines()[-1]) == 0, "schema modules are not registered in sys.modules"


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_damaged_model_is_a_data_error(cut):
    data = _model()
    with pytest.raises(DataError, match="tflite.load"):
        read_model(data[:int(len(data) * cut)])


@pytest.mark.parametrize("shape", [(6, 1, 1, 9), (5, 7), (3,)])
def test_row_csr_densify_equals_the_general_walk(shape, monkeypatch):
    """The converter's layout (dense dimensions in order, the last CSR) in array operations,
    against the general walk of every level, on random sparse constants with empty rows."""
    from webnn_gpu.tflite import reader

    rng = np.random.default_rng(len(shape))
    dense = rng.standard_normal(shape).astype(np.float32) * (rng.random(shape) < 0.3)
    rows = dense.reshape(-1, shape[-1])
    segments = np.concatenate([[0], np.cumsum((rows != 0).sum(axis=1))]).astype(np.int64)
    indices = np.nonzero(rows)[1].astype(np.int64)
    values = rows[rows != 0].astype("<f4").tobytes()
    sp = reader.Sparsity(tuple(range(len(shape))), (),
                         tuple(("dense", n) for n in shape[:-1]) + (("csr", segments, indices),))
    fast = reader.densify(sp, values, "FLOAT32", shape)
    np.testing.assert_array_equal(fast, dense)
    monkeypatch.setattr(reader, "_densify_rows", lambda *a: None)
    np.testing.assert_array_equal(reader.densify(sp, values, "FLOAT32", shape), dense)
    # parameters that do not fit stay a DataError (the general walk names what is wrong)
    monkeypatch.undo()
    bad = reader.Sparsity(sp.traversal_order, (), sp.dims[:-1] + (("csr", segments[:-1], indices),))
    with pytest.raises(DataError, match="sparse tensor"):
        reader.densify(bad, values, "FLOAT32", shape)


def test_the_package_imports_the_reader_and_converter_at_first_use():
    """``webnn_gpu.tflite`` alone imports none of its submodules (a load from a kept plan needs
    none); its names are the same objects as before: ``convert`` is the function, also after
    the submodule ``convert`` was imported first, and a name a caller set is kept."""
    import subprocess

    script = (
        "import sys, types\n"
        "from webnn_gpu import tflite\n"
        "assert not [m for m in sys.modules if m.startswith('webnn_gpu.tflite.')], sys.modules.keys()\n"
        "assert {'convert', 'read_model', 'ModelInfo', 'load'} <= set(dir(tflite))\n"
        "assert tflite.read_source(b'abc') == b'abc' and tflite.GRAPH_DTYPES == ('float32', 'float16')\n"
        "mine = lambda data: data\n"
        "tflite.read_model = mine\n"
        "if sys.argv[1] == 'submodule':\n"
        "    import webnn_gpu.tflite.convert as sub\n"
        "    assert callable(sub) and not isinstance(sub, types.ModuleType)\n"
        "from webnn_gpu.tflite import convert, ModelInfo, OperatorInfo, TensorInfo, MAPPED_TO\n"
        "from webnn_gpu.tflite import convert as c2, reader, ops\n"
        "import webnn_gpu.tflite.convert\n"
        "assert convert is sys.modules['webnn_gpu.tflite.convert'].convert is c2 is tflite.convert\n"
        "assert not isinstance(tflite.convert, types.ModuleType)\n"
        "assert ModelInfo is reader.ModelInfo and MAPPED_TO is ops.MAPPED_TO and tflite.read_model is mine\n"
        "tflite._import_converter()\n"
        "assert tflite.read_model is mine and reader.read_source is tflite.read_source\n"
        "assert tflite.supported_ops() == dict(sorted(ops.MAPPED_TO.items()))\n"
        "print('ok')\n"
    )
    for first in ("package", "submodule"):
        out = subprocess.run([sys.executable, "-c", script, first], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and out.stdout.split() == ["ok"], out.stderr[-3000:]
