"""The compiler's driver: the order of the rules, as data, and the loop that applies them.

A rule is a function ``rule(nodes, outputs, context=None) -> nodes``: it reads the node list
(through a :class:`~webnn_gpu._ir.GraphView`) and returns a new one, never changing the list,
the nodes or the values it receives (a failed ``build()`` leaves the builder usable). Rules
are applied in the order of :data:`ORDER`, a table of stages whose entries each say why the
rule stands where it does; a stage marked ``repeat`` runs again until none of its rules
changes the graph (where one of its rules can make work for another). After each rule
:func:`check_order` checks that every node's inputs are computed before it.
``WEBNN_GPU_PASSES=-fuse_epilogue,-fold_constants`` switches rules off by name,
``WEBNN_GPU_PASSES=-all`` every one but :func:`dead_code` (for benchmarks and debugging).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._env import DEBUG
from ..fusions.attention import fuse_attention
from ..fusions.heads import fuse_heads
from ..fusions.layer_norm import fuse_layer_norm
from ..fusions.mlp import fuse_mlp
from ..fusions.pooled_head import fuse_pooled_head
from ..fusions.pw_depthwise import fuse_pw_depthwise
from ..fusions.siblings import fuse_siblings
from ..fusions.squeeze_excite import fuse_squeeze_excite
from .rules.canonical import (depthwise_to_scale, mean_to_pool, merge_duplicates, merge_reshapes, self_add_to_scale,
                              sink_reshapes, sum_to_mean)
from .rules.cleanup import dead_code
from .rules.dense_chain import fuse_dense_chain
from .rules.dwp_consumer import fuse_project_consumer
from .rules.conv import (conv_columns_to_channels, fuse_conv_input, fuse_conv_input_preact, fuse_conv_input_relu, fuse_conv_pool, fuse_conv_upsample,
                         fuse_depthwise_project, swap_resample_conv)
from .rules.elementwise import fuse_elementwise, fuse_hard_swish, fuse_swish
from .rules.epilogue import fuse_epilogue
from .rules.fold import fold_constants
from .rules.layout import concat_in_place, fold_layout, fuse_concat_map, fuse_remap_chain, store_depth_to_space
from .rules.linalg import fold_matmul_transpose, stack_shared_gemms
from .rules.norm import split_batch_norm
from .rules.nchw import compose_transposes, nchw_conv_to_nhwc
from .rules.norm_rows import fuse_matmul_layer_norm, fuse_matmul_softmax
from .rules.pool import fuse_pool_input, fuse_pool_map, fuse_pool_partials, fuse_pool_residual
from .rules.regions import nhwc_regions
from .rules.resample import fuse_upsampled_residual
from .rules.views import fold_matmul_views

log = logging.getLogger("webnn_gpu")

#: a rule: ``rule(nodes, outputs, context=None) -> nodes``
RuleFn = Callable[..., list]


@dataclass(frozen=True)
class Rule:
    """One entry of the order: a rule function and why it stands where it does."""

    fn: RuleFn
    why: str

    @property
    def name(self) -> str:
        """The rule's name (its function's), as ``WEBNN_GPU_PASSES`` spells it."""
        return self.fn.__name__


@dataclass(frozen=True)
class Stage:
    """Rules applied in turn; with ``repeat``, again until none of them changes the graph."""

    name: str
    rules: tuple[Rule, ...]
    repeat: bool = False
    why: str = ""


#: most rounds of a repeating stage: one still changing the graph then fails the build (rules
#: that undo each other's work would loop forever)
MAX_ROUNDS = 8

#: The order of the rules. A later rule sees what the earlier ones made; each ``why`` names
#: the rules it must follow or precede and the reason.
ORDER: tuple[Stage, ...] = (
    Stage("simplify", (
        Rule(dead_code, "first: no later rule looks at nodes no output needs, and every rule's "
                        "'feeds nothing else' test counts only live readers"),
        Rule(fold_constants, "before every fusion: a constant computed by ops (a transposed filter, a "
                             "float16 scale cast up) must be host data for the fusions' constant tests "
                             "(a 1x1 filter, the 3 and 6 of hard-swish, layer normalization's epsilon)"),
        Rule(merge_duplicates, "after fold_constants (an operand computed by ops is host data then, the same for "
                               "both readers) and before every fusion: the fused kernels would compute the "
                               "duplicate twice"),
        Rule(self_add_to_scale, "after merge_duplicates (two identical operands it merges become one value read "
                                "twice) and before every fusion: fuse_epilogue takes the product by a constant"),
        Rule(fold_matmul_transpose, "after fold_constants (a constant transposed operand is folded into "
                                    "host data instead) and before fuse_attention and fuse_epilogue: they "
                                    "take the matmul as it will run, reading its operand in place"),
        Rule(fold_matmul_views, "after fold_matmul_transpose (a swap of A's last two dimensions is its fold) and "
                                "before fuse_attention and fuse_epilogue: a matmul takes its epilogue and joins an "
                                "attention node reading and storing its operands in place"),
        Rule(nhwc_regions, "after fold_constants (the filters and broadcast constants it re-lays out are host "
                           "data) and before nchw_conv_to_nhwc (the convs of a region it stores NHWC are NHWC "
                           "already; that rule takes those it leaves) and compose_transposes (the transposes "
                           "it adds at a region's edges compose with the graph's)"),
        Rule(nchw_conv_to_nhwc, "before compose_transposes (the transposes it adds cancel against an "
                                "exporter's) and before every fusion: it takes only a conv without an "
                                "epilogue, and the fusions see the NHWC conv"),
        Rule(compose_transposes, "after nchw_conv_to_nhwc: back-to-back transposes, its own against the "
                                 "graph's, become one (or a free view where they cancel)"),
    )),
    Stage("structural", (
        Rule(conv_columns_to_channels, "after fold_constants (the filter and bias must be host data) and "
                                       "compose_transposes (an exporter's NCHW conv is NHWC by then) and before "
                                       "merge_reshapes (the views it adds around the conv meet the graph's) and "
                                       "fuse_epilogue: it takes only a conv without an epilogue"),
        Rule(depthwise_to_scale, "after fold_constants (the filter and bias must be host data) and before "
                                 "fuse_epilogue and fuse_elementwise: the mul and add it makes become the producing "
                                 "kernel's epilogue steps or join an element-wise chain"),
        Rule(fuse_layer_norm, "before fuse_epilogue and fuse_elementwise: they would take the decomposed "
                              "form's sub, mul and add into other kernels"),
        Rule(sum_to_mean, "after fold_constants (the scale must be host data) and fuse_layer_norm (it matches "
                          "the decomposed forms as written); before mean_to_pool, which takes the means it makes"),
        Rule(mean_to_pool, "after fuse_layer_norm (the decomposed form's means are the reductions it matches) "
                           "and before fuse_pool_input, fuse_conv_pool, fuse_pool_partials and "
                           "fuse_squeeze_excite: they take global average pools"),
        Rule(merge_reshapes, "after mean_to_pool (the reshape it adds after a pool that drops the spatial axes "
                             "meets the graph's reshape back) and before sink_reshapes and the rules that ask what "
                             "produced a value or whether one node reads it (fuse_conv_pool, fuse_squeeze_excite, "
                             "the epilogue rules): a chain of views is one view, an identity view none"),
        Rule(swap_resample_conv, "before fuse_epilogue: it swaps only a conv without an epilogue (a bias "
                                 "commutes with the resample, an activation does not)"),
        Rule(fuse_hard_swish, "before fuse_epilogue: its input has two readers in the decomposed form "
                              "(an epilogue chain stops there); the hard_swish node is one epilogue step"),
        Rule(fuse_swish, "before fuse_epilogue: its input has two readers in the decomposed form (an "
                         "epilogue chain stops there); the swish node is one epilogue step"),
        Rule(sink_reshapes, "after fuse_layer_norm, fuse_hard_swish and fuse_swish (they match their forms as "
                            "the graph writes them) and before fuse_epilogue and fuse_elementwise: the ops it moves "
                            "next to their producer become its epilogue steps or join its chain"),
        Rule(split_batch_norm, "before fuse_epilogue: the element-wise steps it makes become the producing "
                               "kernel's epilogue"),
    )),
    Stage("epilogue", (
        Rule(fuse_epilogue, "after the structural rules (the ops they make become steps); before the "
                            "rules below, whose legality tests look at a conv's epilogue and outputs"),
        Rule(fold_layout, "after fuse_epilogue: it reads a zero pad or a slice in place where an epilogue "
                          "step took it as an operand; before fuse_conv_input and fuse_depthwise_project, "
                          "whose legality tests see the conv's final padding"),
        Rule(stack_shared_gemms, "after fuse_epilogue: each step's activation is its gemm's epilogue by then (the "
                                 "gemms compare equal with it, and the concat reads them directly)"),
    )),
    Stage("kernels", (
        Rule(fuse_attention, "after fuse_epilogue: the scale, the mask and a tail are the matmuls' epilogues "
                             "by then (the attention node keeps the matmuls as they are)"),
        Rule(fuse_matmul_layer_norm, "after fuse_epilogue: the product's bias and residual add are its epilogue "
                                     "steps by then, the normalization's tail its own"),
        Rule(fuse_matmul_softmax, "after fuse_epilogue (as fuse_matmul_layer_norm) and fuse_attention: a softmax "
                                  "between two products is the attention node's"),
        Rule(fuse_dense_chain, "after fuse_epilogue (each layer's bias and activation are its epilogue) and "
                               "fuse_matmul_softmax (a classifier's last layer and its softmax are one kernel "
                               "already: the chain stops before it)"),
        Rule(fuse_conv_input, "after fuse_epilogue: a mul / add the producing kernel can apply as it "
                              "stores goes there; this rule takes those left in front of a pointwise conv, "
                              "and an affine of constants in front of a first-layer (block kernel) conv; "
                              "after fold_layout, which gave the conv the padding of a zero pad after the "
                              "affine"),
        Rule(fuse_pool_input, "after fuse_epilogue: likewise, a residual add stays its conv's epilogue "
                              "step; the pool takes an add left on its own"),
        Rule(fuse_conv_upsample, "after fuse_conv_input: it reads the skip add that rule put in the conv"),
        Rule(fuse_conv_pool, "after fuse_epilogue (a conv with two outputs hosts no epilogue) and "
                             "fuse_pool_input (a pool that sums an add is no conv's second output)"),
        Rule(fuse_depthwise_project, "after fuse_conv_pool and fuse_conv_input: a depthwise conv that pools "
                                     "its output keeps that output (only its expansion is fused), a pointwise "
                                     "conv that took its input's scale or skip add is no projection"),
        Rule(fuse_pool_partials, "after fuse_depthwise_project and fuse_pool_input: it asks the final "
                                 "producers (depthwise_project nodes) for the partial sums of what a pool sums"),
        Rule(fuse_squeeze_excite, "after fuse_conv_pool and fuse_pool_partials: it takes the partial sums they "
                                  "make into the excitation's kernel"),
        Rule(fuse_pool_map, "after fuse_epilogue (the pool's own epilogue is set; a chain a producer could "
                            "host went there), fuse_conv_input (a scale a pointwise conv reads in costs no "
                            "store) and the pool rules (a pool with a fused input is no side host); before "
                            "fuse_elementwise, which would merge the chain into a kernel of its own"),
        Rule(fuse_concat_map, "after fuse_epilogue and fuse_conv_input (a chain a kernel takes as its epilogue or "
                              "prologue costs no store) and before fuse_elementwise, which would merge the chain "
                              "into a kernel of its own"),
        Rule(fuse_pool_residual, "after fuse_epilogue and fold_layout (the residual add, maybe of a channel-padded "
                                 "pool, is an epilogue step by then), fuse_depthwise_project (the step is the "
                                 "projection's; the pair's legality saw the plain residual) and fuse_pool_map "
                                 "(a pool that stores a side map stays)"),
        Rule(fuse_upsampled_residual, "after fuse_epilogue (the skip add is its reader's epilogue step by then), "
                                      "fuse_conv_upsample (an upsampled add a pointwise conv adds to its input is "
                                      "read by that conv's tiles) and fuse_depthwise_project (the step is the "
                                      "projection's; the pair's legality saw the plain residual)"),
        Rule(fuse_mlp, "after fuse_epilogue (each product's bias, activation and residual add are its epilogue "
                       "steps), fuse_matmul_layer_norm and fuse_matmul_softmax (a product and its rows' "
                       "normalization are one kernel already), fuse_dense_chain (one-row chains), "
                       "fuse_depthwise_project (a projection it takes is no product here) and fuse_pool_residual "
                       "(a pooled residual is the first product's epilogue step by then)"),
        Rule(fuse_heads, "after fuse_epilogue (each product's bias and activation are its epilogue steps), "
                         "fuse_dense_chain and fuse_mlp (a product in a chain or a pair is no head here) and "
                         "fuse_matmul_layer_norm / fuse_matmul_softmax (a product whose rows are normalized "
                         "is one kernel already)"),
        Rule(fuse_pooled_head, "after fuse_heads (a heads node of the pooled vector takes the mean as one product "
                               "does), fuse_conv_pool and fuse_pool_partials (it reads the partial sums they make) and "
                               "fuse_squeeze_excite (an excitation on the pooled pixel is one kernel already)"),
        Rule(fuse_pw_depthwise, "after fuse_depthwise_project (a depthwise conv with its projection, maybe its "
                                "expansion, in one kernel saves more: the triple takes the expansion this rule "
                                "would), fuse_pool_residual and fuse_upsampled_residual (the convs' epilogue steps "
                                "are final), fuse_mlp and fuse_heads (a pointwise conv they took is no expansion "
                                "here); before fuse_project_consumer and fuse_siblings, which would take the "
                                "pointwise conv into a launch that still stores its output"),
        Rule(fuse_conv_input_preact, "after every rule that takes a pointwise conv into another kernel "
                                     "(fuse_mlp, fuse_heads, fuse_pw_depthwise, fuse_depthwise_project: their "
                                     "legality saw the plain conv; input_preact_ok asks for a conv2d on the tile "
                                     "kernel) and fuse_concat_map (a chain a concat stores as a side map is gone by "
                                     "then, unless WEBNN_GPU_FORCE_INPUT_PREACT=concat leaves it here); before "
                                     "fuse_elementwise, which would give the chain a launch of its own, and ahead of "
                                     "the relu rule for depthwise convs (a relu read by tile-kernel convs is taken "
                                     "here, one read by depthwise convs there)"),
        Rule(fuse_conv_input_relu, "after every rule that takes a depthwise conv into another kernel "
                                   "(fuse_depthwise_project, fuse_pw_depthwise: their legality saw the plain "
                                   "conv; such a kernel saves more) and before fuse_elementwise, which would "
                                   "give the relu a launch of its own"),
    )),
    Stage("elementwise", (
        Rule(fuse_elementwise, "last of the fusions: it merges the element-wise nodes no kernel took as a "
                               "prologue or an epilogue"),
    )),
    Stage("memory", (
        Rule(store_depth_to_space, "after every fusion: it leaves a conv's output in the bytes of its "
                                   "depth_to_space, which no rule after it may read as the conv's output "
                                   "(concat_in_place only follows the views to the producer)"),
        Rule(fuse_remap_chain, "after every fusion and store_depth_to_space: a pad or slice an epilogue reads in "
                               "place (fold_layout), a transpose a conv stores (store_depth_to_space) costs no "
                               "kernel, so the chain is only what is left; the views it leaves at a chain's ends "
                               "stay views for concat_in_place"),
        Rule(concat_in_place, "after fuse_elementwise and every fusion: the producers it lets write into a "
                              "concat's output are the final kernels (a fusion that took one would leave the "
                              "concat without its block)"),
        Rule(fuse_project_consumer, "after fuse_depthwise_project (it attaches a pointwise conv to the pair's "
                                    "node) and last: it takes only a conv that no other rule marked or changed "
                                    "(fuse_pool_residual, fuse_mlp, store_depth_to_space would find it gone), "
                                    "and concat_in_place places values, which the merged kernel stores as any "
                                    "producer does"),
        Rule(fuse_siblings, "after fuse_epilogue (each product's bias and activation are its epilogue steps), "
                            "the rules that take a conv into a kernel or mark it (fuse_conv_input, fuse_conv_pool, "
                            "fuse_depthwise_project, fuse_pool_residual, fuse_upsampled_residual, fuse_mlp, "
                            "store_depth_to_space and fuse_project_consumer: such a kernel saves a launch and "
                            "more; a conv they took or marked is no sibling here), fuse_heads (products of a few "
                            "rows are one matvec launch already) and concat_in_place (it places values: the "
                            "merged node stores each product's output where its conv would)"),
    )),
)


def rules(order: Sequence[Stage] | None = None) -> list[Rule]:
    """Every rule of ``order`` (default :data:`ORDER`) in the order they run."""
    return [r for stage in (ORDER if order is None else order) for r in stage.rules]


#: every rule function, in order (``ORDER`` flattened)
PASSES: list[RuleFn] = [r.fn for r in rules()]


def _enabled(p) -> bool:
    """Whether rule ``p`` runs: ``WEBNN_GPU_PASSES`` lists rules to switch off by name
    (``-fuse_epilogue,-fold_constants``), ``-all`` switches every one off but :func:`dead_code`."""
    off = {s.strip().lstrip("-") for s in os.environ.get("WEBNN_GPU_PASSES", "").split(",") if s.strip()}
    return p is dead_code or (p.__name__ not in off and "all" not in off)


def check_order(nodes: list, outputs: dict, after: str = "") -> None:
    """Raise AssertionError unless every value a node reads (and every output) is computed by
    an earlier node of ``nodes`` (or is a graph input or constant): a rule that breaks the
    order would make a kernel read a buffer not yet written, a silent wrong result."""
    ready: set[int] = set()
    for node in nodes:
        for v in node.inputs:
            if v is not None and v.kind == "op" and v.id not in ready:
                raise AssertionError(f"compiler pass {after}: {node.op} [{node.label}] reads {v!r} before "
                                     "any node computes it")
        ready.update(v.id for v in node.outputs)
    for name, v in outputs.items():
        if v.kind == "op" and v.id not in ready:
            raise AssertionError(f"compiler pass {after}: output {name!r} ({v!r}) is computed by no node")


def _changed(before: list, after: list) -> bool:
    """Whether a rule changed the node list (rules return new nodes for what they change)."""
    return len(before) != len(after) or any(a is not b for a, b in zip(before, after))


def run_passes(nodes: list, outputs: dict, context=None, order: Sequence[Stage] | None = None) -> list:
    """Apply the rules of ``order`` (default :data:`ORDER`, minus those ``WEBNN_GPU_PASSES``
    switches off) to ``nodes``, checking after each that changes it that the node list is still
    in a valid order (:func:`check_order`).

    Arguments:
        nodes (list[Node]): the graph's nodes in a valid order (not changed).
        outputs (dict[str, Value]): the graph's named outputs.
        context (MLContext | None): the device whose limits and tuning the rules respect.
        order (Sequence[Stage] | None): the stages to apply; default :data:`ORDER`.

    Returns:
        list[Node]: the compiled graph's nodes.
    """
    check_order(nodes, outputs, "input")
    for stage in ORDER if order is None else order:
        for _ in range(MAX_ROUNDS if stage.repeat else 1):
            changed = False
            for rule in stage.rules:
                if not _enabled(rule.fn):
                    continue
                new = rule.fn(nodes, outputs, context)
                if _changed(nodes, new):  # an unchanged list is in the order checked before
                    check_order(new, outputs, rule.name)
                    changed = True
                nodes = new
            if not changed:
                break
        else:
            if stage.repeat:
                raise AssertionError(f"compiler stage {stage.name}: still changing the graph after {MAX_ROUNDS} rounds")
    if DEBUG >= 1:
        log.info("graph after passes (%d nodes):\n%s", len(nodes), "\n".join(map(repr, nodes)))
    return nodes
