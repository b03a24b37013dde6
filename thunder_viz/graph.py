"""The graph model of traces, their diff, and the trace document (docs/trace-schema.md).

A trace becomes a *step*: nodes are its bound symbols (plus the members of each fusion),
edges are the values between them, groups are fusions, decompositions and module scopes.
Node identity comes from lineage (see Note [Node identity]), so two steps of one
compilation can be diffed and laid out stably. Steps are plain JSON-ready dicts with exactly
the fields of the schema: the front end, the renderers and the tests read the same thing.

Note [Node identity]
The first step of a kind names each node ``n<uid>``. In a later step a bound symbol that a
pass kept (same uid) keeps its id; one made from exactly one bound symbol of the previous
step (claimed by an executor, renamed) takes that one's id; several made from the same one
(a decomposition) take ``<parent id>.<k>``; a fusion gets ``n<uid>`` of its own and lists the
ids it absorbed, and its members take the ids of the ops they were. Anything else is new.
A fusion absorbing an op that the execution transform first decomposed knows only the uid
of an intermediate bound symbol that no trace keeps; then (and only then) the member is
matched to the previous node that produced the same value.

Note [Statement lines]
A step's ``source`` is its trace printed once, top-level statements only
(``thunder.core.codegen.trace_source(trace, print_depth=1, printer=printer)``, the text of
``trace.python(print_depth=1)``), and a node's ``line`` is the first line of that text (1-based,
lines split at "\\n") that prints its bound symbol. The printer records those lines as it
prints (``printer.line_bsyms``: line -> bound symbol); ``_printed`` inverts that map. Nothing
here counts or scans printed lines.

Layer: visualiser. Imports: thunder (public API, core printer, symbols and proxies); never
imported by thunder.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Iterable, Sequence
from typing import Any

from thunder.core import dtypes
from thunder.core.codegen import Printer, bsym_lines, trace_source
from thunder.core.devices import device_str
from thunder.core.prims import check_outcome
from thunder.core.prims.python import SymbolicOutcome, python_return
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.symbol import PARAMETER, BoundSymbol, SourceLocation, notebook_cell
from thunder.core.symbolic import SymInt
from thunder.transforms.delete_last_used import python_del

__all__ = [
    "SCHEMA",
    "VERSION",
    "KINDS",
    "DocumentError",
    "steps_from_traces",
    "steps_from_jitted",
    "steps_of_compilation",
    "diff",
    "document",
    "validate_document",
    "torch_name",
]

SCHEMA = "thunder-trace"
VERSION = 1
KINDS = ("prologue", "computation", "backward")

_REPR_LIMIT = 200  # characters of a constant's repr kept in the document


# --- values ------------------------------------------------------------------------------
def _shape(shape) -> list | None:
    """The shape as ints; None when a dimension is symbolic (the ``repr`` then shows it)."""
    return list(shape) if all(type(d) is int for d in shape) else None


def type_text(p: TensorProxy) -> str:
    """A tensor's type as the explorer shows it: ``cpu f32[1, 2, cache_keys_2, 16]``. A symbolic size is shown by
    its expression, which any value satisfying the prologue's checks runs; ``type_string`` (what the trace
    prints) shows the value it was traced with, which would read as the one size the entry runs."""
    dims = ", ".join(d.expr if isinstance(d, SymInt) else str(d) for d in p.shape)
    return f"{device_str(p.device)} {dtypes.short_name(p.dtype)}[{dims}]"


def _constant_ref(x: Any) -> dict:
    text = repr(x)
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 1] + "…"
    kind = "number" if isinstance(x, (bool, int, float, complex)) else "other"
    return {"name": text, "shape": None, "dtype": None, "device": None, "kind": kind, "repr": text}


def _proxy_ref(p: Proxy) -> dict:
    if isinstance(p, TensorProxy):
        ref = {
            "name": p.name,
            "shape": _shape(p.shape),
            "dtype": dtypes.short_name(p.dtype),
            "device": device_str(p.device),
            "kind": "tensor",
        }
        if ref["shape"] is None:
            ref["repr"] = type_text(p)
        return ref
    if isinstance(p, NumberProxy):
        return {"name": p.name, "shape": None, "dtype": None, "device": None, "kind": "number", "repr": repr(p.value)}
    return {"name": p.name, "shape": None, "dtype": None, "device": None, "kind": "other"}


def _place(src: SourceLocation) -> dict:
    """A line's file, line, function and code (a notebook cell's file as IPython names it: ``Cell In[3]``)."""
    return {
        "file": notebook_cell(src.filename) or src.filename,
        "line": src.lineno,
        "function": src.function,
        "code": src.source_line,
    }


class _Facts:
    """What a step needs to know about bound symbols and values, computed once per object.

    Passes keep bound symbols and proxies as the same objects from trace to trace, so one
    compilation's steps mostly share them; the cache holds the objects so ids stay valid.
    """

    def __init__(self):
        self._values: dict[int, tuple[Any, dict]] = {}
        self._bsyms: dict[int, tuple[BoundSymbol, dict]] = {}
        self._sources: dict[SourceLocation, dict] = {}
        self._decompositions: dict[int, tuple[tuple, list[str]]] = {}
        self.printed: dict = {}  # the printed lines of each bound symbol (codegen.trace_source's lines_cache)
        # Parameter and buffer names -> qualified names (``TraceCtx.input_paths``), of every step so far:
        # the traces of one compilation share their names.
        self.paths: dict[str, str] = {}

    def value(self, x: Any) -> dict:
        hit = self._values.get(id(x))
        if hit is not None and hit[0] is x:
            return hit[1]
        if isinstance(x, Proxy):
            ref = _proxy_ref(x)
            path = self.paths.get(x.name)
            if path is not None:
                ref["path"] = path
        else:
            ref = _constant_ref(x)
        self._values[id(x)] = (x, ref)
        return ref

    def source(self, src: SourceLocation) -> dict:
        """The node's ``source`` field."""
        hit = self._sources.get(src)
        if hit is None:
            hit = self._sources[src] = {**_place(src), "module_path": src.module_path}
            if src.call_site is not None:
                hit["call_site"] = _place(src.call_site)
        return hit

    def decomposition(self, subsymbols: tuple) -> list[str]:
        """The subsymbols printed; passes that rewrite a bound symbol keep its subsymbols tuple."""
        if not subsymbols:
            return []
        hit = self._decompositions.get(id(subsymbols))
        if hit is not None and hit[0] is subsymbols:
            return hit[1]
        printer = Printer()
        lines = [line for sub in subsymbols for line in bsym_lines(sub, print_depth=1, printer=printer)]
        self._decompositions[id(subsymbols)] = (subsymbols, lines)
        return lines

    def bsym(self, bsym: BoundSymbol) -> dict:
        """Per-bound-symbol fields that do not depend on the step."""
        hit = self._bsyms.get(id(bsym))
        if hit is not None and hit[0] is bsym:
            return hit[1]
        sym = bsym.sym
        value = self.value
        facts = {
            "op": sym.print_name,
            "label": _label(bsym),
            "inputs": [value(a) for a in bsym.flat_args],
            "outputs": [value(o) for o in bsym.flat_proxy_outs],
            "source": self.source(bsym.source) if bsym.source is not None else None,
            "decomposition": self.decomposition(bsym.subsymbols),
        }
        self._bsyms[id(bsym)] = (bsym, facts)
        return facts


