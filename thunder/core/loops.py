"""Loops over a symbolic range, traced once: the loop becomes one bound symbol that runs its body n times.

Note [Loops over a symbolic range]
``for i in range(n)`` (any ``range(start, stop, step)`` with a symbolic start or stop and a constant step: reverse
scans, strides) with ``n`` a symbolic size (a sequence length that automatic dynamic shapes made symbolic)
unrolls into n copies of the body: the trace depends on n's value, which ``range`` pins, and every new length
compiles a new entry (Hugging Face Mamba's and Jamba's slow scan, RecurrentGemma's ``_rnn_scan``, generating
with ``use_cache=False``). Instead, such a loop is traced once with a symbolic index ``i`` (a ``SymInt`` named
in no prologue, value 0) and recorded as one bound symbol, ``loopN``, whose implementation runs the body's trace n
times. The body's trace is valid for every index it is run with when:

- every constraint it recorded on ``i`` holds for all ``i`` the range gives: one in which ``i`` cancels (``(i + 1) - i
  == 1``) holds for one ``i`` as for all, and an ordering of two sides affine in ``i`` (``i < x_1``) holds on an
  interval, so at both ends; both become prologue constraints with ``i`` replaced by the first and the last value
  (checked on these inputs now); any other constraint on ``i`` (``i == 0``, ``i % 2``) refuses the loop;
- what one iteration hands the next is what the first got: each local the body rebinds is either a tensor with
  the same shape, dtype, device and grad flag as before the loop (carried: the body's input and output), a tuple of
  such tensors and unchanged values (``state = (h, c)``), an int counter (Note [Counters in a loop]), or
  unbound before the loop (written before it is read: its last value is an output, also where it is a carried
  tensor's value at the start of the iteration, ``prev = h``), or the loop variable
  (``n - 1`` after the loop); the value stack is as it was;
- it changes no other Python state: the containers reachable from the interpreted frames and the tracer's copies
  of outside containers are compared, shallowly, before and after the body (native objects too: an iterator's or
  a generator's position, a bytearray's contents, as their ``__reduce_ex__`` gives them: ``_native_state``); the
  tracer recorded no store, replay, random draw, data-dependent value, item of an iterator argument or grad mode
  switch; the only allowed change is one tensor appended to a list that only the loop's frame refers to, empty
  before the loop (``outs.append(y)``): after the loop that local is a ``StackedList``, which ``torch.stack`` turns
  into the loop's stacked output and ``torch.cat`` into that output merged into its dim (any other use refuses the
  loop, and so does a write in place between the loop and the stack: the loop stacked when it ended, eager stacks
  then);
- no tensor of the body requires grad (a gradient needs the unrolled trace: scope of this note is inference).

Note [Counters in a loop]
An int local that each iteration changes by a constant (``pos += 1``) is a function of the index: the first trace,
which sees it change from 0 to 1, refuses the loop with its step (``_Retry``), and the retrace binds it, before
the body, to ``pos0 + step * iteration`` (a ``SymInt`` over the index), so what the body computes from it and the
constraints it records on it are the index's, checked as above; after the body it must be ``pos + step`` (as
``+=``/``-=`` write it: any other expression refuses the loop), after the loop it is ``pos0 + step * count``.
A float that grows the same way is no counter: eager's repeated rounding (``t + 0.1 + 0.1``) is not
``t + 2 * 0.1``, so such a loop unrolls.

Note [A carried tensor held elsewhere]
The body's trace names tensors, not the locals they were read from: where the tensor a local carries into the loop
is also another local's (``y = h``, ``h = c = torch.zeros(...)``), an item of a container or a global, the body read
through that other path the first value in eager but would read the carried one in the next iterations; so does
an input of the trace (an argument, a global, a module's attribute), which the body can read again through where it
came from. Such a local (``_holders`` counts who holds each object before the loop, over-counting is only a retrace)
makes the loop trace again (``_Retry``) with the local bound to a fresh tensor of its own, which the loop symbol
starts as the old one: reads through the local are the carried value, reads through the other paths the first. A
carried tuple held elsewhere refuses the loop.

Note [The walk reads the globals a frame names]
The state compared before and after the body is reached from the frames' locals and value stacks and from the
globals their code names, not from whole module dicts: a module's dunders reach far (a test module's ``__loader__``
is pytest's import hook, which holds the whole session; a notebook's ``__main__`` holds ``get_ipython``, the
shell and its growing history, a script's any large object), and a walk over more than ``_WALK_BUDGET`` objects
refuses the loop: under pytest's full suite every loop unrolled (one compile per length). A global store of the body is the
tracer's (``cb_store_global``), and the objects the body changes through a call are the tracer's copies, both
compared as before.

Where any of this fails, the loop is refused: the tracer notes its site (code object and instruction) and the whole
function is traced again (``thunder.compiler.acquire_traces``) with that loop unrolled as before, so a refused loop
only costs a retrace, never a wrong result. A ``break``, ``return`` or exception that leaves the body is such a
failure too (the loop is still open when tracing ends).

Loops nest: a symbolic loop inside the body is traced once too (the open loops are a stack), its body may use the
outer indices, and its constraints on its own index become constraints on the outer index, which the outer loop
checks in turn; a list it appended to is the outer body's (using it after the outer loop refuses the outer loop).
An inner range whose length depends on the outer index (``range(i)``) is empty for ``i == 0``, which pins the
index: the outer loop unrolls.

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
from thunder.core.symbolic import SymFloat, SymInt
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
        t = type(v)  # (not ``isinstance``: it reads ``__class__``, which a StackedList refuses)
        if issubclass(t, _ATOMS) or v is NULL or id(v) in seen:
            continue
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
        g = f.globals  # (a module's own objects the frame names: the program may change them too)
        roots.extend(g[n] for n in _global_names(f.code) if n in g)
    roots.extend(getattr(tracer, name) for name in _COPIES)
    return roots


def _global_names(code: types.CodeType) -> set[str]:
    """The names ``code`` and the code nested in it can read from their module: only those of a frame's globals
    are walked (Note [The walk reads the globals a frame names])."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _global_names(c)
    return names


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
            try:  # (a literal such as ``-1``)
                value = ast.literal_eval(const)
            except (ValueError, TypeError, SyntaxError):
                return None
            return k * value if type(value) is int else None
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

    def run(start, stop, step, init, captured):
        nonlocal fn
        if fn is None:
            fn = body.python_callable()
        state = list(init)
        stacks = [[] for _ in range(stacked)]
        outs = ()
        for i in range(start, stop, step):
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


