"""No rule changes what it receives: the node list, the nodes, their attributes and values.

Each rule runs, in the driver's order, on the IR of generated graphs of the differential
fuzzer (every motif the rules target, with their near misses), and a deep snapshot of its
input (:func:`_snapshot.snapshot`) is compared before and after. No kernels are built.
"""

from __future__ import annotations

from _snapshot import snapshot
from fuzz import graphs

from webnn_gpu.compiler import check_order, rules

#: generated graphs per seed (IR only: a few ms each)
GRAPHS = 120


def _check_graph(ctx, desc, fired: set) -> None:
    b, env, _ = graphs._build(ctx, desc, graphs.declared_data(desc))
    outputs = {name: env[name]._value for name in desc["outputs"]}
    nodes = list(b._nodes)
    for rule in rules():
        before = snapshot(nodes, outputs)
        kept = list(nodes)
        new = rule.fn(nodes, outputs, ctx)
        assert nodes == kept, f"{rule.name} changed the node list it received"
        assert snapshot(nodes, outputs) == before, f"{rule.name} changed a node or value it received"
        check_order(new, outputs, rule.name)
        if len(new) != len(nodes) or any(a is not c for a, c in zip(new, nodes)):
            fired.add(rule.name)
        nodes = new


def test_no_rule_mutates_its_input(ctx):
    fired: set = set()
    for seed in (0, 1):
        for index in range(GRAPHS):
            _check_graph(ctx, graphs.generate(seed, index), fired)
    # the check means something only where rules fired
    assert {"fold_constants", "fuse_epilogue", "fuse_conv_input", "fuse_depthwise_project", "fuse_squeeze_excite",
            "fuse_layer_norm", "fuse_attention", "fuse_elementwise"} <= fired, fired


def test_the_builder_is_unchanged_by_build(ctx):
    """build() runs every rule: the builder's own nodes and values stay as they were (a graph
    built from them again gives the same IR)."""
    desc = next(d for d in (graphs.generate(0, i) for i in range(40))
                if any(n["op"] == "conv2d" for n in d["nodes"]))
    b, env, _ = graphs._build(ctx, desc, graphs.declared_data(desc))
    outputs = {name: env[name]._value for name in desc["outputs"]}
    before = snapshot(list(b._nodes), outputs)
    graph = b.build({name: env[name] for name in desc["outputs"]})
    graph.destroy()
    assert snapshot(list(b._nodes), outputs) == before