# Note [Node labels]
# A node is labelled with the name the user wrote (``layer_norm``, ``view``, ``dropout``), in every
# step: the symbol a pass or an executor renamed it to (``layer_norm_with_stats``,
# ``torch_layer_norm_with_stats``, ``Tensor.view``) is the node's ``op``, shown in its details. A
# node keeps its id through such renames (see "Identity" in docs/trace-schema.md), so it keeps the
# label it had in the first step it appeared in; a new node (a decomposition's part, a fusion) is
# labelled with its own symbol's name, less the namespaces of torch and of the executors.
_NAMESPACES = ("dist_", "dist.", "ltorch.", "torch.nn.functional.", "nn.functional.", "torch.Tensor.", "Tensor.", "torch.", "torch_")


def torch_name(name: str) -> str:
    """``Tensor.view`` -> ``view``, ``torch_iota`` -> ``iota``, ``nn.functional.dropout`` -> ``dropout``."""
    for prefix in _NAMESPACES:
        if name.startswith(prefix) and len(name) > len(prefix):
            return name[len(prefix) :]
    return name


def _label(bsym: BoundSymbol) -> str:
    """A node's label: the op's name; where the program needed a tensor's value (a split,
    Note [Data-dependent values] in ``thunder.core.data_dependent``), what it asked and got."""
    if bsym.sym is check_outcome:
        t, kind, value = bsym.args[:3]
        if type(value) is SymbolicOutcome:  # Note [Symbolic data-dependent sizes]
            return f"split: {kind}({t.name}) = {value.name}, symbolic"
        return f"split: {kind}({t.name}) = {value!r}"
    return bsym.sym.name.removeprefix("python_")


# --- lines -------------------------------------------------------------------------------
def _printed(trace, lines_cache: dict | None = None) -> tuple[str, list[int]]:
    """The trace's source and the line of it printing each top-level bound symbol (Note [Statement lines])."""
    printer = Printer()
    source = trace_source(trace, print_depth=1, printer=printer, lines_cache=lines_cache)
    starts: dict[int, list[int]] = {}  # id(bound symbol) -> the first line of each of its statements
    prev, prev_line = None, 0
    for line, bsym in printer.line_bsyms.items():  # in increasing line order
        if bsym is not prev or line != prev_line + 1:
            starts.setdefault(id(bsym), []).append(line)
        prev, prev_line = bsym, line
    lines: list[int] = []
    for bsym in trace.bound_symbols:
        found = starts.get(id(bsym))
        if not found:  # its printer printed nothing: where the statement before it is
            lines.append(lines[-1] if lines else 1)
        else:
            lines.append(found.pop(0) if len(found) > 1 else found[0])
    return source, lines


# --- one step ----------------------------------------------------------------------------
class _StepIndex:
    """What the next step needs from this one to derive identity."""

    __slots__ = ("uid_to_id", "origin", "producer", "op", "label", "executed")

    def __init__(self):
        self.uid_to_id: dict[int, str] = {}
        self.origin: dict[str, list[str]] = {}
        self.producer: dict[str, str] = {}  # value name -> id of the node that makes it
        self.op: dict[str, str] = {}
        self.label: dict[str, str] = {}  # node id -> its label (the torch name it keeps, Note [Node labels])
        self.executed = False


