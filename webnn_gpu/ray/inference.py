"""Batch inference of a model file over many images, in one process or on a Ray cluster.

:class:`ModelPredictor` is the callable class for ``ray.data.Dataset.map_batches``: Ray Data
builds one per actor of an ``ActorPoolStrategy`` pool, so each actor holds one wgpu device
(on its own adapter, :func:`~webnn_gpu.ray.select_adapter`), one ``MLContext`` and one
model loaded by ``webnn_gpu.load``, built once; each call takes a batch of images and
returns the model's outputs. The same class runs the single-process path of
``webnn-gpu run`` (no Ray), so both give the same numbers.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from .cluster import actor_resources, connect, require_ray

__all__ = [
    "IMAGE_SUFFIXES",
    "ModelPredictor",
    "find_images",
    "decode_image",
    "read_images",
    "read_video_frames",
    "write_results",
    "run_model",
    "add_arguments",
    "run",
]

#: file suffixes taken as images when the input is a folder
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def _pil() -> Any:
    try:
        from PIL import Image
    except ModuleNotFoundError as exc:  # pragma: no cover - the ray extra installs it
        raise ModuleNotFoundError("reading images needs Pillow: pip install 'webnn-gpu[ray]'",
                                  name=exc.name) from exc
    return Image


def decode_image(data: bytes, size: tuple[int, int] | None = None) -> np.ndarray:
    """Decode an image file's bytes to an H x W x 3 ``uint8`` RGB array (Pillow).

    Arguments:
        data (bytes): a PNG, JPEG, ... file.
        size (tuple[int, int] | None): resize to (width, height) (bilinear, antialiased).

    Returns:
        np.ndarray: H x W x 3 ``uint8``.

    Raises:
        ValueError: the bytes are not an image Pillow reads.
    """
    Image = _pil()
    try:
        img = Image.open(io.BytesIO(data))
        img = img.convert("RGB")
    except Exception as exc:
        raise ValueError(f"not an image Pillow can read: {exc}") from exc
    if size is not None and img.size != tuple(size):
        img = img.resize((int(size[0]), int(size[1])), Image.BILINEAR)
    return np.asarray(img, dtype=np.uint8)


def _resize(image: np.ndarray, width: int, height: int) -> np.ndarray:
    Image = _pil()
    return np.asarray(Image.fromarray(image).resize((width, height), Image.BILINEAR), dtype=np.uint8)


def _floats(value: float | Sequence[float], what: str) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    if arr.ndim != 1 or arr.size not in (1, 3) or not np.all(np.isfinite(arr)):
        raise ValueError(f"ModelPredictor: {what} must be one number or three (per channel), given {value!r}")
    return arr


class ModelPredictor:
    """One loaded model, called on batches of images (a ``map_batches`` callable class).

    Arguments:
        model (bytes | str | os.PathLike): a model file ``webnn_gpu.load`` reads, or its
            bytes (which travel through Ray's object store: nodes need no copy).
        dtype ("float32" | "float16"): the compute type (passed to ``webnn_gpu.load``).
        input_name (str | None): the image input; default the model's only input.
        column (str): the batch column holding the images (H x W x 3 ``uint8``, any size:
            each is resized to the model's input size, bilinear).
        layout ("nhwc" | "nchw" | None): the image input's layout; default the model's
            (``LoadedModel.layout``), else told from where the size-3 channel axis is.
        scale, mean, std: the input is ``(pixel * scale - mean) / std`` (per channel when
            three numbers); default ``[0, 1]``: scale 1/255, mean 0, std 1. Integer inputs
            (uint8, int32, ...) get the pixels as they are; int8 is refused.
        keep (Sequence[str]): batch columns passed through to the output (e.g. ``"path"``).
        software_threads (int | None): ``LP_NUM_THREADS`` for an actor without a GPU.
        load_options (dict | None): more ``webnn_gpu.load`` options.

    Calling it with a batch (``{column: images, ...}``) returns ``{output name: array}``
    for every model output, one row per image, without the model's batch axis when that
    is 1, plus the ``keep`` columns.

    Raises:
        ValueError: the model has no single 4-D image input (name it with ``input_name``),
            or bad normalisation options.
    """

    def __init__(
        self,
        model: bytes | str | os.PathLike,
        *,
        dtype: str = "float32",
        input_name: str | None = None,
        column: str = "image",
        layout: str | None = None,
        scale: float = 1.0 / 255.0,
        mean: float | Sequence[float] = 0.0,
        std: float | Sequence[float] = 1.0,
        keep: Sequence[str] = ("path",),
        software_threads: int | None = None,
        load_options: dict[str, Any] | None = None,
    ) -> None:
        import webnn_gpu as webnn
        from webnn_gpu.demo import create_device

        from .adapter import describe, select_adapter, set_software_threads

        if software_threads:
            set_software_threads(software_threads)
        self.scale = float(scale)
        self.mean, self.std = _floats(mean, "mean"), _floats(std, "std")
        if np.any(self.std == 0):
            raise ValueError(f"ModelPredictor: std must not be 0, given {std!r}")
        adapter = select_adapter()
        self.adapter = describe(adapter)
        self.context = webnn.ml.create_context(create_device(adapter))
        source = bytes(model) if isinstance(model, (bytes, bytearray)) else Path(model)
        self.model = webnn.load(source, self.context, dtype=dtype, **(load_options or {}))
        inputs = dict(self.model.inputs)
        if input_name is None:
            images = [k for k, d in inputs.items() if len(d["shape"]) == 4]
            if len(images) != 1 or len(inputs) != 1:
                shapes = {k: list(d["shape"]) for k, d in inputs.items()}
                raise ValueError(f"ModelPredictor: the model's inputs are {shapes}; expected one "
                                 f"4-D image input (name it with input_name=)")
            input_name = images[0]
        if input_name not in inputs:
            raise ValueError(f"ModelPredictor: the model has no input {input_name!r} (it has {list(inputs)})")
        if len(inputs) != 1:
            raise ValueError(f"ModelPredictor: the model has {len(inputs)} inputs ({list(inputs)}); "
                             f"only single-input models run on images")
        desc = inputs[input_name]
        shape = [int(d) for d in desc["shape"]]
        if len(shape) != 4:
            raise ValueError(f"ModelPredictor: input {input_name!r} must be 4-D (batch, height, width, "
                             f"channels in either order), given shape {shape}")
        if layout is None:
            layout = getattr(self.model, "layout", None)
            if layout not in ("nhwc", "nchw"):
                layout = "nchw" if shape[1] in (1, 3) and shape[3] not in (1, 3) else "nhwc"
        if layout not in ("nhwc", "nchw"):
            raise ValueError(f"ModelPredictor: layout must be 'nhwc' or 'nchw', given {layout!r}")
        self.layout = layout
        self.input_name, self.column, self.keep = input_name, column, tuple(keep)
        self.batch = shape[0]
        if layout == "nhwc":
            self.height, self.width, self.channels = shape[1], shape[2], shape[3]
        else:
            self.channels, self.height, self.width = shape[1], shape[2], shape[3]
        if self.channels not in (1, 3):
            raise ValueError(f"ModelPredictor: input {input_name!r} ({layout}, shape {shape}) must have "
                             f"1 or 3 channels to take images")
        self.input_dtype = np.dtype(desc["data_type"])
        if self.input_dtype.kind in "iu" and np.iinfo(self.input_dtype).max < 255:
            raise ValueError(f"ModelPredictor: input {input_name!r} is {desc['data_type']}, which cannot "
                             f"hold pixels 0..255 (a quantized model: feed it float or uint8 images)")
        self.outputs = dict(self.model.outputs)

    def preprocess(self, images: Iterable[np.ndarray]) -> np.ndarray:
        """Images (H x W x 3 ``uint8``, any size) -> the model's input, batch axis first.

        Arguments:
            images: the images.

        Returns:
            np.ndarray: N x (model input without its batch axis), in the input's data type.

        Raises:
            ValueError: an image is not H x W x 3 (or H x W).
        """
        out = []
        for img in images:
            img = np.asarray(img)
            if img.ndim == 2:
                img = np.repeat(img[..., None], 3, axis=2)
            if img.ndim != 3 or img.shape[2] not in (3, 4):
                raise ValueError(f"ModelPredictor: an image must be H x W x 3, given shape {img.shape}")
            img = np.ascontiguousarray(img[..., :3]).astype(np.uint8, copy=False)
            if img.shape[:2] != (self.height, self.width):
                img = _resize(img, self.width, self.height)
            x = img.astype(np.float64)
            if self.channels == 1:
                x = x.mean(axis=2, keepdims=True)
            if self.input_dtype.kind == "f":
                x = (x * self.scale - self.mean[: self.channels]) / self.std[: self.channels]
            if self.layout == "nchw":
                x = x.transpose(2, 0, 1)
            out.append(x.astype(self.input_dtype))
        return np.stack(out) if out else np.zeros((0,), self.input_dtype)

    def predict(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Run the model on preprocessed inputs, chunked by the model's batch size.

        Arguments:
            x (np.ndarray): N x (the model input without its batch axis).

        Returns:
            dict[str, np.ndarray]: output name -> N rows. With a batch size of 1 a row is the
            output without its leading size-1 axis; with a larger one, the last chunk is
            padded with zeros and a row is one index of the output's first axis.
        """
        n = len(x)
        results: dict[str, list[np.ndarray]] = {k: [] for k in self.outputs}
        for i in range(0, n, self.batch):
            chunk = x[i: i + self.batch]
            m = len(chunk)
            if m < self.batch:
                pad = np.zeros((self.batch - m,) + chunk.shape[1:], chunk.dtype)
                chunk = np.concatenate([chunk, pad])
            got = self.model.compute({self.input_name: np.ascontiguousarray(chunk)})
            for k in self.outputs:
                value = np.asarray(got[k])
                if self.batch == 1:
                    results[k].append(value[0] if value.ndim and value.shape[0] == 1 else value)
                else:
                    results[k].extend(value[:m])
        return {k: np.stack(v) for k, v in results.items() if v}

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        """Run the model on a batch: ``{column: images, ...}`` -> outputs and ``keep`` columns."""
        out: dict[str, Any] = dict(self.predict(self.preprocess(batch[self.column])))
        for k in self.keep:
            if k in batch:
                out[k] = batch[k]
        return out


def find_images(inputs: str | os.PathLike | Sequence[str | os.PathLike]) -> list[Path]:
    """The image files named by a folder (not recursive), a glob, a file, or a list of these.

    Raises:
        FileNotFoundError: an input names nothing.
    """
    from .videos import find_videos

    return find_videos(inputs, suffixes=IMAGE_SUFFIXES, kind="image")


def read_images(paths: str | os.PathLike | Sequence[str | os.PathLike], *,
                size: tuple[int, int] | None = None) -> Any:
    """A Ray Dataset of images: columns ``path`` (str) and ``image`` (H x W x 3 ``uint8``).

    The files are read and decoded on the cluster (Pillow); on several nodes they must be
    on storage every node sees.

    Arguments:
        paths: a folder, a glob, a file or a list of them (:func:`find_images`).
        size (tuple[int, int] | None): resize every image to (width, height) while reading.

    Returns:
        ray.data.Dataset
    """
    ray = require_ray()
    files = [str(p) for p in find_images(paths)]

    def decode(row: dict[str, Any]) -> dict[str, Any]:
        return {"path": row["path"], "image": decode_image(row["bytes"], size)}

    return ray.data.read_binary_files(files, include_paths=True).map(decode)


def read_video_frames(paths: str | os.PathLike | Sequence[str | os.PathLike], *,
                      size: tuple[int, int] | None = None, every: int = 1) -> Any:
    """A Ray Dataset of video frames: columns ``path``, ``frame`` (index) and ``image``.

    Each video is decoded by one task (FFmpeg, as the blur demo reads it).

    Arguments:
        paths: a folder, a glob, a file or a list of them (``webnn_gpu.ray.find_videos``).
        size (tuple[int, int] | None): scale frames to (width, height).
        every (int): keep every ``every``-th frame (1: all).

    Returns:
        ray.data.Dataset

    Raises:
        ValueError: ``every`` < 1.
    """
    from .videos import find_videos

    ray = require_ray()
    if int(every) < 1:
        raise ValueError(f"read_video_frames: every must be >= 1, given {every!r}")
    files = [str(p) for p in find_videos(paths)]

    def frames(row: dict[str, Any]) -> Iterator[dict[str, Any]]:
        from webnn_gpu.demo import VideoReader

        with VideoReader(row["path"], size=size) as reader:
            for i, frame in enumerate(reader):
                if i % every == 0:
                    yield {"path": row["path"], "frame": i, "image": frame.copy()}

    return ray.data.from_items([{"path": f} for f in files], override_num_blocks=max(1, len(files))).flat_map(frames)


def _is_mask(value: np.ndarray) -> bool:
    v = np.squeeze(value)
    return value.dtype.kind == "f" and v.ndim == 2 and min(v.shape) > 1 and (
        value.ndim == 2 or (value.ndim == 3 and 1 in (value.shape[0], value.shape[-1])))


def write_results(rows: Any, out_dir: str | os.PathLike, *, masks: bool = True,
                  outputs: Sequence[str] | None = None) -> int:
    """Write each row's outputs as ``.npy`` files (and single-channel float maps as PNG).

    Names: ``OUT_DIR/<image name>.npy`` for a model with one output, else
    ``<image name>.<output>.npy``; a mask (a float H x W map, with or without a size-1
    channel axis) also as ``.png`` (values clipped to [0, 1], times 255). The files are
    written here, by this process, as the rows arrive.

    Arguments:
        rows: a Ray Dataset (iterated in batches) or an iterable of row dicts, each with
            ``path`` and the output columns.
        out_dir: the folder (created).
        masks (bool): also write masks as PNG.
        outputs (Sequence[str] | None): the output columns; default every column but
            ``path``, ``frame`` and ``image``.

    Returns:
        int: rows written.
    """
    from webnn_gpu.demo import write_png

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if hasattr(rows, "iter_rows"):
        rows = rows.iter_rows()
    count = 0
    for row in rows:
        names = list(outputs) if outputs is not None else [k for k in row if k not in ("path", "frame", "image")]
        stem = Path(str(row["path"])).stem + (f".{int(row['frame']):06d}" if "frame" in row else "")
        for name in names:
            value = np.asarray(row[name])
            base = out / (stem if len(names) == 1 else f"{stem}.{name}")
            np.save(base.with_name(base.name + ".npy"), value)
            if masks and _is_mask(value):
                grey = np.clip(np.squeeze(value).astype(np.float64), 0.0, 1.0) * 255.0
                write_png(base.with_name(base.name + ".png"), np.floor(grey + 0.5).astype(np.uint8))
        count += 1
    return count


def run_model(
    model: bytes | str | os.PathLike,
    inputs: str | os.PathLike | Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    *,
    use_ray: bool = False,
    address: str | None = None,
    actors: int | None = None,
    num_gpus: float | None = None,
    batch_size: int = 8,
    masks: bool = True,
    progress: bool = False,
    **predictor_options: Any,
) -> dict[str, Any]:
    """Run a model over a folder of images and write each output (``webnn-gpu run``).

    Arguments:
        model: the model file or its bytes.
        inputs: the images (:func:`find_images`).
        out_dir: where the outputs go (:func:`write_results`).
        use_ray (bool): run on a Ray actor pool (one :class:`ModelPredictor` per actor);
            otherwise in this process with one predictor.
        address (str | None): the cluster (:func:`~webnn_gpu.ray.connect`); default local.
        actors, num_gpus: the pool (:func:`~webnn_gpu.ray.actor_resources`).
        batch_size (int): images per ``map_batches`` call.
        masks (bool): also write masks as PNG.
        progress (bool): a progress bar on stderr (the single-process path).
        **predictor_options: :class:`ModelPredictor` options (``dtype``, ``layout``,
            ``scale``, ``mean``, ``std``, ``input_name``).

    Returns:
        dict: ``images``, ``seconds``, ``actors``.

    Raises:
        FileNotFoundError: ``inputs`` names no image.
        ValueError: two images have the same name (their outputs would collide); bad options.
        ModuleNotFoundError: ``use_ray`` without Ray installed.
    """
    files = find_images(inputs)
    stems: dict[str, Path] = {}
    for f in files:
        if f.stem in stems:
            raise ValueError(f"{str(stems[f.stem])!r} and {str(f)!r} would both be written as "
                             f"{f.stem}.npy; rename one or run them separately")
        stems[f.stem] = f
    model_bytes = bytes(model) if isinstance(model, (bytes, bytearray)) else Path(model).read_bytes()
    start = time.perf_counter()
    if not use_ray:
        predictor = ModelPredictor(model_bytes, **predictor_options)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(files), unit="image", file=sys.stderr, desc="run")

        def rows() -> Iterator[dict[str, Any]]:
            for i in range(0, len(files), batch_size):
                chunk = files[i: i + batch_size]
                images = [decode_image(p.read_bytes()) for p in chunk]
                result = predictor({"image": images, "path": np.array([str(p) for p in chunk])})
                for j in range(len(chunk)):
                    yield {k: v[j] for k, v in result.items()}
                if bar is not None:
                    bar.update(len(chunk))

        n = write_results(rows(), out_dir, masks=masks)
        if bar is not None:
            bar.close()
        return {"images": n, "seconds": time.perf_counter() - start, "actors": 0}
    ray = require_ray()
    started = connect(address)
    try:
        resources = actor_resources(actors, num_gpus=num_gpus, work_items=len(files), reserve_cpus=1)
        ds = read_images(files).map_batches(
            ModelPredictor,
            fn_constructor_args=(model_bytes,),
            fn_constructor_kwargs={**predictor_options, "software_threads": resources.software_threads},
            batch_size=batch_size,
            compute=ray.data.ActorPoolStrategy(size=resources.actors),
            **resources.options(),
        )
        n = write_results(ds, out_dir, masks=masks)
    finally:
        if started:
            ray.shutdown()
    return {"images": n, "seconds": time.perf_counter() - start, "actors": resources.actors}


# -- the `webnn-gpu run` command ------------------------------------------------------------


def _floats_arg(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, given {text!r}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``run`` command's options to ``parser``."""
    parser.description = ("Run a model (any file webnn_gpu.load reads) over a folder of images, "
                          "writing each output as .npy (and masks as PNG); on Ray with --ray.")
    parser.add_argument("model", metavar="MODEL", help="the model file (.tflite, ...)")
    parser.add_argument("inputs", metavar="IN_DIR", help="a folder of images, a glob, or a file")
    parser.add_argument("-o", "--output", required=True, metavar="OUT_DIR", help="folder for the outputs")
    parser.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                        help="run on Ray: a local instance, or the cluster at ADDRESS (HOST:PORT, auto)")
    parser.add_argument("--actors", type=int, default=None, metavar="N",
                        help="actors in the pool (default: one per GPU, or per 2 CPUs)")
    parser.add_argument("--dtype", choices=("float32", "float16"), default="float32")
    parser.add_argument("--batch-size", type=int, default=8, metavar="N", help="images per batch (default 8)")
    parser.add_argument("--layout", choices=("nhwc", "nchw"), default=None,
                        help="the image input's layout (default: the model's)")
    parser.add_argument("--input", default=None, metavar="NAME", help="the image input (default: the only one)")
    parser.add_argument("--scale", type=float, default=1.0 / 255.0,
                        help="pixels are multiplied by this first (default 1/255)")
    parser.add_argument("--mean", type=_floats_arg, default=[0.0], metavar="M[,M,M]",
                        help="subtracted after scaling (default 0)")
    parser.add_argument("--std", type=_floats_arg, default=[1.0], metavar="S[,S,S]",
                        help="divided by last (default 1)")
    parser.add_argument("--no-masks", action="store_true", help="no PNG of single-channel outputs")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    """Run the ``run`` command with parsed arguments; returns the exit status."""
    say = lambda msg: print(f"webnn-gpu run: {msg}", file=sys.stderr)  # noqa: E731
    if args.batch_size < 1 or (args.actors is not None and args.actors < 1):
        say("error: --batch-size and --actors must be positive")
        return 2
    try:
        result = run_model(
            args.model, args.inputs, args.output, use_ray=args.ray is not None, address=args.ray,
            actors=args.actors, batch_size=args.batch_size, masks=not args.no_masks,
            progress=not args.no_progress, dtype=args.dtype, layout=args.layout,
            input_name=args.input, scale=args.scale, mean=args.mean, std=args.std,
        )
    except ModuleNotFoundError as exc:
        say(f"error: {exc}")
        return 1
    except (OSError, ValueError) as exc:
        say(f"error: {exc}")
        return 1
    where = f"on {result['actors']} Ray actor(s)" if result["actors"] else "in this process"
    print(f"{result['images']} images in {result['seconds']:.2f} s {where}; outputs in "
          f"{Path(args.output).resolve()}")
    return 0
