"""The run loop, function entry, the call protocol and generators.

Layer: ``thunder.core.interpreter``. Imports: the standard library and the interpreter's own modules
(``errors``, ``opcodes``, ``instructions``, ``frame``, ``runtime``).

Note [Calls under the interpreter]
    ``call(ctx, fn, args, kwargs)`` is the single entry for every call the interpreted program makes
    (CALL, CALL_FUNCTION_EX, the call that enters the interpreted function, and the implicit dunders the
    interpreter decides to interpret, see Note [Implicit calls] in ``protocols``). In order:
      0. the arguments of native functions that call back into Python are adapted (Note [Native callbacks]
         in ``natives``);
      1. the user's ``fn_lookaside(fn)``: a non-None result is called natively in its place;
      2. the interpreter's own lookasides (``lookasides.py``: zero-argument ``super()``, ``locals()``,
         ``globals()``, ``sys.exc_info()``, ``__build_class__``, ``is_jitting_with_raise`` ...), which need
         the interpreted frame;
      3. Python functions are entered (unless ``make_opaque``'d, or ``types.coroutine`` generators, which run
         natively); bound methods, ``functools.partial`` objects, ``staticmethod`` objects are
         unwrapped and go through ``call`` again (so the lookaside sees the inner callable too); classes
         are instantiated by ``protocols.instantiate`` (interpreting Python ``__new__``/``__init__``);
         objects whose type has a Python ``__call__`` get it interpreted;
      4. everything else (C functions, builtin methods, ...) is called natively.

Note [Exceptions under the interpreter]
    Exceptions are ordinary Python exceptions: a handler (or a native call inside it) raises, the run loop
    catches it, records the frame's line in ``ctx.unwound`` (unless the instruction re-raises, like CPython's
    traceback entries) so ``api`` can build a traceback through the user's lines, looks up the instruction's
    entry of the exception table (pre-resolved per instruction by ``instructions.decode``) and either jumps to
    the handler or lets the exception leave the frame. The handled
    exception of the interpreted program (what ``sys.exc_info()`` would say) is kept in ``ctx.exc_slots``
    by PUSH_EXC_INFO/POP_EXCEPT. A *fresh* exception (raised by the instruction itself, not re-raised and
    not coming out of an interpreted callee) gets ``__context__`` set to the handled exception as CPython
    would. ``InterpreterError`` is never caught by the interpreted program.
"""

from __future__ import annotations

import dis
import functools
import inspect
import os
import sys
import types
from types import CodeType, FunctionType, MethodType

from .errors import NULL, InterpreterError
from .frame import Frame
from .instructions import decode, instruction_line
from .opcodes import RETURN, YIELD
from .runtime import Runtime, is_opaque, runtime_stack

__all__ = [
    "run_frame",
    "call",
    "call_native",
    "call_back",
    "enter_function",
    "make_frame",
    "register_default_lookaside",
    "register_native_adapter",
    "register_method_lookaside",
    "lookup_type_attr",
    "AsyncGenValue",
    "generator_code",
]

#: Signal of RETURN_GENERATOR: the frame is a fresh generator, wrap it.
GENERATOR = 3

CO_GENERATOR = 0x20
CO_COROUTINE = 0x80
CO_ITERABLE_COROUTINE = 0x100
CO_ASYNC_GENERATOR = 0x200
CO_OPTIMIZED = 0x01
CO_VARARGS = 0x04
CO_VARKEYWORDS = 0x08
# A generator decorated with ``types.coroutine`` runs natively: ``await`` accepts it for its code's flag.
_NATIVE_CODE_FLAGS = CO_ITERABLE_COROUTINE

_PY312 = sys.version_info >= (3, 12)

_RERAISE_OPS = frozenset(("RERAISE", "END_ASYNC_FOR", "CLEANUP_THROW"))


# ---------------------------------------------------------------------------------------------------------
# The run loop
# ---------------------------------------------------------------------------------------------------------