class _Groups:
    """Group ids shared by all steps of a document: the same scope keeps the same id."""

    def __init__(self):
        self._ids: dict[tuple, str] = {}
        self._scopes: dict[str, list[tuple[str, str, str | None]]] = {}

    def id(self, key: tuple) -> str:
        gid = self._ids.get(key)
        if gid is None:
            gid = self._ids[key] = f"g{len(self._ids)}"
        return gid

    def scopes(self, path: str) -> list[tuple[str, str, str | None]]:
        """(group id, module path, parent group id) of each module scope from the outermost to ``path``'s."""
        chain = self._scopes.get(path)
        if chain is None:
            chain, parent = [], None
            parts = path.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                gid = self.id(("module", prefix))
                chain.append((gid, prefix, parent))
                parent = gid
            self._scopes[path] = chain
        return chain


class _StepBuilder:
    def __init__(
        self, trace, kind: str, index: int, prev: _StepIndex | None, inherit: bool, facts, groups, entry: int | None
    ):
        self.trace = trace
        self.kind = kind
        self.index = index
        self.entry = entry
        self.prev = prev
        self.inherit = inherit and prev is not None
        self.facts = facts
        facts.paths.update(trace.input_paths)
        self.registry = groups
        self.nodes: list[dict] = []
        self.used: set[str] = set()
        self.groups: dict[str, dict] = {}
        self.out = _StepIndex()

    # identity
    def _resolve(self, uids: Iterable[int]) -> list[str]:
        if self.prev is None:
            return []
        table = self.prev.uid_to_id
        return _unique(table[u] for u in uids if u in table)

    def _free(self, wanted: str | None, uid: int) -> str:
        nid = wanted if wanted is not None and wanted not in self.used else f"n{uid}"
        k = 0
        while nid in self.used:  # cannot happen with unique uids; kept for safety
            nid, k = f"n{uid}_{k}", k + 1
        self.used.add(nid)
        return nid

    def _origin(self, nid: str, lineage: list[str]) -> list[str]:
        if self.prev is None:
            return [nid]
        table = self.prev.origin
        return _unique(o for pid in lineage for o in table.get(pid, ()))

    # groups
    def _module_group(self, path: str | None) -> str | None:
        if not path:
            return None
        chain = self.registry.scopes(path)
        innermost = chain[-1][0]
        if innermost not in self.groups:  # its outer scopes are then added if this step lacks them
            for gid, prefix, parent in chain:
                if gid not in self.groups:
                    self.groups[gid] = _group(gid, "module", prefix, parent)
        return innermost

    def _add_to(self, gid: str | None, node: dict) -> None:
        node["group"] = gid
        if gid is not None:
            self.groups[gid]["nodes"].append(node["id"])

    def _executor(self, bsym: BoundSymbol) -> str | None:
        ex = bsym.sym.executor
        if ex is not None:
            return ex.name
        # Python-level symbols are the python executor's once the trace is executable.
        return "python" if self.out.executed and bsym.sym.printer is not None else None

    def _node(self, bsym, nid, line, lineage, executor=None) -> dict:
        facts = self.facts.bsym(bsym)
        label = self.prev.label.get(nid) if self.inherit and not bsym.sym._is_fusion else None
        if label is None:
            label = torch_name(facts["label"])
        self.out.label[nid] = label
        node = {
            "id": nid,
            "uid": bsym.uid,
            "op": facts["op"],
            "label": label,
            "executor": executor if executor is not None else self._executor(bsym),
            "fusion": bool(bsym.sym._is_fusion),
            "inputs": facts["inputs"],
            "outputs": facts["outputs"],
            "line": line,
            "source": facts["source"],
            "lineage": lineage,
            "origin": self._origin(nid, lineage),
            "decomposition": facts["decomposition"],
            "group": None,
            "fused_into": None,
        }
        self.out.uid_to_id[bsym.uid] = nid
        self.out.origin[nid] = node["origin"]
        self.out.op[nid] = node["op"]
        return node

    def build(self, pass_name: str, ms: float) -> dict:
        trace, prev = self.trace, self.prev
        bsyms = trace.bound_symbols
        executed = (self.inherit and prev.executed) or pass_name == "Transform for execution"
        self.out.executed = executed or any(b.sym.executor is not None for b in bsyms)
        source, lines = _printed(trace, self.facts.printed)
        prev_ids = prev.uid_to_id if self.inherit else {}
        # Several new bound symbols made from one: a decomposition, numbered in order.
        made_from: dict[int, int] = {}
        for b in bsyms:
            if b.uid not in prev_ids and len(b.lineage) == 1 and not b.sym._is_fusion:
                made_from[b.lineage[0]] = made_from.get(b.lineage[0], 0) + 1
        parts: dict[int, int] = {}
        inner: list[tuple[dict, BoundSymbol]] = []
        for bsym, line in zip(bsyms, lines):
            if PARAMETER in bsym.sym.tags:  # the input itself is the graph's node for it
                continue
            if bsym.sym._is_fusion:
                self._fusion(bsym, line, inner, prev_ids)
                continue
            wanted, lineage, part_of = self._identity(bsym, prev_ids, made_from, parts)
            nid = self._free(wanted, bsym.uid)
            node = self._node(bsym, nid, line, lineage)
            if part_of is not None and nid == wanted:
                self._add_part(node, part_of, bsym)
            else:
                self._add_to(self._module_group(_module_path(bsym)), node)
            self.nodes.append(node)
        edges, inner_edges = self._edges(inner)
        return {
            "id": f"s{self.index}" if self.entry is None else f"e{self.entry}s{self.index}",
            **({} if self.entry is None else {"entry": self.entry}),
            "index": self.index,
            "kind": self.kind,
            "pass": pass_name,
            "ms": ms,
            "source": source,
            "nodes": self.nodes,
            "edges": edges,
            "inner_edges": inner_edges,
            "groups": list(self.groups.values()),
            "inputs": self._inputs(),
            "outputs": self._outputs(),
            "diff": None,
        }

    def _identity(self, bsym, prev_ids, made_from, parts) -> tuple[str | None, list[str], str | None]:
        """The id ``bsym`` wants, the previous nodes it was made from, and the parent it is a part of."""
        uid = bsym.uid
        if uid in prev_ids:
            return prev_ids[uid], [prev_ids[uid]], None
        lineage = self._resolve(bsym.lineage)
        if not (self.inherit and len(bsym.lineage) == 1 and lineage):
            return None, lineage, None
        parent_uid = bsym.lineage[0]
        if made_from.get(parent_uid, 0) < 2:
            return lineage[0], lineage, None
        k = parts.get(parent_uid, 0)
        parts[parent_uid] = k + 1
        return f"{lineage[0]}.{k}", lineage, lineage[0]

    def _add_part(self, node: dict, parent_id: str, bsym: BoundSymbol) -> None:
        module = self._module_group(_module_path(bsym))
        gid = self.registry.id(("decomposition", parent_id))
        if gid not in self.groups:
            label = self.prev.op.get(parent_id, parent_id)
            self.groups[gid] = _group(gid, "decomposition", label, module)
        self._add_to(gid, node)

    def _fusion(self, bsym: BoundSymbol, line: int, inner: list, prev_ids: dict[int, str]) -> None:
        """The fusion node, then its members (in the fusion's group)."""
        members = bsym.subsymbols
        survived = bsym.uid in prev_ids
        nid = self._free(prev_ids.get(bsym.uid), bsym.uid)
        absorbed = [nid] if survived else self._resolve(bsym.lineage)
        executor = self._executor(bsym)
        member_nodes = []
        for m in members:
            if m.uid in prev_ids:
                resolved = [prev_ids[m.uid]]
            else:
                resolved = self._resolve(m.lineage) if self.inherit else []
                if not resolved and self.inherit:  # Note [Node identity], the last case
                    made = self.prev.producer
                    resolved = _unique(made[o.name] for o in m.flat_proxy_outs if o.name in made)
                if not survived:
                    absorbed.extend(r for r in resolved if r not in absorbed)
            mid = self._free(resolved[0] if len(resolved) == 1 else None, m.uid)
            mnode = self._node(m, mid, line, resolved, executor=executor)
            mnode["fused_into"] = nid
            member_nodes.append(mnode)
        node = self._node(bsym, nid, line, absorbed)
        parent = self._module_group(_common_prefix([_module_path(m) for m in members] or [None]))
        gid = self.registry.id(("fusion", nid))
        group = self.groups[gid] = _group(gid, "fusion", bsym.sym.name, parent, collapsed=True)
        group["node"] = nid
        self._add_to(gid, node)  # the group is the fusion: collapsed, it stands for the fusion node
        self.nodes.append(node)
        for mnode, m in zip(member_nodes, members):
            self._add_to(gid, mnode)
            self.nodes.append(mnode)
            inner.append((mnode, m))

    # values
    def _inputs(self) -> list[dict]:
        trace = self.trace
        refs = [self.facts.value(a) if isinstance(a, Proxy) else _constant_ref(a) for a in trace.args]
        for extra in (trace.varargs, trace.varkwargs):
            if extra:
                refs.append({"name": extra, "shape": None, "dtype": None, "device": None, "kind": "other"})
        return refs

    def _outputs(self) -> list[str]:
        for bsym in reversed(self.trace.bound_symbols):
            if bsym.sym is python_return:
                return [p.name for p in bsym.flat_proxy_args]
        return []

    def _edges(self, inner: list[tuple[dict, BoundSymbol]]) -> tuple[list[dict], list[dict]]:
        """``edges``: the graph with every fusion collapsed. ``inner_edges``: every edge that
        touches a fusion member, with both ends at the finest level (members, not fusions)."""
        input_names = {ref["name"] for ref in self._inputs()}
        producer: dict[str, str] = {}  # value -> top-level node
        fine: dict[str, str] = {}  # value -> member, for values a fusion member makes
        refs: dict[str, dict] = {}
        edges: list[dict] = []
        inner_edges: list[dict] = []
        members_of: dict[str, list[tuple[dict, BoundSymbol]]] = {}
        for mnode, m in inner:
            members_of.setdefault(mnode["fused_into"], []).append((mnode, m))

        def link(into: list, src: str, dst: str, name: str) -> None:
            ref = refs[name]
            into.append(
                {"id": "", "source": src, "target": dst, "value": name, "shape": ref["shape"], "dtype": ref["dtype"]}
            )

        def uses(bsym: BoundSymbol, nid: str, member: bool) -> list[str]:
            """Links ``nid`` to the makers of the values ``bsym`` reads; returns their names."""
            seen: dict[str, None] = {}
            for p in bsym.flat_proxy_args:
                name = p.name
                if name in seen:
                    continue
                seen[name] = None
                if name not in refs:
                    refs[name] = self.facts.value(p)
                src = producer.get(name) or (f"input:{name}" if name in input_names else None)
                if src is None or src == nid:
                    continue
                src_fine = fine.get(name)
                if not member:
                    link(edges, src, nid, name)
                if member or src_fine is not None:
                    link(inner_edges, src_fine or src, nid, name)
            return list(seen)

        top_nodes = [n for n in self.nodes if n["fused_into"] is None]
        shown = [b for b in self.trace.bound_symbols if PARAMETER not in b.sym.tags]
        for bsym, node in zip(shown, top_nodes):
            nid = node["id"]
            if bsym.sym is not python_del:  # freeing a value is not a use of it
                names = uses(bsym, nid, member=False)
                if bsym.sym is python_return:
                    for name in names:
                        link(edges, nid, "output", name)
            made_here: list[tuple[str, str]] = []
            for mnode, m in members_of.get(nid, ()):
                uses(m, mnode["id"], member=True)
                for p in m.flat_proxy_outs:
                    refs[p.name] = self.facts.value(p)
                    fine[p.name] = mnode["id"]
                    producer[p.name] = mnode["id"]  # members see each other's values
                    made_here.append((p.name, mnode["id"]))
            for p in bsym.flat_proxy_outs:
                refs[p.name] = self.facts.value(p)
                producer[p.name] = nid
            for name, _ in made_here:
                producer[name] = nid
        self.out.producer = producer
        for k, e in enumerate(edges):
            e["id"] = f"e{k}"
        for k, e in enumerate(inner_edges):
            e["id"] = f"i{k}"
        return edges, inner_edges


