"""PyTorch sequence, audio and transformer models exported to ONNX by both of PyTorch's exporters,
loaded with ``webnn.load``, against ONNX Runtime.

    .venv/bin/python benchmarks/onnx_torch_seq.py                        # export (once), compare, time
    .venv/bin/python benchmarks/onnx_torch_seq.py --models lstm1 gpt_sdpa --rounds 10
    .venv/bin/python benchmarks/onnx_torch_seq.py --dtype float16 --rounds 0   # float16 graphs, errors only
    .venv/bin/python benchmarks/onnx_torch_seq.py --reexport             # export again
    .venv/bin/python benchmarks/onnx_torch_seq.py --ab WEBNN_GPU_FORCE_GRU_CELL=off --models gru_cell_loop
    .venv/bin/python benchmarks/onnx_torch_seq.py --variant op11 --rounds 0   # older exports (see VARIANTS)

What a user with a PyTorch model does: the models below (plain PyTorch, seeded weights,
``eval()``) are exported in the PyTorch environment (``--torch-python``, by default
``~/.cache/webnn-gpu/bench/venv-torch/bin/python``; the main venv has no torch) with
``torch.onnx.export(m, args, f, dynamo=False, opset_version=17)`` (the TorchScript exporter,
rows ``NAME.ts``) and ``dynamo=True`` (its default opset, rows ``NAME.dynamo``) into
``$XDG_CACHE_HOME/webnn-gpu/onnx_torch/`` (never into the repository). The models of
:data:`DYNAMIC_BATCH` are also exported with an open batch axis (rows ``NAME.ts+batch``,
``NAME.dynamo+batch``) and loaded with ``dims`` giving a batch of 3. ``--variant`` picks
instead one of :data:`VARIANTS`, files as users have them from older or other TorchScript
exports (rows ``NAME.ts-VARIANT``): ``op11`` and ``op13`` (``opset_version`` 11 and 13),
``half`` (``model.half()``, float inputs in float16, opset 17: a float16 ONNX graph, compared
at the float16 tolerance whatever ``--dtype``; a model PyTorch cannot run in float16 on the CPU
is a row with its error) and ``nofold`` (``do_constant_folding=False``, opset 17).

Each row is ``onnx_keras.bench_model``: ``webnn.load``, the largest error over the outputs
against ONNX Runtime on one seeded input (floats N(0, 1), integer ids and lengths in [0, 20)) relative to
the output's largest magnitude (1e-3 in float32, 3e-2 with ``--dtype float16``), and the
medians of webnn-gpu's tensor path and ONNX Runtime with 2 threads, alternating. A model that
does not export is a row with the exporter's innermost error's first line; one that does not load, the
engine's error's first line.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402 - beside this script

#: The PyTorch environment, the export variants (``--variant``) and the exports' folder
#: are the other PyTorch script's too (``_common``).
DEFAULT_TORCH_PYTHON, VARIANTS, cache_dir = _common.TORCH_PYTHON, _common.TORCH_VARIANTS, _common.torch_cache_dir

#: The models, in table order (names of :func:`_models`).
MODELS = ["lstm1", "lstm2_bidir_h0", "gru1", "gru2_bidir_h0", "rnn_tanh", "lstm_cell_loop", "gru_cell_loop",
          "encoder_post_pad", "encoder_pre_causal", "decoder", "gpt_manual", "gpt_sdpa", "mha_weights",
          "conv1d_stack", "mel_conv", "stft", "token_ops", "seq_classifier", "audio_ops",
          "conformer_ops", "speech_encoder", "packed_lstm"]

#: Models also exported with an open batch axis: name -> {input name: batch axis}.
DYNAMIC_BATCH = {"lstm1": {"x": 0}, "encoder_post_pad": {"ids": 0, "lengths": 0}, "gpt_sdpa": {"x": 0},
                 "conv1d_stack": {"x": 0}, "seq_classifier": {"ids": 0, "lengths": 0}, "speech_encoder": {"wav": 0}}

EXPORTERS = ("ts", "dynamo")


def _models():
    """name -> (module, example args, input names, output names); runs in the PyTorch environment."""
    import math

    import torch
    import torch.nn.functional as F
    from torch import nn

    B, T, E = 1, 8, 16

    class Recurrent(nn.Module):
        def __init__(self, rnn, states=0):
            super().__init__()
            self.rnn, self.states = rnn, states

        def forward(self, x, *h):
            y, hn = self.rnn(x, (h if len(h) > 1 else h[0]) if h else None)
            return (y, *hn) if isinstance(hn, tuple) else (y, hn)

    class CellLoop(nn.Module):
        def __init__(self, cell, lstm):
            super().__init__()
            self.cell, self.lstm = cell, lstm
            self.head = nn.Linear(cell.hidden_size, 4)

        def forward(self, x):
            h = x.new_zeros(x.shape[0], self.cell.hidden_size)
            c = h
            outs = []
            for t in range(x.shape[1]):
                if self.lstm:
                    h, c = self.cell(x[:, t], (h, c))
                else:
                    h = self.cell(x[:, t], h)
                outs.append(self.head(h))
            return torch.stack(outs, 1)

    class Encoder(nn.Module):
        def __init__(self, norm_first, causal, pad):
            super().__init__()
            self.tok = nn.Embedding(32, E)
            self.pos = nn.Embedding(T, E)
            layer = nn.TransformerEncoderLayer(E, 4, 32, dropout=0.0, batch_first=True, norm_first=norm_first)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.causal, self.pad = causal, pad

        def forward(self, ids, lengths=None):
            pos = torch.arange(ids.shape[1], device=ids.device)
            h = self.tok(ids) + self.pos(pos)[None]
            mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1]) if self.causal else None
            pad = None
            if self.pad:
                pad = pos[None, :] >= lengths.clamp(1, ids.shape[1])[:, None]
            y = self.enc(h, mask=mask, src_key_padding_mask=pad, is_causal=self.causal)
            if self.pad:  # masked mean pooling over the lengths
                keep = (~pad).unsqueeze(-1).to(y.dtype)
                return (y * keep).sum(1) / keep.sum(1)
            return y

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerDecoderLayer(E, 4, 32, dropout=0.0, batch_first=True)
            self.dec = nn.TransformerDecoder(layer, 2)

        def forward(self, tgt, memory):
            mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
            return self.dec(tgt, memory, tgt_mask=mask, tgt_is_causal=True)

    class RMSNorm(nn.Module):
        def __init__(self, d, eps=1e-6):
            super().__init__()
            self.weight, self.eps = nn.Parameter(1 + 0.1 * torch.randn(d)), eps

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    class GPTBlock(nn.Module):
        def __init__(self, sdpa, d=32, heads=4):
            super().__init__()
            self.sdpa, self.h = sdpa, heads
            self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(self.n1(x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.h, d // self.h).transpose(1, 2) for z in (q, k, v))
            if self.sdpa:
                a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = q @ k.transpose(-2, -1) / math.sqrt(d // self.h)
                causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
                a = s.masked_fill(causal, float("-inf")).softmax(-1) @ v
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.out(F.gelu(self.fc(self.n2(x)), approximate="tanh"))

    class MHA(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = nn.MultiheadAttention(E, 4, batch_first=True)

        def forward(self, q, kv):
            return self.mha(q, kv, kv, need_weights=True)

    class Conv1dStack(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Conv1d(8, 16, 5, padding="same")
            self.b = nn.Conv1d(16, 16, 3, dilation=2, padding=2, groups=4)
            self.c = nn.Conv1d(16, 16, 3, dilation=2)  # causal: left pad 4 by F.pad
            self.d = nn.Conv1d(16, 8, 1)

        def forward(self, x):
            x = F.relu(self.a(x))
            x = F.gelu(self.b(x))
            x = torch.tanh(self.c(F.pad(x, (4, 0))))
            return self.d(x)

    class MelConv(nn.Module):
        """A framed STFT as a strided Conv1d on DFT bases (Hann window), power, mel matrix, log."""

        def __init__(self, n_fft=64, hop=16, mels=12):
            super().__init__()
            n = torch.arange(n_fft, dtype=torch.float64)
            f = torch.arange(n_fft // 2 + 1, dtype=torch.float64)
            win = torch.hann_window(n_fft, periodic=True, dtype=torch.float64)
            ang = 2 * math.pi * f[:, None] * n[None] / n_fft
            basis = torch.cat([torch.cos(ang) * win, -torch.sin(ang) * win])[:, None].float()
            self.register_buffer("basis", basis)
            self.register_buffer("mel", torch.rand(mels, n_fft // 2 + 1))
            self.hop, self.half = hop, n_fft // 2 + 1

        def forward(self, wav):
            x = F.pad(wav[:, None], (32, 32), mode="reflect")
            spec = F.conv1d(x, self.basis, stride=self.hop)
            re, im = spec[:, : self.half], spec[:, self.half:]
            power = re * re + im * im
            return torch.log(torch.matmul(self.mel, power) + 1e-6)

    class Stft(nn.Module):
        def forward(self, wav):
            s = torch.stft(wav, 64, 16, window=torch.hann_window(64), center=False, return_complex=False)
            return s.pow(2).sum(-1).sqrt()

    class TokenOps(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(32, E)
            self.proj = nn.Linear(E, 10)

        def forward(self, ids, x):
            logits = self.proj(self.emb(ids))                       # [B, T, 10]
            best = logits.argmax(-1)                                 # int64
            top_v, top_i = logits.topk(3, dim=-1)
            run = torch.cumsum(x, 1)
            picked = torch.gather(logits, 2, top_i)                  # = top_v
            rows = torch.index_select(logits, 2, torch.tensor([0, 3, 7]))
            gated = torch.where(x > 0, run, x.expand(-1, -1, -1))
            rep = torch.repeat_interleave(x, 2, dim=1)
            wide = x.expand(-1, -1, 3)
            return best, top_v, top_i, picked - rows, gated, rep, wide * rows

    class SeqClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(32, E)
            self.lstm = nn.LSTM(E, 24, batch_first=True)
            self.head = nn.Linear(24, 5)

        def forward(self, ids, lengths):
            y, _ = self.lstm(self.emb(ids))
            valid = torch.arange(ids.shape[1])[None] < lengths.clamp(1, ids.shape[1])[:, None]
            m = valid.unsqueeze(-1).float()
            return self.head((y * m).sum(1) / m.sum(1))

    class AudioOps(nn.Module):
        """1-D resampling, pooling and gating as vocoders and audio encoders use them."""

        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose1d(8, 8, 4, stride=2, padding=1)
            self.glu = nn.Conv1d(8, 16, 3, padding=1)
            self.norm = nn.LayerNorm(8)
            self.act = nn.PReLU(8)

        def forward(self, x):                                        # [B, 8, 32]
            a = F.interpolate(x, scale_factor=2, mode="nearest")
            b = F.interpolate(x, scale_factor=2, mode="linear", align_corners=False)
            y = self.up(x) + a + b                                   # [B, 8, 64]
            y = F.glu(self.glu(y), dim=1)
            y = F.max_pool1d(y, 2) + F.avg_pool1d(y, 2)              # [B, 8, 32]
            y = self.norm(y.transpose(1, 2)).transpose(1, 2)
            y = self.act(y).flip(-1)
            s = torch.einsum("bct,bdt->bcd", y, x)                   # [B, 8, 8]
            pooled = F.adaptive_avg_pool1d(y, 1).squeeze(-1)
            return torch.cat([F.normalize(pooled, dim=-1), s.softmax(1).mean(2)], -1), torch.stack(y.chunk(2, 1), 1)

    class ConformerOps(nn.Module):
        """A conformer's convolution module and a padded attention as Hugging Face code writes them:
        positions from the cumulative sum of a padding mask, a -1e9 mask, one-hot, argsort."""

        def __init__(self):
            super().__init__()
            self.pw = nn.Conv1d(E, 2 * E, 1)
            self.dw = nn.Conv1d(E, E, 5, padding=2, groups=E)
            self.bn = nn.BatchNorm1d(E)
            self.gn = nn.GroupNorm(4, E)
            self.tok = nn.Embedding(32, E)
            self.pos = nn.Embedding(T + 2, E)
            self.qkv = nn.Linear(E, 3 * E)

        def forward(self, ids):                                      # int64 [B, T], 0 = padding
            keep = ids.ne(0)
            pos = keep.long().cumsum(-1) * keep.long()              # Hugging Face's position ids
            h = self.tok(ids) + self.pos(pos)                        # [B, T, E]
            q, k, v = self.qkv(h).chunk(3, -1)
            s = q @ k.transpose(1, 2) / math.sqrt(E)
            s = s.masked_fill(~keep[:, None, :], -1e9)
            h = h + s.softmax(-1) @ v
            c = F.glu(self.pw(h.transpose(1, 2)), dim=1)
            c = F.silu(self.bn(self.dw(c)))
            c = self.gn(c).transpose(1, 2)                           # [B, T, E]
            order = c.mean(-1).argsort(-1, descending=True)
            return c, F.one_hot(order[:, 0], T).float(), order

    class SpeechEncoder(nn.Module):
        """A wav2vec-style feature extractor (strided Conv1d, GroupNorm, exact GELU), sinusoidal
        positions, a GELU TransformerEncoderLayer, a bidirectional batch-first LSTM and a CTC
        head (log_softmax, argmax)."""

        def __init__(self, d=16):
            super().__init__()
            self.c1 = nn.Conv1d(1, d, 10, stride=5)
            self.gn = nn.GroupNorm(d, d)
            self.c2 = nn.Conv1d(d, d, 3, stride=2)
            pos = torch.arange(64)[:, None] / torch.pow(10000, torch.arange(0, d, 2) / d)
            self.register_buffer("pe", torch.cat([torch.sin(pos), torch.cos(pos)], -1))
            self.layer = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
            self.lstm = nn.LSTM(d, 8, batch_first=True, bidirectional=True)
            self.head = nn.Linear(16, 12)

        def forward(self, wav):                                      # [B, 400]
            h = F.gelu(self.gn(self.c1(wav[:, None])))
            h = F.gelu(self.c2(h)).transpose(1, 2)                   # [B, frames, d]
            h = self.layer(h + self.pe[: h.shape[1]])
            h, _ = self.lstm(h)
            logp = self.head(h).log_softmax(-1)
            return logp, logp.argmax(-1)

    class Packed(nn.Module):
        """``pack_padded_sequence`` around a bidirectional LSTM (unsorted lengths), padded back."""

        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(E, 12, batch_first=True, bidirectional=True)

        def forward(self, x, lengths):
            lengths = lengths.clamp(1, x.shape[1])
            p = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            y, (h, _) = self.lstm(p)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
            return y, h

    torch.manual_seed(0)
    x = torch.randn(B, T, E)
    ids = torch.randint(0, 32, (B, T))
    lengths = torch.tensor([5] * B)
    h2 = torch.randn(4, B, 24)
    return {
        "lstm1": (Recurrent(nn.LSTM(E, 24, batch_first=True)), (x,), ["x"], ["y", "h", "c"]),
        "lstm2_bidir_h0": (Recurrent(nn.LSTM(E, 24, 2, bidirectional=True)), (x.transpose(0, 1), h2, h2.clone()),
                           ["x", "h0", "c0"], ["y", "h", "c"]),
        "gru1": (Recurrent(nn.GRU(E, 24, batch_first=True)), (x,), ["x"], ["y", "h"]),
        "gru2_bidir_h0": (Recurrent(nn.GRU(E, 24, 2, bidirectional=True)), (x.transpose(0, 1), h2), ["x", "h0"],
                          ["y", "h"]),
        "rnn_tanh": (Recurrent(nn.RNN(E, 24, 2, batch_first=True)), (x,), ["x"], ["y", "h"]),
        "lstm_cell_loop": (CellLoop(nn.LSTMCell(E, 24), True), (x,), ["x"], ["y"]),
        "gru_cell_loop": (CellLoop(nn.GRUCell(E, 24), False), (x,), ["x"], ["y"]),
        "encoder_post_pad": (Encoder(False, False, True), (ids, lengths), ["ids", "lengths"], ["y"]),
        "encoder_pre_causal": (Encoder(True, True, False), (ids,), ["ids"], ["y"]),
        "decoder": (Decoder(), (x, torch.randn(B, 6, E)), ["tgt", "memory"], ["y"]),
        "gpt_manual": (GPTBlock(False), (torch.randn(B, T, 32),), ["x"], ["y"]),
        "gpt_sdpa": (GPTBlock(True), (torch.randn(B, T, 32),), ["x"], ["y"]),
        "mha_weights": (MHA(), (x, torch.randn(B, 6, E)), ["q", "kv"], ["y", "weights"]),
        "conv1d_stack": (Conv1dStack(), (torch.randn(B, 8, 64),), ["x"], ["y"]),
        "mel_conv": (MelConv(), (torch.randn(B, 1024),), ["wav"], ["y"]),
        "stft": (Stft(), (torch.randn(B, 1024),), ["wav"], ["y"]),
        "token_ops": (TokenOps(), (ids, torch.randn(B, T, 1)), ["ids", "x"],
                      ["best", "top_v", "top_i", "diff", "gated", "rep", "wide"]),
        "seq_classifier": (SeqClassifier(), (ids, lengths), ["ids", "lengths"], ["y"]),
        "audio_ops": (AudioOps(), (torch.randn(B, 8, 32),), ["x"], ["y", "halves"]),
        "conformer_ops": (ConformerOps(), (ids,), ["ids"], ["y", "top_onehot", "order"]),
        "speech_encoder": (SpeechEncoder(), (torch.randn(B, 400),), ["wav"], ["logp", "best"]),
        "packed_lstm": (Packed(), (torch.randn(3, T, E), torch.tensor([8, 3, 5])), ["x", "lengths"], ["y", "h"]),
    }


def export_all(out: pathlib.Path, names: list[str], exporters: list[str]) -> dict:
    """Export ``names`` with each exporter of ``exporters`` (and the open-batch forms of
    :data:`DYNAMIC_BATCH`; ``ts-VARIANT``: the TorchScript exporter with :data:`VARIANTS`' keywords,
    no open batch) into ``out``; runs in the PyTorch environment. Returns file stem -> the
    exporter's error line, for those that failed."""
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    failed = {}
    models = _models()
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        m, args, ins, outs = models[name]
        m.eval()
        for exp in exporters:
            for dyn in ([False, True] if name in DYNAMIC_BATCH and exp in EXPORTERS else [False]):
                stem = f"{name}.{exp}" + ("+batch" if dyn else "")
                tmp = out / f".{stem}.onnx.tmp"
                kw: dict = {"input_names": ins, "output_names": outs}
                mod, margs = m, args
                if exp.startswith("ts-"):
                    kw.update(dynamo=False, **VARIANTS[exp[3:]])
                elif exp == "ts":
                    kw.update(dynamo=False, opset_version=17)
                    if dyn:
                        kw["dynamic_axes"] = {n: {a: "batch"} for n, a in DYNAMIC_BATCH[name].items()}
                else:
                    kw.update(dynamo=True, external_data=False)
                    if dyn:
                        batch = torch.export.Dim("batch", min=1, max=64)
                        kw["dynamic_shapes"] = tuple({a: batch} if n in DYNAMIC_BATCH[name] else None
                                                     for n, a in zip(ins, [DYNAMIC_BATCH[name].get(n) for n in ins]))
                try:
                    if exp == "ts-half":  # a model PyTorch cannot run in float16 on the CPU: the row says why
                        mod = _models()[name][0].eval().to(torch.float16)  # mel_conv has a .half attribute
                        margs = tuple(a.half() if a.is_floating_point() else a for a in args)
                        with torch.no_grad():
                            mod(*margs)
                    torch.onnx.export(mod, margs, str(tmp), **kw)  # not under no_grad: its fast paths do not export
                    tmp.rename(out / f"{stem}.onnx")
                except Exception as exc:  # noqa: BLE001 - a row of the table
                    while exc.__cause__ is not None:  # torch.export's reason, under the exporter's
                        exc = exc.__cause__
                    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in str(exc).splitlines() if ln.strip()]
                    failed[stem] = f"{type(exc).__name__}: {(lines[0] if lines else '')[:300]}"
                print(f"{stem}: {'failed' if stem in failed else 'ok'}", file=sys.stderr, flush=True)
    return failed


