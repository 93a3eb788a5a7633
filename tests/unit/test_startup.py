"""webnn_gpu._startup: wgpu-py's cffi types parse to the same types, faster."""

import cffi
import pytest

from webnn_gpu import _startup

@pytest.fixture(autouse=True)
def _own_type_cache(tmp_path, monkeypatch):
    """Each test keeps its type-string trees in its own cache folder, starting from none (the
    user's cache is neither read nor written)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_startup, "_TREES", None)
    monkeypatch.setattr(_startup, "_TREES_DIRTY", False)


# The struct, pointer, array, function-pointer and enum types wgpu-py asks cffi for.
TYPES = [
    "WGPUComputePipelineDescriptor *", "WGPUBindGroupEntry[]", "WGPUBindGroupDescriptor *",
    "WGPUBufferMapCallback", "WGPUShaderModuleWGSLDescriptor *", "WGPUFeatureName[]",
    "WGPUCommandBuffer[]", "WGPULimits *", "uint32_t[]", "char *", "WGPUTextureFormat *",
]


def _wgpu_ffis():
    from wgpu.backends.wgpu_native._ffi import get_wgpu_header

    plain, patched = cffi.FFI(), cffi.FFI()
    for ffi in (plain, patched):
        ffi.cdef(get_wgpu_header())
    assert _startup.speed_up_cffi_types(patched)
    return plain, patched


def test_wgpu_types_parse_the_same():
    plain, patched = _wgpu_ffis()
    known = [t for t in TYPES if _parses(plain, t)]
    assert len(known) >= 8, known  # the header names most of them (names move between versions)
    for t in known:
        a, b = plain.typeof(t), patched.typeof(t)
        assert a.cname == b.cname and a.kind == b.kind, t
        if a.kind in ("struct", "pointer", "primitive", "enum"):
            item = a.item if a.kind == "pointer" else a
            assert plain.sizeof(item) == patched.sizeof(b.item if b.kind == "pointer" else b), t


def _parses(ffi, t):
    try:
        ffi.typeof(t)
        return True
    except (cffi.CDefError, cffi.FFIError):
        return False


def test_unknown_names_still_fail_the_same_way():
    plain, patched = _wgpu_ffis()
    for t in ("WGPUNoSuchThing *", "struct WGPUNoSuchThing *x y"):
        with pytest.raises(Exception) as a:
            plain.typeof(t)
        with pytest.raises(Exception) as b:
            patched.typeof(t)
        assert type(a.value) is type(b.value), t


def test_a_typedef_named_in_the_string_changes_how_it_parses():
    # "T * x" is a declaration only when T is a type name: the kept typedefs must be the ones
    # the string mentions, or pycparser would misread it.
    ffi = cffi.FFI()
    ffi.cdef("typedef struct { int a; double b; } T; typedef T U[3]; typedef int (*F)(T *, U);")
    assert _startup.speed_up_cffi_types(ffi)
    assert ffi.sizeof("T") == ffi.sizeof("struct { int a; double b; }")
    assert ffi.typeof("U *").item.length == 3
    assert ffi.typeof("F").kind == "function"


def test_only_the_mentioned_typedefs_are_declared(monkeypatch):
    from cffi import cparser

    seen = []
    real = cparser._get_parser()
    monkeypatch.setattr(cparser, "_get_parser", lambda: _Recorder(real, seen))
    monkeypatch.setattr(_startup, "_TREES", {})  # no type string parsed before
    plain, patched = _wgpu_ffis()
    assert _startup.speed_up_cffi_types(patched)  # a second call keeps one wrapper
    seen.clear()
    plain.typeof("WGPUBindGroupDescriptor *")
    patched.typeof("WGPUBindGroupDescriptor *")
    unpatched_count, patched_count = (src.count("typedef int ") for src in seen)
    assert unpatched_count > 300  # every typedef of wgpu.h: what made each new type cost ~40 ms
    assert patched_count <= 3


def _same_type(plain, patched, t):
    a, b = plain.typeof(t), patched.typeof(t)
    assert a.cname == b.cname and a.kind == b.kind, t
    if a.kind == "pointer":
        a, b = a.item, b.item
    if a.kind in ("struct", "primitive", "enum"):
        assert plain.sizeof(a) == patched.sizeof(b), t
        if a.kind == "struct":
            assert [(n, f.type.cname, f.offset) for n, f in a.fields] == \
                [(n, f.type.cname, f.offset) for n, f in b.fields], t


def test_type_string_trees_are_kept_on_disk_and_give_the_same_types(tmp_path, monkeypatch):
    """A second process finds the syntax trees of the type strings the first one parsed (no
    pycparser run) and cffi makes the same types of them."""
    from cffi import cparser

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_startup, "_TREES", None)
    monkeypatch.setattr(_startup, "_TREES_DIRTY", False)
    plain, patched = _wgpu_ffis()
    known = [t for t in TYPES if _parses(plain, t)]
    fn = "void(WGPUMapAsyncStatus, WGPUStringView, void *, void *)"
    if _parses(plain, fn):
        known.append(fn)
    for t in known:
        _same_type(plain, patched, t)
    _startup._write_type_trees()  # what the first process does at exit
    files = list((tmp_path / "webnn-gpu").glob("cffi-types-*.pickle"))
    assert len(files) == 1

    monkeypatch.setattr(_startup, "_TREES", None)  # a second process: read from disk
    seen = []
    real = cparser._get_parser()
    monkeypatch.setattr(cparser, "_get_parser", lambda: _Recorder(real, seen))
    _, again = _wgpu_ffis()
    seen.clear()
    for t in known:
        _same_type(plain, again, t)
    assert seen == [], "every type string was parsed before"
    again.typeof("struct { int a; } *")  # a struct body is parsed each time, not kept
    assert len(seen) == 1


def test_a_damaged_or_foreign_type_cache_is_ignored(tmp_path, monkeypatch):
    import pickle

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = _startup._trees_path()
    path.parent.mkdir(parents=True)
    plain, _ = _wgpu_ffis()
    key = ("void __dummy(\nWGPULimits *\n);", ("WGPULimits",))
    other = cffi.FFI()
    other.cdef("typedef struct { int a; } WGPULimits;")
    tree = other._parser._parse(key[0])  # a tree of the right shape, but not for this string
    for body in (b"not a pickle", pickle.dumps({key: (print, {}, key[0])}), pickle.dumps([1, 2]),
                 pickle.dumps({key: ("a tree", {}, "another source")}), pickle.dumps({key: ("a tree", {}, key[0])}),
                 pickle.dumps({key: (tree[0], {"M": "1"}, key[0])}),
                 pickle.dumps({key: (tree[0].__class__([]), {}, key[0])})):
        path.write_bytes(body)
        monkeypatch.setattr(_startup, "_TREES", None)
        monkeypatch.setattr(_startup, "_TREES_DIRTY", False)
        _, patched = _wgpu_ffis()
        _same_type(plain, patched, "WGPULimits *")
        assert key not in _startup._TREES or _startup._TREES[key][0] != "a tree"
    monkeypatch.setattr(_startup, "_TREES", None)
    monkeypatch.setenv("WEBNN_GPU_TEMPLATE_CACHE", "0")
    assert _startup._trees_path() is None and _startup._type_trees() == {}


def test_sized_arrays_are_not_kept_and_the_table_is_bounded(monkeypatch):
    """Type strings with a size in brackets (one entry per size) are parsed each time; at most
    _TREES_MAX trees are kept."""
    plain, patched = _wgpu_ffis()
    patched.new("uint8_t[4096]")
    patched.typeof("uint32_t[]")
    assert [k[0] for k in _startup._type_trees()] == ["void __dummy(\nuint32_t[]\n);"]
    monkeypatch.setattr(_startup, "_TREES_MAX", 1)
    patched.typeof("WGPULimits *")
    assert len(_startup._type_trees()) == 1
    _same_type(plain, patched, "WGPULimits *")


class _Recorder:
    def __init__(self, parser, seen):
        self._parser, self._seen = parser, seen

    def parse(self, source, *args, **kwargs):
        self._seen.append(source)
        return self._parser.parse(source, *args, **kwargs)


def test_an_ffi_without_the_expected_internals_is_left_alone():
    class Odd:
        pass

    assert not _startup.speed_up_cffi_types(Odd())


def test_compiled_templates_are_kept_on_disk_and_render_the_same(tmp_path, monkeypatch):
    import jinja2

    from webnn_gpu import _kernels

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    texts = []
    for _ in range(2):  # the first environment compiles and stores, the second loads
        env = jinja2.Environment(loader=_kernels._env.loader, bytecode_cache=_kernels._bytecode_cache(),
                                 undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        texts.append(env.get_template("_lib/io.wgsl").module)
    assert list((tmp_path / "webnn-gpu").glob("jinja-*/*.cache"))
    assert dir(texts[0]) == dir(texts[1])
    monkeypatch.setenv("WEBNN_GPU_TEMPLATE_CACHE", "0")
    assert _kernels._bytecode_cache() is None


def test_a_template_cache_that_cannot_be_written_or_read_costs_time_not_errors(tmp_path, monkeypatch):
    import jinja2

    from webnn_gpu import _kernels

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache = _kernels._bytecode_cache()
    for entry in (tmp_path / "webnn-gpu").glob("jinja-*"):
        entry.rmdir()
        entry.write_text("not a directory")  # every write and read of the cache now fails

    def env(bcc):
        return jinja2.Environment(loader=_kernels._env.loader, bytecode_cache=bcc, undefined=jinja2.StrictUndefined)

    for name in ("_lib/io.wgsl", "reduce/_lib.wgsl"):
        assert env(cache).get_template(name).name == name
    with pytest.raises(OSError):  # what Jinja's own cache does there
        env(jinja2.FileSystemBytecodeCache(cache.directory)).get_template("_lib/io.wgsl")


def _kernel_context():
    from webnn_gpu import _kernels

    return _kernels.KernelContext("conv/permute.wgsl", [_kernels.Binding("in", "float32"),
                                                         _kernels.Binding("out", "float32", output=True)], 24,
                                  vars={"out_strides": [12, 4, 1], "in_strides": [1, 2, 6]})


def test_rendered_wgsl_is_kept_on_disk_keyed_by_every_template(tmp_path, monkeypatch):
    """A second process reads the rendered text instead of rendering; the folder's name hashes
    every template, so an edited template never reads a stale text."""
    from webnn_gpu import _kernels

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [])
    monkeypatch.setattr(_kernels, "_RENDERED", type(_kernels._RENDERED)())
    try:
        first = _kernel_context().render()
    except Exception as exc:  # the context above must match the template's variables
        pytest.fail(f"rendering the test kernel failed: {exc}")
    files = list((tmp_path / "webnn-gpu").glob("wgsl-*/*.wgsl"))
    assert len(files) == 1 and files[0].read_text() == first
    files[0].write_text(first + "// from disk\n")  # what a second process would read
    monkeypatch.setattr(_kernels, "_RENDERED", type(_kernels._RENDERED)())
    assert _kernel_context().render() == first + "// from disk\n"

    shaders = tmp_path / "shaders"  # the same templates, one of them edited: another folder
    import shutil
    shutil.copytree(_kernels._shader_root(), shaders)
    (shaders / "_lib" / "io.wgsl").write_text((shaders / "_lib" / "io.wgsl").read_text() + "\n")
    monkeypatch.setattr(_kernels, "_shader_root", lambda: shaders)
    folder = _kernels._rendered_dir()
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [])
    assert _kernels._rendered_dir() != folder
    monkeypatch.setenv("WEBNN_GPU_TEMPLATE_CACHE", "0")
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [])
    assert _kernels._rendered_dir() is None


def test_a_rendered_wgsl_cache_that_cannot_be_written_costs_time_not_errors(tmp_path, monkeypatch):
    from webnn_gpu import _kernels

    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [blocked / "wgsl"])  # every read and write fails
    monkeypatch.setattr(_kernels, "_RENDERED", type(_kernels._RENDERED)())
    assert "fn main" in _kernel_context().render()


def test_pipelines_compile_on_threads_and_report_the_failing_kernel(ctx, monkeypatch):
    from webnn_gpu import _kernels
    from webnn_gpu.errors import OperationError

    monkeypatch.setattr(_kernels, "PIPELINE_THREADS", 2)
    cache = _kernels.PipelineCache(ctx.device)
    ok = ["@compute @workgroup_size(1) fn main() { let a = %d; }" % i for i in range(3)]
    pipes = cache.get_many([(w, "t.wgsl", f"k{i}") for i, w in enumerate(ok + ok[:1])])
    assert len({id(p) for p in pipes}) == 3 and pipes[0] is pipes[3]
    assert (cache.misses, cache.hits) == (3, 1)
    bad = "@compute @workgroup_size(1) fn main() { let a = undefined_name; }"
    with pytest.raises(OperationError, match="kbad: our kernel failed to compile"):
        cache.get_many([(ok[0], "t.wgsl", "k0"), (bad, "bad.wgsl", "kbad"), (ok[1] + " ", "t.wgsl", "k9")])
    assert len(cache) == 3, "nothing of the failed call is kept"


def test_pipeline_keys_hashed_once_and_the_file_index_bounded(tmp_path, monkeypatch):
    """``PipelineCache.key`` is the SHA-1 of the entry point and text, worked out once per text;
    the index of rendered files (what a model's pipeline list names) keeps the last
    ``RENDER_CACHE_SIZE`` texts, the latest renders among them."""
    import hashlib

    from webnn_gpu import _kernels

    text = "// a kernel\n" * 3000
    calls = []
    real = hashlib.sha1
    monkeypatch.setattr(_kernels.hashlib, "sha1", lambda data=b"": (calls.append(len(data)), real(data))[1])
    _kernels._text_key.cache_clear()
    keys = {_kernels.PipelineCache.key(text) for _ in range(4)}
    assert keys == {real(b"main\0" + text.encode()).hexdigest()} and len(calls) == 1
    assert _kernels.PipelineCache.key(text, "other") != next(iter(keys)) and len(calls) == 2
    monkeypatch.setattr(_kernels.hashlib, "sha1", real)

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(_kernels, "_RENDERED_DIR", [])
    monkeypatch.setattr(_kernels, "_RENDERED", type(_kernels._RENDERED)())
    monkeypatch.setattr(_kernels, "_RENDERED_FILE", type(_kernels._RENDERED_FILE)())
    monkeypatch.setattr(_kernels, "RENDER_CACHE_SIZE", 2)

    def render(n):
        return _kernels.KernelContext("conv/permute.wgsl", [_kernels.Binding("in", "float32"),
                                                            _kernels.Binding("out", "float32", output=True)], n,
                                      vars={"out_strides": [12, 4, 1], "in_strides": [1, 2, 6]}).render()

    texts = [render(n) for n in (24, 48, 96)]
    assert len(set(texts)) == 3
    index = _kernels._RENDERED_FILE
    assert list(index) == [_kernels.PipelineCache.key(t) for t in texts[1:]], "the last two"
    assert render(48) == texts[1] and list(index)[-1] == _kernels.PipelineCache.key(texts[1]), "a hit is the latest"


def _declared(ffi) -> dict:
    """What a cdef declared, by value: each declaration's kind, C name and qualifiers (a struct's
    fields too), and the integer constants."""
    def describe(tp):
        if not hasattr(tp, "_get_c_name"):  # a constant's value
            return [type(tp).__name__, tp]
        out = [type(tp).__name__, tp._get_c_name()]
        if getattr(tp, "fldnames", None) is not None:
            out += [tp.fldnames, [t._get_c_name() for t in tp.fldtypes], tp.fldbitsize, tp.fldquals]
        return out

    p = ffi._parser
    return {"decls": {k: (describe(tp), q) for k, (tp, q) in p._declarations.items()},
            "ints": dict(p._int_constants), "sources": len(ffi._cdefsources)}


def test_the_wgpu_header_parse_is_kept_on_disk_and_declares_the_same(tmp_path, monkeypatch):
    """cached_cdef: the first cdef parses and stores, the second loads what the parse made; both
    declare what a plain cdef does, and types and sizes read the same."""
    from wgpu.backends.wgpu_native._ffi import get_wgpu_header

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    header = get_wgpu_header()
    plain = cffi.FFI()
    plain.cdef(header)
    cdef = _startup.cached_cdef(cffi.FFI.cdef)
    parsed, loaded = cffi.FFI(), cffi.FFI()
    calls = []
    monkeypatch.setattr(cffi.cparser.Parser, "parse", lambda self, *a, real=cffi.cparser.Parser.parse, **k:
                        (calls.append(1), real(self, *a, **k))[1])
    cdef(parsed, header)
    assert len(calls) == 1 and len(list((tmp_path / "webnn-gpu").glob("cffi-*.pickle"))) == 1
    cdef(loaded, header)
    assert len(calls) == 1, "the second cdef loads, it does not parse"
    assert _declared(parsed) == _declared(plain) == _declared(loaded)
    for t in [t for t in TYPES if _parses(plain, t)]:
        a, b = plain.typeof(t), loaded.typeof(t)
        assert (a.cname, a.kind) == (b.cname, b.kind), t
        if a.kind in ("struct", "pointer", "primitive", "enum"):
            item = a.item if a.kind == "pointer" else a
            assert plain.sizeof(item) == loaded.sizeof(b.item if b.kind == "pointer" else b), t


def test_a_cdef_cache_that_is_damaged_or_off_parses(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cdef = _startup.cached_cdef(cffi.FFI.cdef)
    src = "typedef struct { int a; double b; } T; enum E { X = 3 };"
    cdef(cffi.FFI(), src)
    path, = (tmp_path / "webnn-gpu").glob("cffi-*.pickle")
    path.write_bytes(b"not a pickle")
    ffi = cffi.FFI()
    cdef(ffi, src)  # parsed again, and stored again
    assert ffi.sizeof("T") == cffi.FFI().sizeof("struct { int a; double b; }") and ffi._parser._int_constants["X"] == 3
    assert path.read_bytes() != b"not a pickle"
    other = cffi.FFI()
    other.cdef("int f(int);")
    cdef(other, src)  # a parser that holds declarations already: a plain cdef, nothing stored
    assert other.sizeof("T") == ffi.sizeof("T") and len(list(path.parent.glob("cffi-*.pickle"))) == 1
    monkeypatch.setenv("WEBNN_GPU_TEMPLATE_CACHE", "0")
    path.unlink()
    cdef(cffi.FFI(), src)
    assert not list(path.parent.glob("cffi-*.pickle"))


def test_importing_the_package_leaves_wgpu_natives_ffi_to_the_first_context():
    """``import webnn_gpu`` does not import wgpu-py's native backend: the first context imports
    it through the cached cdef (a module that imported it at load time would make every
    process parse wgpu.h again, about 0.13 s of CPU)."""
    import subprocess
    import sys

    code = ("import sys, webnn_gpu; print('wgpu.backends.wgpu_native._ffi' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False"