class _Retry(collections.namedtuple("_Retry", "site steps fresh")):
    """A loop to trace again with the int locals its body counts in affine in the index (Note [Counters in a
    loop]): ``steps``, (slot, step) pairs; and the locals in ``fresh`` bound to tensors of their own (Note [A
    carried tensor held elsewhere])."""


class _Loop:
    """One ``for i in range(n)`` being traced: the iterator the program's FOR_ITER steps."""

    def __init__(self, tracer, bounds: tuple, count: SymInt, last, frame, site: tuple, var_slot: int,
                 retry: _Retry | None):  # fmt: skip
        self.tracer, self.frame, self.site, self.var_slot = tracer, frame, site, var_slot
        self.retried = retry is not None
        # slot -> how much the int local it holds grows each iteration (Note [Counters in a loop])
        self.steps: dict[int, int] = dict(retry.steps) if retry else {}
        self.fresh: tuple[int, ...] = retry.fresh if retry else ()  # Note [A carried tensor held elsewhere]
        self.initial: dict[str, TensorProxy] = {}  # a fresh tensor's name -> the tensor it starts as
        self.counters: dict[int, SymInt] = {}  # slot -> its value in the body, affine in the index
        self.bounds, self.count, self.last = bounds, count, last  # (start, stop, step); the index's last value
        self.first = bounds[0]
        self.index: SymInt | None = None

    def __iter__(self):
        return self

    def __next__(self):
        self.refuse("the loop's iterator is stepped outside its for statement")

    def refuse(self, why: str, retry: Any = None):
        """Refuses the loop: the retrace unrolls it, or traces it again with what ``retry`` says."""
        tracer = self.tracer
        if tracer.loop_refused is None:
            tracer.loop_refused = (retry or self.site, why)
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
        for slot in self.fresh:
            if not isinstance(frame.fast[slot], TensorProxy):
                self.refuse("a local carrying a tensor holds none")
            fresh = TensorProxy.like(frame.fast[slot])
            self.initial[fresh.name] = frame.fast[slot]
            frame.fast[slot] = fresh
        self.fast = list(frame.fast)
        self.stack = list(frame.stack[:-1])
        self.recorded = len(tracer._recorded)
        self.prologue_start = len(tracer.prologue.bound_symbols)
        self.effects = [len(getattr(tracer, name)) for name in _EFFECTS]
        roots = _frame_roots(tracer)
        try:
            self.before = _fingerprints(roots)
        except _TooBig:
            self.refuse("too much state to compare")
        self.held = _holders(roots, self.before)
        name = trace.make_name("i")
        tracer.prologue.names.add(name)
        self.index = SymInt(_value(self.first), name)
        start, _, step = self.bounds
        iteration = (self.index - start) * step if abs(step) == 1 else (self.index - start) // step
        for slot, d in self.steps.items():
            if type(frame.fast[slot]) not in (int, SymInt):
                self.refuse("a counter of the loop holds no int")
            self.counters[slot] = frame.fast[slot] + d * iteration
            frame.fast[slot] = self.counters[slot]
        tracer.open_loops.append(self)
        return self.index

    def _end(self, frame) -> None:
        tracer = self.tracer
        trace = tracer.computation
        if tracer.open_loops[-1] is not self:
            self.refuse("a loop inside the body is still open")
        tracer.open_loops.pop()
        index = self.index.expr
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
        steps: dict[int, int] = {}  # (the int locals that each iteration changes by a constant)
        fresh: list[int] = []  # (the locals carrying a tensor held elsewhere too)
        computed = {o.name for b in trace.bound_symbols[: self.start] for o in b.flat_proxy_outs} | self.initial.keys()
        # the numbers the body may use: the prologue's and the indices of the loops around this one
        symbols = {h.name: v for h, v in tracer.inputs if isinstance(v, (SymInt, SymFloat))}
        symbols.update((d.name, v) for d, v in tracer.dims)
        symbols.update((outer.index.expr, outer.index) for outer in tracer.open_loops)
        inner_lists: list[int] = []  # (the slots of lists that a loop inside the body appended to)
        carried: list[tuple[TensorProxy, TensorProxy]] = []  # (before, after) of each tensor carried
        rebound: list[tuple[int, Any, Any]] = []  # (slot, before, after) of the locals that carry tensors
        last: list[tuple[int, Any]] = []
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
            if slot in self.counters:
                counter, d = self.counters[slot], self.steps[slot]
                c = counter.expr  # (``c += d``, ``c = d + c``, ``c -= -d``: no other form is read)
                if type(new) is not SymInt or new.expr not in (f"({c} + {d})", f"({d} + {c})", f"({c} - {-d})"):
                    self.refuse(f"a counter of the loop changes otherwise than by {d}")
                continue
            if new is old:
                continue
            if type(old) is StackedList or type(new) is StackedList:  # (never ``isinstance``: a StackedList refuses it)
                if old is not NULL or type(new) is not StackedList:
                    self.refuse("the body rebinds a list a loop appended to")
                inner_lists.append(slot)  # (a loop inside the body appended to it)
                continue
            if type(old) is int and type(new) is int and old == new:
                continue  # (an equal int: the same value every iteration)
            if type(old) in (int, SymInt) and type(new) in (int, SymInt) and not self.retried:
                steps[slot] = _value(new) - _value(old)
                continue
            pairs = _carried_pairs(old, new, index)
            if pairs is not None:
                for old_tensor, _ in pairs:
                    if old_tensor.strides_read:
                        self.refuse(f"the body reads the strides of {old_tensor.name}")
                carried.extend(pairs)
                rebound.append((slot, old, new))
                if any(self.held[id(v)] > 1 or (isinstance(v, TensorProxy) and v.name not in computed)
                       for v in _carriers(old, new)):  # Note [A carried tensor held elsewhere]  # fmt: skip
                    if type(old) is tuple or self.retried:
                        self.refuse("a tensor the body carries is held elsewhere too")
                    fresh.append(slot)
            elif old is NULL and isinstance(new, TensorProxy):
                if not _free_of(new, index):
                    self.refuse(f"the shape of {new.name} depends on the index")
                last.append((slot, new))
            elif old is NULL and type(new) in (int, float, bool, str, type(None)):
                pass  # the same in every iteration: it depends on no carried value
            elif old is NULL and type(new) is SymInt and new.names <= symbols.keys() - {index}:
                pass  # (the last index of a loop inside the body)
            else:
                self.refuse(f"the body rebinds the local {frame.code.co_varnames[slot] if slot < len(frame.code.co_varnames) else slot} to a {type(new).__name__}")  # fmt: skip
        # (a tensor from before the loop is the same every iteration, unless it is a carried value: ``y = h``)
        last = [(slot, new) for slot, new in last if new.name in made or any(new is old for old, _ in carried)]
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
        if steps or fresh:
            why = "the body counts in an int" if steps else "a carried tensor is held elsewhere too"
            self.refuse(why, retry=_Retry(self.site, tuple(steps.items()), tuple(fresh)))
        # constraints on the index
        ints = {k for k, v in symbols.items() if isinstance(v, SymInt)}
        recorded = tracer._recorded
        added = list(recorded)[self.recorded :]
        first_index, last_index = _source(self.first), _source(self.last)
        values = {k: v.value for k, v in symbols.items()}
        replacements = []
        for expr in added:
            if not re.search(rf"\b{index}\b", expr):
                continue
            ends = index_constraints(expr, index, first_index, last_index, ints)
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
        self._record(body, made, carried, rebound, last, elements, names)
        for slot, _ in lists:
            frame.fast[slot] = StackedList(self, self.stacked.pop(0), len(trace.bound_symbols))
            tracer.stacked_lists.append(frame.fast[slot])
        for slot in inner_lists:  # (its stacked output is the body's: any use after the loop refuses the loop)
            frame.fast[slot] = StackedList(self, None, len(trace.bound_symbols))
            tracer.stacked_lists.append(frame.fast[slot])
        for slot in self.counters:
            frame.fast[slot] = self.fast[slot] + self.steps[slot] * self.count
        if var_cell is None:
            frame.fast[self.var_slot] = self.last
        else:
            var_cell.cell_contents = self.last
        self.frame = self.fast = self.stack = self.before = self.held = None  # (what a StackedList keeps alive: not the frame)

    def _appended_list(self, frame, slot: int) -> bool:
        """Whether local ``slot`` holds a list that was empty before the body and has one item now, which no other
        object refers to: the frame's slot, our copy of the slots and our fingerprint hold it (getrefcount's
        argument is the fourth reference)."""
        if type(self.fast[slot]) is not list or frame.fast[slot] is not self.fast[slot] or len(frame.fast[slot]) != 1:
            return False
        return self.before.get(id(frame.fast[slot]), (None, None))[1] == () and sys.getrefcount(frame.fast[slot]) == 4

    def _record(self, body, made, carried, rebound, last, elements, names) -> None:
        trace = self.tracer.computation
        captured: dict[str, Proxy] = {}
        carried_names = {old.name for old, _ in carried}
        for b in body:
            for p in b.flat_proxy_args:
                if p.name not in made and p.name not in carried_names and p.name not in captured:
                    captured[p.name] = p
        outputs = (*(new for _, new in carried), *elements, *(new for _, new in last))
        for p in outputs:  # (an output the body only passes on: ``h = x``, ``outs.append(x)``)
            if p.name not in made and p.name not in carried_names and p.name not in captured:
                captured[p.name] = p
        captured_args = (*captured.values(), *names.values())
        body_trace = TraceCtx(name=f"{trace.make_name('loop')}_body")
        body_trace.names = set(trace.names)
        body_trace.args = [self.index, *(old for old, _ in carried), *captured_args]
        body_trace.bound_symbols.extend(body)
        body_trace.bound_symbols.append(prims.python_return.bind(outputs, output=None))
        results = [TensorProxy.like(old) for old, _ in carried]
        stacked = [TensorProxy.like(e, shape=(self.count, *e.shape)) for e in elements]
        lasts = [TensorProxy.like(new) for _, new in last]
        tags = {MAY_ALIAS} | {t for b in body for t in b.sym.tags & {MAY_RAISE}}
        if any(_mutates(b) for b in body):  # it writes tensors in place: kept and never moved, as those ops are
            tags |= {IN_PLACE, DONT_DCE}
        name = body_trace.name.removesuffix("_body")
        impl = _loop_impl(body_trace, len(carried), len(elements))
        sym = Symbol(name=name, meta=None, id=f"loop.{name}", python_impl=impl, executor=_LOOP_EXECUTOR,
                     printer=_print_loop, tags=frozenset(tags))  # fmt: skip
        output = (*results, *stacked, *lasts)
        bsym = BoundSymbol(sym, (*self.bounds, tuple(self.initial.get(old.name, old) for old, _ in carried),
                           captured_args), {}, output,
                           tuple(body), source=body[0].source if body else None)  # fmt: skip
        trace.add_bound_symbol(bsym)
        remaining = iter(results)
        for slot, old, new in rebound:
            self.frame.fast[slot] = _with_results(old, new, remaining)
        for (slot, _), r in zip(last, lasts):
            self.frame.fast[slot] = r
        self.stacked = stacked


