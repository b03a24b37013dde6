"""Loops over a symbolic range, traced once: the loop becomes one bound symbol that runs its body n times.

Note [Loops over a symbolic range]
``for i in range(n)`` with ``n`` a symbolic size (a sequence length that automatic dynamic shapes made symbolic)
unrolls into n copies of the body: the trace depends on n's value, which ``range`` pins, and every new length
compiles a new entry (Hugging Face Mamba's and Jamba's slow scan, RecurrentGemma's ``_rnn_scan``, generating
with ``use_cache=False``). Instead, such a loop is traced once with a symbolic index ``i`` (a ``SymInt`` named
in no prologue, value 0) and recorded as one bound symbol, ``loopN``, whose implementation runs the body's trace n
times. The body's trace is valid for every index it is run with when:

- every constraint it recorded on ``i`` holds for all ``i`` in ``[0, n)``: one in which ``i`` cancels (``(i + 1) - i
  == 1``) holds for one ``i`` as for all, and an ordering of two sides affine in ``i`` (``i < x_1``) holds on an
  interval, so at both ends; both become prologue constraints with ``i`` replaced by ``0`` and ``n - 1`` (checked
  on these inputs now); any other constraint on ``i`` (``i == 0``, ``i % 2``) refuses the loop;
- what one iteration hands the next is what the first got: each local the body rebinds is either a tensor with
  the same shape, dtype, device and grad flag as before the loop (carried: the body's input and output), or
  unbound before the loop (written before it is read: its last value is an output, also where it is a carried
  tensor's value at the start of the iteration, ``prev = h``), or the loop variable
  (``n - 1`` after the loop); the value stack is as it was;
- it changes no other Python state: the containers reachable from the interpreted frames and the tracer's copies
  of outside containers are compared, shallowly, before and after the body (native objects too: an iterator's or
  a generator's position, a bytearray's contents, as their ``__reduce_ex__`` gives them: ``_native_state``); the
  tracer recorded no store, replay, random draw, data-dependent value, item of an iterator argument or grad mode
  switch; the only allowed change is one tensor appended to a list that only the loop's frame refers to, empty
  before the loop (``outs.append(y)``): after the loop that local is a ``StackedList``, which ``torch.stack`` turns into the loop's stacked output (any other use refuses the loop, and
  so does a write in place between the loop and the stack: the loop stacked when it ended, eager stacks then);
- no tensor of the body requires grad (a gradient needs the unrolled trace: scope of this note is inference).

Where any of this fails, the loop is refused: the tracer notes its site (code object and instruction) and the whole
function is traced again (``thunder.compiler.acquire_traces``) with that loop unrolled as before, so a refused loop
only costs a retrace, never a wrong result. A ``break``, ``return`` or exception that leaves the body is such a
failure too (the loop is still open when tracing ends). Loops nest no symbolic loop inside (an inner
``range`` of a symbolic size pins it, as before).

Passes see ``loopN`` as one opaque symbol (claimed by the python executor through its printer), its body's bound
symbols as its subsymbols (so passes that look for in-place writes find the body's); the body runs the body's
trace as it was traced, its symbols calling their torch implementations, so every iteration computes what eager
computes. Where tracing needs what the loop computed (a tensor's value for Python after the loop: Note
[Data-dependent values]; a result's strides: ``thunder.torch.layout``), the same implementation runs, outside the
trace, on the real inputs or on meta tensors (``is_loop``).

Layer: tracing. Imports: core, core.interpreter.
"""

from __future__ import annotations

import ast
import collections
import pathlib
import re
import sys
import types
from typing import Any

import torch

from thunder.core import prims, replays
from thunder.core.interpreter.errors import NULL
from thunder.core.interpreter.execution import generator_code
from thunder.core.interpreter.runtime import current_runtime, innermost_frame_objects
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbol import DONT_DCE, IN_PLACE, MAY_ALIAS, MAY_RAISE, RANDOM, BoundSymbol, Symbol
from thunder.core.symbolic import SymFloat, SymInt, make_symbolic
from thunder.core.trace import TraceCtx, draws

