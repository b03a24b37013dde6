"""Tracing: the thunder layer on the interpreter.

The user's function runs under ``thunder.core.interpreter``. Its inputs become proxies that
remember where they came from (provenance); torch calls are diverted to torch-language
symbols and recorded in the computation trace; Python values the program reads from outside
(arguments, globals, closure cells, attributes of input objects) are specialised, and the
prologue trace unpacks them and checks what the computation assumed.

This module holds ``Tracer``: its state, the interpreter callbacks it installs, and the run that
produces the two traces. Its parts, one concern each, are mixins in their own modules:

- ``thunder.core.provenance``: what an outside value becomes; the prologue's unpacking and checks of the
  arguments and of every outside value (Note [Provenance]);
- ``thunder.core.outside_reads``: the program's reads of globals, closure cells and attributes
  (Note [Module members]);
- ``thunder.core.side_effects``: outside containers, and assignments to outside state, replayed on every
  call (Note [Outside containers]);
- ``thunder.core.special_calls``: the callables the tracer handles itself: torch symbols, ``copy``,
  ``checkpoint``, ``torch.autograd.Function``, module calls (Note [Module calls],
  Note [Copies of outside objects]);
- ``thunder.core.program_output``: ``print``, writes to ``sys.stdout``, warnings and logging, replayed on every
  call (Note [Warnings]);
- ``thunder.core.symbolic_numbers``: symbolic numbers, numbers the prologue draws on every call, and the
  constraints on them;
- ``thunder.core.user_code``: the user's code told from a library's, and the user's source location.

Layer: tracing. Imports: core only. Which symbol a torch callable stands for comes from
``symbol_lookup`` (filled by the torch language and the entry layer) or the lookup the caller
hands to ``Tracer``; the option enums come from ``thunder.core.options``.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import math
import types
import warnings
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import data_dependent, devices, dtypes, prims, proxies, replays, torch_state
from thunder.core.copies import CopiesMixin
from thunder.core.errors import (
    InternalError,
    SharpEdgeError,
    ThunderError,
    ThunderIndexError,
    ThunderOverflowError,
    ThunderRuntimeError,
    ThunderTypeError,
    ThunderValueError,
)
from thunder.core.interpreter import InterpreterCallbacks, InterpreterError, conversions, generator_code, interpret
from thunder.core.interpreter.runtime import innermost_frame_objects
from thunder.core.lifting import holds
from thunder.core.loops import LoopsMixin
from thunder.core.options import CACHE_OPTIONS, SHARP_EDGES_OPTIONS
from thunder.core.outside_reads import OutsideReadsMixin
from thunder.core.prims.python import SymbolicOutcome, tensor_value
from thunder.core.program_output import ProgramOutputMixin, warnings_state
from thunder.core.provenance import ProvenanceMixin
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import register_containers, tree_leaves, tree_map
from thunder.core.shape_history import ShapeHistory
from thunder.core.side_effects import LazyContainer, SideEffectsMixin
from thunder.core.special_calls import SpecialCallsMixin
from thunder.core.symbol import IN_PLACE, SourceLocation, Symbol
from thunder.core.symbol_lookup import symbol_for
from thunder.core.symbolic import SymFloat, SymInt, recording_constraints
from thunder.core.symbolic_numbers import GeneratorDraw, SymbolicNumbersMixin, pin_native_operands
from thunder.core.trace import TraceCtx, draws, may_raise, tracectx
from thunder.core.tracectx import current_source_location, source_location_provider
from thunder.core.transforms.autodiff import written_in_place
from thunder.core.user_code import source_location

# Thunder's mirrors of eager's argument checks (an op's meta rejecting a shape, a dtype, an index): eager raises there too.
_EAGER_ERRORS = (ThunderTypeError, ThunderValueError, ThunderIndexError, ThunderOverflowError)


# What a program asks of a tensor that must have one element (``t.item()``, ``bool(t)``, ``int(t)``)
_ONE_ELEMENT = frozenset({"bool", "item", "int", "float", "index"})


class Tracer(
    ProvenanceMixin, OutsideReadsMixin, SideEffectsMixin, SpecialCallsMixin, CopiesMixin, ProgramOutputMixin,
    SymbolicNumbersMixin, LoopsMixin,
):
    """The state of one trace acquisition: the two traces being built and the provenance map.

    Note [What a trace relied on]
    Everything the program reads from outside goes through ``unpack_value`` with a prologue
    expression (its *path*: an argument, a global, a closure cell, an attribute of an object that
    has a path, a captured constant), which emits the prologue's check for it. Each path is read
    and checked once (``_reads``); a path the program assigned is the program's own from then on
    (``_written``). Outside lists, dicts and sets are copied for the program (the prologue
    unpacks their items); a copy the program changed is written back at the end of every call.
    Assignments to outside globals, cells and attributes are undone when tracing ends and
    replayed by the computation, in order, with each call's values; so are ``print`` calls.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        cache_option: CACHE_OPTIONS,
        sharp_edges: SHARP_EDGES_OPTIONS,
        record_history: bool = False,
        symbol_lookup: Callable[[Callable], Symbol | None] = symbol_for,
        eager_impl: Callable[[Symbol], Callable | None] | None = None,
        outcomes: tuple = (),
        shape_history: ShapeHistory | None = None,
        automatic_dynamic: bool = False,
        unroll: frozenset = frozenset(),
    ):
        # ``symbol_lookup(fn)``: the symbol a call of ``fn`` is recorded as, or None (also for an
        # unhashable ``fn``); by default the tables of ``thunder.core.symbol_lookup``.
        self.fn = fn
        self._init_loops(unroll)  # ``unroll``: the loops refused before (Note [Loops over a symbolic range])
        self.symbolic = cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES
        # Note [Automatic dynamic shapes] in thunder.core.shape_history: the sizes seen so far (updated), and
        # whether this trace makes the sizes that changed symbolic.
        self.shape_history = shape_history
        self.automatic_dynamic = automatic_dynamic and shape_history is not None
        # A data-dependent number that changed since an earlier entry is symbolic whatever this miss was (an
        # optimizer's second step misses on its new state, and its step count has changed by then)
        self.dynamic_outcomes = shape_history is not None and cache_option is CACHE_OPTIONS.CONSTANT_VALUES
        if shape_history is not None:
            shape_history.begin_entry()
        self.checks = cache_option is not CACHE_OPTIONS.SAME_INPUT
        self.sharp_edges = sharp_edges
        self.record_history = record_history
        self.symbol_lookup = symbol_lookup
        self.computation = TraceCtx(fn, name="computation")
        self.computation.follows_autocast = True
        self.computation.eager_failure = self._eager_failure
        self.computation.in_program_try = lambda: any(map(_in_try, innermost_frame_objects()))
        self.prologue = TraceCtx(fn, name="prologue")
        self.prologue.varargs, self.prologue.varkwargs = "args", "kwargs"
        self.inputs: list[tuple[Proxy, Any]] = []  # (prologue proxy, what the computation sees), in order
        self.dims: list[tuple[Proxy, SymInt]] = []  # symbolic dims of input tensors (symbolic values)
        self.constraints: list[str] = []
        self._recorded: dict[str, object] = {}  # the constraints being recorded (symbolic values), by source
        self._checked_early: set[str] = set()  # constraints checked before the end of the prologue
        self.grad_mode_switched = False
        self.torch_state_read: set[str] = set()  # keys of torch_state.TORCH_STATE the trace read (Note [Torch state])
        self.abc_reads = torch_state.AbcReads()  # what the program asked ABCs (Note [Torch state])
        self._provenance: dict[int, Proxy] = {}  # id(outside object) -> prologue proxy
        self._proxy_for: dict[int, Any] = {}  # id(outside object) -> what the program sees instead
        self._keepalive: list[Any] = []  # outside objects, kept so their ids stay unique
        self._copied_from: dict[int, tuple[Proxy, Any]] = {}  # id(copy made for this call) -> (holder, original)
        self._global_hooks_checked = False  # the prologue checks that no module hooks are registered globally
        self._reads: dict[tuple, Any] = {}  # path -> what the program saw (see Note [What a trace relied on])
        self._written: set[tuple] = set()
        self._undo: list[Callable[[], None]] = []
        # key -> (current value, value at the start, stores) per open checkpointed region, and those it restored
        # (Note [Stores a checkpointed region undoes] in thunder.core.side_effects)
        self._store_regions: list[dict[tuple, tuple]] = []
        self._restored_by_regions: list[tuple] = []
        self._arrays_shared: list[tuple] = []  # (array, its values, torch function) (Note [Tensors of outside arrays])
        self._internal_cells: set[int] = set()  # cells the program made itself
        self._internal_objects: set[int] = set()  # objects the program made itself (see _is_outside)
        self._made_parameters: dict[int, tuple] = {}  # (parameter, line): Note [A parameter the program makes and uses]
        self._object_dicts: dict[int, tuple[dict, Any]] = {}  # id(__dict__ or the program's copy) -> (__dict__, object)
        self._dict_copies: dict[int, dict] = {}  # id(object) -> the program's copy of its __dict__ (same Note)
        self._copies: dict[int, tuple[Proxy, Any, Any]] = {}  # id(copy) -> (holder, copy, its first contents)
        self._copy_changed_after: dict[int, Any] = {}  # id(copy) -> the last bound symbol before its last change
        self._stored_values: list = []  # (bound symbol, argument position, value): the stores, escaped again at the end
        self._lazy: dict[int, LazyContainer] = {}  # id(copy) -> an outside container not read yet
        self._copy_originals: dict[int, Any] = {}  # id(copy) -> the outside container it copies (read already)
        # id(copy) -> its contents when the program read it, after the changes it made before (replayed where made)
        self._copy_at_read: dict[int, Any] = {}
        self._rebuilt: dict[int, Proxy] = {}  # id(copy) -> holder of an outside dict subclass the program sees
        self._buffers: list[tuple] = []  # outside buffers: (object, its contents, where it is read)
        self._constants: dict[int, Proxy] = {}  # id(object) -> prologue proxy capturing it by identity
        self._object_inputs: dict[str, Proxy] = {}  # prologue name -> the computation's proxy for that object
        self._guarded_functions: set[int] = set()
        self._definition = None  # where the program is defined (named in errors about its arguments)
        self._calls_instead: dict[int, Callable] = {}  # id(outside callable) -> what its calls run (_call_instead)
        self._asked_hasattr: set[tuple] = set()  # (id(outside object), name), ("global", id(globals), name): checked once
        self._tensor_inputs: dict[int, tuple[Proxy, torch.Tensor]] = {}  # id(proxy) -> (holder, real tensor)
        self._tensor_attributes: dict[int, dict[str, Any]] = {}  # id(proxy) -> attributes the program set on it
        self._hoisted: dict[str, str] = {}  # prologue name -> the call that makes it (random.random)
        self._module_paths: dict[int, str] = {}  # id(nn.Module) -> qualified name under the input module
        self._member_paths: dict[str, str] = {}  # prologue name of a parameter or buffer -> its qualified name
        self._warnings_state = warnings_state()  # the caller's (Note [Warnings] in thunder.core.program_output)
        # name -> (the bound symbols it was recorded in, where the call ended)
        # (Note [Printing a jitted function's result] in thunder.core.nested_jit)
        self._jitted_results: dict[str, tuple[list, int]] = {}
        self.interpreted: Callable | None = None
        self.program_raised: Exception | None = None  # Note [A program that raises] in thunder.compiler
        # Note [A run-time failure the program handles] in thunder.compiler: an op was recorded inside a ``try`` body
        # of the program's, or a per-call draw after an op that may fail at run time
        self.ops_in_try = False
        self.draws_after_may_raise = False
        # ``_raise_an_earlier_failure`` checked the computation's ops before this one; grad mode after them
        self._raise_checked: tuple[int, bool] = (0, torch.is_grad_enabled())
        # Note [Data-dependent values] in thunder.core.data_dependent: ``eager_impl(sym)`` runs a symbol on
        # real tensors (None: the program cannot ask for tensor values); ``forced`` are the outcomes known
        # for these inputs, ``outcomes`` those the trace continued with.
        self.eager_impl = eager_impl
        self._evaluations = data_dependent.Evaluations()  # what they computed (Note [Evaluating once per trace])
        self._real_inputs_read: tuple[int, dict[str, torch.Tensor]] = (0, {})  # (inputs read, their tensors by name)
        self.forced = tuple(outcomes)
        self.outcomes: list = []
        self.symbolic_outcomes: dict[str, tuple[SymbolicOutcome, Proxy, int]] = {}  # by name, in order

    def sharp_edge(self, what: str, *, replayed: bool = False) -> None:
        """A sharp edge (``what``, the trace capturing outside state): allowed, warned of or refused per ``sharp_edges``."""
        if self.sharp_edges is SHARP_EDGES_OPTIONS.ALLOW:
            return
        loc = source_location()
        where = f" at {loc}" if loc else ""
        if replayed:
            consequence = "thunder replays it on every call, after the ops before it"
        else:
            consequence = "a value read from outside is guarded (a change recompiles)"
        msg = (
            f"{what}{where}. The trace captures it when the function is compiled: {consequence}. Pass the value "
            "as an argument (or return it) instead, or use sharp_edges='allow' to accept this."
        )
        if self.sharp_edges is SHARP_EDGES_OPTIONS.ERROR:
            raise SharpEdgeError(msg)
        warnings.warn(msg, stacklevel=2)

    # --- interpreter callbacks --------------------------------------------------------------
    def operands(self, inst, values) -> None:
        """Interpreter callback (Note [Operand reads]): a symbolic number that CPython's own operator would
        read natively is pinned; an outside container used natively is read."""
        pin_native_operands(inst, values)
        if self._lazy:
            self._read_operand_containers(inst, values)

    def read_value(self, p: TensorProxy, kind: str) -> Any:
        """The Python value the program asks of ``p`` (Note [Data-dependent values]), or None where
        it cannot be had: the trace continues with it and the computation checks it."""
        trace = self.computation
        if self.eager_impl is None or len(trace.scopes) > 1:  # inside a region traced on its own
            return None
        index = len(self.outcomes)
        # (a value asked of a tensor that has not one element raises, as eager's: evaluated, not handed the value
        # an earlier trace read at this index, which a ``try`` caught there)
        if index < len(self.forced) and (kind not in _ONE_ELEMENT or p.numel() == 1):
            value = self.forced[index]
        else:
            inputs = self._real_inputs()
            real = data_dependent.evaluate(trace.bound_symbols, p, inputs, self.eager_impl, self._evaluations)
            if real is None:
                return None
            value = tensor_value(real, kind)
        if self.sharp_edges is not SHARP_EDGES_OPTIONS.ALLOW:
            loc = source_location(self._module_paths)
            asked = "the truth value" if kind == "bool" else f"{kind}()"
            msg = (
                f"Data-dependent value: the program needs {asked} of tensor {p.name}{f' at {loc}' if loc else ''}. "
                "thunder splits the program there: each call checks the value and runs the trace made for it. Use "
                "sharp_edges='allow' to accept this, or torch.where / masking to keep the value a tensor."
            )
            if self.sharp_edges is SHARP_EDGES_OPTIONS.ERROR:
                raise SharpEdgeError(msg)
            warnings.warn(msg, stacklevel=2)
        earlier = tuple(proxy for _, proxy, _ in self.symbolic_outcomes.values())
        if self._symbolic_outcome(index, kind, value):
            outcome = SymbolicOutcome(f"u{index}", type(value))
            proxy = prims.check_outcome(p, kind, outcome, index, earlier)
            outcome.name = proxy.name
            self.symbolic_outcomes[proxy.name] = (outcome, proxy, value)
            self.outcomes.append(outcome)
            return (SymInt if type(value) is int else SymFloat)(value, proxy.name, proxies=(proxy,))
        prims.check_outcome(p, kind, value, index, earlier)
        self.outcomes.append(value)
        return value

    def _real_inputs(self) -> dict[str, torch.Tensor]:
        """The tensors of the trace's inputs by name, for evaluations (added to as the program reads inputs: a
        detector asks hundreds of values of a trace with hundreds of inputs)."""
        known, real = self._real_inputs_read
        for _, q in self.inputs[known:]:
            if id(q) in self._tensor_inputs:
                real[q.name] = self._tensor_inputs[id(q)][1]
        self._real_inputs_read = (len(self.inputs), real)
        return real

    def _symbolic_outcome(self, index: int, kind: str, value) -> bool:
        """Whether the trace keeps outcome ``index`` symbolic: an int above 1 (or the float ``t.item()`` of a float
        tensor: an optimizer's step count), under symbolic values always, under automatic dynamic shapes once it (or
        another asked at its line) changed between entries (Note [Symbolic data-dependent sizes] in
        thunder.core.data_dependent)."""
        if not (kind in ("int", "item", "index") and type(value) is int or kind == "item" and type(value) is float):
            return False
        if self.symbolic:  # cache="symbolic values": every size is symbolic from the first trace
            return type(value) is float or value > 1
        history = self.shape_history
        if history is None:
            return False
        where = current_source_location()
        site = None if where is None else (where.filename, where.lineno)
        symbolic = self.dynamic_outcomes and history.symbolic_outcome(index, site, value)
        history.record_outcome(index, value, symbolic)
        return symbolic

    def _raise_an_earlier_failure(self) -> None:
        """The program raised while tracing, at a line after ops that eager could fail at run time (an index out
        of range, ``MAY_RAISE``), or is about to take an item from an iterator argument that cannot be put back
        (Note [Iterator arguments]): eager would have failed at the first of those that fails on these inputs, so
        that error is raised instead (run on the real inputs, as Note [Data-dependent values] does)."""
        trace = self.computation
        if self.eager_impl is None or len(trace.scopes) > 1 or not self._inputs_as_traced():
            return
        inputs = self._real_inputs()
        bsyms = trace.bound_symbols
        start, grad = self._raise_checked
        for i in range(start, len(bsyms)):
            bsym = bsyms[i]
            if bsym.sym is prims.set_grad_enabled:
                grad = bsym.args[0]
            for target in written_in_place(bsym) if grad else ():
                real = self._tensor_inputs.get(id(target), (None, None))[1]
                if real is not None and real.requires_grad and real.is_leaf:  # eager refuses to change it in place
                    self.program_raised = RuntimeError(
                        "a leaf Variable that requires grad is being used in an in-place operation."
                    )
                    raise self.program_raised
            outs = [o for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy)]
            # (an in-place op fails on a tensor whose elements share memory: an expanded input)
            if outs and (may_raise(bsym) or written_in_place(bsym)):
                try:
                    data_dependent.evaluate(bsyms[: i + 1], outs[0], inputs, self.eager_impl, self._evaluations)
                except Exception as earlier:
                    self.program_raised = earlier  # the program's own error: the call runs eagerly, with its effects
                    raise earlier from None
        self._raise_checked = (len(bsyms), grad)

    def _inputs_as_traced(self) -> bool:
        """Whether the real tensors of the inputs have the shapes the trace gave them, so that the ops recorded so far
        can be run on them: a ZeRO-3 module's parameter is traced whole, and its real tensor is this rank's shard."""
        for _, q in self.inputs:
            found = self._tensor_inputs.get(id(q))
            if found is not None and isinstance(q, TensorProxy):
                real = found[1]
                if len(q.shape) != real.dim() or any(type(d) is int and d != n for d, n in zip(q.shape, real.shape)):
                    return False
        return True

    # Note [An op's failure the program catches]
    # An op whose meta rejects its arguments raises a ThunderError, which is also the ValueError, RuntimeError or
    # IndexError eager may raise, and says where and why. A program that catches it (``try: x.view(3, -1) except
    # ValueError:``) must see eager's: ``view`` raises a RuntimeError, which that handler does not catch, and
    # ``type(e)``, ``str(e)`` are eager's. So where the failure reaches a ``try``'s handler of the program
    # (``_in_try``), the op runs eagerly on meta tensors of the arguments' shapes (symbolic sizes pinned: eager's error
    # depends on them) and dtypes, then, where it fails
    # there and the tensors are small, on real ones (a meta kernel's message may differ from the device's), and
    # eager's exception is raised instead. A failure eager does not make on those (one that depends on values or
    # strides) stays thunder's.
    def _eager_failure(self, sym: Symbol, args: tuple, kwargs: dict) -> BaseException | None:
        impl = self.eager_impl(sym) if self.eager_impl is not None else None
        if impl is None or not any(map(_in_try, innermost_frame_objects())):
            return None
        shapes = {id(t): tuple(int(d) for d in t.shape) for t in tree_leaves((args, kwargs))
                  if isinstance(t, TensorProxy)}  # fmt: skip
        failure = None
        for device in ("meta", None):
            if device is None and sum(math.prod(shape) for shape in shapes.values()) > 1 << 16:
                break

            def tensor(v, device=device):
                if isinstance(v, TensorProxy):
                    where = device or devices.to_torch_device(v.device)
                    return torch.zeros(shapes[id(v)], dtype=dtypes.to_torch_dtype(v.dtype), device=where)
                return getattr(v, "value", v) if isinstance(v, Proxy) else v

            try:
                a, k = tree_map(tensor, args), tree_map(tensor, kwargs)
                impl(*a, **k)
            except Exception as e:  # noqa: BLE001 - whatever eager raises is what the program catches
                if device is None:
                    return e
                # no meta kernel, a value asked of a meta tensor: the device decides. (A meta kernel that accepts the
                # op may still be refused by the device's, a dtype it has no kernel for: ``@`` of bool tensors.)
                if not isinstance(e, NotImplementedError) and "meta" not in str(e).lower():
                    failure = e
        return failure

    def _locating(self):
        """The source location of the op being recorded; notes whether the program may handle its failure."""
        if not self.ops_in_try and any(map(_in_try, innermost_frame_objects())):
            self.ops_in_try = True
        return source_location(self._module_paths)

    def _made_effects(self) -> bool:
        """Whether the program, so far, did something that eager leaves done when it raises later: a print, a store
        or a write outside (a replay), an in-place op, a draw from a random generator."""
        if self._hoisted or any(b.sym is prims.unpack_call and type(b.args[0]) is GeneratorDraw
                                for b in self.prologue.bound_symbols):  # fmt: skip
            return True
        return any(
            b.sym in replays.REPLAYS or IN_PLACE in b.sym.tags or draws(b) for b in self.computation.bound_symbols
        )

    # --- running ----------------------------------------------------------------------------
    def trace(self, args: tuple, kwargs: dict) -> Any:
        """Runs the program on proxies; returns its (proxy) result."""
        callbacks = InterpreterCallbacks(
            load_global=self.load_global,
            store_global=self.store_global,
            load_attr=self.load_attr,
            missing_attr=self.missing_attr,
            missing_global=self.missing_global,
            store_attr=self.store_attr,
            store_subscr=self.store_subscr,
            load_deref=self.load_deref,
            store_deref=self.store_deref,
            make_cell=self.make_cell,
            made_object=self.made_object,
            operands=self.operands,
        )
        program = self.fn.func if isinstance(self.fn, functools.partial) else self.fn
        if not isinstance(program, (types.FunctionType, types.MethodType)) and (
            isinstance(self.fn, functools.partial) or isinstance(getattr(program, "__self__", None), torch.Tensor)
        ):  # functools.partial(torch.add, alpha=2), ``x.add`` of a tensor: the call itself is the program
            program = _calling(program)
        self.interpreted = interpret(
            program, fn_lookaside=self.lookaside, callbacks=callbacks, record_history=self.record_history
        )
        dtypes.default_dtype_was_read.set(False)
        grad_enabled = torch.is_grad_enabled()
        state_at_entry, autocast_at_entry = torch_state.state_now()  # Note [Torch state]
        provider = self._locating
        active = _active_tracer.set(self)
        try:
            with (
                tracectx(self.computation),
                source_location_provider(provider),
                recording_constraints() as cs,
                _restoring_grad_mode(grad_enabled),
            ):
                self._recorded = cs
                seen_args, seen_kwargs = self.bind_arguments(args, kwargs)
                try:
                    returned = self.interpreted(*seen_args, **seen_kwargs)
                except Exception as e:
                    if not isinstance(e, (ThunderError, InterpreterError, InternalError)):
                        self.program_raised = e  # Note [A program that raises] in thunder.compiler
                    elif not isinstance(e, (InterpreterError, InternalError)):
                        self._raise_an_earlier_failure()
                        if isinstance(e, _EAGER_ERRORS) and self._made_effects():
                            self.program_raised = e  # eager's argument check, after effects: the call runs eagerly
                    raise
                self._exit_context_managers_left_entered(returned)
                memo: dict[int, Any] = {}  # what the program made and stores or returns: one object each
                self.lift_stored_objects_again(memo)
                result = self.escaping(returned, memo)
                self._refuse_parameters_leaving(returned)
                register_containers(result)
                _check_result(result)
                self._write_back_copies(memo)
                self._check_stores_undone()
                self._check_arrays_shared()
                for setter, value in torch_state.set_since(state_at_entry):  # Note [Torch state the program sets]
                    prims.set_torch_state(setter, value)
                prims.python_return(result)
        finally:
            _active_tracer.reset(active)
            for undo in reversed(self._undo):
                undo()
            torch_state.put_back(state_at_entry)
            self._evaluations = data_dependent.Evaluations()  # the values it computed: not kept past tracing
        self.constraints = self._constraints_on_outcomes(cs)
        self._refuse_branches_on_hoisted(cs)
        self._check_reads_of_written_state()
        self._check_strides()
        self._check_buffers()
        read = self.torch_state_read
        if dtypes.default_dtype_was_read.get():
            read.add("torch.get_default_dtype()")
        if self.grad_mode_switched or self.computation.grad_mode_read:
            # the recorded switches restore the mode the trace began in; requires_grad answers depend on it
            read.add("torch.is_grad_enabled()")
        if self.computation.inference_mode_read or self.grad_mode_switched or (
            "torch.is_grad_enabled()" in read
            and (state_at_entry["torch.is_grad_enabled()"] or state_at_entry["torch.is_inference_mode_enabled()"])
        ):
            # grad mode records autograd only outside inference mode (``enable_grad()`` in the program, or around
            # the call inside ``inference_mode()``): the answers depend on both. A trace made with grad off outside
            # inference mode records no autograd, which holds inside it too (where grad on fails the grad check).
            read.add("torch.is_inference_mode_enabled()")
        state_at_entry["abc.get_cache_token()"] = self.abc_reads.token_to_check()
        self.abc_reads = torch_state.AbcReads()  # the objects it asked about are the program's: not kept past tracing
        for expr, value in state_at_entry.items():
            if expr in read:
                self._check(prims.check_torch_state, expr, value)
        for device_type in sorted(self.computation.autocast_read):  # Note [Autocast] in thunder.core.trace
            enabled, dtype = autocast_at_entry.get(device_type, (False, None))
            self._check(prims.check_autocast, device_type, enabled, dtype if enabled else None)
            if enabled or self.computation.autocast_cast:
                self.computation.decorators.append(f"torch.autocast({device_type!r}, enabled=False)")
        if self.checks:
            for expr in self.constraints:
                if expr not in self._checked_early:
                    self._check_constraint(expr)
        self.computation.args = [p for _, p in self.inputs] + [s for _, s in self.dims]
        parameters = [prims.unpack_trivial.bind(p, output=None) for _, p in self.inputs if isinstance(p, TensorProxy)]
        self.computation.bound_symbols[:0] = parameters
        replays.place_after_their_values(self.computation)
        self.moved_replays = bool(self.outcomes) and data_dependent.order_for_checks(self.computation)
        return result

    # Note [A context manager entered and never exited]
    # ``cm = torch.random.fork_rng(); cm.__enter__()`` with no exit: eager's ``cm`` dies when the function returns,
    # which closes its generator, whose ``finally`` runs then (``fork_rng`` puts back the random state). The tracer
    # keeps the objects the program made alive until it is released, when that ``finally`` ran interpreted under a
    # released tracer ("Exception ignored ... '_provenance'") and the random state stayed as the program left it. So
    # when the program returns, each generator-based context manager it made and left entered is closed there, under
    # the tracer: the ``finally`` is traced as the last thing the call does, as eager runs it. One the program returns
    # lives on in eager, to be closed whenever it is collected, which a trace cannot place: refused.
    def _exit_context_managers_left_entered(self, returned: Any) -> None:
        left = [
            obj for obj in self._keepalive
            if type(obj) is contextlib._GeneratorContextManager and getattr(obj.gen, "gi_suspended", False)
        ]  # fmt: skip
        if not left:
            return
        leaves = {id(leaf) for leaf in tree_leaves(returned)}
        returned_entered = [cm for cm in left if id(cm) in leaves]
        for cm in left:
            cm.gen.close()  # (a refused one too: nothing of it may run once the tracer is released)
        if returned_entered:
            raise ThunderRuntimeError(
                f"the jitted function returns a context manager it entered and did not exit "
                f"({returned_entered[0].gen.__qualname__}): eager exits it when it is collected, which a trace cannot "
                "place. Exit it inside the function (a with statement), or enter it outside."
            )

    def release(self) -> None:
        """Lets go of the program's objects once the entry is compiled: the tracer and the interpreted
        function refer to each other, and that cycle would keep this call's inputs alive until the
        garbage collector runs."""
        vars(self).clear()

    def finish_prologue(self, used_names: set[str]) -> list:
        """Ends the prologue with the computation's inputs; returns the computation's parameters.

        Symbolic dims are passed only when the final computation uses them. Calls the prologue makes
        for the program (``random.random()``) come last, after every check, so a call that another
        entry serves (or that recompiles) draws once, as eager does; no check depends on them.
        """
        bsyms = self.prologue.bound_symbols
        draws = [b for b in bsyms if b.sym is prims.unpack_call and (b.args[3] is None or b.args[3].name in self._hoisted)]
        if draws:
            bsyms[:] = [b for b in bsyms if not any(b is d for d in draws)] + draws
        pairs = list(self.inputs) + [(d, s) for d, s in self.dims if s.name in used_names]
        self.prologue.bound_symbols.append(prims.python_return.bind(tuple(h for h, _ in pairs), output=None))
        self._returned = pairs
        return [p for _, p in pairs]

    def first_inputs(self) -> tuple | None:
        """What the finished prologue returns for the call this trace was made from, known from tracing (Note
        [The first call runs no prologue] in thunder.compiler); None where the prologue does more than read and
        check (draws numbers, pulls items from iterators) or a value is not known here. A copy of an outside object
        that the prologue makes per call is the one tracing made (Note [Copies of outside objects]): made again,
        a ``__copy__`` of the user's ran twice on the first call."""
        if any(b.sym not in _READS_AND_CHECKS and not copies_per_call(b) for b in self.prologue.bound_symbols):
            return None
        held = {}
        for obj in self._keepalive:  # (the outside object first, then the program's copy of it: Note [List and tuple
            if id(obj) in self._provenance:  # subclasses] in thunder.core.provenance)
                held.setdefault(self._provenance[id(obj)].name, obj)
        values = []
        for holder, seen in self._returned:
            if isinstance(seen, TensorProxy) and id(seen) in self._tensor_inputs:
                values.append(self._tensor_inputs[id(seen)][1])
            elif isinstance(seen, (SymInt, SymFloat)):
                values.append(seen.value)
            elif holder.name in held:
                values.append(held[holder.name])
            else:
                return None
        return tuple(values)