def _is_reraise(frame: Frame) -> bool:
    inst = frame.info.instructions[frame.pc - 1]
    return inst.opname in _RERAISE_OPS or (inst.opname == "RAISE_VARARGS" and inst.arg == 0)


_HANDLERS_DIR = os.path.join(os.path.dirname(__file__), "handlers") + os.sep


_STACK_ERRORS = frozenset(("pop from empty list", "list index out of range"))


def _is_stack_underflow(e: IndexError, inst, handler) -> bool:
    """``e`` is a pop or a read past the bottom of the stack: raised by list code in the running handler's own
    code, with nothing else between (handlers reach the program's values only through ``protocols`` and
    ``call``, so an ``IndexError`` of the program, raised natively or by an interpreted callee, passes through
    those), by a handler that does not raise the program's own exceptions."""
    if inst.opname in _RERAISE_OPS or inst.opname == "RAISE_VARARGS" or not e.args or e.args[0] not in _STACK_ERRORS:
        return False
    tb = e.__traceback__  # its first entry is run_frame, where it was caught
    tb = tb.tb_next if tb is not None else None
    if tb is None:
        return False
    handler_code = getattr(handler, "__code__", None)
    while tb is not None:
        code = tb.tb_frame.f_code
        if code is not handler_code and not code.co_filename.startswith(_HANDLERS_DIR):
            return False
        tb = tb.tb_next
    return True


def set_context(ctx: Runtime, e: BaseException) -> None:
    """Sets ``e.__context__`` to the interpreted program's handled exception, as CPython's raise does."""
    handled = ctx.handled_exception()
    if handled is None or handled is e:
        return
    # Avoid reference cycles in the context chain, like CPython.
    o = handled
    while True:
        c = o.__context__
        if c is None:
            break
        if c is e:
            o.__context__ = None
            break
        o = c
    e.__context__ = handled


def unwind_to_handler(frame: Frame, e: BaseException) -> bool:
    """Jumps to the exception handler covering the current instruction; False when there is none."""
    entry = frame.info.exc_handlers[frame.pc - 1]
    if entry is None:
        return False
    target, depth, lasti = entry
    stack = frame.stack
    if len(stack) < depth:
        # Only when throwing into a generator on 3.12, where YIELD_VALUE leaves a slot for the sent value that
        # our YIELD_VALUE pops (the resumption pushes the sent value instead).
        stack.extend([None] * (depth - len(stack)))
    del stack[depth:]
    if lasti:
        stack.append(frame.info.offsets[frame.pc - 1])
    stack.append(e)
    frame.pc = target
    return True


def note_traceback(frame: Frame, e: BaseException) -> None:
    """Adds the frame's current line to ``e``'s traceback entries (``ctx.unwound``), as CPython does wherever an
    exception is raised or passes through, caught there or not (not where it is re-raised)."""
    ctx = frame.ctx
    if ctx.unwound_exc is not e:
        ctx.unwound_exc = e
        ctx.unwound = []
    ctx.unwound.append((frame.code, instruction_line(frame.info, frame.pc - 1)))


def run_frame(frame: Frame) -> int:
    """Runs ``frame`` from ``frame.pc`` until it returns, yields or creates its generator (the signal is
    returned, the value is in ``frame.retval``) or an exception leaves it (raised)."""
    ctx = frame.ctx
    insts = frame.info.instructions
    handlers = frame.info.handlers if ctx.cb_operands is None else frame.info.watched_handlers()
    record = ctx.record
    while True:
        try:
            while True:
                i = frame.pc
                inst = insts[i]
                frame.pc = i + 1
                record(inst)
                sig = handlers[i](inst, frame)
                if sig is not None:
                    return sig
        except InterpreterError:
            raise
        except BaseException as e:
            if type(e) is IndexError and _is_stack_underflow(e, insts[frame.pc - 1], handlers[frame.pc - 1]):
                inst = insts[frame.pc - 1]
                raise InterpreterError(
                    f"{inst.opname} (offset {inst.offset}) in {frame.code.co_qualname} found the stack too short "
                    f"({len(frame.stack)} values): the interpreter misread the stack layout"
                ) from e
            reraised = _is_reraise(frame)
            if not reraised and e is not ctx.propagating:
                set_context(ctx, e)
            if not reraised or ctx.unwound_exc is not e:
                note_traceback(frame, e)
            if not unwind_to_handler(frame, e):
                ctx.propagating = e
                raise
            if ctx.propagating is e:
                ctx.propagating = None


