"""Build time: lowered models kept on disk (``webnn_gpu._plancache``): a hit builds the same
graph without reading, converting or lowering the model; anything changed misses; a broken
file is rebuilt; concurrent writers leave a whole file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import webnn_gpu as webnn
from webnn_gpu import _plancache
from webnn_gpu._lower import KernelStep

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def plans(tmp_path, monkeypatch):
    """The plan cache on (the suite runs with it off), in a folder of this test's own."""
    folder = tmp_path / "plans"
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE", "1")
    monkeypatch.delenv("WEBNN_GPU_PLAN_CACHE_MB", raising=False)
    monkeypatch.setattr(_plancache, "folder", lambda: folder)
    return folder


def _cases():
    sys.path.insert(0, str(REPO / "tests" / "model"))
    try:
        from litert_reference import run_litert
        from synthetic_models import CASES
    finally:
        sys.path.pop(0)
    return CASES, run_litert


@pytest.fixture(scope="module")
def model():
    """A small model with a conv, a depthwise conv and fused activations: (bytes, inputs, LiteRT's outputs)."""
    cases, run_litert = _cases()
    data, inputs = cases["depthwise_multiplier2_same_stride2_relu"]()
    return data, inputs, run_litert(data, inputs)


def _outputs(loaded, inputs) -> dict:
    return loaded.compute(dict(zip(loaded.input_names, inputs)))


def _no_reading(monkeypatch):
    """Make reading a TFLite model fail: a load that succeeds came from a plan."""
    import webnn_gpu.tflite as tfl

    def refuse(*a, **k):
        raise AssertionError("the model was read: not a plan-cache hit")

    monkeypatch.setattr(tfl, "read_model", refuse)


def test_a_hit_builds_the_same_graph_bit_for_bit(plans, model, ctx, monkeypatch, tmp_path):
    data, inputs, ref = model
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    first = webnn.load(path, ctx)
    files = list(plans.glob("*.plan"))
    assert len(files) == 1, "the plan of the first load is kept"
    want = _outputs(first, inputs)
    for name, r in zip(first.output_names, ref):
        np.testing.assert_allclose(want[name], r, rtol=1e-5, atol=1e-5)
    fresh = webnn.ml.create_context()  # a device of its own: every pipeline made again from the plan
    try:
        with monkeypatch.context() as mp:
            _no_reading(mp)
            again = webnn.load(path, fresh)
            from_bytes = webnn.load(data, fresh)
        assert again.describe() == first.describe() == from_bytes.describe()
        got = _outputs(again, inputs)
        assert set(got) == set(want)
        for name in want:
            assert got[name].dtype == want[name].dtype and np.array_equal(got[name], want[name]), name
        assert [s.wgsl for s in again.graph._steps if isinstance(s, KernelStep)] == \
            [s.wgsl for s in first.graph._steps if isinstance(s, KernelStep)]
        assert np.array_equal(_outputs(from_bytes, inputs)[first.output_names[0]], want[first.output_names[0]])
        # the plan's values have ids of this process, none shared with the graph it came from
        ids = {v.id for s in first.graph._steps if isinstance(s, KernelStep) for v in s.values}
        assert not ids & {v.id for s in again.graph._steps if isinstance(s, KernelStep) for v in s.values}
    finally:
        fresh.destroy()
    assert list(plans.glob("*.plan")) == files, "a hit writes nothing"


@pytest.mark.parametrize("populate", [True, False], ids=["mapping", "bytearray"])
def test_a_hit_reads_alike_into_a_mapping_or_a_bytearray(plans, model, ctx, monkeypatch, populate):
    """The file is read into an anonymous populated mapping where the system has one, else into a
    bytearray: the same plan either way, its constants' arrays writable views of what was read."""
    import mmap

    data, inputs, _ = model
    first = webnn.load(data, ctx)
    want = _outputs(first, inputs)
    if not populate:
        monkeypatch.delattr(mmap, "MAP_POPULATE", raising=False)
    assert isinstance(_plancache._buffer(64), mmap.mmap if populate and hasattr(mmap, "MAP_POPULATE") else bytearray)
    k = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    plan, _ = _plancache.load(k)
    arrays = [v.data for s in plan.steps if isinstance(s, KernelStep) for v in s.values
              if isinstance(getattr(v, "data", None), np.ndarray) and v.data.size]
    assert arrays and all(a.flags.writeable for a in arrays)
    fresh = webnn.ml.create_context()
    try:
        with monkeypatch.context() as mp:
            _no_reading(mp)
            got = _outputs(webnn.load(data, fresh), inputs)
        for name in want:
            assert np.array_equal(got[name], want[name]), name
    finally:
        fresh.destroy()