# What a prologue may do for its first call to be skipped: read the call's inputs and check them, nothing else.
_READS_AND_CHECKS = frozenset({
    prims.unpack_sequence, prims.unpack_key, prims.unpack_attr, prims.unpack_raw_attr, prims.unpack_module_member, prims.unpack_global,
    prims.unpack_cell, prims.unpack_constant, prims.unpack_environ, prims.unpack_shape, prims.unpack_trivial, prims.check_args_structure,
    prims.check_tensor, prims.check_tensor_rank, prims.check_value, prims.check_identity, prims.check_type,
    prims.check_torch_state, prims.check_autocast, prims.check_is, prims.check_hasattr, prims.check_global_absent,
    prims.check_class_attr, prims.check_no_hooks,
    prims.check_expr, prims.check_keys, prims.python_return, prims.comment,
})  # fmt: skip


conversions.NATIVE_VALUE_TYPES.append(Proxy)  # (its dunders record ops: Note [Dunders called by C functions])


def _in_try(frame) -> bool:
    """Whether an exception raised at ``frame``'s instruction now reaches a ``try``'s ``except`` or ``finally`` of
    its code, or a ``with``'s exit that may suppress it (``contextlib.suppress``, a user's): past the handlers that
    only clean up and re-raise, and torch's context managers (grad mode, autocast, profiling ranges), which never
    suppress."""
    info = frame.info
    ops = info.instructions
    entry = info.exc_handlers[frame.pc - 1]
    for _ in range(16):  # (nested handlers; a program nests fewer)
        if entry is None:
            return False
        target, depth, _ = entry
        if ops[target].opname == "PUSH_EXC_INFO":
            if ops[target + 1].opname != "WITH_EXCEPT_START":
                return True
            exit_fn = frame.stack[depth - 1] if 0 < depth <= len(frame.stack) else None  # (the with's ``__exit__``)
            if not getattr(exit_fn, "__module__", None) or not exit_fn.__module__.startswith("torch"):
                return True
        # a with's exit, or a cleanup that re-raises: the handler of its RERAISE is the next one out
        reraise = next((i for i in range(target, len(ops)) if ops[i].opname == "RERAISE"), None)
        if reraise is None:
            return False
        entry = info.exc_handlers[reraise]
    return False