__all__ = ["LoopRefused", "LoopsMixin", "StackedList", "is_loop"]


class LoopRefused(BaseException):
    """Raised where a traced loop turns out not to be one trace for every index (a BaseException: a program's
    ``except Exception`` does not swallow it; the tracer's flag makes the retrace happen regardless)."""


# The tracer's collections that grow when the program changes outside state, draws, or reads tensor values.
_EFFECTS = ("_undo", "_stored_values", "_written", "_copy_changed_after", "_tensor_attributes", "_hoisted",
            "outcomes", "symbolic_outcomes", "_jitted_results", "_arrays_shared", "_buffers", "_store_regions",
            "_restored_by_regions")  # fmt: skip
# The tracer's copies of outside containers (the program changes those, not the originals).
_COPIES = ("_copies", "_dict_copies", "_lazy", "_copy_originals", "_rebuilt", "_object_dicts")
_WALK_BUDGET = 100_000
# (a path is a value: its slots are caches filled when read, ``str(path)`` in 3.13's pathlib)
_ATOMS = (int, float, complex, str, bytes, bool, type(None), type, types.ModuleType, torch.Tensor, torch.dtype,
          torch.device, Proxy, SymInt, SymFloat, types.BuiltinFunctionType, types.MethodWrapperType, pathlib.PurePath)  # fmt: skip


class _TooBig(Exception):
    pass


def _slot_names(t: type) -> list[str]:
    names = []
    for k in t.__mro__:
        slots = k.__dict__.get("__slots__", ())
        names.extend((slots,) if isinstance(slots, str) else slots)
    return [n for n in names if n not in ("__dict__", "__weakref__")]


def _slot_value(v, name: str):
    try:
        return object.__getattribute__(v, name)
    except Exception:  # noqa: BLE001 - an empty slot (or one that is no plain slot)
        return NULL


def _fingerprints(roots: list) -> dict[int, tuple[Any, Any]]:
    """id -> (object, shallow contents by identity) of every mutable container reachable from ``roots`` (thunder's
    own objects are not looked into)."""
    seen: dict[int, tuple[Any, Any]] = {}
    todo = list(roots)
    while todo:
        v = todo.pop()
        if isinstance(v, _ATOMS) or v is NULL or id(v) in seen:
            continue
        t = type(v)
        if (getattr(t, "__module__", None) or "").startswith("thunder."):
            continue
        fp = None
        if isinstance(v, (list, collections.deque)):
            fp = tuple(map(id, v))
            todo.extend(v)
        elif isinstance(v, dict):
            fp = tuple((id(k), id(x)) for k, x in v.items())
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, (set, frozenset)):
            fp = frozenset(map(id, v))
            todo.extend(v)
        elif isinstance(v, tuple):
            todo.extend(v)
        elif t is types.CellType:
            try:
                contents = v.cell_contents
            except ValueError:
                contents = NULL
            fp = id(contents)
            todo.append(contents)
        elif isinstance(v, (types.FunctionType, types.MethodType)):
            fn = getattr(v, "__func__", v)
            todo.extend(fn.__closure__ or ())
            todo.append(getattr(v, "__self__", None))
        else:  # (read without the object's ``__getattr__``: no code of the program's runs)
            try:
                d = object.__getattribute__(v, "__dict__")
            except Exception:  # noqa: BLE001 - no instance dict
                d = None
            if type(d) is dict:
                todo.append(d)
            slots = _slot_names(t)
            if slots:
                values = tuple(_slot_value(v, n) for n in slots)
                fp = tuple(map(id, values))
                todo.extend(values)
            elif d is None:  # a native object: an iterator, a generator, a bytearray, an array
                state = _native_state(v)
                if state is not None:
                    fp = tuple(x if isinstance(x, _VALUES) else id(x) for x in state)
                    todo.extend(x for x in state if not isinstance(x, _VALUES))
        seen[id(v)] = (v, fp)
        if len(seen) > _WALK_BUDGET:
            raise _TooBig
    return seen