def test_the_checksum_covers_the_whole_body_in_parts():
    body = os.urandom(1000)
    assert _plancache.checksum([body]) == _plancache.checksum([body[:7], memoryview(body)[7:]])
    flipped = bytearray(body)
    flipped[500] ^= 1
    assert _plancache.checksum([flipped]) != _plancache.checksum([body])
    assert len(_plancache.checksum([b""])) == 4


@pytest.mark.parametrize("count", [2**24, 2**32 - 1])
def test_a_planted_table_count_is_refused_before_it_is_read(count):
    # a body whose first word claims a huge table: refused at once, not after building the
    # table (minutes and gigabytes for a count near 2**32)
    body = count.to_bytes(4, "little") + (0).to_bytes(8, "little")
    with pytest.raises(ValueError, match="does not fit"):
        _plancache.loads(bytearray(body))


def test_anything_changed_misses(plans, model, ctx, monkeypatch):
    data, inputs, _ = model
    webnn.load(data, ctx)
    base = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    assert base is not None and _plancache.load(base) is not None
    changed = bytearray(data)
    changed[-1] ^= 1
    assert _plancache.key("tflite", bytes(changed), {"dtype": "float32", "input_shapes": None}, ctx) != base
    assert _plancache.key("tflite", data, {"dtype": "float16", "input_shapes": None}, ctx) != base
    assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": {"x": [1]}}, ctx) != base
    assert _plancache.key("onnx", data, {"dtype": "float32", "input_shapes": None}, ctx) != base
    assert _plancache.key("tflite", data, {"custom_ops": {"X": print}}, ctx) is None, "options not data: no cache"
    with monkeypatch.context() as mp:
        mp.setenv("WEBNN_GPU_FORCE_DEPTHWISE", "strip")
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx) != base
        mp.setenv("WEBNN_GPU_PLAN_CACHE_MB", "64")
        mp.delenv("WEBNN_GPU_FORCE_DEPTHWISE")
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx) == base, \
            "the cache's own size bound is not part of the key"
        mp.setenv("WEBNN_GPU_FORCE_CONST_PACK", "each")
        mp.setenv("WEBNN_GPU_FORCE_ENCODE", "public")
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx) == base, \
            "switches read when the graph is made from its plan are not part of the key"
    with monkeypatch.context() as mp:
        mp.setattr(_plancache, "engine_hash", lambda: "another engine")
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx) != base
    other = webnn.ml.create_context()
    try:
        with monkeypatch.context() as mp:
            mp.setattr(other, "_limits", dict(other._limits, **{"max-compute-workgroup-storage-size": 1024}))
            assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, other) != base
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, other) == base, \
            "another device of the same adapter: the same plan"
    finally:
        other.destroy()
    with monkeypatch.context() as mp:
        mp.setenv("WEBNN_GPU_PLAN_CACHE", "0")
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx) is None
        mp.setenv("WEBNN_GPU_PLAN_CACHE", "1")
        mp.setenv("WEBNN_GPU_TEMPLATE_CACHE", "0")
        assert _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx) is None


def test_a_hit_uploads_its_constants_as_the_switch_says(plans, model, ctx, monkeypatch):
    """``WEBNN_GPU_FORCE_CONST_PACK`` is read when the graph is made, on a hit as on a miss: a
    plan written with the constants packed loads with a buffer per constant, the same results."""
    data, inputs, ref = model
    packed = webnn.load(data, ctx)
    assert packed.graph._const_at
    with monkeypatch.context() as mp:
        _no_reading(mp)
        mp.setenv("WEBNN_GPU_FORCE_CONST_PACK", "each")
        each = webnn.load(data, ctx)
        assert not each.graph._const_at
        got = _outputs(each, inputs)
    np.testing.assert_array_equal(next(iter(got.values())), next(iter(_outputs(packed, inputs).values())))
    np.testing.assert_allclose(next(iter(got.values())), ref[0], rtol=1e-5, atol=1e-5)