def copies_per_call(bsym) -> bool:
    """Whether ``bsym`` is a prologue's copy of an outside object (Note [Copies of outside objects])."""
    return bsym.sym is prims.unpack_call and bsym.args[0] in (copy.copy, copy.deepcopy)


def _calling(fn: Callable) -> Callable:
    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    return call


_active_tracer: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("thunder_active_tracer", default=None)


def _read_grad(p: TensorProxy) -> Any:
    tracer = _active_tracer.get()
    return tracer.read_grad(p) if tracer is not None else None


proxies.grad_reader = _read_grad


def _read_attribute(p: TensorProxy, name: str) -> Any:
    tracer = _active_tracer.get()
    if tracer is None:
        raise AttributeError(f"'TensorProxy' object has no attribute {name!r}")
    return tracer.read_tensor_attribute(p, name)


proxies.attribute_reader = _read_attribute


def _while_tracing(method: str, what: str) -> Callable:
    """A proxy's hook (``proxies.hook_recorder``, ...) that calls the active tracer's ``method``: ``what`` means
    nothing outside tracing."""

    def call(p: TensorProxy, *args: Any) -> Any:
        tracer = _active_tracer.get()
        if tracer is None:
            raise ThunderRuntimeError(f"{what} is only meaningful while thunder.jit traces a function")
        return getattr(tracer, method)(p, *args)

    return call


