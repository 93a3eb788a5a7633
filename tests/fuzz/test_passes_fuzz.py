"""Differential fuzzing of the compiler passes (``fuzz/graphs.py``): random graphs over the
motifs the rules target, built and run on the GPU, against a float64 NumPy evaluation of the
same description. A graph that differs (or fails to build) is run again with every pass off
and with each pass off in turn; the failure names the passes at fault and prints a reproducer.

``make test`` checks :data:`GRAPHS` graphs of seed 0 (about 70 s cold on lavapipe), the same
graphs' first :data:`GRAPHS_16` and each rule's first graph again as float16 graphs;
``pytest -m soak tests/fuzz`` checks ``WEBNN_GPU_FUZZ_GRAPHS`` (default 200) graphs of each of
the seeds ``WEBNN_GPU_FUZZ_SEEDS`` (default 1-7) in each float type of
``WEBNN_GPU_FUZZ_DTYPES`` (default ``float32,float16``), within ``WEBNN_GPU_SOAK_SECONDS``
(default 3600 here).
"""

from __future__ import annotations

import collections
import os
import time

import numpy as np
import pytest

from webnn_gpu.compiler import PASSES, Rule, Stage, driver
from webnn_gpu.compiler.rules.cleanup import dead_code
from webnn_gpu._ir import Node

from . import graphs

#: opt-in rules the fuzzer switches on (its inputs are finite): ``WEBNN_GPU_FORCE_<KNOB>=on``
OPT_IN = ("CONV_COLUMNS",)


@pytest.fixture(autouse=True)
def _opt_in_rules(monkeypatch):
    """The rules that are off by default (they may change a result on non-finite inputs, which
    the fuzzer does not make) are on here, so that the fuzzer reaches and checks them too."""
    for knob in OPT_IN:
        monkeypatch.setenv(f"WEBNN_GPU_FORCE_{knob}", "on")


#: graphs of seed 0 that `make test` checks
GRAPHS = 55
#: of those, how many `make test` checks again as float16 graphs
GRAPHS_16 = 25
#: most graphs of a rule's motif whose IR (no kernels) is searched for one the rule changes
COVERAGE_GRAPHS = 200


def _fail(findings, done: int, seconds: float):
    lines = [f"{len(findings)} of {done} random graphs differ from the float64 reference ({seconds:.0f} s):"]
    lines += [f.report() for f in findings[:5]]
    pytest.fail("\n\n".join(lines), pytrace=False)


def test_random_graphs_match_the_reference(ctx):
    t0 = time.monotonic()
    done, findings = graphs.fuzz(ctx, [0], GRAPHS)
    if findings:
        _fail(findings, done, time.monotonic() - t0)
    assert done == GRAPHS


def test_random_float16_graphs_match_the_reference(ctx):
    """The same graphs as float16 graphs (inputs, constants and casts), against the float64
    reference of their float16-rounded data, within ``graphs.TOLERANCE_16``."""
    t0 = time.monotonic()
    done, findings = graphs.fuzz(ctx, [0], GRAPHS_16, dtype="float16")
    if findings:
        _fail(findings, done, time.monotonic() - t0)
    assert done == GRAPHS_16


def _first_graphs(ctx) -> tuple[dict, list, dict]:
    """For each rule, the first graph of its motif (``graphs.RULE_MOTIFS``) among
    COVERAGE_GRAPHS of seed 0 that it changes (IR only): ``{rule: (motif, index, desc)}``, the
    rules no such graph reaches, and the graphs tried per motif."""
    by_motif = collections.defaultdict(set)
    names = [p.__name__ for p in PASSES if p is not dead_code]
    unknown = [n for n in names if graphs.RULE_MOTIFS.get(n) not in graphs.KINDS]
    assert not unknown, f"no motif of graphs.KINDS named for {unknown} in graphs.RULE_MOTIFS"
    assert set(graphs.RULE_MOTIFS) <= set(names), set(graphs.RULE_MOTIFS) - set(names)
    for name in names:
        by_motif[graphs.RULE_MOTIFS[name]].add(name)
    first, missing, tried = {}, [], {}
    for motif, rules in by_motif.items():
        left = set(rules)
        for i in range(COVERAGE_GRAPHS):
            desc = graphs.generate(0, i, motif)
            for rule in left & graphs.fired(ctx, desc):
                first[rule] = (motif, i, desc)
            left -= set(first)
            if not left:
                break
        tried[motif] = i + 1
        missing += [f"{r} ({motif})" for r in sorted(left)]
    return first, missing, tried


