"""The program's effects on the world, made again by every call of the computation: what it prints, logs and
warns, the tensor hooks it registers, and its assignments to outside globals, cells, attributes and containers
(Note [What a trace relied on] in thunder.core.jit_ext; ``thunder.core.replays`` orders them).

Their printers emit plain Python (``print(...)``, ``obj.name = value``, ``t.register_hook(hook)``).

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum
import keyword
import logging
import sys
import warnings

import torch

from thunder.core.prims.base import make_prim
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import DONT_DCE, ESCAPES, Symbol


class EffectPrimIDs(enum.Enum):
    PRINT = enum.auto()
    LOG = enum.auto()
    WARN = enum.auto()
    REGISTER_HOOK = enum.auto()
    RETAIN_GRAD = enum.auto()
    STORE_ATTR = enum.auto()
    STORE_GLOBAL = enum.auto()
    STORE_CELL = enum.auto()
    REPLACE_CONTENTS = enum.auto()
    CONTAINER_CALL = enum.auto()
    SET_TORCH_STATE = enum.auto()
    MODULE_HOOK_INPUTS = enum.auto()
    MODULE_HOOK_OUTPUTS = enum.auto()


P = EffectPrimIDs


def _print_print(bsym, printer):
    args, kwargs = bsym.args

    def value(x):  # a torch.Size prints as torch.Size([...]), not as the tuple the printer makes of it
        if isinstance(x, torch.Size):
            return f"{printer.add_ctx('_Size', torch.Size)}({printer.value(tuple(x))})"
        return printer.value(x)

    parts = [value(a) for a in args] + [f"{k}={value(v)}" for k, v in kwargs.items()]
    return [f"print({', '.join(parts)})"]


python_print = make_prim(P.PRINT, "python_print", lambda args, kwargs: None, tags=(DONT_DCE,), printer=_print_print)


def log_record(logger, caller: tuple, level: int, msg, args: tuple, exc_info=None, extra=None) -> None:
    """``logger._log(level, msg, args, ...)`` from ``caller``, the (file, line, function, stack text) that
    ``findCaller`` gave for the program's line while tracing: called here, it would find the generated code's."""
    fn, lno, func, sinfo = caller if logging._srcfile else ("(unknown file)", 0, "(unknown function)", None)
    if exc_info:
        if isinstance(exc_info, BaseException):
            exc_info = (type(exc_info), exc_info, exc_info.__traceback__)
        elif not isinstance(exc_info, tuple):
            exc_info = sys.exc_info()
    logger.handle(logger.makeRecord(logger.name, level, fn, lno, msg, args, exc_info, func, extra, sinfo))


def _print_log(bsym, printer):
    logger, level, msg, args, kwargs, caller = bsym.args
    parts = [printer.constant(logger, "_logger"), printer.constant(caller, "_caller"), printer.value(level)]
    parts += [printer.value(msg), printer.value(args)]
    parts += [f"{k}={printer.value(v)}" for k, v in kwargs.items()]
    return [f"{printer.add_ctx('_log_record', log_record)}({', '.join(parts)})"]


# ``python_log(logger, level, msg, args, kwargs, caller)``: a ``logging`` record the program emitted
# (``log.warning(...)``, once the logger was found enabled for its level), made again by every call with that call's
# values, from the program's line (``caller``: ``log_record``).
python_log = make_prim(P.LOG, "python_log", lambda *args: None, tags=(DONT_DCE,), printer=_print_log)


def _print_warn(bsym, printer):
    message, category, filename, lineno, module_globals = bsym.args
    namespace = printer.constant(module_globals.namespace, "_globals")
    module = repr(module_globals.namespace.get("__name__", "<string>"))
    parts = [printer.value(message), printer.constant(category, "_category"), repr(filename), repr(lineno), module]
    # No module_globals, as eager's ``warnings.warn`` passes none (3.12+ warns of a module whose globals have no
    # ``__spec__.loader``, a script's, when given them).
    parts += [f"{namespace}.setdefault('__warningregistry__', {{}})"]
    return [f"{printer.add_ctx('_warnings', warnings)}.warn_explicit({', '.join(parts)})"]


# ``python_warn(message, category, filename, lineno, module_globals)``: a ``warnings.warn`` of the program, attributed
# as eager's is (to the frame ``stacklevel`` names: its file, line and module's warning registry), issued again by
# every call, so that the filters decide each time whether it shows, as they do for eager's.
python_warn = make_prim(P.WARN, "python_warn", lambda *args: None, tags=(DONT_DCE,), printer=_print_warn)


def _print_register_hook(bsym, printer):
    tensor, hook = bsym.args
    return [f"{printer.value(tensor)}.register_hook({printer.value(hook)})"]


# ``register_hook(tensor, hook)``, ``retain_grad(tensor)``: the program's ``tensor.register_hook(hook)`` and
# ``tensor.retain_grad()``, made again by every call on its tensor (Note [Tensor hooks in the program] in
# thunder.core.side_effects).
register_hook = make_prim(P.REGISTER_HOOK, "register_hook", lambda t, hook: None, tags=(DONT_DCE, ESCAPES),
                          printer=_print_register_hook)  # fmt: skip
retain_grad = make_prim(P.RETAIN_GRAD, "retain_grad", lambda t: None, tags=(DONT_DCE,),
                        printer=lambda bsym, printer: [f"{printer.value(bsym.args[0])}.retain_grad()"])  # fmt: skip


def _print_store_attr(bsym, printer):
    obj, name, value, delete, *raw = bsym.args
    target = printer.value(obj)
    if raw and raw[0]:  # made past the type's own ``__setattr__`` (``object.__setattr__(self, ...)`` in it)
        if delete:
            return [f"object.__delattr__({target}, {name!r})"]
        return [f"object.__setattr__({target}, {name!r}, {printer.value(value)})"]
    if delete:
        return [f"delattr({target}, {name!r})"]
    if name.isidentifier() and not keyword.iskeyword(name):
        return [f"{target}.{name} = {printer.value(value)}"]
    return [f"setattr({target}, {name!r}, {printer.value(value)})"]


# ``store_attr(obj, name, value, delete, raw=False)``: the program's ``obj.name = value`` (``del`` where ``delete``),
# replayed; ``raw``: through ``object.__setattr__``, past a ``__setattr__`` of the type (a frozen dataclass's).
store_attr = make_prim(P.STORE_ATTR, "store_attr", lambda *args: None, tags=(DONT_DCE, ESCAPES), printer=_print_store_attr)


def _print_store_global(bsym, printer):
    globals_dict, name, value, delete = bsym.args
    target = f"{printer.constant(globals_dict, '_globals')}[{name!r}]"
    return [f"del {target}" if delete else f"{target} = {printer.value(value)}"]


store_global = make_prim(P.STORE_GLOBAL, "store_global", lambda *args: None, tags=(DONT_DCE, ESCAPES), printer=_print_store_global)


def _print_store_cell(bsym, printer):
    cell, value = bsym.args
    return [f"{printer.constant(cell, '_cell')}.cell_contents = {printer.value(value)}"]


store_cell = make_prim(P.STORE_CELL, "store_cell", lambda *args: None, tags=(DONT_DCE, ESCAPES), printer=_print_store_cell)


def _print_replace_contents(bsym, printer):
    container, items = bsym.args
    c = printer.value(container)
    if isinstance(items, list):
        return [f"{c}[:] = {printer.value(items)}"]
    if isinstance(items, dict):
        return [f"{c}.clear()", f"{c}.update({printer.value(dict(items))})"]
    if isinstance(items, bytes):  # a bytearray
        return [f"{c}[:] = {printer.value(items)}"]
    if isinstance(items, tuple):  # a deque
        return [f"{c}.clear()", f"{c}.extend({printer.value(items)})"]
    return [f"{c}.clear()", f"{c}.update({printer.value(list(items))})"]


# ``replace_contents(container, items)``: an outside list, dict, set, deque or bytearray the program changed ends the call
# holding what it held at the end of the program.
replace_contents = make_prim(
    P.REPLACE_CONTENTS, "replace_contents", lambda *args: None, tags=(DONT_DCE, ESCAPES), printer=_print_replace_contents
)


def _print_container_call(bsym, printer):
    container, method, args = bsym.args
    if method == "__setitem__":
        key, value = args
        return [f"{printer.value(container)}[{printer.value(key)}] = {printer.value(value)}"]
    return [f"{printer.value(container)}.{method}({', '.join(printer.value(a) for a in args)})"]


# ``container_call(container, method, args)``: a change to an outside list, dict or set whose contents the
# program never read (``log.append(x)``), made again by every call on whatever object the path holds then.
container_call = make_prim(
    P.CONTAINER_CALL, "container_call", lambda *args: None, tags=(DONT_DCE, ESCAPES), printer=_print_container_call
)


def _print_set_torch_state(bsym, printer):
    setter, value = bsym.args
    return [f"{printer.constant(setter, setter.__name__)}({printer.value(value)})"]


# ``set_torch_state(setter, value)``: a piece of global torch state the program left changed (``torch.set_num_threads(1)``,
# ``torch.backends.cudnn.benchmark = True``), set again by every call (Note [Torch state the program sets] in
# thunder.core.torch_state).
set_torch_state = make_prim(
    P.SET_TORCH_STATE, "set_torch_state", lambda *args: None, tags=(DONT_DCE,), printer=_print_set_torch_state
)



# Note [Module backward hooks in the program]
# ``nn.Module.__call__`` of a module with full backward hooks (``register_full_backward_hook``,
# ``register_full_backward_pre_hook``, or global ones) makes a ``torch.utils.hooks.BackwardHook`` that passes the
# module's tensor arguments, and then its results, through an identity autograd function whose node calls the hooks
# with the gradients of the module's arguments and results. In a trace, ``module_hook_inputs`` and
# ``module_hook_outputs`` stand for its two calls: each call of the computation makes eager's ``BackwardHook`` (the
# first prim returns it, an object of the trace) and passes the call's tensors through it, so torch runs the hooks
# where, when and with what eager's would, and a gradient a hook returns replaces eager's. The computation then has
# torch's autograd for its backward (autodiff refuses it, as for a tensor hook: Note [Tensor hooks in the program] in
# thunder.core.side_effects). Whether the tensors pass through (any requires grad, grad mode on) is decided at tracing
# as eager's ``BackwardHook`` decides it on each call: the prologue checks both.
def _module_hook_inputs(module, hooks, pre_hooks, n_args, positions, *tensors):
    hook = torch.utils.hooks.BackwardHook(module, hooks, pre_hooks)
    args = [None] * n_args
    for i, t in zip(positions, tensors):
        args[i] = t
    args = hook.setup_input_hook(tuple(args))
    return hook if hook.input_tensors_index is None else (hook, *(args[i] for i in positions))


def _module_hook_outputs(hook, n_results, positions, *tensors):
    results = [None] * n_results
    for i, t in zip(positions, tensors):
        results[i] = t
    results = hook.setup_output_hook(tuple(results))
    return tuple(results[i] for i in positions)


def _print_module_hook(fn):
    def printer_(bsym, printer):
        call = f"{printer.add_ctx(fn.__name__, fn)}({', '.join(printer.value(a) for a in bsym.args)})"
        return [f"{printer.target(bsym.output)} = {call}"]

    return printer_


def _module_hook_inputs_meta(module, hooks, pre_hooks, n_args, positions, *tensors):
    hook = Proxy(prefix="backward_hook")
    if not any(t.requires_grad for t in tensors):
        return hook
    return (hook, *(TensorProxy(like=t) for t in tensors))


# ``module_hook_inputs(module, hooks, pre_hooks, n_args, positions, *tensors)``: eager's ``BackwardHook(module, hooks,
# pre_hooks).setup_input_hook(args)`` of a module call whose ``n_args`` arguments hold ``tensors`` at ``positions``;
# returns the hook object and, where they pass through it, the tensors that the module's forward reads instead
# (Note [Module backward hooks in the program]).
module_hook_inputs = make_prim(
    P.MODULE_HOOK_INPUTS, "module_hook_inputs", _module_hook_inputs_meta, tags=(DONT_DCE, ESCAPES),
    printer=_print_module_hook(_module_hook_inputs),
)  # fmt: skip

# ``module_hook_outputs(hook, n_results, positions, *tensors)``: ``hook.setup_output_hook(results)``, the tensors the
# module call returns instead.
module_hook_outputs = make_prim(
    P.MODULE_HOOK_OUTPUTS, "module_hook_outputs",
    lambda hook, n_results, positions, *tensors: tuple(TensorProxy(like=t) for t in tensors), tags=(DONT_DCE,),
    printer=_print_module_hook(_module_hook_outputs),
)  # fmt: skip


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]