def _value(x) -> int:
    return x.value if isinstance(x, SymInt) else x


def _source(x) -> str:
    return x.expr if isinstance(x, SymInt) else repr(x)


def _count_and_last(start, stop, step: int) -> tuple:
    """How many times ``range(start, stop, step)`` runs and its last value (symbolic: no constraint recorded)."""
    if step > 0:
        count = stop - start if step == 1 else (stop - start + (step - 1)) // step
    else:
        count = start - stop if step == -1 else (start - stop + (-step - 1)) // -step
    return count, stop - step if abs(step) == 1 else start + step * (count - 1)


def _mutates(b: BoundSymbol) -> bool:
    return IN_PLACE in b.sym.tags or any(_mutates(s) for s in b.subsymbols)


class _LoopExecutor:
    """Marks the loop symbol as an operator of its own (claimed whole, through its printer, by the python
    executor: never decomposed into its body)."""

    name = "python"


_LOOP_EXECUTOR = _LoopExecutor()


def _holders(roots: list, containers: dict) -> collections.Counter:
    """id -> how many of ``roots`` and of the items of ``containers`` (``_fingerprints``'s) are that object."""
    held = collections.Counter(map(id, roots))
    for obj, _ in containers.values():
        t = type(obj)
        if issubclass(t, dict):
            items = [*obj.keys(), *obj.values()]
        elif issubclass(t, (list, tuple, set, frozenset, collections.deque)):
            items = obj
        elif t is types.CellType:
            try:
                items = [obj.cell_contents]
            except ValueError:
                items = []
        else:
            items = [_slot_value(obj, n) for n in _slot_names(t)]
        held.update(map(id, items))
    return held


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