def throw_into(frame: Frame, exc: BaseException) -> int:
    """Raises ``exc`` inside a frame suspended at a yield (generator ``throw``/``close``), then runs it."""
    note_traceback(frame, exc)
    if not unwind_to_handler(frame, exc):
        frame.ctx.propagating = exc
        try:
            raise exc
        finally:
            del exc
    return run_frame(frame)


# ---------------------------------------------------------------------------------------------------------
# Entering functions
# ---------------------------------------------------------------------------------------------------------

_binder_codes: dict[int, tuple[CodeType, CodeType]] = {}


def _binder_code(code: CodeType) -> CodeType:
    """A code object with ``code``'s signature whose body returns its arguments as a tuple, in slot order.

    Calling it natively binds arguments exactly like CPython (defaults, keyword-only, ``*args``,
    ``**kwargs``) with CPython's own error messages."""
    entry = _binder_codes.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    flags = code.co_flags
    nargs = code.co_argcount + code.co_kwonlyargcount + bool(flags & CO_VARARGS) + bool(flags & CO_VARKEYWORDS)
    op = dis.opmap
    bc = bytearray([op["RESUME"], 0])

    def emit(opname: str, arg: int) -> None:
        if arg > 255:
            for shift in (24, 16, 8):
                if arg >> shift:
                    bc.extend((op["EXTENDED_ARG"], (arg >> shift) & 0xFF))
        bc.extend((op[opname], arg & 0xFF))

    for i in range(nargs):
        emit("LOAD_FAST", i)
    emit("BUILD_TUPLE", nargs)
    bc.extend((op["RETURN_VALUE"], 0))
    shadow = code.replace(
        co_code=bytes(bc),
        co_consts=(None,),
        co_names=(),
        co_exceptiontable=b"",
        co_linetable=b"",
        co_stacksize=nargs + 1,
        co_cellvars=(),
        co_freevars=(),
        co_flags=flags & ~(CO_GENERATOR | _NATIVE_CODE_FLAGS | 0x10),  # 0x10: CO_NESTED
    )
    if len(_binder_codes) > 20_000:
        _binder_codes.clear()
    _binder_codes[id(code)] = (code, shadow)
    return shadow


def bind_arguments(func: FunctionType, code: CodeType, nslots: int, args: tuple, kwargs: dict | None) -> list:
    """The fast-local slots of a call of ``func`` (arguments bound, the rest ``NULL``)."""
    flags = code.co_flags
    if (
        not kwargs
        and len(args) == code.co_argcount
        and not code.co_kwonlyargcount
        and not flags & (CO_VARARGS | CO_VARKEYWORDS)
    ):
        fast = list(args)
        nargs = len(args)
    else:
        binder = FunctionType(_binder_code(code), func.__globals__, code.co_name, func.__defaults__)
        kwd = func.__kwdefaults__
        if kwd is not None:
            binder.__kwdefaults__ = kwd
        fast = list(binder(*args, **kwargs) if kwargs else binder(*args))
        nargs = len(fast)
    if nslots > nargs:
        fast.extend([NULL] * (nslots - nargs))
    return fast


def make_frame(ctx: Runtime, func: FunctionType, args: tuple, kwargs: dict | None) -> Frame:
    code = func.__code__
    info = decode(code)
    fast = bind_arguments(func, code, info.nlocalsplus, args, kwargs)
    closure = func.__closure__
    if closure:
        fast[info.free_start :] = closure
    # A function made from module-level code (``FunctionType(compile(src, f, "exec"), g)``) has its globals as
    # its locals mapping, as CPython's function call gives it.
    locals_ = None if code.co_flags & CO_OPTIMIZED else func.__globals__
    return Frame(ctx, code, info, func, func.__globals__, func.__builtins__, locals_, fast)


