"""The channel-lane kernel's estimate against the pixel blocks (``webnn_gpu.ops.conv._dwp_form``,
``DWPL_FIT`` with ``DWPL_MARGIN``) on the pairs measured for its small-image refit (docs/conv.md,
"The channel-lane estimate on small images"): no GPU."""

from __future__ import annotations

import pytest

from webnn_gpu.ops import conv


def _geometry(hw: int, c: int, k: int, s: int) -> dict:
    """conv.py's geometry dict of a 'same'-padded depthwise conv2d on one hw x hw x c image."""
    p = (k - 1) // 2
    o = (hw + 2 * p - k) // s + 1
    return dict(NB=1, H=hw, W=hw, C=c, O=c, OH=o, OW=o, KH=k, KW=k, G=c, sh=s, sw=s, dh=1, dw=1, pt=p, pl=p)


# (input H = W, C, window, stride, projected channels N) that ran slower on the channel-lane kernel
# than on the pixel blocks (forced, one process, 12-16 rounds alternating, per-round medians of the
# ratio, 2026-11-26: 1.01-1.22; benchmarks/dw_shapes.py --paired lanes --shapes): two channel groups
# per lane with two words of output columns (12 x 12 x 64 -> 64 1.15, 8 x 8 x 48 -> 96 1.18), stride 2
# with two channel groups per lane (16 x 16 x 64 -> 128 1.09, 24 x 24 x 64 -> 64 1.10), few channels
# projected to few (12 x 12 x 8 -> 16 1.22, 96 x 96 x 8 -> 16 stride 2 1.02) and 14 x 14 x 48 -> 48 (1.12)
_RAN_SLOWER = [(12, 64, 3, 1, 64), (8, 48, 3, 1, 96), (16, 64, 3, 2, 128), (24, 64, 3, 2, 64), (12, 8, 3, 1, 16),
               (96, 8, 3, 2, 16), (14, 48, 3, 1, 48), (28, 8, 3, 2, 16), (12, 16, 3, 1, 16)]
# ... and faster (0.43-0.88): what _dwp_form takes
_RAN_FASTER = [(16, 32, 3, 1, 128), (16, 32, 3, 1, 192), (16, 64, 3, 1, 128), (40, 24, 3, 1, 16), (56, 16, 3, 2, 64),
               (96, 16, 3, 2, 16), (28, 64, 3, 2, 64), (20, 24, 3, 1, 64)]


@pytest.mark.parametrize("shape", _RAN_SLOWER + _RAN_FASTER)
def test_form_follows_the_measured_pairs(monkeypatch, shape):
    """_dwp_form keeps on the pixel blocks the pairs that ran slower on the channel-lane kernel and
    takes it for those that ran faster."""
    monkeypatch.delenv("WEBNN_GPU_FORCE_DWP_FORM", raising=False)
    hw, c, k, s, n = shape
    want = "lanes" if shape in _RAN_FASTER else "blocks"
    assert conv._dwp_form(_geometry(hw, c, k, s), n // 4, "lane-loop", 8)[0] == want


@pytest.mark.parametrize("shape,inside", [((16, 64, 32, 64), False), ((8, 64, 32, 64), True), ((4, 128, 64, 128), True),
                                          ((12, 64, 64, 64), False)])
def test_expansion_inside_against_its_own_launch(shape, inside):
    """_expand_shared_cost with the separate conv's launch at LAUNCH_US: 16 x 16 x 64 -> 32 -> 64,
    which ran 301 us inside against 230 us apart (docs/conv.md), stays apart; the small images whose
    expansion cost nothing measurable inside (8 x 8 x 64 -> 32, 4 x 4 x 128 -> 64) take it; 12 x 12
    x 64 -> 64 stays apart."""
    hw, k, c, n = shape
    g = _geometry(hw, c, 3, 1)
    added, separate = conv._expand_shared_cost(g, k // 4, n // 4, "lane-loop")
    assert (added <= separate) == inside
