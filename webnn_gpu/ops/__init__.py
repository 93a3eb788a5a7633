"""WebNN operators, one module per family.

Each module defines the builder methods of its operators (validation, shape and dtype
inference), their lowering to WGSL kernels, and their support limits, all registered through
:mod:`webnn_gpu.ops._registry`. Every module in this package is imported here, so adding an
operator family is adding a file.
"""

from __future__ import annotations

import importlib
import pkgutil

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__)):
    if not _mod.startswith("_"):
        importlib.import_module(f"{__name__}.{_mod}")