def run_function_frame(ctx: Runtime, frame: Frame, fn):
    """Runs a freshly made frame of ``fn`` and returns the call's result (a generator for generator code)."""
    ctx.log_call(fn)
    frames = ctx.frames
    frames.append(frame)
    try:
        sig = run_frame(frame)
    except BaseException as e:
        if ctx.log is not None:
            ctx.log_return(fn, e, exception=True)
        raise
    finally:
        frames.pop()
    if sig == RETURN:
        rv = frame.retval
        if ctx.log is not None:
            ctx.log_return(fn, rv)
        return rv
    if sig == GENERATOR:
        gen = _generator_driver(ctx, frame)
        code = frame.code
        if code.co_flags & CO_COROUTINE:
            gen = _coroutine(gen)
        elif code.co_flags & CO_ASYNC_GENERATOR:
            gen = _async_generator(gen)
        gen.__name__ = code.co_name
        gen.__qualname__ = code.co_qualname
        if ctx.log is not None:
            ctx.log_return(fn, gen)
        return gen
    raise InterpreterError(f"Frame of {frame.code.co_qualname} yielded before RETURN_GENERATOR")


def enter_function(ctx: Runtime, func: FunctionType, args: tuple, kwargs: dict | None):
    code = func.__code__
    if code.co_flags & _NATIVE_CODE_FLAGS or is_opaque(func):
        return call_native(ctx, func, args, kwargs)
    frame = make_frame(ctx, func, args, kwargs)
    return run_function_frame(ctx, frame, func)


# ---------------------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------------------


def _suspended_in_yield_from(frame: Frame) -> bool:
    i = frame.pc - 1
    insts = frame.info.instructions
    return i >= 1 and insts[i].opname == "YIELD_VALUE" and insts[i - 1].opname == "SEND"


def _resume(ctx: Runtime, frame: Frame, sent, thrown):
    """One resumption of a generator frame: sends ``sent`` or throws ``thrown``; returns the signal."""
    if thrown is None:
        frame.stack.append(sent)
        return run_frame(frame)
    if _suspended_in_yield_from(frame):
        # Like CPython's gen_throw: delegate to the sub-iterator of ``yield from`` first.
        receiver = frame.stack[-1]
        if isinstance(thrown, GeneratorExit):
            close = getattr(receiver, "close", None)
            if close is not None:
                err = None
                try:
                    close()
                except BaseException as e:
                    err = e
                if err is not None:
                    thrown = err
        else:
            throw = getattr(receiver, "throw", None)
            if throw is not None:
                outcome = None
                try:
                    value = throw(thrown)
                except StopIteration as si:
                    outcome = ("return", si.value) if not _PY312 else ("raise", si)
                except BaseException as e:
                    outcome = ("raise", e)
                if outcome is None:
                    frame.retval = value
                    return YIELD
                kind, val = outcome
                if kind == "return":
                    frame.stack.pop()
                    frame.pc = frame.info.targets[frame.pc - 2]
                    frame.stack.append(val)
                    return run_frame(frame)
                thrown = val
    try:
        return throw_into(frame, thrown)
    finally:
        # The exception's traceback holds this frame: its locals must not hold the exception (a reference cycle).
        thrown = err = val = None


def _generator_driver(ctx: Runtime, frame: Frame):
    """A native generator running an interpreted generator frame: it works under the interpreter (FOR_ITER,
    SEND call ``next``/``send`` on it) and natively after ``interpret`` returned. Each resumption makes the
    runtime current again, so the generator's code is always interpreted."""
    sent = None
    thrown = None
    runtimes = runtime_stack()
    while True:
        runtimes.append(ctx)
        ctx.frames.append(frame)
        ctx.exc_slots.append(frame.gen_exc)
        try:
            sig = _resume(ctx, frame, sent, thrown)
        finally:
            frame.gen_exc = ctx.exc_slots.pop()
            ctx.frames.pop()
            runtimes.pop()
            sent = thrown = None  # (a thrown exception that propagates must not be held by this frame: a cycle)
        if sig == RETURN:
            return frame.retval
        try:
            sent = yield frame.retval
        except BaseException as e:
            thrown = e