proxies.hook_recorder = _while_tracing("register_hook", "Tensor.register_hook of a traced value")
proxies.requires_grad_setter = _while_tracing("set_requires_grad", "Tensor.requires_grad_")


def _read_value(p: TensorProxy, kind: str) -> Any:
    tracer = _active_tracer.get()
    return tracer.read_value(p, kind) if tracer is not None else None


proxies.value_reader = _read_value


@contextlib.contextmanager
def _restoring_grad_mode(enabled: bool):
    """A program that fails inside ``with torch.no_grad():`` must not leave autograd off."""
    try:
        yield
    finally:
        torch._C._set_grad_enabled(enabled)


def _check_result(result: Any) -> None:
    for leaf in tree_leaves(result):
        if isinstance(leaf, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
            code = generator_code(leaf)
            made = f" ({code.co_qualname} at {SourceLocation(code.co_filename, code.co_firstlineno)})" if code else ""
            raise ThunderRuntimeError(
                f"the function returned a {type(leaf).__name__}{made} that has already run (or that holds an iterator "
                "thunder cannot make again), whose code would run after the trace, on traced values; thunder cannot "
                "compile that (a generator not started yet is made again by each call). Return a list or tuple "
                "instead, e.g. `return list(...)` or `return tuple(t * i for i in ...)`."
            )
        if isinstance(leaf, torch.Tensor):
            raise ThunderRuntimeError(
                "the function returned a torch.Tensor that was not computed from its inputs by traced torch "
                "operations (it was made by code thunder ran natively); return values must come from traced ops"
            )
        if not isinstance(leaf, (Proxy, str, bytes, int, float, complex, type(None))) and holds(leaf, _is_proxy):
            raise ThunderRuntimeError(
                f"the function returned a {type(leaf).__name__} that holds traced values where thunder cannot make it "
                "again on each call (a module made inside the function, an object of a type that copies itself its "
                "own way): return the tensors, or a dict, list, tuple, dataclass or plain object of them instead"
            )


def _is_proxy(v: Any) -> bool:
    return isinstance(v, Proxy)
