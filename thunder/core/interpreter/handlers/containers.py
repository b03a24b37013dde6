"""Handlers: building and unpacking containers, subscripts, slices, f-strings.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

from ..conversions import as_ascii, as_repr, as_str, formatted
from ..errors import DELETED, NULL
from ..execution import call, lookup_type_attr
from ..natives import interpreted_iterable
from ..opcodes import register_opcode_handler
from ..protocols import _is_py, delitem, getitem, length, setitem


def pop_n(stack: list, n: int) -> list:
    if not n:
        return []
    items = stack[-n:]
    del stack[-n:]
    return items


@register_opcode_handler("BUILD_TUPLE")
def BUILD_TUPLE(inst, frame):
    frame.stack.append(tuple(pop_n(frame.stack, inst.arg)))


@register_opcode_handler("BUILD_LIST")
def BUILD_LIST(inst, frame):
    frame.stack.append(pop_n(frame.stack, inst.arg))


@register_opcode_handler("BUILD_SET")
def BUILD_SET(inst, frame):
    frame.stack.append(set(pop_n(frame.stack, inst.arg)))


@register_opcode_handler("BUILD_MAP")
def BUILD_MAP(inst, frame):
    items = pop_n(frame.stack, 2 * inst.arg)
    d = {}
    for i in range(0, len(items), 2):
        d[items[i]] = items[i + 1]
    frame.stack.append(d)


@register_opcode_handler("BUILD_CONST_KEY_MAP")
def BUILD_CONST_KEY_MAP(inst, frame):
    stack = frame.stack
    keys = stack.pop()
    values = pop_n(stack, inst.arg)
    d = {}
    for k, v in zip(keys, values):
        d[k] = v
    stack.append(d)


@register_opcode_handler("BUILD_STRING")
def BUILD_STRING(inst, frame):
    parts = pop_n(frame.stack, inst.arg)
    for part in parts:
        if type(part) is not str:  # a tool's text that joins itself (a ``SymStr``: its expression kept)
            join = lookup_type_attr(type(part), "__interpreter_build_string__")
            if join is not NULL:
                frame.stack.append(join(parts))
                return
    frame.stack.append("".join(parts))


@register_opcode_handler("BUILD_SLICE")
def BUILD_SLICE(inst, frame):
    frame.stack.append(slice(*pop_n(frame.stack, inst.arg)))


@register_opcode_handler("LIST_APPEND")
def LIST_APPEND(inst, frame):
    stack = frame.stack
    v = stack.pop()
    stack[-inst.arg].append(v)


@register_opcode_handler("SET_ADD")
def SET_ADD(inst, frame):
    stack = frame.stack
    v = stack.pop()
    stack[-inst.arg].add(v)


@register_opcode_handler("MAP_ADD")
def MAP_ADD(inst, frame):
    stack = frame.stack
    v = stack.pop()
    k = stack.pop()
    stack[-inst.arg][k] = v


def _is_iterable_type(t: type) -> bool:
    return lookup_type_attr(t, "__iter__") is not NULL or lookup_type_attr(t, "__getitem__") is not NULL


@register_opcode_handler("LIST_EXTEND")
def LIST_EXTEND(inst, frame):
    stack = frame.stack
    v = stack.pop()
    if not _is_iterable_type(type(v)):
        raise TypeError(f"Value after * must be an iterable, not {type(v).__name__}")
    stack[-inst.arg].extend(interpreted_iterable(frame.ctx, v, hint=True))  # (Note [Native callbacks])


@register_opcode_handler("SET_UPDATE")
def SET_UPDATE(inst, frame):
    stack = frame.stack
    v = stack.pop()
    stack[-inst.arg].update(interpreted_iterable(frame.ctx, v))


@register_opcode_handler("DICT_UPDATE")
def DICT_UPDATE(inst, frame):
    stack = frame.stack
    v = stack.pop()
    if lookup_type_attr(type(v), "keys") is NULL:
        raise TypeError(f"'{type(v).__name__}' object is not a mapping")
    merge_mapping(frame.ctx, stack[-inst.arg], v)


def function_str(f) -> str:
    """Like CPython's ``_PyObject_FunctionStr``: ``module.qualname()``."""
    qualname = getattr(f, "__qualname__", None)
    if qualname is None:
        return f"{type(f).__name__} object"
    module = getattr(f, "__module__", None)
    if module is not None and module != "builtins":
        return f"{module}.{qualname}()"
    return f"{qualname}()"


def merge_kwargs(ctx, func, d: dict, update) -> None:
    if lookup_type_attr(type(update), "keys") is NULL:
        raise TypeError(f"{function_str(func)} argument after ** must be a mapping, not {type(update).__name__}")
    merge_mapping(ctx, d, update, func)


_DICT_ITER = dict.__dict__["__iter__"]
_NO_FUNCTION = object()


def merge_mapping(ctx, d: dict, m, func=_NO_FUNCTION) -> None:
    """``d`` updated with the mapping ``m`` as CPython's ``{**m}`` (``f(**m)`` where ``func`` is given: a key given
    twice is an error) does it: a dict's items as stored; another mapping's ``keys()``, their iteration and its
    ``__getitem__`` called as the program would (natively, what they read went unchecked: Note [Native callbacks])."""
    t = type(m)
    if isinstance(m, dict) and lookup_type_attr(t, "__iter__") is _DICT_ITER:
        keys, get = tuple(dict.keys(m)), m.__getitem__ if t is dict else dict.__getitem__.__get__(m)
    else:
        keys_fn = lookup_type_attr(t, "keys")
        keys = interpreted_iterable(ctx, call(ctx, keys_fn, (m,)) if _is_py(keys_fn) else m.keys())
        get = lambda k: getitem(ctx, m, k)  # noqa: E731
    for k in keys:
        if func is not _NO_FUNCTION and k in d:
            raise TypeError(f"{function_str(func)} got multiple values for keyword argument '{k}'")
        d[k] = get(k)