def _module_path(bsym: BoundSymbol) -> str | None:
    return bsym.source.module_path if bsym.source is not None else None


def _group(gid: str, kind: str, label: str, parent: str | None, *, collapsed: bool = False) -> dict:
    return {"id": gid, "kind": kind, "label": label, "nodes": [], "parent": parent, "collapsed": collapsed}


def _common_prefix(paths: list[str | None]) -> str | None:
    if any(not p for p in paths):
        return None
    split = [p.split(".") for p in paths]
    common = []
    for parts in zip(*split):
        if any(x != parts[0] for x in parts):
            break
        common.append(parts[0])
    return ".".join(common) or None


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# --- steps -------------------------------------------------------------------------------
class _DocumentState:
    """Shared by the steps of one document: caches and group ids."""

    def __init__(self, entry: int | None = None):
        self.facts = _Facts()
        self.groups = _Groups()
        self.entry = entry  # the cache entry the steps are of, in a document of several (their ids say it)


@contextlib.contextmanager
def _no_gc():
    """Building a document allocates many small dicts while the traces hold many objects:
    the cyclic collector would rescan them all, for nothing (they form no cycles)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _steps(
    traces: Sequence, kind: str, start_index: int, after: _StepIndex | None, state: _DocumentState, collect=None
):
    """Steps (with diffs) for consecutive traces of one kind, and the last step's index (each
    step's index is appended to ``collect`` when given)."""
    if kind not in KINDS:
        raise ValueError(f"steps_from_traces: kind must be one of {KINDS}, got {kind!r}")
    steps: list[dict] = []
    prev = after
    for i, trace in enumerate(traces):
        provenance = trace.provenance
        builder = _StepBuilder(trace, kind, start_index + i, prev, i > 0, state.facts, state.groups, state.entry)
        step = builder.build(
            provenance.pass_name if provenance is not None else "",
            float(provenance.ms) if provenance is not None else 0.0,
        )
        if steps:
            step["diff"] = diff(steps[-1], step)
        steps.append(step)
        prev = builder.out
        if collect is not None:
            collect.append(prev)
    return steps, prev