def _carried_pairs(old, new, index: str) -> list[tuple[TensorProxy, TensorProxy]] | None:
    """The (before, after) tensors that a local carries from one iteration to the next: a tensor of the same
    metadata, or a tuple of such tensors and unchanged values (``state = (h, c)``); None where it is neither."""
    if isinstance(old, TensorProxy) and isinstance(new, TensorProxy):
        return [(old, new)] if _same_metadata(old, new, index) else None
    if type(old) is tuple and type(new) is tuple and len(old) == len(new):
        pairs = []
        for a, b in zip(old, new):
            inner = [] if a is b else _carried_pairs(a, b, index)
            if inner is None:
                return None
            pairs.extend(inner)
        return pairs
    return None


def _carriers(old, new):
    """The tensors and tuples of ``old`` that carry a value into the loop (``_carried_pairs``'s)."""
    if old is new:
        return
    yield old
    if type(old) is tuple:
        for a, b in zip(old, new):
            yield from _carriers(a, b)


def _with_results(old, new, results):
    """``new`` with each tensor it carries replaced by the loop's result (in ``_carried_pairs``'s order)."""
    if old is new:
        return new
    if isinstance(new, TensorProxy):
        return next(results)
    return tuple(_with_results(a, b, results) for a, b in zip(old, new))


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
        self.open_loops: list[_Loop] = []  # the loops being traced, innermost last
        self.stacked_lists: list[StackedList] = []  # made by the loops (refused when one outlives the program)

    def refused_loop(self) -> tuple | None:
        """The site of a loop this trace cannot keep, or None: one refused, one left open (a ``break``, an
        exception), or one whose appended list outlives the program's frames (returned, stored away)."""
        if self.loop_refused is not None:
            return self.loop_refused[0]
        if self.open_loops:
            return self.open_loops[-1].site
        for stacked in self.stacked_lists:
            if sys.getrefcount(stacked) > 3:  # (this list, the loop variable and the argument)
                return stacked._loop.site
        return None

    def _range(self, *args, **kwargs):
        from thunder.core import introspection

        loop = None
        bounds = (0, args[0], 1) if len(args) == 1 else (*args, 1)[:3]
        if (
            not kwargs and 1 <= len(args) <= 3 and type(bounds[2]) is int and bounds[2]
            and all(type(b) in (int, SymInt) for b in bounds) and SymInt in map(type, bounds[:2])
        ):  # fmt: skip
            loop = self._symbolic_loop(bounds)
        if loop is not None:
            return loop
        return introspection.lookaside(range)(*args, **kwargs)

    def _symbolic_loop(self, bounds: tuple) -> _Loop | None:
        runtime = current_runtime()
        if runtime is None or not runtime.frames or len(self.computation.scopes) != 1:
            return None
        frame = runtime.frames[-1]
        if frame.locals is not None or frame.code.co_flags & (0x20 | 0x80 | 0x100 | 0x200):  # generators, coroutines
            return None
        slot = _loop_target(frame)
        site = (frame.code, frame.pc)
        if slot is None or site in self.unroll:
            return None
        retry = next((r for r in self.unroll if type(r) is _Retry and r.site == site), None)
        count, last = _count_and_last(*bounds)
        if _value(count) <= 0 or not count > 0:  # (the second records the constraint: the body runs at least once)
            return None
        return _Loop(self, bounds, count, last, frame, site, slot, retry)

    def _stack(self, *args, **kwargs):
        """``torch.stack``: of a list the loop appended to, the loop's stacked output moved to ``dim``."""
        return self._joined(torch.stack, args, kwargs)

    def _cat(self, *args, **kwargs):
        """``torch.cat``: of a list the loop appended to, the loop's stacked output moved to ``dim`` and merged
        into it."""
        return self._joined(torch.cat, args, kwargs)

    def _joined(self, fn, args: tuple, kwargs: dict):
        tensors = args[0] if args else kwargs.get("tensors")
        if type(tensors) is not StackedList:
            return self.symbol_lookup(fn)(*args, **kwargs)
        loop, stacked = tensors._loop, tensors._stacked
        if stacked is None:
            loop.refuse("a list appended to in a loop inside the loop's body is used after the loop")
        dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
        ndim = stacked.ndim - (fn is torch.cat)  # (that of the result)
        if len(args) > 2 or set(kwargs) - {"tensors", "dim"} or type(dim) is not int or not -ndim <= dim < ndim:
            loop.refuse(f"{fn.__name__} of the loop's list with other arguments than a constant dim in range")
        # The loop stacked its list's tensors when it ended; eager stacks them now: a write in place since (into
        # the carried tensor, or a tensor an element is a view of) would be seen by eager's stack only.
        scopes = self.computation.scopes
        if any(_mutates(b) for b in (*scopes[0][tensors._after :], *(b for s in scopes[1:] for b in s))):
            loop.refuse(f"a tensor is written in place between the loop and {fn.__name__} of its list")
        lookup = self.symbol_lookup
        dim %= ndim
        joined = lookup(torch.movedim)(stacked, 0, dim)
        if fn is torch.cat:
            joined = lookup(torch.flatten)(joined, dim, dim + 1)
        return lookup(torch.Tensor.contiguous)(joined)
