"""``python -m webnn_gpu``: the command line."""

from .cli import main

raise SystemExit(main())