def steps_from_traces(traces: Sequence, kind: str = "computation", *, start_index: int = 0) -> list[dict]:
    """Steps (with diffs) for consecutive traces of one kind (each made from the one before)."""
    with _no_gc():
        return _steps(traces, kind, start_index, None, _DocumentState())[0]


def steps_from_jitted(jf) -> list[dict]:
    """The steps of ``jf``'s last compilation: prologue traces, computation traces, backward traces.

    Backward nodes are resolved against the computation steps for lineage and origin (a
    backward op's lineage is the forward op whose gradient it computes, as it stood when the
    autograd split made the backward; the forward node keeps that id in the later steps).
    """
    import thunder

    return steps_of_compilation(
        thunder.last_prologue_traces(jf), thunder.last_traces(jf), thunder.last_backward_traces(jf)
    )


def steps_of_compilation(
    prologue_traces: Sequence, computation_traces: Sequence, backward_traces: Sequence, *, entry: int | None = None
) -> list[dict]:
    """The steps of one compilation (``steps_from_jitted``'s, or a cache entry's traces); ``entry``: the index of
    its cache entry in a document of several entries, which each step then carries (its id too: ``e1s3``)."""
    state = _DocumentState(entry)
    forward_indices: list[_StepIndex] = []
    with _no_gc():
        prologue, _ = _steps(prologue_traces, "prologue", 0, None, state)
        computation, _ = _steps(computation_traces, "computation", len(prologue), None, state, forward_indices)
        start = len(prologue) + len(computation)
        forward = _combined_index(forward_indices) if forward_indices else None
        backward, _ = _steps(backward_traces, "backward", start, forward, state)
    return prologue + computation + backward


