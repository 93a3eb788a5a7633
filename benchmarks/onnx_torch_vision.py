"""PyTorch vision models exported to ONNX by both of PyTorch's exporters, loaded with ``webnn.load``,
against ONNX Runtime.

    .venv/bin/python benchmarks/onnx_torch_vision.py                        # export (once), compare, time
    .venv/bin/python benchmarks/onnx_torch_vision.py --models resnet unet --rounds 10
    .venv/bin/python benchmarks/onnx_torch_vision.py --dtype float16 --rounds 0   # float16 graphs, errors only
    .venv/bin/python benchmarks/onnx_torch_vision.py --reexport            # export again
    .venv/bin/python benchmarks/onnx_torch_vision.py --batch 3 --rounds 0  # the dynamic-batch files at batch 3
    .venv/bin/python benchmarks/onnx_torch_vision.py --models convnext vit --ab WEBNN_GPU_FORCE_ERF_GELU=off
    .venv/bin/python benchmarks/onnx_torch_vision.py --variant op11 --rounds 0   # older exports (see VARIANTS)

What a user with a PyTorch vision model does: the models below are written in plain PyTorch
(no torchvision; seeded weights, ``eval()``, small inputs), each a few layers of the pattern it
stands for. In the PyTorch environment (``--torch-python``, by default
``~/.cache/webnn-gpu/bench/venv-torch/bin/python``: torch, onnx, onnxscript) every model is
exported twice into ``$XDG_CACHE_HOME/webnn-gpu/onnx_torch/`` (never into the repository):

* ``<name>.ts.onnx``: ``torch.onnx.export(m, args, f, dynamo=False, opset_version=17)``, the
  TorchScript exporter most published files come from;
* ``<name>.dynamo.onnx``: ``dynamo=True``, today's default exporter, at its default opset.

The models of :data:`DYNAMIC` are exported a third and fourth time with an open batch axis
(``dynamic_axes`` / ``dynamic_shapes``: ``<name>.ts-dyn.onnx``, ``<name>.dynamo-dyn.onnx``);
``--batch N`` loads those with ``dims`` giving the batch N. ``--variant`` picks instead one of
:data:`VARIANTS`, the files users have from older or other TorchScript exports
(``<name>.ts-<variant>.onnx``): ``op11`` and ``op13`` (``opset_version`` 11 and 13), ``half``
(``model.half()`` with a float16 input at opset 17: a float16 ONNX graph, compared at the
float16 tolerance whatever ``--dtype``) and ``nofold`` (``do_constant_folding=False`` at opset
17: the Shape/Gather/Concat chains left for the importer). Then for every file
``benchmarks/onnx_keras.py``'s ``bench_model``: ``webnn.load``, the largest error against ONNX
Runtime (1 thread) on one seeded input relative to the output's largest magnitude (tolerance
1e-3, 3e-2 with ``--dtype float16``), and medians over ``--rounds`` rounds of webnn-gpu's
tensor path and ONNX Runtime with 2 threads, alternating (ratio = webnn / ORT).

A model that does not export is a row with the exporter's error; one that does not load, with
the engine's error's first line.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402 - beside this script

#: The PyTorch environment, the export variants (``--variant``) and the exports' folder
#: are the other PyTorch script's too (``_common``).
DEFAULT_TORCH_PYTHON, VARIANTS, cache_dir = _common.TORCH_PYTHON, _common.TORCH_VARIANTS, _common.torch_cache_dir

#: The models, in table order: name -> input shape (one float32 input each).
MODELS = {
    "resnet": (1, 3, 64, 64),
    "mobilenet_v2": (1, 3, 64, 64),
    "mobilenet_v3": (1, 3, 64, 64),
    "efficientnet": (1, 3, 64, 64),
    "convnext": (1, 3, 64, 64),
    "unet": (1, 3, 64, 64),
    "vit": (1, 3, 32, 32),
    "vit_sdpa": (1, 3, 32, 32),
    "detect_head": (1, 3, 32, 32),
    "yolo_parts": (1, 3, 64, 64),
    "pixel_shuffle": (1, 4, 32, 32),
    "norms": (1, 8, 32, 32),
    "dilated_grouped": (1, 8, 32, 32),
    "pads": (1, 4, 32, 32),
    "pools": (1, 4, 31, 31),
    "upsample_dropout": (1, 4, 16, 16),
    "activations": (1, 8, 16, 16),
    "grid_sample": (1, 4, 16, 16),
    "vision_misc": (1, 4, 20, 20),
}

#: Models also exported with an open batch axis.
DYNAMIC = ["resnet", "mobilenet_v2", "vit", "detect_head"]

#: The exporters: file suffix -> (dynamo, open batch axis).
EXPORTERS = {"ts": (False, False), "dynamo": (True, False), "ts-dyn": (False, True), "dynamo-dyn": (True, True),
             "ts-op11": (False, False), "ts-op13": (False, False), "ts-half": (False, False),
             "ts-nofold": (False, False)}


def _architectures() -> dict:
    """name -> a function building the (untrained) ``torch.nn.Module`` (runs in the torch environment)."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    def cbr(i, o, k=3, s=1, g=1, act=nn.ReLU):
        return nn.Sequential(nn.Conv2d(i, o, k, s, k // 2, groups=g, bias=False), nn.BatchNorm2d(o), act())

    class Basic(nn.Module):
        def __init__(self, i, o, s):
            super().__init__()
            self.c1, self.c2 = cbr(i, o, 3, s), nn.Sequential(nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o))
            self.down = (nn.Sequential(nn.Conv2d(i, o, 1, s, bias=False), nn.BatchNorm2d(o))
                         if s != 1 or i != o else nn.Identity())

        def forward(self, x):
            return F.relu(self.c2(self.c1(x)) + self.down(x))

    def resnet():
        return nn.Sequential(cbr(3, 16, 7, 2), nn.MaxPool2d(3, 2, 1), Basic(16, 16, 1), Basic(16, 32, 2),
                             Basic(32, 64, 2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    class InvRes(nn.Module):
        def __init__(self, i, o, s, e, act=nn.ReLU6, se=None, k=3):
            super().__init__()
            h = i * e
            layers = [cbr(i, h, 1, act=act), cbr(h, h, k, s, g=h, act=act)]
            if se is not None:
                layers.append(se(h))
            layers += [nn.Conv2d(h, o, 1, bias=False), nn.BatchNorm2d(o)]
            self.body, self.res = nn.Sequential(*layers), s == 1 and i == o

        def forward(self, x):
            y = self.body(x)
            return x + y if self.res else y

    def mobilenet_v2():
        return nn.Sequential(cbr(3, 16, 3, 2, act=nn.ReLU6), InvRes(16, 16, 1, 1), InvRes(16, 24, 2, 6),
                             InvRes(24, 24, 1, 6), cbr(24, 64, 1, act=nn.ReLU6), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Dropout(0.2), nn.Linear(64, 10))

    class SE(nn.Module):
        def __init__(self, c, gate=nn.Hardsigmoid, act=nn.ReLU):
            super().__init__()
            self.fc1, self.fc2, self.act, self.gate = nn.Conv2d(c, c // 4, 1), nn.Conv2d(c // 4, c, 1), act(), gate()

        def forward(self, x):
            s = F.adaptive_avg_pool2d(x, 1)
            return x * self.gate(self.fc2(self.act(self.fc1(s))))

    def mobilenet_v3():
        return nn.Sequential(cbr(3, 16, 3, 2, act=nn.Hardswish), InvRes(16, 16, 2, 1, nn.ReLU, SE),
                             InvRes(16, 24, 2, 4, nn.Hardswish, SE, k=5), InvRes(24, 24, 1, 3, nn.Hardswish, SE, k=5),
                             cbr(24, 96, 1, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(96, 64), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(64, 10))

    def efficientnet():
        se = lambda c: SE(c, nn.Sigmoid, nn.SiLU)  # noqa: E731
        return nn.Sequential(cbr(3, 16, 3, 2, act=nn.SiLU), InvRes(16, 16, 1, 1, nn.SiLU, se),
                             InvRes(16, 24, 2, 6, nn.SiLU, se), InvRes(24, 24, 1, 6, nn.SiLU, se, k=5),
                             cbr(24, 64, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(64, 10))

    class ConvNeXtBlock(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm, self.fc1, self.fc2 = nn.LayerNorm(c, eps=1e-6), nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.rand(c) * 0.5 + 0.1)

        def forward(self, x):
            y = self.dw(x).permute(0, 2, 3, 1)
            y = self.fc2(F.gelu(self.fc1(self.norm(y))))
            return x + (self.gamma * y).permute(0, 3, 1, 2)

    class LayerNorm2d(nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

    def convnext():
        return nn.Sequential(nn.Conv2d(3, 32, 4, 4), LayerNorm2d(32, eps=1e-6), ConvNeXtBlock(32), ConvNeXtBlock(32),
                             LayerNorm2d(32, eps=1e-6), nn.Conv2d(32, 64, 2, 2), ConvNeXtBlock(64),
                             nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(64), nn.Linear(64, 10))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.e1, self.e2, self.e3 = cbr(3, 8), cbr(8, 16), cbr(16, 32)
            self.up3 = nn.ConvTranspose2d(32, 16, 2, 2)
            self.d2, self.d1, self.d0 = cbr(32, 16), cbr(24, 8), cbr(11, 8)
            self.head = nn.Conv2d(8, 2, 1)

        def forward(self, x):
            a = self.e1(x)
            b = self.e2(F.max_pool2d(a, 2))
            c = self.e3(F.max_pool2d(b, 2))
            d = self.d2(torch.cat([self.up3(c), b], 1))
            e = self.d1(torch.cat([F.interpolate(d, scale_factor=2, mode="bilinear", align_corners=False), a], 1))
            f = torch.cat([e, F.interpolate(F.avg_pool2d(x, 2), size=e.shape[-2:], mode="bilinear",
                                            align_corners=True)], 1)
            y = self.head(self.d0(f))
            return y + F.interpolate(F.avg_pool2d(y, 4), scale_factor=4, mode="nearest")

    class ViT(nn.Module):
        def __init__(self, d=32, sdpa=False):
            super().__init__()
            self.patch = nn.Conv2d(3, d, 8, 8)
            self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.1)
            self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.1)
            if sdpa:
                self.blocks = nn.Sequential(SdpaBlock(d), SdpaBlock(d))
            else:
                layer = nn.TransformerEncoderLayer(d, 4, 2 * d, dropout=0.1, activation="gelu", batch_first=True,
                                                   norm_first=True)
                self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

        def forward(self, x):
            t = self.patch(x).flatten(2).transpose(1, 2)
            t = torch.cat([self.cls.expand(t.shape[0], -1, -1), t], 1) + self.pos
            return self.head(self.norm(self.blocks(t))[:, 0])

    class SdpaBlock(nn.Module):
        def __init__(self, d, h=4):
            super().__init__()
            self.h, self.n1, self.n2 = h, nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(approximate="tanh"), nn.Linear(2 * d, d))

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(self.n1(x)).reshape(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4).unbind(0)
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, n, d)
            x = x + self.proj(a)
            return x + self.mlp(self.n2(x))

    class DetectHead(nn.Module):
        def __init__(self, na=3, nc=4):
            super().__init__()
            self.na, self.nc = na, nc
            self.body = nn.Sequential(cbr(3, 16, 3, 2), cbr(16, 16, 3, 2))
            self.pred = nn.Conv2d(16, na * (5 + nc), 1)

        def forward(self, x):
            p = self.pred(self.body(x))
            b, _, h, w = p.shape
            p = p.view(b, self.na, 5 + self.nc, h, w).permute(0, 1, 3, 4, 2).reshape(b, -1, 5 + self.nc)
            xy, wh, obj, cls = torch.split(p, [2, 2, 1, self.nc], dim=-1)
            xy = xy.sigmoid() * 2 - 0.5
            wh = torch.exp(wh.clamp(max=4.0)) * 4
            x0, x1 = xy.chunk(2, dim=-1)
            score = obj.sigmoid() * cls.sigmoid()
            best = score.argmax(-1, keepdim=True).float()
            top, idx = score.max(-1)[0].topk(5, dim=-1)
            return torch.cat([x0, x1, wh, score, best], -1), top, idx

    class YoloParts(nn.Module):
        """YOLOv5's Focus slicing, an SPPF block, nearest upsampling, concatenation, LeakyReLU."""

        def __init__(self):
            super().__init__()
            self.focus = cbr(12, 16, 3, act=lambda: nn.LeakyReLU(0.1))
            self.c2 = cbr(16, 32, 3, 2, act=nn.SiLU)
            self.sppf = cbr(128, 32, 1, act=nn.SiLU)
            self.out = nn.Conv2d(48, 8, 1)

        def forward(self, x):
            x = torch.cat([x[..., ::2, ::2], x[..., 1::2, ::2], x[..., ::2, 1::2], x[..., 1::2, 1::2]], 1)
            a = self.focus(x)
            b = self.c2(a)
            p1 = F.max_pool2d(b, 5, 1, 2)
            p2 = F.max_pool2d(p1, 5, 1, 2)
            p3 = F.max_pool2d(p2, 5, 1, 2)
            c = self.sppf(torch.cat([b, p1, p2, p3], 1))
            return self.out(torch.cat([nn.Upsample(scale_factor=2.0, mode="nearest")(c), a], 1))

    class Shuffle(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Conv2d(16, 16, 3, padding=1), nn.Conv2d(4, 12, 3, padding=1)
            self.unshuffle, self.shuffle = nn.PixelUnshuffle(2), nn.PixelShuffle(2)

        def forward(self, x):
            y = self.shuffle(self.a(self.unshuffle(x)))
            return self.shuffle(self.b(y))

    class Norms(nn.Module):
        def __init__(self):
            super().__init__()
            self.gn, self.inorm = nn.GroupNorm(4, 8), nn.InstanceNorm2d(8, affine=True)
            self.inorm_plain, self.conv = nn.InstanceNorm2d(8), nn.Conv2d(8, 8, 3, padding=1)
            with torch.no_grad():
                for n in (self.gn, self.inorm):
                    n.weight.uniform_(0.5, 1.5)
                    n.bias.uniform_(-0.5, 0.5)

        def forward(self, x):
            y = F.relu(self.gn(self.conv(x)))
            return self.inorm_plain(self.inorm(y) + x)

    class DilatedGrouped(nn.Module):
        def __init__(self):
            super().__init__()
            self.dil = nn.Conv2d(8, 8, 3, padding=2, dilation=2)
            self.grp = nn.Conv2d(8, 16, 3, padding=1, groups=4)
            self.dil_grp = nn.Conv2d(16, 16, 3, padding=4, dilation=4, groups=2)
            self.strided = nn.Conv2d(16, 8, 3, stride=2, padding=1, groups=8)

        def forward(self, x):
            return self.strided(F.relu(self.dil_grp(F.relu(self.grp(F.relu(self.dil(x)))))))

    class Pads(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = nn.Conv2d(4, 4, 3), nn.Conv2d(4, 4, 3), nn.Conv2d(4, 4, 3)

        def forward(self, x):
            y = self.a(F.pad(x, (1, 1, 1, 1), mode="reflect"))
            y = self.b(F.pad(y, (2, 0, 1, 1), mode="replicate"))
            return self.c(F.pad(y, (1, 1, 0, 2), mode="constant", value=0.5))

    class Pools(nn.Module):
        def forward(self, x):
            a = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
            b = F.max_pool2d(x, 3, 2, 1, ceil_mode=True)
            c = F.avg_pool2d(x, 2, 2, ceil_mode=True)
            d = F.avg_pool2d(x, 3, 2, 1)
            e = F.adaptive_avg_pool2d(a + b + c + d, (4, 4))
            f = F.adaptive_max_pool2d(a * b, 1)
            return e, f, F.lp_pool2d(x[..., :30, :30], 2, 2)

    class UpDrop(nn.Module):
        def __init__(self):
            super().__init__()
            self.up, self.upb = nn.Upsample(scale_factor=2), nn.Upsample(scale_factor=2, mode="bilinear")
            self.drop, self.drop2d, self.ident = nn.Dropout(0.5), nn.Dropout2d(0.3), nn.Identity()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            y = self.drop(self.conv(self.ident(self.up(x))))
            return self.drop2d(y) + self.upb(x)

    class Activations(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.prelu = nn.Conv2d(8, 8, 1), nn.PReLU(8)
            with torch.no_grad():
                self.prelu.weight.uniform_(0.0, 0.5)

        def forward(self, x):
            y = self.prelu(self.conv(x))
            acts = [F.elu(y), F.leaky_relu(y, 0.2), F.softplus(y), F.mish(y), F.hardtanh(y, -2, 2), F.gelu(y),
                    F.selu(y), F.celu(y), torch.tanh(y), F.softsign(y), F.relu6(y), F.logsigmoid(y)]
            return sum(acts) + F.softmax(y, 1) + F.log_softmax(y, -1)

    class GridSample(nn.Module):
        def __init__(self):
            super().__init__()
            self.loc = nn.Conv2d(4, 2, 3, padding=1)

        def forward(self, x):
            grid = torch.tanh(self.loc(x)).permute(0, 2, 3, 1)
            return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)

    class VisionMisc(nn.Module):
        """Swin's roll, L2 normalization, flip, bicubic resizing, adaptive pooling, unfold (im2col),
        einsum, cumsum, masked_fill. (An adaptive pooling to a size that does not divide the
        input is refused by the TorchScript exporter.)"""

        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            y = torch.roll(self.conv(x), shifts=(2, -3), dims=(2, 3))
            y = F.normalize(y, dim=1) + torch.flip(y, dims=[3])
            up = F.interpolate(y, scale_factor=2, mode="bicubic", align_corners=False)
            pooled = F.adaptive_avg_pool2d(up, (8, 8))
            cols = F.unfold(y, kernel_size=2, stride=2)                  # [1, 16, 100]
            gram = torch.einsum("bcl,bdl->bcd", cols, cols) / 100
            csum = torch.cumsum(y, dim=3).masked_fill(y < -1.0, 0.0)
            return pooled, gram, csum

    return {"resnet": resnet, "mobilenet_v2": mobilenet_v2, "mobilenet_v3": mobilenet_v3,
            "efficientnet": efficientnet, "convnext": convnext, "unet": UNet, "vit": ViT,
            "vit_sdpa": lambda: ViT(sdpa=True), "detect_head": DetectHead, "yolo_parts": YoloParts,
            "pixel_shuffle": Shuffle, "norms": Norms, "dilated_grouped": DilatedGrouped, "pads": Pads,
            "pools": Pools, "upsample_dropout": UpDrop, "activations": Activations, "grid_sample": GridSample,
            "vision_misc": VisionMisc}


def seeded_module(name: str):
    """The model ``name`` with seed-0 weights (BatchNorm statistics drawn too, so that folding
    them is checked), in ``eval()`` mode."""
    import torch

    torch.manual_seed(0)
    m = _architectures()[name]()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.5, 0.5)
                mod.running_var.uniform_(0.5, 2.0)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.5, 0.5)
    return m.eval()


def export_all(names: list[str], out: pathlib.Path, kinds: list[str]) -> dict:
    """Export every model of ``names`` with every exporter of ``kinds`` into ``out`` (in the torch
    environment): file name -> None, or the exporter's error (its last line)."""
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    result = {}
    for name in names:
        m = seeded_module(name)
        for kind in kinds:
            dynamo, dyn = EXPORTERS[kind]
            if dyn and name not in DYNAMIC:
                continue
            variant = VARIANTS.get(kind.partition("-")[2], {"opset_version": 17})
            # torch.export specializes a dimension of size 1: an open batch is traced at batch 2.
            x = torch.randn((2, *MODELS[name][1:]) if dyn else MODELS[name])
            f = out / f"{name}.{kind}.onnx"
            tmp = out / f".{name}.{kind}.onnx.tmp"
            mod = m
            try:
                if kind == "ts-half":  # a model PyTorch cannot run in float16 on the CPU: the row says why
                    mod, x = seeded_module(name).half(), x.half()
                    with torch.no_grad():
                        mod(x)
                if dynamo:
                    shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dyn else None  # by position
                    prog = torch.onnx.export(m, (x,), dynamo=True, input_names=["x"], dynamic_shapes=shapes,
                                             verbose=False)
                    prog.save(str(tmp))
                else:
                    axes = {"x": {0: "batch"}} if dyn else None
                    torch.onnx.export(mod, (x,), str(tmp), dynamo=False, input_names=["x"], dynamic_axes=axes,
                                      **variant)
                tmp.rename(f)
                result[f.name] = None
            except Exception as exc:  # noqa: BLE001 - a row of the table
                lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()] or [type(exc).__name__]
                result[f.name] = f"{type(exc).__name__}: {lines[0][:300]}"
    return result


def export(torch_python: str, names: list[str], out: pathlib.Path, kinds: list[str]) -> dict:
    """Run :func:`export_all` in the torch environment (one process): file name -> None or the error."""
    out.mkdir(parents=True, exist_ok=True)
    report = out / ".export_report.json"
    cmd = [torch_python, os.path.abspath(__file__), "--export-to", str(report), "--models", *names, "--kinds", *kinds]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode or not report.exists():
        tail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1][:300]
        return {f"{n}.{k}.onnx": f"export process: {tail}" for n in names for k in kinds}
    return json.loads(report.read_text())


def bench_batch(ctx, name: str, path: pathlib.Path, args) -> dict:
    """A dynamic-batch file loaded with ``dims`` giving batch ``args.batch``: its largest error
    against ONNX Runtime on that batch (no timing)."""
    import numpy as np
    from onnx_keras import check_row, ort_session

    row: dict = {"model": name}
    ref_rt = ort_session(path, 1)
    shape = [args.batch, *MODELS[name.split(".")[0]][1:]]
    x = {ref_rt.get_inputs()[0].name: np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
    check_row(ctx, ref_rt, path, x, args.dtype, row)
    return row


def main(argv: list[str] | None = None) -> int:
    """Export the chosen models where not cached (in the torch environment ``--torch-python``),
    then load each ONNX file and print a table of its largest error against ONNX Runtime, its
    kernel count and (``--rounds`` > 0) its time beside ONNX Runtime's. Returns the exit status
    (0; a model that does not export or load is a row with its reason)."""
    import onnx_keras

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS), metavar="NAME")
    parser.add_argument("--kinds", nargs="*", default=["ts", "dynamo"], choices=list(EXPORTERS),
                        help="exporters (default: %(default)s; --batch uses the -dyn ones)")
    parser.add_argument("--variant", choices=list(VARIANTS),
                        help="instead of --kinds: the TorchScript export variant ts-VARIANT (see VARIANTS)")
    parser.add_argument("--reexport", action="store_true", help="export the models again")
    parser.add_argument("--torch-python", default=str(DEFAULT_TORCH_PYTHON),
                        help="Python of the PyTorch environment (default: %(default)s)")
    parser.add_argument("--batch", type=int, help="load the dynamic-batch files at this batch (errors only)")
    onnx_keras.add_run_args(parser)
    parser.add_argument("--export-to", metavar="PATH", help=argparse.SUPPRESS)  # the torch-side half
    args = parser.parse_args(argv)
    if args.export_to:
        report = pathlib.Path(args.export_to)
        report.write_text(json.dumps(export_all(args.models, report.parent, args.kinds)))
        return 0
    if args.variant:
        args.kinds = [f"ts-{args.variant}"]
    if args.batch:
        args.kinds = ["ts-dyn", "dynamo-dyn"]
        args.models = [n for n in args.models if n in DYNAMIC]

    out = cache_dir()
    files = [f"{n}.{k}.onnx" for n in args.models for k in args.kinds
             if not (k.endswith("-dyn") and n not in DYNAMIC)]
    missing = [n for n in args.models if args.reexport or any(
        not (out / f).exists() for f in files if f.startswith(n + "."))]
    failed = {}
    if missing:
        print(f"exporting {' '.join(missing)} ...", file=sys.stderr, flush=True)
        failed = {f: e for f, e in export(args.torch_python, missing, out, args.kinds).items() if e}

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import webnn_gpu as webnn
    import zoo
    from onnx_keras import bench_model, format_table, knob_ab

    ok = {f[:-5]: out / f for f in files if f not in failed}
    if args.ab:
        from _common import print_ab

        ctx = webnn.ml.create_context()
        print_ab(args.ab, ok.items(), lambda n, path, env: knob_ab(ctx, n, path, env, args.rounds))
        return 0
    rows = {r["model"]: r for r in zoo.run_rows(webnn.ml.create_context(), ok,
                                                 bench_batch if args.batch else bench_model, args)}
    rows.update({f[:-5]: {"model": f[:-5], "error": e} for f, e in failed.items()})
    print(format_table([rows[f[:-5]] for f in files]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
