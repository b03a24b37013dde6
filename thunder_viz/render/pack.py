"""The packed form of a trace document: what saved notebooks and HTML snapshots store.

A session document repeats itself: every step of a compilation holds nearly the same nodes,
each node spells out the shape, dtype and device of every value it reads, and consecutive
sources share most of their lines. A 2-layer GPT-2 session is 7 MB as JSON. Packed:

- each distinct ``ValueRef`` is stored once, in ``values``; nodes and step inputs hold indices;
- each distinct source line is stored once, in ``lines``; a step's ``source`` is a list of indices;
- a node, group or edge equal in part to the one with the same key in the previous step of the
  same kind holds only what changed: ``{"=": 1, <key fields>, <changed fields>, "-": [dropped]}``;
  items equal to consecutive items of that previous list (most of a step: 12-layer GPT-2's 16,000
  edges are 20 such stretches) are one run, ``[first index in the previous list, count]``;
- the text is JSON lines: first the payload with each step less its body (``_BODY``: its lists
  and source), then one line per step holding that step's body, so that a reader can parse a step
  when it is first shown (js/src/packed.ts; a payload of one line, as written before, holds the
  steps whole and reads the same);
- the result is gzip-compressed and base64-encoded into ``data``.

The wrapper is ``{"schema": "thunder-trace", "version": 1, "encoding": "gzip-base64", "data": ...}``,
and may carry an ``executors`` object that replaces the document's (the live widget sends the data of
its saved form, packed once for the widget and the snapshot, with its live executors);
in a notebook output that also holds the HTML snapshot the document is stored only there, and
the wrapper says ``"data_in": "text/html"`` instead of holding ``data``. The front end
(``js/src/packed.ts``) undoes exactly these steps; :func:`unpack_document` is the same in Python.

Layer: visualiser. Imports: the standard library.
"""

from __future__ import annotations

import base64
import gc
import gzip
import json
import threading
from collections.abc import Callable
from operator import itemgetter
from typing import Any

__all__ = ["ENCODING", "is_packed", "pack_document", "packed_payload", "unpack_document", "unpack_payload"]

ENCODING = "gzip-base64"
_SAME = "="
_DROPPED = "-"

# Per list of a step: the fields that identify an item across steps.
_KEYS: dict[str, tuple[str, ...]] = {
    "nodes": ("id",),
    "groups": ("id",),
    "edges": ("source", "target", "value"),
    "inner_edges": ("source", "target", "value"),
}
# What each step's line of the packed text holds (JSON text has no raw newline to split on).
_BODY = (*_KEYS, "inputs", "source")