def _combined_index(indices: list[_StepIndex]) -> _StepIndex:
    """One index over several steps of a kind (later steps win): what backward lineage resolves against."""
    merged = _StepIndex()
    for index in indices:
        merged.uid_to_id.update(index.uid_to_id)
        merged.origin.update(index.origin)
        merged.producer.update(index.producer)
        merged.op.update(index.op)
    merged.executed = indices[-1].executed
    return merged


# --- diff --------------------------------------------------------------------------------
def diff(step_a: dict, step_b: dict) -> dict:
    """What changed from ``step_a`` to ``step_b`` (two steps of one kind, ``b`` after ``a``).

    ``merged`` maps a removed node to the node that now supplies its values (CSE): a node
    kept in both steps read the removed node's output in ``a`` and reads that node's in ``b``.
    """
    a_nodes = {n["id"]: n for n in step_a["nodes"]}
    b_ids = {n["id"] for n in step_b["nodes"]}
    claimed: set[str] = set()
    added, rewritten, fused, unchanged = [], [], {}, 0
    for n in step_b["nodes"]:
        claimed.update(n["lineage"])
        if n["fused_into"] is not None:
            continue
        nid = n["id"]
        if n["fusion"] and nid not in a_nodes:
            fused[nid] = list(n["lineage"])
        elif nid in a_nodes:
            old = a_nodes[nid]
            if old["op"] != n["op"] or old["executor"] != n["executor"]:
                rewritten.append(nid)
            else:
                unchanged += 1
        elif n["lineage"]:
            rewritten.append(nid)  # a part of a decomposed node
        else:
            added.append(nid)
    removed = [nid for nid in a_nodes if nid not in b_ids and nid not in claimed]
    return {
        "previous": step_a["id"],
        "added": added,
        "removed": removed,
        "rewritten": rewritten,
        "fused": fused,
        "merged": _merged(step_a, step_b, a_nodes, set(removed)),
        "unchanged": unchanged,
    }


def _merged(step_a: dict, step_b: dict, a_nodes: dict, removed: set[str]) -> dict:
    if not removed:
        return {}
    a_made = {o["name"]: n["id"] for n in step_a["nodes"] if n["fused_into"] is None for o in n["outputs"]}
    b_made = {o["name"]: n["id"] for n in step_b["nodes"] if n["fused_into"] is None for o in n["outputs"]}
    for ref in step_b["inputs"]:
        b_made.setdefault(ref["name"], f"input:{ref['name']}")
    merged: dict[str, str] = {}
    for n in step_b["nodes"]:
        old = a_nodes.get(n["id"])
        if old is None or n["fused_into"] is not None:
            continue
        for before, after in zip(old["inputs"], n["inputs"]):
            if before["name"] == after["name"]:
                continue
            gone = a_made.get(before["name"])
            if gone in removed and gone not in merged and after["name"] in b_made:
                merged[gone] = b_made[after["name"]]
    return merged


# --- document ----------------------------------------------------------------------------
def document(
    steps: Sequence[dict],
    *,
    title: str,
    runs: Sequence[dict] = (),
    executors: dict | None = None,
    error: dict | None = None,
    profile: dict | None = None,
    autograd: str | None = None,
    entries: dict | None = None,
) -> dict:
    """The trace document (schema ``thunder-trace`` version 1) of one explorer session; ``autograd``: why torch's
    autograd records the backward instead of thunder's backward traces, if it does; ``entries``: the cache
    entries, when there are several, and which one the explorer opens on (``steps`` then holds the steps of each
    entry that carries them, in turn)."""
    doc = {
        "schema": SCHEMA,
        "version": VERSION,
        "title": str(title),
        "steps": list(steps),
        "runs": list(runs),
        "error": error,
    }
    if executors is not None:
        doc["executors"] = executors
    if profile is not None:
        doc["profile"] = profile
    if autograd is not None:
        doc["autograd"] = str(autograd)
    if entries is not None:
        doc["entries"] = entries
    return doc


class DocumentError(ValueError):
    """A trace document that does not follow docs/trace-schema.md; the message names the field."""


_NULL = type(None)
_STR_OR_NULL = (str, _NULL)
_NUM = (int, float)