def test_a_float16_load_keeps_a_plan_of_its_own(plans, model, ctx, monkeypatch):
    if "shader-f16" not in ctx._features:
        pytest.fail("the adapter has no shader-f16")
    data, inputs, _ = model
    f32 = webnn.load(data, ctx)
    f16 = webnn.load(data, ctx, dtype="float16")
    assert len(list(plans.glob("*.plan"))) == 2
    with monkeypatch.context() as mp:
        _no_reading(mp)
        again = webnn.load(data, ctx, dtype="float16")
    name = f16.output_names[0]
    assert again.describe() == f16.describe() and f16.outputs[name]["data_type"] == "float16"
    assert f32.outputs[name]["data_type"] == "float32"
    want, got = _outputs(f16, inputs)[name], _outputs(again, inputs)[name]
    assert got.dtype == np.float16 and np.array_equal(got, want)


@pytest.mark.parametrize("damage", ["truncated", "flipped", "empty", "garbage", "foreign key", "foreign class"])
def test_a_broken_file_is_rebuilt_never_an_error(plans, model, ctx, damage, monkeypatch):
    data, inputs, _ = model
    want = _outputs(webnn.load(data, ctx), inputs)
    path, = plans.glob("*.plan")
    good = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif damage == "flipped":
        bad = bytearray(good)
        bad[-100] ^= 0x40  # inside the pickled constants: only the checksum can tell
        path.write_bytes(bytes(bad))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(os.urandom(len(good)))
    elif damage == "foreign class":  # header and checksum right, but the pickle calls os.getcwd
        import pickle

        payload = b"\x80\x05cposix\ngetcwd\n)R."  # GLOBAL posix.getcwd, (), REDUCE
        body = (0).to_bytes(4, "little") + len(payload).to_bytes(8, "little") + payload
        head = good[:len(_plancache._MAGIC) + 32]
        path.write_bytes(head + len(body).to_bytes(8, "little") + _plancache.checksum([body]) + body)
        with pytest.raises(pickle.UnpicklingError, match="not part of a plan"):
            _plancache.loads(body)
    else:  # a whole, valid file of another key under this name
        kept = _plancache.load(_plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx))
        assert _plancache.store("0" * 64, *kept)
        (plans / f"{'0' * 40}.plan").replace(path)
    reads = []
    import webnn_gpu.tflite as tfl

    real = tfl.read_model
    monkeypatch.setattr(tfl, "read_model", lambda d: (reads.append(1), real(d))[1])
    loaded = webnn.load(data, ctx)
    assert reads == [1], "read and built again"
    got = _outputs(loaded, inputs)
    for name in want:
        assert np.array_equal(got[name], want[name])
    k = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    assert _plancache.load(k) is not None, "written again, whole"
    with monkeypatch.context() as mp:
        _no_reading(mp)
        got = _outputs(webnn.load(data, ctx), inputs)
    for name in want:
        assert np.array_equal(got[name], want[name])


