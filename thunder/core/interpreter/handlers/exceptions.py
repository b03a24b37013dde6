"""Handlers: raising, catching and re-raising exceptions, ``with`` blocks, ``except*``.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
See Note [Exceptions under the interpreter] in ``execution``.
"""

from __future__ import annotations

from ..errors import NULL
from ..execution import call, lookup_type_attr
from ..opcodes import register_opcode_handler
from ..protocols import bound_special


def _make_exception(ctx, exc, *, cause: bool = False):
    if isinstance(exc, type) and issubclass(exc, BaseException):
        inst = call(ctx, exc, ())
        if not isinstance(inst, BaseException):
            raise TypeError(
                f"calling {exc!r} should have returned an instance of BaseException, not {type(inst).__name__}"
            )
        return inst
    if isinstance(exc, BaseException):
        return exc
    if cause:
        raise TypeError("exception causes must derive from BaseException")
    raise TypeError("exceptions must derive from BaseException")


@register_opcode_handler("RAISE_VARARGS")
def RAISE_VARARGS(inst, frame):
    ctx = frame.ctx
    stack = frame.stack
    argc = inst.arg
    if argc == 0:
        exc = ctx.handled_exception()
        if exc is None:
            raise RuntimeError("No active exception to reraise")
        try:
            raise exc
        finally:
            # The traceback references this frame: do not let it reference the exception (a cycle).
            del exc
    ctx.propagating = None  # a re-raised object that once left a frame is fresh again
    cause = stack.pop() if argc == 2 else NULL
    exc = _make_exception(ctx, stack.pop())
    if cause is not NULL:
        exc.__cause__ = None if cause is None else _make_exception(ctx, cause, cause=True)
    try:
        raise exc
    finally:
        del exc, cause


@register_opcode_handler("RERAISE")
def RERAISE(inst, frame):
    raise frame.stack.pop()


@register_opcode_handler("PUSH_EXC_INFO")
def PUSH_EXC_INFO(inst, frame):
    stack = frame.stack
    slots = frame.ctx.exc_slots
    exc = stack[-1]
    stack[-1] = slots[-1]
    stack.append(exc)
    slots[-1] = exc


@register_opcode_handler("POP_EXCEPT")
def POP_EXCEPT(inst, frame):
    frame.ctx.exc_slots[-1] = frame.stack.pop()


_BAD_CATCH = "catching classes that do not inherit from BaseException is not allowed"


def _check_except_type(t) -> None:
    if isinstance(t, tuple):
        for x in t:
            if not (isinstance(x, type) and issubclass(x, BaseException)):
                raise TypeError(_BAD_CATCH)
    elif not (isinstance(t, type) and issubclass(t, BaseException)):
        raise TypeError(_BAD_CATCH)


@register_opcode_handler("CHECK_EXC_MATCH")
def CHECK_EXC_MATCH(inst, frame):
    stack = frame.stack
    right = stack.pop()
    _check_except_type(right)
    stack.append(issubclass(type(stack[-1]), right))


@register_opcode_handler("CHECK_EG_MATCH")
def CHECK_EG_MATCH(inst, frame):
    stack = frame.stack
    match_type = stack.pop()
    _check_except_type(match_type)
    types_ = match_type if isinstance(match_type, tuple) else (match_type,)
    if any(issubclass(t, BaseExceptionGroup) for t in types_):
        raise TypeError("catching ExceptionGroup with except* is not allowed. Use except instead.")
    exc_value = stack[-1]
    if isinstance(exc_value, match_type):
        if isinstance(exc_value, BaseExceptionGroup):
            match = exc_value
        else:
            match = BaseExceptionGroup("", (exc_value,))
            match.__traceback__ = exc_value.__traceback__
        rest = None
    elif isinstance(exc_value, BaseExceptionGroup):
        match, rest = exc_value.split(match_type)
    else:
        match = rest = None
    if match is None:
        stack.append(None)
        return
    stack[-1] = rest
    stack.append(match)
    frame.ctx.exc_slots[-1] = match


def _leaf_ids(exc, out: set) -> None:
    if isinstance(exc, BaseExceptionGroup):
        for e in exc.exceptions:
            _leaf_ids(e, out)
    else:
        out.add(id(exc))


def _same_metadata(e, orig) -> bool:
    return (
        getattr(e, "__notes__", None) is getattr(orig, "__notes__", None)
        and e.__traceback__ is orig.__traceback__
        and e.__cause__ is orig.__cause__
        and e.__context__ is orig.__context__
    )


def prep_reraise_star(orig, excs):
    """What an ``except*`` statement re-raises: the exceptions raised in its clauses plus the unhandled part
    of ``orig`` (like CPython's ``_PyExc_PrepReraiseStar``)."""
    if not isinstance(orig, BaseExceptionGroup):
        for e in excs:
            if e is not None:
                return e
        return None
    raised, reraised = [], []
    for e in excs:
        if e is None:
            continue
        (reraised if isinstance(e, BaseExceptionGroup) and _same_metadata(e, orig) else raised).append(e)
    leaves: set = set()
    for e in reraised:
        _leaf_ids(e, leaves)
    projection = orig.split(lambda leaf: id(leaf) in leaves)[0] if leaves else None
    if not raised:
        return projection
    if projection is not None:
        raised.append(projection)
    if len(raised) > 1:
        return BaseExceptionGroup("", raised)
    return raised[0]


@register_opcode_handler("PREP_RERAISE_STAR", max_ver=(3, 11))
def PREP_RERAISE_STAR(inst, frame):
    stack = frame.stack
    excs = stack.pop()
    orig = stack.pop()
    stack.append(prep_reraise_star(orig, excs))


@register_opcode_handler("LOAD_ASSERTION_ERROR")
def LOAD_ASSERTION_ERROR(inst, frame):
    frame.stack.append(AssertionError)


# -- with ------------------------------------------------------------------------------------------------------


@register_opcode_handler("BEFORE_WITH")
def BEFORE_WITH(inst, frame):
    stack = frame.stack
    mgr = stack.pop()
    t = type(mgr)
    enter = lookup_type_attr(t, "__enter__")
    exit_ = lookup_type_attr(t, "__exit__")
    if enter is NULL or exit_ is NULL:
        raise TypeError(f"'{t.__name__}' object does not support the context manager protocol")
    stack.append(bound_special(mgr, exit_))
    stack.append(call(frame.ctx, bound_special(mgr, enter), ()))


@register_opcode_handler("WITH_EXCEPT_START")
def WITH_EXCEPT_START(inst, frame):
    stack = frame.stack
    exit_fn = stack[-4]
    val = stack[-1]
    stack.append(call(frame.ctx, exit_fn, (type(val), val, val.__traceback__)))


@register_opcode_handler("CLEANUP_THROW", min_ver=(3, 12))
def CLEANUP_THROW(inst, frame):
    stack = frame.stack
    exc = stack[-1]
    if not isinstance(exc, StopIteration):
        try:
            raise exc
        finally:
            del exc
    del stack[-3:]
    stack.append(None)
    stack.append(exc.value)
