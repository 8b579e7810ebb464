"""Cubed plan optimization for gradient graphs: duplicate cheap elementwise producers into each
of their consumers, then let Cubed fuse.

Cubed fuses an operation into its successor only when the successor is its array's single
consumer: an array two operations read is written to storage and read back (one task per chunk
to write it, one read per consumer). Reverse-mode graphs fan out everywhere: a residual is read by
the forward and by the backward (``e = exp(-|z|)`` in logistic regression feeds ``1 + e`` and the
backward's ``g * e``), and a cotangent is handed to every branch of a sum (the mean's broadcast
cotangent reaches three terms). Writing those arrays cost more than the whole hand-written
gradient's elementwise work (measured on 400,000 x 100 rows: three 20-task operations out of
eight, about a quarter of the step).

This is XLA's answer to the same problem (a cheap producer is duplicated into each consumer's
fusion): an elementwise operation (one block of each input per task, no input chunk larger than
its output chunk, so recomputing it reads no more than reading its result would) with several
consumers gets one copy per consumer that can fuse, and Cubed's multiple-input fusion then fuses
each copy into its consumer. The copies share the original's pipeline and write name (a fused
function finds its predecessor by the array's name), so nothing is recompiled; every copy that
did not fuse is undone and the plan is optimized again without it, so no array is ever written
twice. An op is copied into at most :data:`MAX_COPIES` consumers, else it is stored and read: a
producer read by another producer's copies is copied into each of them, so without a bound the
copies grow with the product of the fan-outs along the graph (a two-layer MLP's step made 47
copies of one op, and Cubed's fusion, which copies the whole graph for each op it fuses, took
8.6 s to plan it; a layer norm's gradient over two elements 30 s).

Two more pieces make that sound and fast: a fused task's projected memory is recomputed for how
Cubed runs it (every input block of the fused tree read before any of it is evaluated;
:func:`project_fused`), with heavy producers kept out of ops that read several of their blocks
(:func:`multi_block_consumers`); and each task opens each input array once and reads each
block once (:func:`apply_blockwise_read_once`), since the copies read the same residuals. The
plan is checked against ``allowed_mem`` after this pass.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

# a copy's node names: the original's with this suffix and a number (Cubed's optimizers only
# look at the "op-"/"array-" prefixes)
_COPY = "-copy"
# the most consumers an op is copied into (measured on a two-layer MLP's graph-mode step: 97
# tasks against 96 with no bound, planned in 0.5 s against 8.6 s; 4 gave 117 tasks)
MAX_COPIES = 8


def seam() -> Any:
    """Cubed's internals (:mod:`cubed_plugin._cubed_seam`, imported with Cubed on first use)."""
    from . import _cubed_seam

    return _cubed_seam


def _op_of(dag: Any, array: str) -> str:
    (op,) = (pre for pre, _ in dag.in_edges(array))
    return op


def _is_blockwise(dag: Any, op: str) -> bool:
    return seam().is_blockwise(seam().node_op(dag, op))


def _nbytes(dag: Any, array: str) -> int:
    """The bytes of one chunk of ``array`` (Cubed's ``chunk_memory``; 0 for a node without a
    target)."""
    target = seam().node_target(dag, array)
    return 0 if target is None else seam().chunk_memory(target)


def _cheap(dag: Any, op: str, array: str, max_sources: int) -> bool:
    """Recomputing ``op`` in a consumer reads no more than reading its result: one block of each
    input per task, and no stored input has a larger chunk than the output."""
    if not _is_blockwise(dag, op):
        return False
    po = seam().node_op(dag, op)
    if not po.fusable_with_successors:
        return False
    if any(n != 1 for n in seam().blocks_per_input(po)):
        return False
    sources = po.source_array_names
    if len(set(sources)) > max_sources:
        return False
    out = _nbytes(dag, array)
    return all(_nbytes(dag, s) <= out for s in sources)


def _fusable_consumer(dag: Any, op: str, num_tasks: int) -> bool:
    po = seam().node_op(dag, op)
    return _is_blockwise(dag, op) and po.fusable_with_predecessors and po.num_tasks == num_tasks