def stems(names: list[str], variant: str | None = None) -> list[str]:
    """The exported files' stems, in table order: ``NAME.ts``, ``NAME.ts+batch``, ``NAME.dynamo``, ...
    (with ``variant``: ``NAME.ts-VARIANT``)."""
    if variant:
        return [f"{n}.ts-{variant}" for n in names]
    return [f"{n}.{e}{s}" for n in names for e in EXPORTERS
            for s in ([""] + (["+batch"] if n in DYNAMIC_BATCH else []))]


def bench_batch(ctx, name: str, path: pathlib.Path, args, batch: int = 3) -> dict:
    """An open-batch export loaded with ``dims`` giving ``batch`` rows: max error against ONNX
    Runtime on that batch (no timing)."""
    import numpy as np
    import onnx_keras

    row: dict = {"model": name}
    ref_rt = onnx_keras.ort_session(path, 1)
    x = onnx_keras.seeded_inputs(ref_rt)
    rng = np.random.default_rng(1)
    for i in ref_rt.get_inputs():
        shape = [batch if not (isinstance(d, int) and d > 0) else d for d in i.shape]
        x[i.name] = (rng.integers(0, 20, shape) if x[i.name].dtype.kind == "i"
                     else rng.standard_normal(shape)).astype(x[i.name].dtype)
    onnx_keras.check_row(ctx, ref_rt, path, x, args.dtype, row)
    return row