@register_opcode_handler("DICT_MERGE")
def DICT_MERGE(inst, frame):
    stack = frame.stack
    update = stack.pop()
    merge_kwargs(frame.ctx, stack[-inst.arg - 2], stack[-inst.arg], update)


@register_opcode_handler("LIST_TO_TUPLE", max_ver=(3, 11))
def LIST_TO_TUPLE(inst, frame):
    stack = frame.stack
    stack[-1] = tuple(stack[-1])


# -- unpacking ----------------------------------------------------------------------------------------------


def _unpack_iter(ctx, v):
    if not _is_iterable_type(type(v)):
        raise TypeError(f"cannot unpack non-iterable {type(v).__name__} object")
    return iter(interpreted_iterable(ctx, v))  # (Note [Native callbacks])


_DONE = object()


@register_opcode_handler("UNPACK_SEQUENCE")
def UNPACK_SEQUENCE(inst, frame):
    stack = frame.stack
    seq = stack.pop()
    n = inst.arg
    t = type(seq)
    if (t is tuple or t is list) and len(seq) == n:
        stack.extend(reversed(seq))
        return
    it = _unpack_iter(frame.ctx, seq)
    values = []
    for _ in range(n):
        v = next(it, _DONE)
        if v is _DONE:
            raise ValueError(f"not enough values to unpack (expected {n}, got {len(values)})")
        values.append(v)
    if next(it, _DONE) is not _DONE:
        raise ValueError(f"too many values to unpack (expected {n})")
    stack.extend(reversed(values))


@register_opcode_handler("UNPACK_EX")
def UNPACK_EX(inst, frame):
    stack = frame.stack
    seq = stack.pop()
    before = inst.arg & 0xFF
    after = inst.arg >> 8
    values = list(_unpack_iter(frame.ctx, seq))
    if len(values) < before + after:
        raise ValueError(f"not enough values to unpack (expected at least {before + after}, got {len(values)})")
    middle_end = len(values) - after
    stack.extend(reversed(values[middle_end:]))
    stack.append(values[before:middle_end])
    stack.extend(reversed(values[:before]))


# -- subscripts ---------------------------------------------------------------------------------------------


@register_opcode_handler("BINARY_SUBSCR")
def BINARY_SUBSCR(inst, frame):
    stack = frame.stack
    k = stack.pop()
    stack[-1] = getitem(frame.ctx, stack[-1], k)


@register_opcode_handler("STORE_SUBSCR")
def STORE_SUBSCR(inst, frame):
    stack = frame.stack
    k = stack.pop()
    container = stack.pop()
    v = stack.pop()
    cb = frame.ctx.cb_store_subscr
    if cb is not None:
        cb(container, k, v)
    setitem(frame.ctx, container, k, v)


@register_opcode_handler("DELETE_SUBSCR")
def DELETE_SUBSCR(inst, frame):
    stack = frame.stack
    k = stack.pop()
    container = stack.pop()
    cb = frame.ctx.cb_store_subscr
    if cb is not None:
        cb(container, k, DELETED)
    delitem(frame.ctx, container, k)


@register_opcode_handler("BINARY_SLICE", min_ver=(3, 12))
def BINARY_SLICE(inst, frame):
    stack = frame.stack
    end = stack.pop()
    start = stack.pop()
    stack[-1] = getitem(frame.ctx, stack[-1], slice(start, end))


@register_opcode_handler("STORE_SLICE", min_ver=(3, 12))
def STORE_SLICE(inst, frame):
    stack = frame.stack
    end = stack.pop()
    start = stack.pop()
    container = stack.pop()
    v = stack.pop()
    k = slice(start, end)
    cb = frame.ctx.cb_store_subscr
    if cb is not None:
        cb(container, k, v)
    setitem(frame.ctx, container, k, v)


@register_opcode_handler("GET_LEN")
def GET_LEN(inst, frame):
    stack = frame.stack
    stack.append(length(frame.ctx, stack[-1]))


# -- f-strings ------------------------------------------------------------------------------------------------

# Note [Conversions interpreted] in ..conversions: a Python __str__/__repr__/__format__ runs as the program's code
_CONVERSIONS = (None, as_str, as_repr, as_ascii)


@register_opcode_handler("FORMAT_VALUE", max_ver=(3, 12))
def FORMAT_VALUE(inst, frame):
    stack = frame.stack
    flags = inst.arg
    spec = stack.pop() if flags & 0x04 else ""
    v = stack[-1]
    conv = _CONVERSIONS[flags & 0x03]
    if conv is not None:
        v = conv(frame.ctx, v)
    stack[-1] = v if (type(v) is str and not spec) else formatted(frame.ctx, v, spec)


@register_opcode_handler("CONVERT_VALUE", min_ver=(3, 13))
def CONVERT_VALUE(inst, frame):
    stack = frame.stack
    stack[-1] = _CONVERSIONS[inst.arg](frame.ctx, stack[-1])


@register_opcode_handler("FORMAT_SIMPLE", min_ver=(3, 13))
def FORMAT_SIMPLE(inst, frame):
    stack = frame.stack
    v = stack[-1]
    if type(v) is not str:
        stack[-1] = formatted(frame.ctx, v, "")


@register_opcode_handler("FORMAT_WITH_SPEC", min_ver=(3, 13))
def FORMAT_WITH_SPEC(inst, frame):
    stack = frame.stack
    spec = stack.pop()
    stack[-1] = formatted(frame.ctx, stack[-1], spec)