def duplicate_producers(
    dag: Any,
    array_names: tuple,
    *,
    skip: frozenset = frozenset(),
    max_sources: int = 4,
    max_copies: int = MAX_COPIES,
) -> tuple[Any, dict]:
    """A copy of ``dag`` in which each cheap elementwise op with several fusable consumers (at
    most ``max_copies``) has one copy per such consumer (consumers that cannot fuse keep
    reading the original). Returns the new dag and ``{copy array name: original op}``."""
    import networkx as nx

    dag = dag.copy()
    copies: dict[str, str] = {}
    counter = itertools.count()
    # consumers first, so a producer's copies are themselves consumers of its inputs' producers
    for op in reversed(list(nx.topological_sort(dag))):
        if not op.startswith("op-") or op in skip or seam().node_op(dag, op) is None:
            continue
        outs = [a for _, a in dag.out_edges(op)]
        if len(outs) != 1:
            continue
        (array,) = outs
        if array in array_names:
            continue
        consumers = sorted({c for _, c in dag.out_edges(array)})
        if len(consumers) < 2 or not _cheap(dag, op, array, max_sources):
            continue
        num_tasks = seam().node_op(dag, op).num_tasks
        fusable = [c for c in consumers if _fusable_consumer(dag, c, num_tasks)]
        if not fusable or len(fusable) > max_copies:
            continue
        keep_original = len(fusable) < len(consumers)
        for c in fusable:
            i = next(counter)
            op_copy, array_copy = f"{op}{_COPY}{i}", f"{array}{_COPY}{i}"
            seam().copy_node(dag, op, op_copy, seam().replace_op(seam().node_op(dag, op)))
            seam().copy_node(dag, array, array_copy)
            for pre, _ in dag.in_edges(op):
                for _ in range(dag.number_of_edges(pre, op)):
                    dag.add_edge(pre, op_copy)
            dag.add_edge(op_copy, array_copy)
            n = dag.number_of_edges(array, c)
            dag.remove_edges_from([(array, c)] * n)
            for _ in range(n):
                dag.add_edge(array_copy, c)
            cpo = seam().node_op(dag, c)
            seam().set_node_op(
                dag,
                c,
                seam().replace_op(
                    cpo,
                    source_array_names=[
                        array_copy if s == array else s for s in cpo.source_array_names
                    ],
                ),
            )
            copies[array_copy] = op
        if not keep_original:
            for pre, _ in list(dag.in_edges(op)):
                dag.remove_edges_from([(pre, op)] * dag.number_of_edges(pre, op))
            dag.remove_node(array)
            dag.remove_node(op)
    return dag, copies


def duplicating_optimizer(
    fuse: Callable[..., Any], *, max_sources: int = 4, max_copies: int = MAX_COPIES
) -> Callable[..., Any]:
    """An ``optimize_function`` for Cubed: :func:`duplicate_producers`, then ``fuse`` (Cubed's
    multiple-input fusion, taking ``never_fuse``), then each fused task's projection made
    sound (:func:`project_fused`). A producer any of whose copies did not fuse is left
    undivided, and an op whose fused task would exceed ``allowed_mem`` is left unfused; the
    plan is optimized again until neither happens."""

    def optimize(dag: Any, array_names: tuple) -> Any:
        skip: set[str] = set()
        never: set[str] = set()
        while True:
            copied, copies = duplicate_producers(
                dag,
                array_names,
                skip=frozenset(skip),
                max_sources=max_sources,
                max_copies=max_copies,
            )
            fused = fuse(copied, array_names=array_names, never_fuse=frozenset(never))
            left = {op for a, op in copies.items() if a in fused}
            if left:
                skip |= left
                continue
            fused = project_fused(copied, fused)
            over = {
                n
                for n, po in seam().op_nodes(fused)
                if n in copied
                and po.projected_mem > po.allowed_mem
                and po is not seam().node_op(copied, n)
            }
            if not over - never:
                return read_once(fused)
            never |= over

    return optimize


# -- reading each block once per task ------------------------------------------------------------


def _leaves(tree: Any) -> Any:
    """The chunk keys of a (nested) key structure, in order."""
    if isinstance(tree, seam().ChunkKey):
        yield tree
    elif isinstance(tree, seam().FunctionArgs):
        for a in tree.args:
            yield from _leaves(a)
    else:  # lists and iterators
        for a in tree:
            yield from _leaves(a)


def _selection_key(selection: tuple) -> tuple:
    return tuple((s.start, s.stop, s.step) if isinstance(s, slice) else s for s in selection)


