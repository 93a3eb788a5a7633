"""The graph IR (``webnn_gpu._ir``) and the compiler's driver, without a GPU."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from webnn_gpu._ir import GraphView, Node, Value
from webnn_gpu.compiler import ORDER, PASSES, Rule, Stage, check_order, driver, rules, run_passes
from webnn_gpu.compiler.rules.cleanup import dead_code

PACKAGE = Path(__file__).resolve().parents[2] / "webnn_gpu"


def _v(shape=(4,), kind="op"):
    return Value("float32", tuple(shape), kind)


def _n(op, inputs, out, **attrs):
    return Node(op, list(inputs), [out], attrs, op)


def _chain():
    """x -> relu -> a -> neg -> b ; a -> abs -> c (a has two readers), outputs b and c."""
    x = _v(kind="input")
    a, b, c = _v(), _v(), _v()
    nodes = [_n("relu", [x], a), _n("neg", [a], b), _n("abs", [a, a], c)]
    return x, (a, b, c), nodes


def test_graph_view_answers_producer_consumers_and_outputs():
    x, (a, b, c), nodes = _chain()
    g = GraphView(nodes, {"b": b, "c": c})
    assert g.producer(a) is nodes[0] and g.producer(x) is None and g.producer(None) is None
    assert g.consumers(a) == [nodes[1], nodes[2]]  # abs reads a twice: one consumer
    assert g.consumers(x) == [nodes[0]] and g.consumers(b) == []
    assert g.is_output(b) and g.is_output(c) and not g.is_output(a)
    assert g.sole_consumer(x) is nodes[0]
    assert g.sole_consumer(a) is None  # a second consumer
    assert g.sole_consumer(b) is None  # a graph output
    assert g.uses(a) == 2 and g.uses(b) == 1 and g.uses(x) == 1


def test_sole_consumer_refuses_a_graph_output_in_the_middle_of_a_chain():
    x, (a, b, _), nodes = _chain()
    nodes = nodes[:2]
    assert GraphView(nodes, {"b": b}).sole_consumer(a) is nodes[1]
    assert GraphView(nodes, {"a": a, "b": b}).sole_consumer(a) is None


def test_replace_returns_a_new_list_and_leaves_the_old_one():
    x, (a, b, c), nodes = _chain()
    before = list(nodes)
    g = GraphView(nodes, {"b": b, "c": c})
    new_neg = _n("exp", [a], b)
    view = _n("reshape", [a], _v())
    out = g.replace({nodes[1].id: new_neg, nodes[2].id: [view, nodes[2]]}, {nodes[0].id})
    assert out == [new_neg, view, nodes[2]]
    assert nodes == before and g.nodes == before
    assert g.replace() == before and g.replace() is not nodes


def test_ir_imports_nothing_of_the_builder_the_ops_or_the_compiler():
    """The IR's own imports reach only the validation helpers; the builder does not import
    the operators or the compiler; the rules import the builder nowhere (no import cycle)."""
    def module_imports(path: Path) -> set[str]:
        """Package modules imported at module level (not inside functions)."""
        tree = ast.parse(path.read_text())
        pkg = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names = set()
        for stmt in tree.body:
            if isinstance(stmt, ast.ImportFrom) and stmt.level:
                base = list(pkg[:len(pkg) - stmt.level]) if path.name != "__init__.py" else list(pkg[:len(pkg) - stmt.level + 1])
                mod = ".".join(base + ([stmt.module] if stmt.module else []))
                names.add(mod)
                names.update(f"{mod}.{a.name}" for a in stmt.names)
            elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").startswith("webnn_gpu"):
                names.add(stmt.module or "")
        return names

    def closure(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            mod = todo.pop()
            if mod in seen:
                continue
            seen.add(mod)
            rel = Path(*mod.split("."))
            for path in (PACKAGE.parent / rel.with_suffix(".py"), PACKAGE.parent / rel / "__init__.py"):
                if path.exists():
                    todo += [m for m in module_imports(path) if m.startswith("webnn_gpu")]
        return seen

    ir = closure("webnn_gpu._ir")
    assert not {m for m in ir if m.startswith(("webnn_gpu.builder", "webnn_gpu.ops", "webnn_gpu.compiler",
                                                "webnn_gpu.fusions", "webnn_gpu.graph"))}, sorted(ir)
    builder = closure("webnn_gpu.builder")
    assert not {m for m in builder if m.startswith(("webnn_gpu.ops", "webnn_gpu.compiler"))}, sorted(builder)
    for path in (PACKAGE / "compiler").rglob("*.py"):
        assert not re.search(r"from \S*builder import|import \S*builder", path.read_text()), \
            f"{path} imports the builder (the IR is webnn_gpu._ir)"


def test_the_order_is_a_table_with_a_reason_for_every_rule():
    names = [r.name for r in rules()]
    assert len(names) == len(set(names)) and PASSES == [r.fn for r in rules()]
    assert all(len(r.why) > 20 for r in rules()), "every rule says why it stands where it does"
    assert names[0] == "dead_code" and names[-6:] == ["fuse_elementwise", "store_depth_to_space", "fuse_remap_chain",
                                                      "concat_in_place", "fuse_project_consumer", "fuse_siblings"]
    # dependencies each rule's reason names
    for rule in rules():
        for other in names:
            if f"after {other}" in rule.why:
                assert names.index(other) < names.index(rule.name), (rule.name, other)
            if f"before {other}" in rule.why:
                assert names.index(rule.name) < names.index(other), (rule.name, other)
    assert {s.name for s in ORDER} >= {"simplify", "epilogue", "elementwise"}


def _counting_rules():
    """Two rules where the second enables the first: neg(neg(x)) -> x, and exp -> neg."""
    def cancel_negs(nodes, outputs, context=None):
        g = GraphView(nodes, outputs)
        for n in nodes:
            if n.op == "neg":
                inner = g.producer(n.inputs[0])
                if inner is not None and inner.op == "neg" and g.sole_consumer(inner.outputs[0]) is n:
                    return g.replace({n.id: Node("identity", list(inner.inputs), list(n.outputs), {})}, {inner.id})
        return nodes

    def exp_to_neg(nodes, outputs, context=None):
        g = GraphView(nodes, outputs)
        for n in nodes:
            if n.op == "exp":
                return g.replace({n.id: Node("neg", list(n.inputs), list(n.outputs), {})})
        return nodes

    return cancel_negs, exp_to_neg


def _neg_exp_chain():
    x = _v(kind="input")
    v1, v2, v3 = _v(), _v(), _v()
    return [_n("neg", [x], v1), _n("exp", [v1], v2), _n("neg", [v2], v3)], {"y": v3}


@pytest.mark.parametrize("repeat", [False, True])
def test_a_repeating_stage_runs_until_nothing_changes(repeat):
    cancel_negs, exp_to_neg = _counting_rules()
    order = (Stage("t", (Rule(cancel_negs, "cancels pairs"), Rule(exp_to_neg, "makes pairs")), repeat=repeat),)
    nodes, outputs = _neg_exp_chain()
    out = run_passes(nodes, outputs, None, order)
    if repeat:  # exp_to_neg made a pair that cancel_negs, run again, takes
        assert [n.op for n in out] == ["identity", "neg"]
    else:
        assert [n.op for n in out] == ["neg", "neg", "neg"]
    assert [n.op for n in nodes] == ["neg", "exp", "neg"]


def test_a_repeating_stage_that_never_settles_fails():
    def flip(nodes, outputs, context=None):
        g = GraphView(nodes, outputs)
        swap = {"neg": "abs", "abs": "neg"}
        return g.replace({n.id: Node(swap.get(n.op, n.op), list(n.inputs), list(n.outputs), {}) for n in nodes})

    nodes, outputs = _neg_exp_chain()
    with pytest.raises(AssertionError, match="stage t: still changing the graph after 8 rounds"):
        run_passes(nodes, outputs, None, (Stage("t", (Rule(flip, "undoes itself"),), repeat=True),))


def test_webnn_gpu_passes_switches_rules_off_by_name(monkeypatch):
    cancel_negs, exp_to_neg = _counting_rules()
    order = (Stage("t", (Rule(dead_code, "first"), Rule(exp_to_neg, "x"), Rule(cancel_negs, "y"))),)
    nodes, outputs = _neg_exp_chain()
    dead = Node("abs", [nodes[0].outputs[0]], [_v()], {})
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-cancel_negs")
    assert [n.op for n in run_passes([*nodes, dead], outputs, None, order)] == ["neg", "neg", "neg"]
    monkeypatch.setenv("WEBNN_GPU_PASSES", "-all")  # every rule but dead_code
    assert [n.op for n in run_passes([*nodes, dead], outputs, None, order)] == ["neg", "exp", "neg"]


def test_a_rule_that_breaks_the_order_is_named():
    def reverse(nodes, outputs, context=None):
        return nodes[::-1]

    nodes, outputs = _neg_exp_chain()
    with pytest.raises(AssertionError, match=r"compiler pass reverse: neg \[neg\] reads"):
        run_passes(nodes, outputs, None, (Stage("t", (Rule(reverse, "wrong"),)),))
    with pytest.raises(AssertionError, match="output 'z'"):
        check_order(nodes, {"z": _v()})


def test_driver_order_is_what_run_passes_applies(monkeypatch):
    """run_passes reads driver.ORDER when called (a test may add a rule)."""
    seen = []

    def spy(nodes, outputs, context=None):
        seen.append(len(nodes))
        return nodes

    monkeypatch.setattr(driver, "ORDER", (*driver.ORDER, Stage("spy", (Rule(spy, "last, looks"),))))
    nodes, outputs = _neg_exp_chain()
    run_passes(nodes, outputs)
    assert seen == [1]  # (after fuse_elementwise made the chain one node)


def test_the_docs_table_lists_the_rules_in_order():
    text = (PACKAGE.parent / "docs" / "compiler.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (\w+) \| `(\w+)` \|", text, flags=re.M)
    assert [(int(i), stage, name) for i, stage, name in rows] == [
        (i + 1, stage.name, r.name) for i, (stage, r) in enumerate((s, r) for s in ORDER for r in s.rules)]