def generator_code(gen) -> CodeType | None:
    """The code a generator, coroutine or async generator runs (for an interpreted one, the interpreted
    frame's, not its native driver's); None once it has finished."""
    frame = getattr(gen, "gi_frame", None) or getattr(gen, "cr_frame", None) or getattr(gen, "ag_frame", None)
    if frame is None:
        return None
    code = frame.f_code
    if code is _generator_driver.__code__:
        interpreted = frame.f_locals.get("frame")
        return interpreted.code if interpreted is not None else None
    if code is _coroutine.__code__ or code is _async_generator.__code__:
        return generator_code(frame.f_locals.get("driver"))
    return code


def unstarted_generator_call(gen) -> tuple[FunctionType, tuple, dict] | None:
    """For an interpreted generator that has not run yet (``g()`` returned, not iterated): the generator function and
    the arguments it was called with, so that calling it again makes the same generator; else None."""
    if type(gen) is not types.GeneratorType or gen.gi_frame is None or gen.gi_frame.f_code is not _generator_driver.__code__:
        return None
    if inspect.getgeneratorstate(gen) != inspect.GEN_CREATED:
        return None
    frame = gen.gi_frame.f_locals.get("frame")
    if frame is None or frame.func is None or frame.locals is not None:
        return None
    code = frame.code
    n_pos, n_kw = code.co_argcount, code.co_kwonlyargcount
    values = [v.cell_contents if type(v) is types.CellType else v for v in frame.fast[: n_pos + n_kw + 2]]
    if any(v is NULL for v in values[: n_pos + n_kw]):
        return None
    args = tuple(values[:n_pos])
    kwargs = dict(zip(code.co_varnames[n_pos : n_pos + n_kw], values[n_pos : n_pos + n_kw]))
    at = n_pos + n_kw
    if code.co_flags & inspect.CO_VARARGS:
        args += tuple(values[at])
        at += 1
    if code.co_flags & inspect.CO_VARKEYWORDS:
        kwargs.update(values[at])
    return frame.func, args, kwargs


class AsyncGenValue:
    """A value an async generator frame yields to its consumer (ASYNC_GEN_WRAP), not to the event loop."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class _Awaiting:
    """Awaiting it runs ``driver`` (a generator driver) to its return value."""

    __slots__ = ("driver",)

    def __init__(self, driver):
        self.driver = driver

    def __await__(self):
        return self.driver


async def _coroutine(driver):
    """A native coroutine object running an interpreted coroutine frame: ``asyncio`` and ``await`` accept it."""
    return await _Awaiting(driver)


class _Forward:
    """Awaiting it passes ``value`` (a future an interpreted ``await`` yielded) on to the event loop."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __await__(self):
        return (yield self.value)


async def _async_generator(driver):
    """A native async generator running an interpreted async generator frame: what the frame yields with
    ASYNC_GEN_WRAP goes to the consumer, anything else (awaited futures) to the event loop."""
    sent = thrown = None
    while True:
        try:
            item = driver.send(sent) if thrown is None else driver.throw(thrown)
        except StopIteration:
            return
        sent = thrown = None
        try:
            if type(item) is AsyncGenValue:
                sent = yield item.value
            else:
                sent = await _Forward(item)
        except BaseException as e:  # athrow(), aclose(), cancellation: into the frame
            thrown = e


# ---------------------------------------------------------------------------------------------------------
# Calls
# ---------------------------------------------------------------------------------------------------------

#: id(fn) -> (fn, impl); impl(ctx, args, kwargs). Filled by ``lookasides``.
_default_lookasides: dict[int, tuple] = {}