class _ReadOnce:
    """A read proxy for one task that reads each block the task asks for more than once a single
    time, and drops it after its last use (so no block stays alive longer than the last of the
    reads it replaces: the task's peak does not grow)."""

    def __init__(self, proxy: Any, uses: dict) -> None:
        self.proxy, self.uses, self._array = proxy, uses, None
        self.held: dict[Any, Any] = {}

    @property
    def array(self) -> Any:  # opened once per task (Cubed opens a Zarr array at every read)
        if self._array is None:
            self._array = self.proxy.open()
        return self._array

    # Cubed's get_chunk calls ``reads_map[name].open()[selection]``
    def open(self) -> _ReadOnce:
        return self

    def __getattr__(self, name: str) -> Any:  # shape, chunks, dtype of the array
        return getattr(self.array, name)

    def __getitem__(self, selection: tuple) -> Any:
        key = _selection_key(selection)
        left = self.uses.get(key, 1)
        if left <= 1 and key not in self.held:
            return self.array[selection]
        if key not in self.held:
            self.held[key] = self.array[selection]
        block = self.held[key]
        self.uses[key] = left - 1
        if left - 1 <= 0:
            del self.held[key]
        return block


def apply_blockwise_read_once(out_coords: list, *, config: Any) -> Any:
    """Cubed's ``apply_blockwise`` for one task, with each input array opened once and each
    input block read once: a fused task that recomputes several producers from the same input
    (a residual ``z`` read by four duplicated elementwise chains) reads it from storage once
    instead of once per chain (and Cubed opens the Zarr array, reading its metadata, at every
    read)."""
    from collections import Counter

    s = seam()
    keys = Counter(_leaves(s.task_keys(config, out_coords)))
    reads = {name: _ReadOnce(p, {}) for name, p in s.reads_of(config).items()}
    for k, n in keys.items():
        if n > 1:
            r = reads[k.name]
            r.uses[_selection_key(s.key_to_slices(k.coords, r.array))] = n
    return s.apply_blockwise(out_coords, config=s.with_reads(config, reads))


def read_once(dag: Any) -> Any:
    """Every fused blockwise op of ``dag`` run by :func:`apply_blockwise_read_once`."""
    for name, po in list(seam().op_nodes(dag)):
        if seam().is_blockwise(po):
            seam().set_node_op(dag, name, seam().run_with(po, apply_blockwise_read_once))
    return dag


# -- fusion whose projected memory is sound ------------------------------------------------------


def _blocks_read(po: Any) -> dict:
    """``{source array: blocks one task reads}`` for the first task (``num_input_blocks`` is an
    upper bound: a reduction's ``split_every``, where a contraction over one block reads one)."""
    from collections import Counter

    keys = set(_leaves(seam().first_task_keys(po)))
    counts = Counter(k.name for k in keys)
    # a copy's consumer asks for its blocks by the original's name
    return {a: counts[a.split(_COPY)[0]] for a in po.source_array_names}


def _tree_reads(dag: Any, op: str) -> tuple[int, bool]:
    """Bytes of stored blocks that ``op`` and the producers that would fuse into it (blockwise,
    single consumer) read for one block, and whether any of them reads blocks larger than it
    writes (a matmul's partial products over the data)."""
    if not _is_blockwise(dag, op):
        return 0, False
    po = seam().node_op(dag, op)
    out = _nbytes(dag, next(a for _, a in dag.out_edges(op)))
    total, heavy = 0, False
    for a in po.source_array_names:
        producer = _op_of(dag, a)
        if len({c for _, c in dag.out_edges(a)}) == 1 and _is_blockwise(dag, producer):
            t, h = _tree_reads(dag, producer)
            total, heavy = total + t, heavy or h
        else:
            total += _nbytes(dag, a)
            heavy = heavy or _nbytes(dag, a) > out
    return total, heavy


def multi_block_consumers(dag: Any) -> set[str]:
    """Ops that read several blocks of a blockwise predecessor's output per task (a reduction
    round), where the predecessor is heavy (a matmul's partial products over the data) or
    its fused tree would read more than 1/16 of the task's budget over those blocks.

    Fused into such an op, the heavy predecessor runs once per block inside one task: a
    quarter of the tasks, each four times longer and holding more (measured on graph-mode
    logistic regression, 28.8 MB chunks in a 250 MB budget: 280-299 MB in tasks Cubed
    projected at 160 MB, whose ``peak_projected_mem`` counts the predecessor once). Light
    predecessors (elementwise tails over row vectors) still fuse, with the task's projection
    counting every block (:func:`project_fused`)."""
    out = set()
    for name, po in list(seam().op_nodes(dag)):
        if not seam().is_blockwise(po):
            continue
        if all(n == 1 for n in seam().blocks_per_input(po)):
            continue
        reads = _blocks_read(po)
        light = (po.allowed_mem - po.reserved_mem) // 16
        for src in po.source_array_names:
            if reads[src] > 1:
                nbytes, heavy = _tree_reads(dag, _op_of(dag, src))
                if heavy or reads[src] * nbytes > light:
                    out.add(name)
    return out


