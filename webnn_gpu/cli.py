"""The ``webnn-gpu`` command line (also ``python -m webnn_gpu``).

Each subcommand lives in the module that owns the feature; this file only routes.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module that owns the command, help)
_COMMANDS = {
    "info": ("webnn_gpu._info", "Show the adapter, backend, features, limits and data types."),
    "fetch": ("webnn_gpu.models", "Fetch a model file (e.g. selfie-segmentation) into the cache."),
    "blur": ("webnn_gpu.demo", "Blur the background of a video (or, with --ray, of many) with the selfie segmenter."),
    "run": ("webnn_gpu.ray.inference", "Run a model over a folder of images, writing each output (--ray: on Ray)."),
    "profile": ("webnn_gpu.profile", "Time each kernel of a model with timestamp queries."),
}


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the exit status.

    Each subcommand module provides ``add_arguments(parser)`` and ``run(args) -> int``.
    """
    parser = argparse.ArgumentParser(prog="webnn-gpu", description="webnn-gpu: the W3C WebNN API on any GPU through WebGPU.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module_name, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    args = parser.parse_args(argv)
    if not hasattr(args, "_run"):
        parser.error(f"the {args.command!r} command is not available in this build")
    return int(args._run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