def test_two_processes_writing_at_once_leave_a_whole_file(plans, model, ctx, tmp_path):
    """Writers of the same key race (each writes a file of its own, then renames it over the
    key's): a reader finds a whole plan, and the temporary files are gone."""
    data, inputs, _ = model
    want = _outputs(webnn.load(data, ctx), inputs)
    k = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    src = tmp_path / "kept.plan"
    (plans / f"{k[:40]}.plan").replace(src)
    script = (
        "import sys, pathlib\n"
        "from webnn_gpu import _plancache\n"
        "folder = pathlib.Path(sys.argv[1]); _plancache.folder = lambda: folder\n"
        "plan, meta = _plancache.loads(pathlib.Path(sys.argv[2]).read_bytes()[_plancache._HEADER:])\n"
        "for _ in range(20):\n"
        "    assert _plancache.store(sys.argv[3], plan, meta)\n"
    )
    env = dict(os.environ, WEBNN_GPU_PLAN_CACHE="1")
    procs = [subprocess.Popen([sys.executable, "-c", script, str(plans), str(src), k], env=env) for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    assert sorted(p.name for p in plans.iterdir()) == [f"{k[:40]}.plan"], "one file, no temporary ones left"
    loaded = webnn.load(data, ctx)
    got = _outputs(loaded, inputs)
    for name in want:
        assert np.array_equal(got[name], want[name])


def test_the_folder_is_bounded_least_recently_used_first(plans, model, ctx, monkeypatch):
    data, _, _ = model
    webnn.load(data, ctx)
    k = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    plan, meta = _plancache.load(k)
    size = (plans / f"{k[:40]}.plan").stat().st_size
    keys = [str(i) * 64 for i in range(1, 5)]
    for i, key in enumerate(keys):
        assert _plancache.store(key, plan, meta)
        os.utime(plans / f"{key[:40]}.plan", (1000 + i, 1000 + i))
    os.utime(plans / f"{k[:40]}.plan", (999, 999))
    assert _plancache.load(keys[0]) is not None  # used now: the most recent
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE_MB", str(3.5 * size / (1 << 20)))
    assert _plancache.store(keys[1], plan, meta)  # written again, then the folder is pruned
    left = sorted(p.name[:40] for p in plans.glob("*.plan"))
    assert left == sorted(x[:40] for x in (keys[0], keys[1], keys[3])), "the oldest two went"
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE_MB", str(0.5 * size / (1 << 20)))
    assert not _plancache.store(keys[2], plan, meta), "larger than the bound: not kept"


def test_an_unwritable_folder_costs_time_never_an_error(tmp_path, model, ctx, monkeypatch):
    data, inputs, ref = model
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE", "1")
    monkeypatch.setattr(_plancache, "folder", lambda: blocker / "plans")
    loaded = webnn.load(data, ctx)
    np.testing.assert_allclose(next(iter(_outputs(loaded, inputs).values())), ref[0], rtol=1e-5, atol=1e-5)


def test_a_plan_with_a_constant_tensor_is_not_kept(plans, ctx):
    b = webnn.MLGraphBuilder(ctx)
    x = b.input("x", {"data_type": "float32", "shape": [4]})
    c = ctx.create_constant_tensor({"data_type": "float32", "shape": [4]}, np.ones(4, np.float32))
    g = b.build({"y": b.add(x, b.constant(c))})
    assert not _plancache.store("1" * 64, g._plan, {})
    assert not list(plans.glob("*"))


def test_a_hit_keeps_the_models_pipeline_list(plans, model, tmp_path, monkeypatch):
    """The texts of a plan were not rendered in this process: the model's pipeline list
    (``ModelPrefetch``) still names every one of them, and the next load starts them all."""
    import json

    from webnn_gpu import _kernels

    data, inputs, _ = model
    folder = tmp_path / "wgsl"
    folder.mkdir()
    monkeypatch.setattr(_kernels, "PIPELINE_THREADS", 2)
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [folder])
    monkeypatch.setattr(_kernels, "_RENDERED", type(_kernels._RENDERED)())
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    contexts = [webnn.ml.create_context() for _ in range(3)]
    try:
        first = webnn.load(path, contexts[0])
        listed_file, = (folder / "models").glob("*.json")
        listed = json.loads(listed_file.read_text())["pipelines"]
        keys = {contexts[0]._pipelines.key(s.wgsl) for s in first.graph._steps if isinstance(s, KernelStep)}
        assert {e[0] for e in listed} == keys
        monkeypatch.setattr(_kernels, "_RENDERED_FILE", type(_kernels._RENDERED_FILE)())  # a new process
        for name in [e[1] for e in listed][:1]:
            (folder / name).unlink()  # one text gone: the hit writes it again
        with monkeypatch.context() as mp:
            _no_reading(mp)
            webnn.load(path, contexts[1])
        again = json.loads(listed_file.read_text())["pipelines"]
        assert {e[0] for e in again} == keys, "every text still listed"
        for key, name, _, _ in again:
            assert _kernels.PipelineCache.key((folder / name).read_text()) == key
        pf = _kernels.ModelPrefetch.start(contexts[2], path, {})
        assert sorted(pf.started) == sorted(keys), "the next load starts them all"
        pf.finish(None)
    finally:
        for c in contexts:
            c.destroy()