_VALUES = (int, float, complex, str, bytes, bool, type(None), range, slice)  # (compared by value: reduce makes them anew)


def _native_state(v) -> list | None:
    """The state of a native object, flattened (values and objects), or None where it has none to read: a
    generator's position and locals (the interpreted frame's, for one the interpreter runs), else what its
    ``__reduce_ex__`` gives (an iterator's position, a bytearray's or an array's contents; only native
    implementations are called, never the program's code)."""
    if isinstance(v, types.GeneratorType):
        f = v.gi_frame
        if f is None:
            return ["done"]
        interpreted = f.f_locals.get("frame") if generator_code(v) is not f.f_code else None
        if interpreted is not None:
            return [interpreted.pc, *interpreted.fast]
        return [f.f_lasti, *f.f_locals.values()]
    native = (types.MethodDescriptorType, types.WrapperDescriptorType)
    reduce = getattr(type(v), "__reduce_ex__", None)
    if not all(isinstance(getattr(type(v), k, None), native) for k in ("__reduce_ex__", "__reduce__", "__getstate__")):
        return None
    try:
        state = reduce(v, 4)
    except Exception:  # noqa: BLE001 - not reducible: no state to compare
        return None
    flat: list = []
    todo = [state]
    while todo and len(flat) < _WALK_BUDGET:
        x = todo.pop()
        if type(x) in (tuple, list):
            todo.extend(x)
        elif type(x) is dict:
            todo.extend(x.items())
        else:
            flat.append(x)
    return flat


def _frame_roots(tracer) -> list:
    roots: list = []
    for f in innermost_frame_objects():
        roots.extend(f.fast)
        roots.extend(f.stack)
        if f.locals is not None:
            roots.append(f.locals)
        if f.locals_snapshot is not None:
            roots.append(f.locals_snapshot)
        roots.append(f.globals)  # (a module's own objects: the program may change them too)
    roots.extend(getattr(tracer, name) for name in _COPIES)
    return roots


# --- constraints on the index --------------------------------------------------------------------------------------


def _coefficient(node: ast.AST, index: str, ints: set[str]) -> int | None:
    """The integer k with ``node == k * index + (terms without index)``, or None when ``node`` is no such affine
    form over ints."""
    if isinstance(node, ast.Name):
        return 1 if node.id == index else (0 if node.id in ints else None)
    if isinstance(node, ast.Constant):
        return 0 if type(node.value) is int else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        k = _coefficient(node.operand, index, ints)
        return None if k is None else (-k if isinstance(node.op, ast.USub) else k)
    if isinstance(node, ast.BinOp):
        a, b = _coefficient(node.left, index, ints), _coefficient(node.right, index, ints)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            if a == 0 and b == 0:
                return 0
            const = node.left if a == 0 else node.right
            k = b if a == 0 else a
            return k * const.value if isinstance(const, ast.Constant) else None
        return 0 if a == 0 and b == 0 else None
    if not any(isinstance(n, ast.Name) and n.id == index for n in ast.walk(node)):
        names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        return 0 if names <= ints | _INT_FUNCTIONS and all(type(n.value) is int for n in ast.walk(node) if isinstance(n, ast.Constant)) else None  # fmt: skip
    return None


# The functions symbolic int expressions call (Note [Guard-free min and max] in thunder.core.symbolic).
_INT_FUNCTIONS = frozenset({"min", "max", "abs"})


class _Substitute(ast.NodeTransformer):
    def __init__(self, index: str, by: ast.AST):
        self.index, self.by = index, by

    def visit_Name(self, node):
        return self.by if node.id == self.index else node


def _substituted(tree: ast.AST, index: str, by: str) -> str:
    import copy

    return ast.unparse(_Substitute(index, ast.parse(by, mode="eval").body).visit(copy.deepcopy(tree)))