def is_packed(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("encoding") == ENCODING


def _getter(keys: tuple[str, ...]) -> Callable[[dict], Any]:
    """An item's key: its one key field, or a tuple of them (a missing field reads as None)."""
    if len(keys) == 1:
        (only,) = keys
        return lambda item: item.get(only)
    return lambda item: tuple(item.get(k) for k in keys)


def _delta(previous: list[dict] | None, current: list[dict], keys: tuple[str, ...]) -> list:
    """``current`` with each item that has a same-keyed item in ``previous`` written as its
    difference, and each stretch of items equal to consecutive items of ``previous`` as a run."""
    if not previous:
        return current
    try:  # the documents graph.py builds give every item its key fields
        return _delta_by(itemgetter(*keys), previous, current, keys)
    except KeyError:
        return _delta_by(_getter(keys), previous, current, keys)


def _delta_by(key: Callable[[dict], Any], previous: list[dict], current: list[dict], keys: tuple[str, ...]) -> list:
    before = {key(item): (j, item) for j, item in enumerate(previous)}  # a repeated key: its last
    out: list = []
    run: list[int] | None = None  # [first index in previous, count], while items repeat previous's in order
    for item in current:
        hit = before.get(key(item))
        if hit is None:
            run = None
            out.append(item)
            continue
        j, base = hit
        if base is item or base == item:
            if run is not None and run[0] + run[1] == j:
                run[1] += 1
            else:
                run = [j, 1]
                out.append(run)
            continue
        run = None
        change = {k: v for k, v in item.items() if k in keys or k not in base or base[k] != v}
        dropped = [k for k in base if k not in item]
        change[_SAME] = 1
        if dropped:
            change[_DROPPED] = dropped
        out.append(change)
    return out


def _undelta(previous: list[dict] | None, current: list, keys: tuple[str, ...]) -> list[dict]:
    previous = previous or []
    key = _getter(keys)
    before = {key(item): item for item in previous}
    out = []
    for item in current:
        if isinstance(item, list):  # a run: items of the previous step, unchanged
            first, count = item
            if not (0 <= first and count > 0 and first + count <= len(previous)):
                raise ValueError(f"a packed run {item} is outside the previous step's {len(previous)} items")
            out.extend(previous[first : first + count])
            continue
        if _SAME not in item:
            out.append(item)
            continue
        merged = {**before[key(item)], **item}
        for k in (_SAME, *merged.pop(_DROPPED, [])):
            merged.pop(k, None)
        out.append(merged)
    return out


def _key(value: Any) -> Any:
    """A hashable key equal only for equal JSON values (fast for a ValueRef: flat, with a shape list)."""
    if isinstance(value, str):
        return value
    try:
        return tuple((k, type(v), tuple(v) if isinstance(v, list) else v) for k, v in value.items())
    except (AttributeError, TypeError):  # not a flat dict
        return json.dumps(value, separators=(",", ":"))


class _Table:
    """Distinct JSON values, each stored once, referred to by index."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._index: dict[Any, int] = {}
        # The steps of a document share their ValueRef objects (thunder_viz.graph makes one per value):
        # found by identity first. ``_seen`` keeps each object alive, so that no id is reused meanwhile.
        self._by_id: dict[int, int] = {}
        self._seen: list[Any] = []

    def ref(self, value: Any) -> int:
        found = self._by_id.get(id(value))
        if found is not None:
            return found
        key = _key(value)  # a value written with its keys in another order is stored twice, never confused
        if key not in self._index:
            self._index[key] = len(self.items)
            self.items.append(value)
        found = self._by_id[id(value)] = self._index[key]
        self._seen.append(value)
        return found


# The last document's packed steps, by the identity of its ``steps`` list: a widget packs its live
# document and then its saved form (the same steps, not interactive), and the snapshot packs it once
# more; the steps are the costly part (a 12-layer GPT-2: 14,000 nodes). Documents are not changed
# once built, so a list that is the same object holds the same steps.
_last_packed: tuple[list, list, list, list] | None = None
_lock = threading.Lock()


def packed_payload(doc: dict) -> dict:
    """The document with values, lines and repeated items shared (before compression)."""
    global _last_packed
    source = doc.get("steps", [])
    with _lock:
        last = _last_packed
    if last is not None and last[0] is source:
        _, steps, values, lines = last
        return {**doc, "steps": steps, "values": values, "lines": lines}
    enabled = gc.isenabled()
    gc.disable()  # many small dicts, no cycles: the collector would rescan the heap for nothing
    try:
        payload = _packed_payload(doc)
    finally:
        if enabled:
            gc.enable()
    if isinstance(source, list):
        with _lock:
            _last_packed = (source, payload["steps"], payload["values"], payload["lines"])
    return payload


def _packed_payload(doc: dict) -> dict:
    values = _Table()
    lines: dict[str, int] = {}  # each distinct line -> its index
    # The nodes of a bound symbol share its lists of values from step to step (thunder_viz.graph):
    # each list is looked up once. ``lists`` keeps them alive, so that no id is reused meanwhile.
    refs: dict[int, list[int]] = {}
    lists: list[list] = []

    def indices(refs_list: list) -> list[int]:
        found = refs.get(id(refs_list))
        if found is None:
            found = refs[id(refs_list)] = [values.ref(v) for v in refs_list]
            lists.append(refs_list)
        return found

    previous: dict[str, dict] = {}
    steps = []
    for step in doc.get("steps", []):
        step = dict(step)
        step["nodes"] = [{**n, "inputs": indices(n["inputs"]), "outputs": indices(n["outputs"])} for n in step.get("nodes", [])]
        step["inputs"] = [values.ref(v) for v in step.get("inputs", [])]
        step["source"] = [lines.setdefault(line, len(lines)) for line in str(step.get("source", "")).split("\n")]
        before = previous.get(step.get("kind"))
        previous[step.get("kind")] = step
        steps.append({**step, **{name: _delta((before or {}).get(name), step.get(name, []), keys) for name, keys in _KEYS.items()}})
    return {**doc, "steps": steps, "values": values.items, "lines": list(lines)}


def unpack_payload(payload: dict) -> dict:
    values, lines = payload["values"], payload["lines"]
    previous: dict[str, dict] = {}
    steps = []
    for packed in payload["steps"]:
        before = previous.get(packed.get("kind"))
        step = {**packed, **{name: _undelta((before or {}).get(name), packed.get(name, []), keys) for name, keys in _KEYS.items()}}
        previous[packed.get("kind")] = step
        steps.append(
            {
                **step,
                "nodes": [{**n, "inputs": [values[i] for i in n["inputs"]], "outputs": [values[i] for i in n["outputs"]]} for n in step["nodes"]],
                "inputs": [values[i] for i in step["inputs"]],
                "source": "\n".join(lines[i] for i in step["source"]),
            }
        )
    doc = {k: v for k, v in payload.items() if k not in ("values", "lines")}
    return {**doc, "steps": steps}


_last_wrapper: tuple[dict, dict] | None = None  # the last document packed, and its wrapper


def pack_document(doc: dict) -> dict:
    """The packed wrapper of ``doc`` (see the module docstring). Packing the same document object
    again (a widget's saved form, then its snapshot) reuses the wrapper: documents are not changed
    once built."""
    global _last_wrapper
    with _lock:
        last = _last_wrapper
    if last is not None and last[0] is doc:
        return dict(last[1])
    payload = packed_payload(doc)
    heads = [{k: v for k, v in step.items() if k not in _BODY} for step in payload["steps"]]
    bodies = [{k: step[k] for k in _BODY if k in step} for step in payload["steps"]]
    text = "\n".join(_dumps(part) for part in [{**payload, "steps": heads}, *bodies])
    data = base64.b64encode(gzip.compress(text.encode("utf-8"), compresslevel=5, mtime=0)).decode("ascii")
    wrapper = {"schema": doc.get("schema", "thunder-trace"), "version": doc.get("version", 1), "encoding": ENCODING, "data": data}
    with _lock:
        _last_wrapper = (doc, wrapper)
    return dict(wrapper)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def unpack_document(packed: dict) -> dict:
    """The document a packed wrapper holds (its ``data``; an ``executors`` beside it replaces the
    document's: the live widget sends its saved form's data with the live executors)."""
    first, *bodies = gzip.decompress(base64.b64decode(packed["data"])).decode("utf-8").split("\n")
    payload = json.loads(first)
    if bodies:
        if len(bodies) != len(payload["steps"]):
            raise ValueError(f"the packed document has {len(bodies)} step bodies for {len(payload['steps'])} steps")
        payload["steps"] = [{**head, **json.loads(body)} for head, body in zip(payload["steps"], bodies)]
    doc = unpack_payload(payload)
    if isinstance(packed.get("executors"), dict):
        doc["executors"] = packed["executors"]
    return doc