def register_default_lookaside(fn):
    """Registers the decorated ``impl(ctx, args, kwargs)`` as the interpreter's own lookaside for ``fn``."""

    def decorator(impl):
        _default_lookasides[id(fn)] = (fn, impl)
        return impl

    return decorator


def default_lookaside(fn):
    """The interpreter's own lookaside ``impl(ctx, args, kwargs)`` for ``fn``, or None: a tracer's lookaside that
    handles some calls of ``fn`` itself leaves the others to it."""
    entry = _default_lookasides.get(id(fn))
    return entry[1] if entry is not None and entry[0] is fn else None


#: id(fn) -> (fn, adapt); adapt(ctx, args, kwargs) -> (args, kwargs). Filled by ``natives``.
_native_adapters: dict[int, tuple] = {}


def register_native_adapter(fn, adapt) -> None:
    """Registers ``adapt(ctx, args, kwargs) -> (args, kwargs)``, applied to the arguments of every call of the
    native ``fn`` before anything else (see Note [Native callbacks] in ``natives``); after those registered before."""
    before = _native_adapters.get(id(fn))
    if before is not None and before[0] is fn:
        first = before[1]

        def adapt(ctx, args, kwargs, first=first, then=adapt):
            return then(ctx, *first(ctx, args, kwargs))

    _native_adapters[id(fn)] = (fn, adapt)


#: (type, method name) -> adapt, for the bound methods of a builtin type (``"{}".format``). Filled by ``conversions``.
_method_adapters: dict[tuple[type, str], object] = {}


def register_method_adapter(tp: type, name: str, adapt) -> None:
    """Registers ``adapt(ctx, receiver, args, kwargs) -> (args, kwargs)`` for every call of the method ``name``
    bound to an object of the builtin type ``tp`` (the receiver)."""
    _method_adapters[(tp, name)] = adapt


#: (type, method name) -> impl(ctx, receiver, args, kwargs), run in place of the bound methods of a builtin type
#: (``d.get(key)``: Note [Lookups in sets and dicts] in ``protocols``). Filled by ``conversions``.
_method_lookasides: dict[tuple[type, str], object] = {}


def register_method_lookaside(tp: type, name: str, impl) -> None:
    """Registers ``impl(ctx, receiver, args, kwargs)``, called in place of every call of the method ``name`` bound to
    an object of the builtin type ``tp``, after the user's lookaside declined it."""
    _method_lookasides[(tp, name)] = impl


def call_native(ctx: Runtime, fn, args: tuple, kwargs: dict | None):
    if ctx.log is not None:
        ctx.log_opaque(fn)
    if kwargs:
        return fn(*args, **kwargs)
    return fn(*args)


def call_back(ctx: Runtime, fn, args: tuple, kwargs: dict | None = None):
    """``call`` from native code that the program called (a callback of ``map``, a step of an iterator): ``ctx``
    is made the current runtime for it; once the interpretation has ended, ``fn`` runs natively."""
    if ctx.done:
        return fn(*args, **kwargs) if kwargs else fn(*args)
    runtimes = runtime_stack()
    if runtimes and runtimes[-1] is ctx:
        return call(ctx, fn, args, kwargs)
    runtimes.append(ctx)
    try:
        return call(ctx, fn, args, kwargs)
    finally:
        runtimes.pop()


# Note [Class attribute lookups]
# The interpreter looks names up on a type's MRO without invoking descriptors several times per call and attribute
# read of the program (a few thousand times a trace). ``klass.__dict__`` makes a new mappingproxy at each access, so
# the proxies of each class on a type's MRO are kept, per type (a proxy is a live view: later changes to a class's
# attributes show through it), and made again when the type's ``__mro__`` is another tuple (``__bases__`` assigned).
# Keyed by ``id``: a metaclass's ``__eq__`` or ``__hash__`` would run, or make its classes unhashable. The entry's MRO
# holds the type alive, so its id is not reused while the entry exists; the cache is cleared when it grows large, as
# the decoded code objects are.
_mro_dicts: dict[int, tuple[tuple, tuple]] = {}
_MRO_CACHE_LIMIT = 20_000