def index_constraints(expr: str, index: str, first: str, last: str, ints: set[str]) -> list[str] | None:
    """The constraints over the prologue's names that make ``expr`` (a constraint on ``index``) hold for every
    ``index`` in ``[first, last]`` (Note [Loops over a symbolic range]), or None where no such are known."""
    tree = ast.parse(expr, mode="eval").body
    body = tree
    if isinstance(body, ast.UnaryOp) and isinstance(body.op, ast.Not):
        body = body.operand
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id == "bool" and len(body.args) == 1:
        k = _coefficient(body.args[0], index, ints)
        ordering = False
    elif isinstance(body, ast.Compare) and len(body.ops) == 1:
        a, b = _coefficient(body.left, index, ints), _coefficient(body.comparators[0], index, ints)
        k = None if a is None or b is None else a - b
        ordering = isinstance(body.ops[0], (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) and body is tree
    else:
        k = _coefficient(body, index, ints)
        ordering = False
    if k is None or (k != 0 and not ordering):
        return None
    ends = [first] if k == 0 else [first, last]
    return [_substituted(tree, index, end) for end in ends]


# --- the loop symbol -----------------------------------------------------------------------------------------------


def _print_loop(bsym: BoundSymbol, printer) -> list[str]:
    call = printer.call(bsym)
    target = printer.target(bsym.output)
    return [f"{target} = {call}" if target else call]


def _loop_impl(body: TraceCtx, carried: int, stacked: int):
    """Runs ``body`` (``body(i, *carried, *captured) -> (*carried, *appended, *last)``) for i in range(n)."""
    fn = None

    def run(start, n, init, captured):
        nonlocal fn
        if fn is None:
            fn = body.python_callable()
        state = list(init)
        stacks = [[] for _ in range(stacked)]
        outs = ()
        for i in range(start, n):
            outs = fn(i, *state, *captured)
            state = outs[:carried]
            for s, t in zip(stacks, outs[carried : carried + stacked]):
                s.append(t)
        return (*state, *(torch.stack(s) for s in stacks), *outs[carried + stacked :])

    return run


class StackedList:
    """What a list the loop appended to is after the loop: only ``torch.stack`` of it is known (Note [Loops over a
    symbolic range]); anything else refuses the loop."""

    __slots__ = ("_loop", "_stacked", "_after")

    def __init__(self, loop: _Loop, stacked: TensorProxy, after: int):
        object.__setattr__(self, "_loop", loop)
        object.__setattr__(self, "_stacked", stacked)
        object.__setattr__(self, "_after", after)  # the number of the trace's bound symbols after the loop's

    def _refuse(self, *args, **kwargs):
        self._loop.refuse("a list appended to in the loop is used otherwise than by torch.stack")

    @property
    def __class__(self):
        self._refuse()


for _name in ("__len__", "__iter__", "__getitem__", "__setitem__", "__delitem__", "__contains__", "__reversed__",
              "__add__", "__radd__", "__iadd__", "__mul__", "__rmul__", "__imul__", "__eq__", "__ne__", "__lt__",
              "__le__", "__gt__", "__ge__", "__hash__", "__bool__", "__repr__", "__str__", "__format__",
              "__getattr__", "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__", "__copy__",
              "__deepcopy__", "__dir__", "__sizeof__"):  # fmt: skip
    setattr(StackedList, _name, StackedList._refuse)


class _Loop:
    """One ``for i in range(n)`` being traced: the iterator the program's FOR_ITER steps."""

    def __init__(self, tracer, start: int, n: SymInt, frame, site: tuple, var_slot: int):
        self.tracer, self.first, self.n, self.frame, self.site, self.var_slot = tracer, start, n, frame, site, var_slot
        self.index: SymInt | None = None

    def __iter__(self):
        return self

    def __next__(self):
        self.refuse("the loop's iterator is stepped outside its for statement")

    def refuse(self, why: str):
        tracer = self.tracer
        if tracer.loop_refused is None:
            tracer.loop_refused = (self.site, why)
        raise LoopRefused(why)

    def __interpreter_for_iter__(self, frame):
        if frame is not self.frame:
            self.refuse("the loop's iterator is stepped by another frame")
        if self.index is None:
            return self._begin(frame)
        self._end(frame)
        raise StopIteration

    def _begin(self, frame) -> SymInt:
        tracer = self.tracer
        trace = tracer.computation
        self.start = len(trace.bound_symbols)
        self.fast = list(frame.fast)
        self.stack = list(frame.stack[:-1])
        self.recorded = len(tracer._recorded)
        self.prologue_start = len(tracer.prologue.bound_symbols)
        self.effects = [len(getattr(tracer, name)) for name in _EFFECTS]
        try:
            self.before = _fingerprints(_frame_roots(tracer))
        except _TooBig:
            self.refuse("too much state to compare")
        name = trace.make_name("i")
        tracer.prologue.names.add(name)
        self.index = SymInt(self.first, name)
        tracer.open_loop = self
        return self.index

    def _end(self, frame) -> None:
        tracer = self.tracer
        trace = tracer.computation
        tracer.open_loop = None
        index, n = self.index.expr, self.n
        body = trace.bound_symbols[self.start :]
        if len(trace.scopes) != 1 or len(frame.stack) != len(self.stack) + 1 or any(
            a is not b for a, b in zip(frame.stack, self.stack)
        ):
            self.refuse("the value stack changed")
        if [len(getattr(tracer, k)) for k in _EFFECTS] != self.effects:
            self.refuse("the body changes outside state, draws or reads a tensor's value")
        for b in body:
            # (an in-place op is kept by dead code elimination too: it is no other effect)
            effect = RANDOM in b.sym.tags or (DONT_DCE in b.sym.tags and IN_PLACE not in b.sym.tags)
            if b.sym.is_prim or b.sym in replays.REPLAYS or draws(b) or effect:
                self.refuse(f"the body records {b.sym.name}")
            for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
                if isinstance(p, TensorProxy) and p.requires_grad:
                    self.refuse("a tensor of the body requires grad")
        for b in tracer.prologue.bound_symbols[self.prologue_start :]:
            if any(re.search(rf"\b{index}\b", a) for a in b.args if isinstance(a, str)) or any(
                isinstance(a, SymInt) and index in a.names for a in tree_leaves(b.args)
            ):
                self.refuse("the prologue checks the index")
            draw = b.sym is prims.unpack_call and (b.args[3] is None or b.args[3].name in tracer._hoisted)
            if b.sym in (prims.unpack_next, prims.check_iterator_end) or draw:
                # an item of an iterator argument, or a draw: each iteration takes another (Note [Iterator arguments])
                self.refuse(f"the body takes a value the prologue makes per call ({b.sym.name})")
        # what the body made and the locals it rebinds
        made: dict[str, TensorProxy] = {}
        for b in body:
            read = {p.name for p in b.flat_proxy_args}
            for o in b.flat_proxy_outs:
                if o.name not in read and isinstance(o, TensorProxy):
                    made[o.name] = o
        carried: list[tuple[int, TensorProxy, TensorProxy]] = []
        last: list[tuple[int, Any]] = []
        passed_on: list[tuple[int, TensorProxy]] = []
        list_slots = [slot for slot in range(len(self.fast)) if self._appended_list(frame, slot)]
        lists = [(slot, frame.fast[slot]) for slot in list_slots]
        var_cell = frame.fast[self.var_slot] if type(frame.fast[self.var_slot]) is types.CellType else None
        for slot, (old, new) in enumerate(zip(self.fast, frame.fast)):
            if slot == self.var_slot:
                if (new if var_cell is None else var_cell.cell_contents) is not self.index or (
                    var_cell is not None and old is not var_cell
                ):
                    self.refuse("the loop variable is rebound")
                continue
            if slot in list_slots:
                continue
            if new is old:
                continue
            if isinstance(old, TensorProxy) and isinstance(new, TensorProxy) and _same_metadata(old, new, index):
                if old.strides_read:
                    self.refuse(f"the body reads the strides of {old.name}")
                carried.append((slot, old, new))
            elif old is NULL and isinstance(new, TensorProxy):
                if not _free_of(new, index):
                    self.refuse(f"the shape of {new.name} depends on the index")
                if new.name in made:
                    last.append((slot, new))
                else:  # one from before the loop: a carried tensor's value at the start of an iteration, or captured
                    passed_on.append((slot, new))
            elif old is NULL and type(new) in (int, float, bool, str, type(None)):
                pass  # the same in every iteration: it depends on no carried value
            else:
                self.refuse(f"the body rebinds the local {frame.code.co_varnames[slot] if slot < len(frame.code.co_varnames) else slot} to a {type(new).__name__}")  # fmt: skip
        # (``prev = h`` of a carried h: the value h had at the start of the last iteration, an output too)
        carried_names = {old.name for _, old, _ in carried}
        last.extend((slot, new) for slot, new in passed_on if new.name in carried_names)
        # the only change to Python state: one tensor appended to each list only this frame holds
        elements = []
        for _, lst in lists:
            element = lst[0]
            if not isinstance(element, TensorProxy) or not _free_of(element, index):
                self.refuse("a list the body appends to holds no tensor, or one whose shape depends on the index")
            elements.append(element)
        try:
            after = _fingerprints(_frame_roots(tracer))
        except _TooBig:
            self.refuse("too much state to compare")
        appended = {id(lst) for _, lst in lists}
        for key, (obj, fp) in self.before.items():
            if key in appended or fp is None or obj is var_cell:
                continue
            now = after.get(key)
            if now is not None and now[1] != fp:
                self.refuse(f"the body changes a {type(obj).__name__}")
            if now is None and _changed_unreached(obj, fp):
                self.refuse(f"the body changes a {type(obj).__name__}")
        # constraints on the index
        symbols = {h.name: v for h, v in tracer.inputs if isinstance(v, (SymInt, SymFloat))}
        symbols.update((d.name, v) for d, v in tracer.dims)
        ints = {k for k, v in symbols.items() if isinstance(v, SymInt)}
        recorded = tracer._recorded
        added = list(recorded)[self.recorded :]
        last_index = f"({n.expr} - 1)"
        values = {k: v.value for k, v in symbols.items()}
        replacements = []
        for expr in added:
            if not re.search(rf"\b{index}\b", expr):
                continue
            ends = index_constraints(expr, index, str(self.first), last_index, ints)
            if ends is None:
                self.refuse(f"the body relies on {expr}")
            for e in ends:
                try:
                    holds = eval(e, {"__builtins__": {}, "max": max, "min": min, "abs": abs, "bool": bool}, values)  # noqa: S307 - our own constraint text
                except Exception:  # noqa: BLE001 - a name it cannot evaluate: refuse
                    holds = False
                if not holds:
                    self.refuse(f"the body relies on {expr}, which fails for index {e}")
            replacements.append((expr, ends))
        names: dict[str, Any] = {}
        for b in body:
            for a in tree_leaves((b.args, b.kwargs)):
                if isinstance(a, (SymInt, SymFloat)):
                    for nm in a.names:
                        if nm != index:
                            if nm not in symbols:
                                self.refuse(f"the body uses the number {nm}")
                            names[nm] = symbols[nm]
        # the loop symbol
        where = recorded[added[0]] if added else None
        for expr, ends in replacements:
            del recorded[expr]
            for e in ends:
                recorded.setdefault(e, where)
        del trace.bound_symbols[self.start :]
        self._record(body, made, carried, last, elements, names)
        for slot, _ in lists:
            frame.fast[slot] = StackedList(self, self.stacked.pop(0), len(trace.bound_symbols))
            tracer.stacked_lists.append(frame.fast[slot])
        if var_cell is None:
            frame.fast[self.var_slot] = make_symbolic(n.value - 1, last_index, n)
        else:
            var_cell.cell_contents = make_symbolic(n.value - 1, last_index, n)
        self.frame = self.fast = self.stack = self.before = None  # (what a StackedList keeps alive: not the frame)

    def _appended_list(self, frame, slot: int) -> bool:
        """Whether local ``slot`` holds a list that was empty before the body and has one item now, which no other
        object refers to: the frame's slot, our copy of the slots and our fingerprint hold it (getrefcount's
        argument is the fourth reference)."""
        if type(self.fast[slot]) is not list or frame.fast[slot] is not self.fast[slot] or len(frame.fast[slot]) != 1:
            return False
        return self.before.get(id(frame.fast[slot]), (None, None))[1] == () and sys.getrefcount(frame.fast[slot]) == 4

    def _record(self, body, made, carried, last, elements, names) -> None:
        trace = self.tracer.computation
        captured: dict[str, Proxy] = {}
        carried_names = {old.name for _, old, _ in carried}
        for b in body:
            for p in b.flat_proxy_args:
                if p.name not in made and p.name not in carried_names and p.name not in captured:
                    captured[p.name] = p
        outputs = (*(new for _, _, new in carried), *elements, *(new for _, new in last))
        for p in outputs:  # (an output the body only passes on: ``h = x``, ``outs.append(x)``)
            if p.name not in made and p.name not in carried_names and p.name not in captured:
                captured[p.name] = p
        captured_args = (*captured.values(), *names.values())
        body_trace = TraceCtx(name=f"{trace.make_name('loop')}_body")
        body_trace.names = set(trace.names)
        body_trace.args = [self.index, *(old for _, old, _ in carried), *captured_args]
        body_trace.bound_symbols.extend(body)
        body_trace.bound_symbols.append(prims.python_return.bind(outputs, output=None))
        results = [TensorProxy.like(old) for _, old, _ in carried]
        stacked = [TensorProxy.like(e, shape=(self.n - self.first, *e.shape)) for e in elements]
        lasts = [TensorProxy.like(new) for _, new in last]
        tags = {MAY_ALIAS} | {t for b in body for t in b.sym.tags & {MAY_RAISE}}
        if any(_mutates(b) for b in body):  # it writes tensors in place: kept and never moved, as those ops are
            tags |= {IN_PLACE, DONT_DCE}
        name = body_trace.name.removesuffix("_body")
        impl = _loop_impl(body_trace, len(carried), len(elements))
        sym = Symbol(name=name, meta=None, id=f"loop.{name}", python_impl=impl, executor=_LOOP_EXECUTOR,
                     printer=_print_loop, tags=frozenset(tags))  # fmt: skip
        output = (*results, *stacked, *lasts)
        bsym = BoundSymbol(sym, (self.first, self.n, tuple(old for _, old, _ in carried), captured_args), {}, output,
                           tuple(body), source=body[0].source if body else None)  # fmt: skip
        trace.add_bound_symbol(bsym)
        for (slot, _, _), r in zip(carried, results):
            self.frame.fast[slot] = r
        for (slot, _), r in zip(last, lasts):
            self.frame.fast[slot] = r
        self.stacked = stacked


def _mutates(b: BoundSymbol) -> bool:
    return IN_PLACE in b.sym.tags or any(_mutates(s) for s in b.subsymbols)


class _LoopExecutor:
    """Marks the loop symbol as an operator of its own (claimed whole, through its printer, by the python
    executor: never decomposed into its body)."""

    name = "python"


_LOOP_EXECUTOR = _LoopExecutor()


def is_loop(sym: Symbol) -> bool:
    """Whether ``sym`` is a loop's symbol: its implementation runs the body's torch calls, so the layouts of its
    results can be had by running it on meta tensors (``thunder.torch.layout``)."""
    return sym.executor is _LOOP_EXECUTOR


def _changed_unreached(obj, fp) -> bool:
    """Whether a container no longer reached from the frames changed (it may still be held elsewhere)."""
    try:
        now = _fingerprints([obj]).get(id(obj))
    except _TooBig:
        return True
    return now is None or now[1] != fp


def _free_of(t: TensorProxy, index: str) -> bool:
    return not any(isinstance(d, SymInt) and index in d.names for d in t.shape)


def _dims(t: TensorProxy) -> tuple:
    return tuple(d.expr if isinstance(d, SymInt) else d for d in t.shape)


def _same_metadata(a: TensorProxy, b: TensorProxy, index: str) -> bool:
    return (
        type(a) is type(b) and _dims(a) == _dims(b) and a.dtype == b.dtype and a.device == b.device
        and a.requires_grad == b.requires_grad and _free_of(b, index)
    )  # fmt: skip


# --- the tracer's part ---------------------------------------------------------------------------------------------


def _loop_target(frame) -> int | None:
    """The fast-local slot of ``for <local> in range(n)`` when the call just made is that range, else None."""
    insts = frame.info.instructions
    pc = frame.pc
    if pc + 2 >= len(insts) or insts[pc].opname != "GET_ITER" or insts[pc + 1].opname != "FOR_ITER":
        return None
    store = insts[pc + 2]
    if store.opname in ("STORE_FAST", "STORE_DEREF") and store.arg < len(frame.fast):  # (a cell: its contents)
        return store.arg
    if store.opname == "STORE_FAST_LOAD_FAST":
        return store.arg >> 4
    return None


class LoopsMixin:
    """``Tracer``'s loops over symbolic ranges (Note [Loops over a symbolic range])."""

    def _init_loops(self, unroll: frozenset) -> None:
        self.unroll = unroll  # the sites whose loops unroll: (code, instruction index)
        self.loop_refused: tuple | None = None  # (site, why): a loop the trace must unroll
        self.open_loop: _Loop | None = None
        self.stacked_lists: list[StackedList] = []  # made by the loops (refused when one outlives the program)

    def refused_loop(self) -> tuple | None:
        """The site of a loop this trace cannot keep, or None: one refused, one left open (a ``break``, an
        exception), or one whose appended list outlives the program's frames (returned, stored away)."""
        if self.loop_refused is not None:
            return self.loop_refused[0]
        if self.open_loop is not None:
            return self.open_loop.site
        for stacked in self.stacked_lists:
            if sys.getrefcount(stacked) > 3:  # (this list, the loop variable and the argument)
                return stacked._loop.site
        return None

    def _range(self, *args, **kwargs):
        from thunder.core import introspection

        loop = None
        if not kwargs and 1 <= len(args) <= 2 and type(args[-1]) is SymInt and self.open_loop is None:
            if len(args) == 1 or type(args[0]) is int:
                loop = self._symbolic_loop(args[0] if len(args) == 2 else 0, args[-1])
        if loop is not None:
            return loop
        return introspection.lookaside(range)(*args, **kwargs)

    def _symbolic_loop(self, start: int, n: SymInt) -> _Loop | None:
        runtime = current_runtime()
        if runtime is None or not runtime.frames or len(self.computation.scopes) != 1:
            return None
        frame = runtime.frames[-1]
        if frame.locals is not None or frame.code.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # generators, coroutines
            return None
        slot = _loop_target(frame)
        site = (frame.code, frame.pc)
        if slot is None or site in self.unroll or n.value <= start:
            return None
        if not n > start:  # (records the constraint: the body runs at least once)
            return None
        return _Loop(self, start, n, frame, site, slot)

    def _stack(self, *args, **kwargs):
        """``torch.stack``: of a list the loop appended to, the loop's stacked output moved to ``dim``."""
        tensors = args[0] if args else kwargs.get("tensors")
        if type(tensors) is not StackedList:
            return self.symbol_lookup(torch.stack)(*args, **kwargs)
        loop, stacked = tensors._loop, tensors._stacked
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        if len(args) > 2 or set(kwargs) - {"tensors", "dim"} or type(dim) is not int:
            loop.refuse("torch.stack of the loop's list with other arguments than a constant dim")
        # The loop stacked its list's tensors when it ended; eager stacks them now: a write in place since (into
        # the carried tensor, or a tensor an element is a view of) would be seen by eager's stack only.
        scopes = self.computation.scopes
        if any(_mutates(b) for b in (*scopes[0][tensors._after :], *(b for s in scopes[1:] for b in s))):
            loop.refuse("a tensor is written in place between the loop and torch.stack of its list")
        return self.symbol_lookup(torch.Tensor.contiguous)(self.symbol_lookup(torch.movedim)(stacked, 0, dim))