def test_the_generator_reaches_every_rule(ctx):
    """Every pass changes some graph among the first COVERAGE_GRAPHS of seed 0 made by its
    motif (``graphs.RULE_MOTIFS``; IR only): a rule's coverage depends on its motif's draws
    alone, not on the other motifs or how many there are."""
    _, missing, tried = _first_graphs(ctx)
    assert not missing, f"no generated graph of its motif exercises {missing} (graphs tried: {tried})"


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_each_rules_first_graph_matches_the_reference(ctx, dtype):
    """The graph that reaches each rule above (one per rule, fewer where a graph reaches several)
    is built and run on the GPU against the float64 reference, as the random graphs are: every
    rule is checked on numbers in ``make test``, not only seen to fire. The float16 form is the
    same graph as a float16 graph (the float16 forms of the rules, where a rule has one)."""
    first, _, _ = _first_graphs(ctx)
    findings = []
    for motif, i, desc in {(m, i): (m, i, d) for m, i, d in first.values()}.values():
        if dtype != "float32":
            desc = {**desc, "dtype": dtype}
        finding = graphs.check(ctx, 0, i, desc, motif)
        if finding is not None:
            findings.append(finding)
    if findings:
        _fail(findings, len(first), 0.0)


def test_a_new_motif_leaves_the_other_motifs_graphs_alone(monkeypatch):
    """A graph made for a motif (the coverage above) is the same whatever motifs the random
    graphs draw from: one more in ``MOTIFS_4D`` changes none."""
    motifs = sorted(set(graphs.RULE_MOTIFS.values()))
    before = [graphs.generate(0, i, m) for m in motifs for i in range(3)]
    monkeypatch.setattr(graphs, "MOTIFS_4D", graphs.MOTIFS_4D + ("motif_conv",))
    assert [graphs.generate(0, i, m) for m in motifs for i in range(3)] == before


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_a_wrong_rule_is_caught_and_named(ctx, monkeypatch, dtype):
    """A rule that changes results (relu becomes abs after the epilogue pass) is caught, in a
    float16 graph too (its tolerance is not so wide that it hides one): the report says the
    graph is right with every pass off and names that rule alone."""
    def relu_to_abs(nodes, outputs, context=None):
        out = []
        for n in nodes:
            if n.op == "relu":
                n = Node("abs", list(n.inputs), list(n.outputs), {}, n.label)
            elif n.attrs.get("epilogue"):
                steps = [{"op": "abs"} if st.get("op") == "relu" else st for st in n.attrs["epilogue"]]
                n = Node(n.op, list(n.inputs), list(n.outputs), {**n.attrs, "epilogue": steps}, n.label)
            out.append(n)
        return out

    monkeypatch.setattr(driver, "ORDER", (*driver.ORDER, Stage("wrong", (Rule(relu_to_abs, "a wrong rule, last"),))))
    desc = {"seed": 5, "decls": [["input", "x0", [2, 9], "normal"], ["const", "c1", [9, 4], "filter"]],
            "nodes": [{"op": "matmul", "in": ["x0", "c1"], "attrs": {}, "out": "v0"},
                      {"op": "relu", "in": ["v0"], "attrs": {}, "out": "v1"}],
            "outputs": ["v1"]}
    if dtype != "float32":
        desc["dtype"] = dtype
    mixed = graphs.reference({**desc, "outputs": ["v0"]})["v0"]
    assert np.any(mixed < 0), "abs differs from relu only where the matmul is negative"
    f = graphs.check(ctx, 5, -1, desc)
    assert f is not None and not f.passes_off and f.culprits == ["relu_to_abs"], f and f.report()
    assert "reproduce" in f.report() and '"op": "matmul"' in f.report()


@pytest.mark.soak
def test_soak_random_graphs(ctx):
    seeds = [int(s) for s in os.environ.get("WEBNN_GPU_FUZZ_SEEDS", "1,2,3,4,5,6,7").split(",")]
    count = int(os.environ.get("WEBNN_GPU_FUZZ_GRAPHS", "200"))
    seconds = float(os.environ.get("WEBNN_GPU_SOAK_SECONDS", "3600"))
    dtypes = os.environ.get("WEBNN_GPU_FUZZ_DTYPES", "float32,float16").split(",")
    t0 = time.monotonic()
    def progress(seed, index, finding, done):
        if finding is not None:
            print("\n" + finding.report(), flush=True)
        if done % 100 == 0:
            print(f"\nfuzz soak: {done} graphs ({time.monotonic() - t0:.0f} s)", flush=True)

    done, findings = 0, []
    for k, dtype in enumerate(dtypes):  # (each float type its share of the time)
        n, found = graphs.fuzz(ctx, seeds, count, deadline=t0 + seconds * (k + 1) / len(dtypes), on_graph=progress,
                               dtype=dtype)
        done, findings = done + n, findings + found
    elapsed = time.monotonic() - t0
    print(f"\nfuzz soak: {done} graphs, seeds {seeds}, {dtypes}, {len(findings)} findings, {elapsed:.0f} s")
    if findings:
        _fail(findings, done, elapsed)