def test_a_hit_in_a_fresh_process_imports_no_reader_or_converter(plans, model, ctx, tmp_path):
    """A load built from its kept plan reads and converts nothing, so it imports neither the
    reader, the converter nor the operator tables (``webnn_gpu.tflite``'s names are imported at
    first use); the graph gives the same outputs bit for bit."""
    data, inputs, _ = model
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    want = _outputs(webnn.load(path, ctx), inputs)
    np.savez(tmp_path / "inputs.npz", *inputs)
    script = (
        "import sys\n"
        "import numpy as np\n"
        "import webnn_gpu as webnn\n"
        "loaded = webnn.load(sys.argv[1], webnn.ml.create_context())\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('webnn_gpu.tflite.'))) or '-')\n"
        "ins = np.load(sys.argv[2])\n"
        "got = loaded.compute(dict(zip(loaded.input_names, (ins[f'arr_{i}'] for i in range(len(ins.files))))))\n"
        "np.savez(sys.argv[3], **got)\n"
    )
    env = dict(os.environ, WEBNN_GPU_PLAN_CACHE="1", WEBNN_GPU_PLAN_CACHE_DIR=str(plans))
    out = subprocess.run([sys.executable, "-c", script, str(path), str(tmp_path / "inputs.npz"),
                          str(tmp_path / "got.npz")], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["-"], "a hit imported " + out.stdout
    got = np.load(tmp_path / "got.npz")
    assert sorted(got.files) == sorted(want)
    for name in want:
        assert np.array_equal(got[name], want[name])


# ---------------------------------------------------------------------------- crafted files

def _call(module: str, name: str, *args) -> bytes:
    """A pickle (protocol 4) that calls ``module``'s ``name`` (STACK_GLOBAL: the name may hold
    dots) with string and empty-dict arguments."""
    import pickle

    def s(x: str) -> bytes:
        b = x.encode()
        return pickle.SHORT_BINUNICODE + bytes([len(b)]) + b

    out = b"\x80\x04" + s(module) + s(name) + pickle.STACK_GLOBAL + pickle.MARK
    for a in args:
        out += s(a) if isinstance(a, str) else pickle.EMPTY_DICT
    return out + pickle.TUPLE + pickle.REDUCE + pickle.STOP


def _plant(payload: bytes, key: str) -> bytes:
    """A plan file under ``key`` whose header and checksum are right and whose pickle is
    ``payload``; returns its body."""
    body = (0).to_bytes(4, "little") + len(payload).to_bytes(8, "little") + payload
    head = _plancache._MAGIC + bytes.fromhex(key) + len(body).to_bytes(8, "little") + _plancache.checksum([body])
    path = _plancache._path(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(head + body)
    return body


@pytest.mark.parametrize("module, name, args", [
    ("webnn_gpu._plancache", "os.system", ("touch {marker}",)),  # a dotted name inside an allowed module
    ("webnn_gpu._plancache", "_make.__globals__.get", ("x",)),
    ("builtins", "eval", ("open({marker!r}, 'w')",)),
    ("builtins", "getattr", ("x", "y")),
    ("builtins", "exec", ("open({marker!r}, 'w')",)),
    ("numpy", "load", ("{marker}",)),  # whole modules are not allowed
    ("numpy._core.numeric", "_frombuffer", ("x",)),  # nor NumPy's own array pickling
    ("types", "FunctionType", ("x",)),
    ("webnn_gpu", "load", ("{marker}",)),
    ("webnn_gpu._kernels", "_shader_root", ()),
    ("posix", "system", ("touch {marker}",)),
])
def test_a_plan_names_only_the_caches_own_four_functions(plans, tmp_path, module, name, args):
    """A crafted file (a shared cache folder) with the right header and checksum cannot call
    anything but ``_make``, ``_stub``, ``_value`` and ``_array``: a miss, nothing run."""
    import pickle

    marker = tmp_path / "ran"
    body = _plant(_call(module, name, *(a.format(marker=str(marker)) for a in args)), "ab" * 32)
    assert _plancache.load("ab" * 32) is None
    with pytest.raises(pickle.UnpicklingError, match="not part of a plan"):
        _plancache.loads(body)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["MLContext", "Value", "Node", "type", "KernelStep.__init__"])
def test_make_builds_only_steps_and_plans(plans, kind):
    import pickle

    body = _plant(_call("webnn_gpu._plancache", "_make", kind, {}), "cd" * 32)
    assert _plancache.load("cd" * 32) is None
    with pytest.raises(pickle.UnpicklingError, match="not a part of a plan"):
        _plancache.loads(body)


def test_a_plan_cannot_change_the_functions_it_names(plans):
    """pickle's BUILD sets attributes of the object on the stack: not of the cache's functions."""
    import pickle

    payload = (b"\x80\x04" + pickle.SHORT_BINUNICODE + bytes([20]) + b"webnn_gpu._plancache"
               + pickle.SHORT_BINUNICODE + bytes([5]) + b"_make" + pickle.STACK_GLOBAL
               + pickle.NONE + pickle.EMPTY_DICT + pickle.SHORT_BINUNICODE + bytes([12]) + b"__qualname__"
               + pickle.SHORT_BINUNICODE + bytes([4]) + b"evil" + pickle.SETITEM + pickle.TUPLE2
               + pickle.BUILD + pickle.STOP)
    _plant(payload, "ef" * 32)
    assert _plancache.load("ef" * 32) is None
    assert _plancache._make.__qualname__ == "_make"
    assert _plancache._GLOBALS[("webnn_gpu._plancache", "_make")]._fn is _plancache._make


def test_the_docstring_names_what_a_plan_may_name():
    doc = _plancache.__doc__
    assert {m for m, _ in _plancache._GLOBALS} == {"webnn_gpu._plancache"}
    for _, name in _plancache._GLOBALS:
        assert f"``{name}``" in doc, name


def test_the_key_is_the_same_whether_or_not_the_reader_was_imported():
    """The engine hash names the reader's packages by what is installed, not by what the
    process imported first: a process that imported tflite hits plans written by others."""
    script = ("import sys\n"
              "if sys.argv[1] == '1':\n"
              "    import tflite, flatbuffers\n"
              "from webnn_gpu import _plancache\n"
              "print(_plancache.engine_hash())\n")
    got = [subprocess.run([sys.executable, "-c", script, first], capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip() for first in ("0", "1")]
    assert len(got[0]) == 64 and got[0] == got[1]


@pytest.mark.parametrize("bound", ["inf", "nan", "-inf", "1e400", "lots"])
def test_any_size_bound_loads(plans, model, ctx, monkeypatch, bound):
    data, inputs, ref = model
    monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE_MB", bound)
    loaded = webnn.load(data, ctx)
    np.testing.assert_allclose(next(iter(_outputs(loaded, inputs).values())), ref[0], rtol=1e-5, atol=1e-5)
    kept = len(list(plans.glob("*.plan")))
    assert kept == (0 if bound == "-inf" else 1), "inf: no bound; not a number: the default"


def test_a_failure_to_store_never_fails_the_load(plans, model, ctx, monkeypatch):
    data, inputs, ref = model

    def fail(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(_plancache, "prune", fail)
    loaded = webnn.load(data, ctx)
    np.testing.assert_allclose(next(iter(_outputs(loaded, inputs).values())), ref[0], rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(_plancache, "dumps", fail)
    assert _plancache.store("12" * 32, loaded.graph._plan, {}) is False


def test_a_bad_context_fails_alike_on_a_hit_and_a_miss(plans, model, ctx, monkeypatch):
    from webnn_gpu.errors import InvalidStateError, MLTypeError

    data, _, _ = model
    webnn.load(data, ctx)
    assert len(list(plans.glob("*.plan"))) == 1
    dead = webnn.ml.create_context()
    dead.destroy()
    errors = []
    for cache in ("1", "0"):  # a hit, then a miss
        monkeypatch.setenv("WEBNN_GPU_PLAN_CACHE", cache)
        with pytest.raises(InvalidStateError) as destroyed:
            webnn.load(data, dead)
        with pytest.raises(MLTypeError) as not_one:
            webnn.load(data, "not a context")
        errors.append((str(destroyed.value), str(not_one.value)))
    assert errors[0] == errors[1]
    assert errors[0][0] == "MLGraphBuilder: the MLContext has been destroyed or lost"


def test_a_huge_file_is_not_read(plans, model, ctx):
    """A sparse ``<key>.plan`` larger than the folder's bound is a miss, never read into
    memory (4 TiB here: a MemoryError if it were)."""
    data, inputs, ref = model
    k = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    path = _plancache._path(k)
    path.parent.mkdir(parents=True)
    with open(path, "wb") as fh:
        fh.truncate(1 << 42)
    assert _plancache.load(k) is None
    loaded = webnn.load(data, ctx)
    np.testing.assert_allclose(next(iter(_outputs(loaded, inputs).values())), ref[0], rtol=1e-5, atol=1e-5)
    assert path.stat().st_size < 1 << 20, "written again, whole"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_of_a_plans_name_does_not_block(plans, model, ctx):
    import threading

    data, inputs, ref = model
    k = _plancache.key("tflite", data, {"dtype": "float32", "input_shapes": None}, ctx)
    path = _plancache._path(k)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    got = []
    reader = threading.Thread(target=lambda: got.append(_plancache.load(k)), daemon=True)
    reader.start()
    reader.join(10)
    blocked = reader.is_alive()
    if blocked:  # open() waits for a writer: give it one, so the thread ends
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(10)
    assert not blocked and got == [None]
    loaded = webnn.load(data, ctx)
    np.testing.assert_allclose(next(iter(_outputs(loaded, inputs).values())), ref[0], rtol=1e-5, atol=1e-5)
    assert path.is_file() and _plancache.load(k) is not None, "a plan written in its place"


def test_the_suite_runs_with_the_plan_cache_off_whatever_the_shell_says():
    """tests/conftest.py turns the cache off even when the developer exported it on (the
    suite must not read or fill the real cache folder)."""
    script = ("import os, runpy\n"
              f"runpy.run_path({str(REPO / 'tests' / 'conftest.py')!r})\n"
              "print(os.environ['WEBNN_GPU_PLAN_CACHE'])\n")
    env = dict(os.environ, WEBNN_GPU_PLAN_CACHE="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True,
                         timeout=120).stdout
    assert out.split() == ["0"]


@pytest.mark.parametrize("form", ["texture", "words"])
def test_a_hit_keeps_a_constant_read_from_a_texture(plans, ctx, monkeypatch, tmp_path, form):
    """A wide head's weights are a texture (``linalg.TextureConstant``, on lavapipe, where
    ``WEBNN_GPU_FORCE_MATMUL_MATVEC_B=texture`` keeps them from the words form) or, by default
    there, float16 words (weights of float16 values: a float16 copy of the packed matrix): a hit
    keeps the form and gives the same outputs, close to float64 NumPy."""
    if form == "texture":
        monkeypatch.setenv("WEBNN_GPU_FORCE_MATMUL_MATVEC_B", "texture")
    sys.path.insert(0, str(REPO / "tests" / "model"))
    try:
        from tflite_maker import ModelMaker
    finally:
        sys.path.pop(0)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((1030, 288)).astype(np.float32)  # 1.2 MB of weights: past 64 KiB
    if form == "words":
        w = w.astype(np.float16).astype(np.float32)
    bias = rng.standard_normal(1030).astype(np.float32)
    m = ModelMaker()
    x = m.input([1, 288])
    m.output(m.op("FULLY_CONNECTED", [x, m.const(w), m.const(bias)], [1, 1030], options=dict(keepNumDims=False)))
    path = tmp_path / "head.tflite"
    path.write_bytes(m.finish())
    xs = rng.standard_normal((1, 288)).astype(np.float32)
    ref = xs.astype(np.float64) @ w.T.astype(np.float64) + bias
    first = webnn.load(path, ctx)
    textures = [v for s in first.graph._steps if isinstance(s, KernelStep) for v in s.values
                if getattr(v, "texture_width", 0)]
    wgsl = [s.wgsl for s in first.graph._steps if isinstance(s, KernelStep) and s.template == "matmul/matvec.wgsl"]
    if ctx._tuning == "lane-loop" and form == "texture":
        assert textures, "the head's weights are read from a texture on lavapipe"
    if ctx._tuning == "lane-loop" and form == "words" and "shader-int64" in ctx._features:
        assert not textures and wgsl and "unpack2x16float" in wgsl[0]
    want = first.compute({first.input_names[0]: xs})[first.output_names[0]]
    np.testing.assert_allclose(want, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    with monkeypatch.context() as mp:
        _no_reading(mp)
        again = webnn.load(path, ctx)
    kept = [v for s in again.graph._steps if isinstance(s, KernelStep) for v in s.values
            if getattr(v, "texture_width", 0)]
    assert [(type(v), v.texture_width, v.shape) for v in kept] == [(type(v), v.texture_width, v.shape) for v in textures]
    assert [s.wgsl for s in again.graph._steps if isinstance(s, KernelStep) and s.template == "matmul/matvec.wgsl"] == wgsl
    assert np.array_equal(again.compute({again.input_names[0]: xs})[again.output_names[0]], want)
