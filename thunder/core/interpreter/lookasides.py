"""The interpreter's own lookasides: builtins that inspect the calling frame.

Layer: ``thunder.core.interpreter``. Imports: the standard library and the interpreter's modules.

Natively these builtins would see the interpreter's Python frames instead of the interpreted one, so they
are replaced, for interpreted callers only, by versions that read the interpreted frame.
"""

from __future__ import annotations
import __future__

import builtins
import collections
import functools
import operator
import sys
import types
from collections.abc import Mapping
from types import CellType, FunctionType

from .errors import NULL
from .execution import call, current_frame, register_default_lookaside, run_function_frame
from .frame import Frame
from .instructions import decode
from .protocols import get_iter, iter_next, length, new_class, reverse, truth, type_call
from .runtime import is_jitting_with_raise

_PY313 = sys.version_info >= (3, 13)

__all__ = ["frame_locals"]


@register_default_lookaside(is_jitting_with_raise)
def _is_jitting_with_raise(ctx, args, kwargs):
    return True


def _no_args(name, args, kwargs):
    if args or kwargs:
        raise TypeError(f"{name}() takes no arguments")


def frame_locals(frame: Frame) -> dict:
    """What ``locals()`` returns in ``frame``: its locals mapping, or in function frames a snapshot of the fast
    slots: a new dict on each call from 3.13 (PEP 667), before 3.13 one dict per frame that each call refreshes,
    keeping keys the program added."""
    if frame.locals is not None:
        return frame.locals
    if _PY313:
        out = {}
    else:
        out = frame.locals_snapshot
        if out is None:
            out = frame.locals_snapshot = {}
    names = frame.info.names
    code = frame.code
    cells = set(code.co_cellvars) | set(code.co_freevars)
    for i, v in enumerate(frame.fast):
        name = names[i]
        if v is not NULL and name in cells and type(v) is CellType:
            try:
                v = v.cell_contents
            except ValueError:
                v = NULL
        if v is NULL:
            out.pop(name, None)
        else:
            out[name] = v
    return out


@register_default_lookaside(builtins.locals)
def _locals(ctx, args, kwargs):
    _no_args("locals", args, kwargs)
    return frame_locals(current_frame(ctx))


@register_default_lookaside(builtins.globals)
def _globals(ctx, args, kwargs):
    """The frame's globals; those of a module read as ``vars(module)`` is (the ``load_attr`` callback), so that a
    tracer checks the items read through it as it checks the module's attributes."""
    _no_args("globals", args, kwargs)
    g = current_frame(ctx).globals
    module = sys.modules.get(g.get("__name__")) if type(g.get("__name__")) is str else None
    if ctx.cb_load_attr is None or getattr(module, "__dict__", None) is not g:
        return g
    return ctx.cb_load_attr(module, "__dict__", g)


@register_default_lookaside(builtins.vars)
def _vars(ctx, args, kwargs):
    if len(args) == 1 and not kwargs:  # ``obj.__dict__``, read as the attribute is (the ``load_attr`` callback)
        value = vars(args[0])
        return value if ctx.cb_load_attr is None else ctx.cb_load_attr(args[0], "__dict__", value)
    if args or kwargs:
        return vars(*args, **(kwargs or {}))
    return frame_locals(current_frame(ctx))


@register_default_lookaside(builtins.dir)
def _dir(ctx, args, kwargs):
    if args or kwargs:
        return dir(*args, **(kwargs or {}))
    return sorted(frame_locals(current_frame(ctx)))


def _default_namespaces(ctx, name, args, kwargs):
    args = list(args)
    kwargs = dict(kwargs or {})
    if len(args) < 2 and "globals" not in kwargs:
        frame = current_frame(ctx)
        args.append(frame.globals)
        if len(args) < 3 and "locals" not in kwargs:
            args.append(frame_locals(frame))
    return args, kwargs


_FUTURE_FLAGS = functools.reduce(operator.or_, (getattr(__future__, f).compiler_flag for f in __future__.all_feature_names))