def single_block_fusion(dag: Any, *, array_names: tuple, **kwargs: Any) -> Any:
    """Cubed's multiple-input fusion (``kwargs`` are its limits) that never fuses a heavy
    predecessor into an op reading several of its blocks (:func:`multi_block_consumers`)."""
    never = multi_block_consumers(dag) | set(kwargs.pop("never_fuse", None) or ())
    return seam().multiple_inputs_optimize_dag(
        dag, array_names=array_names, never_fuse=never, **kwargs
    )


# -- projected memory of a fused task, as Cubed runs it ------------------------------------------


def _tree_peak(dag: Any, fused: Any, op: str, reserved: int) -> int:
    """Peak of evaluating ``op``'s fused tree once its stored inputs are in memory: the
    arguments (each block of each) are evaluated in order, each fused predecessor's result kept
    while the next is evaluated (as Cubed's ``peak_projected_mem``), then ``op`` runs with its
    output and its own extra memory (its projection less its inputs and output)."""
    po = seam().node_op(dag, op)
    blocks = _blocks_read(po)
    ins = [_nbytes(dag, a) * blocks[a] for a in po.source_array_names]
    out = _nbytes(dag, next(a for _, a in dag.out_edges(op)))
    extra = max(0, po.projected_mem - reserved - 2 * sum(ins) - 2 * out)
    held = peak = 0
    for a in po.source_array_names:
        if a in fused:  # read from storage: counted with the task's inputs
            continue
        for _ in range(blocks[a]):
            peak = max(peak, held + _tree_peak(dag, fused, _op_of(dag, a), reserved))
            held += _nbytes(dag, a)
    return max(peak, held + extra + out)


def _stored_sources(dag: Any, fused: Any, op: str, times: int, into: dict) -> dict:
    """``{stored array: bytes of its blocks one task reads}`` over ``op``'s fused tree."""
    po = seam().node_op(dag, op)
    blocks = _blocks_read(po)
    for a in set(po.source_array_names):
        if a in fused:
            into[a] = max(into.get(a, 0), _nbytes(dag, a) * blocks[a] * times)
        else:
            _stored_sources(dag, fused, _op_of(dag, a), times * blocks[a], into)
    return into


def project_fused(dag: Any, fused: Any) -> Any:
    """``fused`` (the optimized ``dag``) with each fused task's projected memory at least what
    the task can hold as Cubed runs it: ``apply_blockwise`` reads every input block of the
    whole fused tree before evaluating any of it, so all of them are alive together (Cubed's
    ``peak_projected_mem`` counts a predecessor's inputs only while it runs). With producers
    copied into their consumers, one task reads more inputs, and Cubed's projection fell short:
    measured 168.6 MB in tasks projected at 160.5 MB (logistic regression's backward, 28.8 MB
    chunks), 163.5 MB once each block is read once.

    The bound: reserved memory, every stored input block the task reads (a predecessor fused
    into an op reading four of its blocks reads its inputs four times; the largest block's
    read buffer once), and the peak of evaluating the fused tree over them
    (:func:`_tree_peak`). The larger of it and Cubed's projection is kept. Unfused ops that
    read several blocks get the bound too: Cubed's reduction round counts one input block
    and one spare, and measured 136.0 MB in tasks projected at 134.6 MB (sums over four 11.5
    MB blocks of a graph-mode MLP's hidden layer; Zarr's read of a compressed chunk alone
    peaks at three times the chunk, measured with tracemalloc)."""
    for name, po in list(seam().op_nodes(fused)):
        if name not in dag or not seam().is_blockwise(po):
            continue
        original = seam().node_op(dag, name)
        if (
            all(a in fused for a in original.source_array_names)
            and max(_blocks_read(original).values(), default=0) <= 1
        ):
            continue  # nothing fused into it, one block of each input: Cubed's projection
        sources = _stored_sources(dag, fused, name, 1, {})
        reserved = po.reserved_mem
        largest = max((_nbytes(dag, a) for a in sources), default=0)
        inputs = sum(sources.values()) + largest
        out = _nbytes(dag, next(a for _, a in dag.out_edges(name)))
        bound = reserved + inputs + max(_tree_peak(dag, fused, name, reserved), 2 * out)
        if bound > po.projected_mem:
            seam().set_node_op(fused, name, seam().replace_op(po, projected_mem=bound))
    return fused