def _check(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise DocumentError(f"{where}: {what}")


def _fields(obj: Any, where: str, spec: dict[str, Any]) -> None:
    _check(isinstance(obj, dict), where, f"expected an object, got {type(obj).__name__}")
    for key, types_ in spec.items():
        _check(key in obj, where, f"missing field {key!r}")
        value = obj[key]
        ok = isinstance(value, types_) and not (isinstance(value, bool) and bool not in _as_tuple(types_))
        _check(ok, f"{where}.{key}", f"expected {_type_names(types_)}, got {type(value).__name__}")


def _as_tuple(t) -> tuple:
    return t if isinstance(t, tuple) else (t,)


def _type_names(t) -> str:
    return " or ".join("null" if x is _NULL else x.__name__ for x in _as_tuple(t))


_VALUE = {"name": str, "shape": (list, _NULL), "dtype": _STR_OR_NULL, "device": _STR_OR_NULL, "kind": str}
_NODE = {
    "id": str, "uid": int, "op": str, "label": str, "executor": _STR_OR_NULL, "fusion": bool,
    "inputs": list, "outputs": list, "line": int, "source": (dict, _NULL), "lineage": list,
    "origin": list, "decomposition": list, "group": _STR_OR_NULL,
}  # fmt: skip
_CALL_SITE = {"file": str, "line": int, "function": str}
_EDGE = {"id": str, "source": str, "target": str, "value": str, "shape": (list, _NULL), "dtype": _STR_OR_NULL}
_GROUP = {"id": str, "kind": str, "label": str, "nodes": list, "parent": _STR_OR_NULL, "collapsed": bool}
_STEP = {
    "id": str, "index": int, "kind": str, "pass": str, "ms": _NUM, "source": str, "nodes": list,
    "edges": list, "groups": list, "inputs": list, "outputs": list, "diff": (dict, _NULL),
}  # fmt: skip
_ENTRY = {"label": str, "inputs": str, "symbolic": bool, "hits": int, "compile_ms": _NUM, "steps": bool}
_DIFF = {"previous": str, "added": list, "removed": list, "rewritten": list, "fused": dict, "unchanged": int}
_RUN = {
    "id": str, "executors": list, "median_ms": (int, float, _NULL), "repeats": int, "compile_ms": (int, float, _NULL),
    "max_abs_diff": (int, float, _NULL), "matches_eager": (bool, _NULL),
    "differs_at": (str, _NULL), "cache_hits": int,
    "cache_misses": int, "fusions": list, "error": (dict, _NULL),
}  # fmt: skip
_ERROR = {"type": str, "message": str, "stage": str, "user_frame": (dict, _NULL)}
_EXECUTORS = {
    "available": list, "selected": list, "always": list, "unavailable": dict, "interactive": bool, "reason": _STR_OR_NULL,
}  # fmt: skip
_VALUE_KINDS = {"tensor", "number", "other"}
_GROUP_KINDS = {"fusion", "module", "decomposition"}
_STAGES = {"tracing", "compiling", "running"}
LIMITS = {"steps": 200, "nodes": 100_000}


def validate_document(doc: Any, *, check_json: bool = True) -> None:
    """Raises ``DocumentError`` naming the first field of ``doc`` that breaks the schema.

    It checks what the front end relies on: required fields and their types, unique ids,
    edges and groups that point at existing nodes, lines inside the source, diffs that point
    at the previous step of the same kind, and (``check_json``) that it serialises as strict
    JSON (no NaN or infinity).
    """
    _fields(doc, "document", {"schema": str, "version": int, "title": str, "steps": list, "runs": list})
    _check(doc["schema"] == SCHEMA, "document.schema", f"expected {SCHEMA!r}")
    _check(doc["version"] == VERSION, "document.version", f"this validator knows version {VERSION}")
    _check("error" in doc, "document", "missing field 'error'")
    if doc["error"] is not None:
        _validate_error(doc["error"], "document.error")
    if doc.get("executors") is not None:
        _fields(doc["executors"], "document.executors", _EXECUTORS)
    _check(doc.get("autograd") is None or isinstance(doc["autograd"], str), "document.autograd", "expected a string")
    entries = doc.get("entries")
    if entries is not None:
        _fields(entries, "document.entries", {"items": list, "shown": (int, _NULL)})
        for i, item in enumerate(entries["items"]):
            _fields(item, f"document.entries.items[{i}]", _ENTRY)
    steps = doc["steps"]
    _check(len(steps) <= LIMITS["steps"], "document.steps", f"more than {LIMITS['steps']} steps")
    last_of_kind: dict[str, str] = {}
    step_ids: set[str] = set()
    entry, first_of_entry, seen_entries = None, 0, set()
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if step.get("entry") != entry:  # the steps of one entry follow each other (Note [Steps of each cache entry])
            entry, first_of_entry, last_of_kind = step.get("entry"), i, {}
            _check(entry not in seen_entries, f"{where}.entry", "the steps of an entry must follow each other")
            seen_entries.add(entry)
            _check(
                entries is not None and isinstance(entry, int) and 0 <= entry < len(entries["items"]),
                f"{where}.entry",
                "expected the index of an item of document.entries (and no entry without them)",
            )
            _check(entries["items"][entry]["steps"], f"{where}.entry", "the entry says it carries no steps")
        _validate_step(step, where, i - first_of_entry)
        _check(step["id"] not in step_ids, f"{where}.id", f"duplicate step id {step['id']!r}")
        step_ids.add(step["id"])
        previous = last_of_kind.get(step["kind"])
        if step["diff"] is not None:
            _check(step["diff"]["previous"] == previous, f"{where}.diff.previous", f"expected {previous!r}")
        last_of_kind[step["kind"]] = step["id"]
    for i, run in enumerate(doc["runs"]):
        _fields(run, f"runs[{i}]", _RUN)
        if run["error"] is not None:
            _validate_error(run["error"], f"runs[{i}].error")
    if doc.get("profile") is not None:
        _validate_profile(doc["profile"], step_ids)
    if check_json:
        try:
            json.dumps(doc, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise DocumentError(f"document: not strict JSON: {e}") from None


_PROFILE = {
    "calls": int, "device": str, "call_ms": _NUM, "eager_call_ms": (int, float, _NULL), "backward": bool,
    "attributed_ms": _NUM, "steps": dict, "modules": list, "saved": (dict, _NULL),
}  # fmt: skip
_MODULE_COST = {
    "path": str, "ms": _NUM, "backward_ms": _NUM, "eager_ms": (int, float, _NULL),
    "eager_backward_ms": (int, float, _NULL),
}  # fmt: skip
_SAVED = {"step": str, "bytes": (int, _NULL), "bytes_before_remat": (int, _NULL), "timeline": list}


# how the calls were measured (Note [Fair comparison with eager]); absent in documents written before
_PROFILE_MEASURED = {
    "call_cpu_ms": (int, float, _NULL), "eager_call_cpu_ms": (int, float, _NULL), "measured": str, "unsteady": bool,
}  # fmt: skip


def _validate_profile(profile: Any, step_ids: set[str]) -> None:
    _fields(profile, "document.profile", _PROFILE)
    _fields(profile, "document.profile", {k: t for k, t in _PROFILE_MEASURED.items() if k in profile})
    for sid, cost in profile["steps"].items():
        where = f"document.profile.steps[{sid!r}]"
        _check(sid in step_ids, where, "no step has this id")
        _fields(cost, where, {"total_ms": _NUM, "nodes": dict})
        for nid, c in cost["nodes"].items():
            _fields(c, f"{where}.nodes[{nid!r}]", {"ms": _NUM, "bytes": int})
    for i, m in enumerate(profile["modules"]):
        _fields(m, f"document.profile.modules[{i}]", _MODULE_COST)
    if profile["saved"] is not None:
        _fields(profile["saved"], "document.profile.saved", _SAVED)
        _check(profile["saved"]["step"] in step_ids, "document.profile.saved.step", "no step has this id")


def _validate_error(err: Any, where: str) -> None:
    _fields(err, where, _ERROR)
    _check(err["stage"] in _STAGES, f"{where}.stage", f"expected one of {sorted(_STAGES)}")


def _validate_step(step: Any, where: str, i: int) -> None:
    _fields(step, where, _STEP)
    _check(step["index"] == i, f"{where}.index", f"expected {i} (the step's position)")
    _check(step["kind"] in KINDS, f"{where}.kind", f"expected one of {list(KINDS)}")
    nodes = step["nodes"]
    _check(len(nodes) <= LIMITS["nodes"], f"{where}.nodes", f"more than {LIMITS['nodes']} nodes")
    n_lines = step["source"].count("\n") + 1
    ids: set[str] = set()
    for k, node in enumerate(nodes):
        nw = f"{where}.nodes[{k}]"
        _fields(node, nw, _NODE)
        _check(node["id"] not in ids, f"{nw}.id", f"duplicate node id {node['id']!r}")
        ids.add(node["id"])
        _check(1 <= node["line"] <= n_lines, f"{nw}.line", f"{node['line']} is outside the source (1..{n_lines})")
        if node["source"] is not None and "call_site" in node["source"]:
            _fields(node["source"]["call_site"], f"{nw}.source.call_site", _CALL_SITE)
        for j, ref in enumerate(node["inputs"]):
            _validate_value(ref, f"{nw}.inputs[{j}]")
        for j, ref in enumerate(node["outputs"]):
            _validate_value(ref, f"{nw}.outputs[{j}]")
    for k, ref in enumerate(step["inputs"]):
        _validate_value(ref, f"{where}.inputs[{k}]")
    ends = ids | {f"input:{ref['name']}" for ref in step["inputs"]} | {"output"}
    for key in ("edges", "inner_edges"):
        for k, edge in enumerate(step.get(key, ())):
            ew = f"{where}.{key}[{k}]"
            _fields(edge, ew, _EDGE)
            _check(edge["source"] in ends, f"{ew}.source", f"unknown node {edge['source']!r}")
            _check(edge["target"] in ends, f"{ew}.target", f"unknown node {edge['target']!r}")
    group_ids = {g.get("id") for g in step["groups"] if isinstance(g, dict)}
    for k, group in enumerate(step["groups"]):
        gw = f"{where}.groups[{k}]"
        _fields(group, gw, _GROUP)
        _check(group["kind"] in _GROUP_KINDS, f"{gw}.kind", f"expected one of {sorted(_GROUP_KINDS)}")
        _check(group["parent"] is None or group["parent"] in group_ids, f"{gw}.parent", "unknown group")
        for nid in group["nodes"]:
            _check(nid in ids, f"{gw}.nodes", f"unknown node {nid!r}")
    for k, node in enumerate(nodes):
        _check(node["group"] is None or node["group"] in group_ids, f"{where}.nodes[{k}].group", "unknown group")
    if step["diff"] is not None:
        _fields(step["diff"], f"{where}.diff", _DIFF)
        for nid in (*step["diff"]["added"], *step["diff"]["rewritten"], *step["diff"]["fused"]):
            _check(nid in ids, f"{where}.diff", f"unknown node {nid!r}")


def _validate_value(ref: Any, where: str) -> None:
    _fields(ref, where, _VALUE)
    _check(ref["kind"] in _VALUE_KINDS, f"{where}.kind", f"expected one of {sorted(_VALUE_KINDS)}")
    _check(isinstance(ref.get("path", ""), str), f"{where}.path", "expected str")
