"""``webnn-gpu info``: the adapter, backend, features, limits, data types and operator support."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``webnn-gpu info``."""
    parser.add_argument("--ops", action="store_true", help="print the operator support table")
    parser.add_argument("--json", action="store_true", help="print everything as JSON")
    parser.add_argument("model", nargs="?", help="a .tflite or .onnx file: print its operators and which are supported")


def model_ops(path) -> dict[str, tuple[int, bool]]:
    """A model file's operators: name -> (count, whether the loader maps it). Reads no GPU."""
    with open(path, "rb") as f:
        head = f.read(8)
    if head[4:8] == b"TFL3":
        from .tflite import read_model, supported_ops

        table = supported_ops()
        counts = read_model(open(path, "rb").read()).op_counts()
    else:
        from .onnx import read_onnx, supported_ops

        table = supported_ops()
        counts = {}
        for n in read_onnx(path).graph.node:
            key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
            counts[key] = counts.get(key, 0) + 1
    return {k: (v, k in table) for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))}


def model_inputs(path) -> list[tuple[str, str, list]]:
    """An ONNX model's graph inputs (initializers excluded): (name, element type, shape), each
    dimension an int, a symbolic name (``dims=`` / ``--dims`` fixes it) or ``"?"``. Reads no GPU;
    an empty list for TFLite files."""
    with open(path, "rb") as f:
        if f.read(8)[4:8] == b"TFL3":
            return []
    from .onnx import read_onnx
    from .onnx.reader import TYPE_NAMES

    g = read_onnx(path).graph
    inits = {t.name for t in g.initializer}
    rows = []
    for vi in g.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim] \
            if tt.HasField("shape") else ["?"]
        rows.append((vi.name, TYPE_NAMES.get(tt.elem_type, str(tt.elem_type)), dims))
    return rows


def collect(ctx) -> dict:
    """Everything ``info`` reports, as a dict."""
    info = ctx.adapter_info
    keep = ("max-storage-buffer-binding-size", "max-buffer-size", "max-storage-buffers-per-shader-stage",
            "max-compute-workgroup-storage-size", "max-compute-invocations-per-workgroup",
            "max-compute-workgroups-per-dimension")
    return {
        "adapter": {k: info.get(k) for k in ("vendor", "device", "description", "adapter_type", "backend_type")},
        "features": sorted(ctx.features),
        "limits": {k: ctx.limits.get(k) for k in keep},
        "data_types": list(ctx.supported_data_types),
        "op_support_limits": ctx.op_support_limits(),
    }


def run(args) -> int:
    """Print the report; returns 0."""
    import json

    import webnn_gpu as webnn

    if getattr(args, "model", None):
        model = model_ops(args.model)
        for name, (count, ok) in model.items():
            print(f"{name:36s} {count:5d}  {'supported' if ok else 'NOT SUPPORTED'}")
        missing = [k for k, (_, ok) in model.items() if not ok]
        print(f"{len(model)} operator types, {len(missing)} not supported")
        for name, elem, dims in model_inputs(args.model):
            print(f"input {name!r}: {elem} [{', '.join(map(str, dims))}]")
        return 0
    ctx = webnn.ml.create_context()
    data = collect(ctx)
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    a = data["adapter"]
    print(f"adapter:    {a['device']} ({a['vendor']}, {a['adapter_type']})")
    print(f"backend:    {a['backend_type']}  {a['description'] or ''}")
    print(f"features:   {', '.join(data['features'])}")
    for k, v in data["limits"].items():
        print(f"limit:      {k} = {v}")
    print(f"data types: {', '.join(data['data_types'])}")
    limits = data["op_support_limits"]
    ops = sorted(k for k, v in limits.items() if isinstance(v, dict) and k not in ("input", "constant", "output"))
    print(f"operators:  {len(ops)}")
    if args.ops:
        print()
        width = max(len(o) for o in ops) + 2
        for op in ops:
            first = True
            for operand, lim in limits[op].items():
                rr = lim["rank_range"]
                print(f"{op if first else '':<{width}}{operand:<22}ranks {rr['min']}-{rr['max']:<3} "
                      f"{', '.join(lim['data_types'])}")
                first = False
    ctx.destroy()
    return 0