def _run_source(ctx, mode: str, args: tuple, kwargs: dict | None):
    """``eval(source)`` and ``exec(source)`` in the caller's namespaces, the code interpreted, so that its reads
    of globals and its stores are seen as the caller's own are (run natively, a global read in the string was
    fixed at tracing). Other forms (explicit namespaces, a closure) run natively."""
    native = eval if mode == "eval" else exec
    frame = current_frame(ctx)
    source = args[0] if len(args) == 1 and not kwargs else None
    if isinstance(source, (bytes, bytearray)):
        source = source.decode()
    if isinstance(source, str):
        if mode == "eval":
            source = source.lstrip(" \t")
        code = compile(source, "<string>", mode, flags=frame.code.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    elif isinstance(source, types.CodeType) and not source.co_freevars:
        code = source
    else:
        args, kwargs = _default_namespaces(ctx, mode, args, kwargs)
        return native(*args, **kwargs)
    g = frame.globals
    if "__builtins__" not in g:
        g["__builtins__"] = frame.builtins
    func = FunctionType(code, g)
    info = decode(code)
    sub = Frame(ctx, code, info, func, g, func.__builtins__, frame_locals(frame), [NULL] * info.nlocalsplus)
    rv = run_function_frame(ctx, sub, func)
    return rv if mode == "eval" else None


@register_default_lookaside(builtins.eval)
def _eval(ctx, args, kwargs):
    return _run_source(ctx, "eval", args, kwargs)


@register_default_lookaside(builtins.exec)
def _exec(ctx, args, kwargs):
    return _run_source(ctx, "exec", args, kwargs)


@register_default_lookaside(sys.exc_info)
def _exc_info(ctx, args, kwargs):
    _no_args("exc_info", args, kwargs)
    e = ctx.handled_exception()
    if e is None:
        return (None, None, None)
    return (type(e), e, e.__traceback__)


if hasattr(sys, "exception"):

    @register_default_lookaside(sys.exception)
    def _exception(ctx, args, kwargs):
        _no_args("exception", args, kwargs)
        return ctx.handled_exception()


@register_default_lookaside(builtins.super)
def _super(ctx, args, kwargs):
    if args or kwargs:
        return super(*args, **(kwargs or {}))
    frame = current_frame(ctx)
    code = frame.code
    if code.co_argcount == 0 and not code.co_flags & 0x04:
        raise RuntimeError("super(): no arguments")
    first = frame.fast[0]
    if code.co_varnames[0] in code.co_cellvars and type(first) is CellType:
        try:
            first = first.cell_contents
        except ValueError:
            first = NULL
    if first is NULL:
        raise RuntimeError("super(): arg[0] deleted")
    names = frame.info.names
    try:
        idx = names.index("__class__", frame.info.free_start)
    except ValueError:
        raise RuntimeError("super(): __class__ cell not found") from None
    try:
        cls = frame.fast[idx].cell_contents
    except ValueError:
        raise RuntimeError("super(): empty __class__ cell") from None
    if not isinstance(cls, type):
        raise RuntimeError("super(): __class__ is not a type")
    return super(cls, first)


def _calculate_metaclass(meta: type, bases: tuple) -> type:
    winner = meta
    for base in bases:
        base_meta = type(base)
        if issubclass(winner, base_meta):
            continue
        if issubclass(base_meta, winner):
            winner = base_meta
            continue
        raise TypeError(
            "metaclass conflict: the metaclass of a derived class must be a (non-strict) subclass "
            "of the metaclasses of all its bases"
        )
    return winner


@register_default_lookaside(builtins.__build_class__)
def _build_class(ctx, args, kwargs):
    """``__build_class__`` with the class body interpreted."""
    if len(args) < 2:
        raise TypeError("__build_class__: not enough arguments")
    func, name, *bases = args
    if type(func) is not FunctionType:
        raise TypeError("__build_class__: func must be a function")
    if not isinstance(name, str):
        raise TypeError("__build_class__: name is not a string")
    kwargs = dict(kwargs or {})
    orig_bases = tuple(bases)
    bases = types.resolve_bases(orig_bases)
    meta = kwargs.pop("metaclass", NULL)
    if meta is NULL:
        meta = type(bases[0]) if bases else type
        is_class = True
    else:
        is_class = isinstance(meta, type)
    if is_class:
        meta = _calculate_metaclass(meta, bases)
    prepare = getattr(meta, "__prepare__", NULL)
    ns = {} if prepare is NULL else call(ctx, prepare, (name, bases), kwargs)
    if not isinstance(ns, Mapping):
        meta_name = meta.__name__ if is_class else "<metaclass>"
        raise TypeError(f"{meta_name}.__prepare__() must return a mapping, not {type(ns).__name__}")
    code = func.__code__
    info = decode(code)
    fast = [NULL] * info.nlocalsplus
    if func.__closure__:
        fast[info.free_start :] = func.__closure__
    frame = Frame(ctx, code, info, func, func.__globals__, func.__builtins__, ns, fast)
    cell = run_function_frame(ctx, frame, func)
    if bases is not orig_bases:
        ns["__orig_bases__"] = orig_bases
    cls = call(ctx, meta, (name, bases, ns), kwargs)
    if isinstance(cls, type) and type(cell) is CellType:
        try:
            contents = cell.cell_contents
        except ValueError:
            contents = NULL
        if contents is not cls:
            raise TypeError(f"__class__ set to {contents!r} defining {name!r} as {cls!r}")
    if isinstance(cls, type) and ctx.cb_made_object is not None:
        ctx.cb_made_object(cls)
    return cls


@register_default_lookaside(type.__new__)
def _type_new(ctx, args, kwargs):
    """``type.__new__(meta, name, bases, ns)`` (a metaclass's ``super().__new__``): Note [Classes made by the program]."""
    if len(args) == 4 and isinstance(args[0], type) and issubclass(args[0], type):
        return new_class(ctx, args, kwargs)
    return type.__new__(*args, **(kwargs or {}))


@register_default_lookaside(type.__call__)
def _type_dunder_call(ctx, args, kwargs):
    if args and isinstance(args[0], type):
        return type_call(ctx, args[0], args[1:], kwargs)
    return type.__call__(*args, **(kwargs or {}))


# Builtins that only dispatch to a dunder: interpret the dunder when it is a Python function
# (see Note [Implicit calls] in ``protocols``).

_MISSING = object()


@register_default_lookaside(builtins.bool)
def _bool(ctx, args, kwargs):
    if len(args) == 1 and not kwargs:
        return truth(ctx, args[0])
    return bool(*args, **(kwargs or {}))


@register_default_lookaside(builtins.len)
def _len(ctx, args, kwargs):
    if len(args) == 1 and not kwargs:
        return length(ctx, args[0])
    return len(*args, **(kwargs or {}))


@register_default_lookaside(builtins.iter)
def _iter(ctx, args, kwargs):
    if len(args) == 1 and not kwargs:
        return get_iter(ctx, args[0])
    return iter(*args, **(kwargs or {}))


@register_default_lookaside(builtins.reversed)
def _reversed(ctx, args, kwargs):
    if len(args) == 1 and not kwargs:
        return reverse(ctx, args[0])
    return reversed(*args, **(kwargs or {}))


@register_default_lookaside(builtins.next)
def _next(ctx, args, kwargs):
    if kwargs or not 1 <= len(args) <= 2:
        return next(*args, **(kwargs or {}))
    it = args[0]
    if not hasattr(type(it), "__next__"):
        raise TypeError(f"'{type(it).__name__}' object is not an iterator")
    if len(args) == 1:
        return iter_next(ctx, it)
    result = _MISSING
    try:
        result = iter_next(ctx, it)
    except StopIteration:
        pass
    return args[1] if result is _MISSING else result


@register_default_lookaside(collections.namedtuple)
def _namedtuple(ctx, args, kwargs):
    # namedtuple() reads its caller's module from the Python frame stack, which is the interpreter's.
    kwargs = dict(kwargs or {})
    if "module" not in kwargs:
        kwargs["module"] = current_frame(ctx).globals.get("__name__", "__main__")
    return collections.namedtuple(*args, **kwargs)