def main(argv: list[str] | None = None) -> int:
    """Export the chosen models where not cached (in the PyTorch environment), then load each
    ONNX file and print ``onnx_keras.format_table``'s table (open-batch rows: batch 3, errors
    only). Returns the exit status (0; a model that does not export is a row with its reason)."""
    import onnx_keras

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=MODELS, choices=MODELS, metavar="NAME")
    parser.add_argument("--exporters", nargs="*", default=list(EXPORTERS),
                        choices=[*EXPORTERS, *(f"ts-{v}" for v in VARIANTS)])
    parser.add_argument("--variant", choices=list(VARIANTS),
                        help="instead of --exporters: the TorchScript export variant ts-VARIANT (see VARIANTS)")
    parser.add_argument("--reexport", action="store_true", help="export the models again")
    parser.add_argument("--torch-python", default=str(DEFAULT_TORCH_PYTHON),
                        help="Python of a PyTorch environment with onnx and onnxscript (default: %(default)s)")
    onnx_keras.add_run_args(parser)
    parser.add_argument("--export", metavar="DIR", help=argparse.SUPPRESS)  # the PyTorch-side half
    args = parser.parse_args(argv)
    if args.export:
        print(json.dumps(export_all(pathlib.Path(args.export), args.models, args.exporters)))
        return 0

    out = cache_dir()
    if args.variant:
        args.exporters = [f"ts-{args.variant}"]
    wanted = [s for s in stems(args.models, args.variant) if s.split(".")[1].split("+")[0] in args.exporters]
    missing = [s for s in wanted if args.reexport or not (out / f"{s}.onnx").exists()]
    failed: dict = {}
    if missing:
        todo = sorted({s.split(".")[0] for s in missing}, key=args.models.index)
        print(f"exporting {' '.join(todo)} ...", file=sys.stderr, flush=True)
        proc = subprocess.run([args.torch_python, os.path.abspath(__file__), "--export", str(out), "--models", *todo,
                               "--exporters", *args.exporters], capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stderr[-3000:])
            return proc.returncode
        failed = json.loads(proc.stdout.strip().splitlines()[-1])

    os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")
    import onnx_keras
    import webnn_gpu as webnn
    import zoo

    ctx = webnn.ml.create_context()
    ok = {s: out / f"{s}.onnx" for s in wanted if s not in failed}
    if args.ab:
        from _common import print_ab

        print_ab(args.ab, [(s, path) for s, path in ok.items() if "+batch" not in s],
                 lambda s, path, env: onnx_keras.knob_ab(ctx, s, path, env, args.rounds))
        return 0

    def bench(ctx, stem, path, args):
        return (bench_batch if "+batch" in stem else onnx_keras.bench_model)(ctx, stem, path, args)

    rows = {r["model"]: r for r in zoo.run_rows(ctx, ok, bench, args)}
    rows.update({s: {"model": s, "error": reason} for s, reason in failed.items()})
    print(onnx_keras.format_table([rows[s] for s in wanted]))  # its two TFLite-twin columns stay empty
    return 0


if __name__ == "__main__":
    sys.exit(main())