def lookup_type_attr(tp: type, name: str):
    """``name`` looked up on the MRO of ``tp`` without descriptors being invoked (like ``_PyType_Lookup``)."""
    mro = tp.__mro__
    entry = _mro_dicts.get(id(tp))
    if entry is None or entry[0] is not mro:
        if len(_mro_dicts) >= _MRO_CACHE_LIMIT:
            _mro_dicts.clear()
        entry = _mro_dicts[id(tp)] = (mro, tuple(klass.__dict__ for klass in mro))
    for d in entry[1]:
        if name in d:
            return d[name]
    return NULL


_partial = functools.partial


def call(ctx: Runtime, fn, args: tuple, kwargs: dict | None = None):
    """Calls ``fn(*args, **kwargs)`` for the interpreted program; see Note [Calls under the interpreter]."""
    adapter = _native_adapters.get(id(fn))
    if adapter is not None and adapter[0] is fn:
        args, kwargs = adapter[1](ctx, args, kwargs)
    elif type(fn) is _BuiltinMethod:
        adapt = _method_adapters.get((type(fn.__self__), fn.__name__))
        if adapt is not None:
            args, kwargs = adapt(ctx, fn.__self__, args, kwargs)
    lookaside = ctx.fn_lookaside
    if lookaside is not None:
        replacement = lookaside(fn)
        if replacement is not None:
            if ctx.log is not None:
                ctx.log_lookaside(fn)
            if kwargs:
                return replacement(*args, **kwargs)
            return replacement(*args)
    entry = _default_lookasides.get(id(fn))
    if entry is not None and entry[0] is fn:
        if ctx.log is not None:
            ctx.log_lookaside(fn)
        return entry[1](ctx, args, kwargs)
    if type(fn) is _BuiltinMethod:
        impl = _method_lookasides.get((type(fn.__self__), fn.__name__))
        if impl is not None:
            return impl(ctx, fn.__self__, args, kwargs)
    t = type(fn)
    if t is FunctionType:
        return enter_function(ctx, fn, args, kwargs)
    if t is MethodType:
        return call(ctx, fn.__func__, (fn.__self__, *args), kwargs)
    if t is _partial:
        kw = {**fn.keywords, **kwargs} if kwargs else fn.keywords
        return call(ctx, fn.func, fn.args + args, kw)
    if t is staticmethod:
        return call(ctx, fn.__func__, args, kwargs)
    if isinstance(fn, type):
        from .protocols import instantiate

        return instantiate(ctx, fn, args, kwargs)
    if t in _NATIVE_CALLABLE_TYPES:
        if t is _MethodWrapper and fn.__name__ == "__call__" and _is_bound_type_call(fn):
            from .protocols import type_call

            return type_call(ctx, fn.__self__, args, kwargs)
        return call_native(ctx, fn, args, kwargs)
    dunder_call = lookup_type_attr(t, "__call__")
    if type(dunder_call) is FunctionType and not is_opaque(fn):
        return call(ctx, dunder_call, (fn, *args), kwargs)
    return call_native(ctx, fn, args, kwargs)


_MethodWrapper = types.MethodWrapperType
_BuiltinMethod = types.BuiltinMethodType
_type_call = type.__call__


def _is_bound_type_call(fn) -> bool:
    """``fn`` is ``type.__call__`` bound to a class (``super().__call__`` in a metaclass ``__call__``)."""
    cls = fn.__self__
    return isinstance(cls, type) and fn == _type_call.__get__(cls)


_NATIVE_CALLABLE_TYPES = frozenset(
    (
        types.BuiltinFunctionType,
        types.BuiltinMethodType,
        types.MethodDescriptorType,
        types.WrapperDescriptorType,
        types.MethodWrapperType,
        types.ClassMethodDescriptorType,
    )
)


def current_frame(ctx: Runtime) -> Frame:
    if not ctx.frames:
        raise InterpreterError("No interpreted frame is active")
    return ctx.frames[-1]
