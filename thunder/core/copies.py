"""Copies the program makes: ``copy.copy`` and ``copy.deepcopy`` of tensors and of outside objects.

Note [Copies of outside objects]
``copy.deepcopy(m)`` of a module argument, run by the interpreter, reads ``m``'s state natively (its
``__reduce_ex__``), and the new module would be an object the trace captured as it was on the first call.
So a copy (``copy.copy`` too) of an input tensor, or of an outside object the program sees as itself, is made
by the prologue on every call, as eager makes it, and the program gets it as an input whose attributes are
read and checked like an argument's: a fresh copy of this call's ``m``, with its own parameters, which get
the gradients, as in eager. The prologue runs before the program, so a copy after the program changed outside
state (which the computation replays) is refused. Copies of anything else are the program's own, interpreted.

``CopiesMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that makes them; ``SpecialCallsMixin`` sends the
calls here.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import copy as copy_module
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import prims
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.execution import enter_function
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.lifting import holds, holds_tensors
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.user_code import source_location

__all__ = ["CopiesMixin", "deepcopy_tensor"]


def deepcopy_tensor(a: torch.Tensor) -> torch.Tensor:
    """Eager's ``copy.deepcopy`` of a tensor: its whole storage copied and the same view of it kept (the strides,
    a broadcast's zero stride included, and the storage offset: not ``clone``'s layout). On the meta device, where
    the layout replays run (Note [Strides of traced tensors]) and ``deepcopy`` would clone, a tensor laid out so.
    The torch language's ``ltorch.deepcopy_tensor`` stands for it in traces."""
    if a.device.type == "meta":
        storage = torch.empty(a.untyped_storage().nbytes() // a.element_size(), dtype=a.dtype, device="meta")
        return storage.as_strided(a.shape, a.stride(), a.storage_offset())
    return copy_module.deepcopy(a)


class CopiesMixin:
    """``copy.copy``/``copy.deepcopy`` as the tracer runs them (Note [Copies of outside objects])."""

    def _copy(self, fn: Callable, x: Any, memo: dict | None = None) -> Any:
        """``copy.deepcopy(x)`` or ``copy.copy(x)`` (Note [Copies of outside objects])."""
        outside = self._outside_as_is(x)
        if outside is None and isinstance(x, TensorProxy):
            return self._copy_own_tensor(fn, x, memo)
        if outside is None:  # the program's own value: copied by the interpreted copy module
            self._guard_function(fn)
            return enter_function(current_runtime(), fn, (x,) if memo is None else (x, memo), None)
        if memo is not None and id(x) in memo:  # copied before within this deepcopy: the same copy, as deepcopy gives
            return memo[id(x)]
        holder, value = outside
        if self._changed_outside_state(value):
            again = self._copy_of_a_changed_copy(fn, value)
            if again is not None:
                return again
            loc = source_location()
            raise ThunderRuntimeError(
                f"copy.{fn.__name__}({holder.name}) copies an object from outside the jitted function after the "
                f"program changed outside state{f' (at {loc})' if loc else ''}: thunder makes such copies on every "
                "call before the program runs, so the copy would miss those changes. Copy before changing anything, "
                "or outside the jitted function."
            )
        out = self._prologue_proxy(f"{holder.name}_copy")
        self._emit(prims.unpack_call, fn, (holder,), {}, out, output=out)
        made = fn(value)
        self._keepalive.append(made)
        self._copied_from[id(made)] = (holder, value)
        seen = self.unpack_value(made, out, out.name)
        if memo is not None:
            memo[id(x)] = seen
            memo.setdefault(id(memo), []).append(x)  # as deepcopy keeps what it copied alive
        return seen

    def _copy_source_name(self, x: Any) -> str | None:
        """The prologue's name of what ``x``, a copy the prologue makes for each call, copies; None for anything
        else."""
        source = self._copied_from.get(id(x))
        return None if source is None else source[0].name

    def _copy_of_a_changed_copy(self, fn: Callable, value: Any) -> Any:
        """A copy of an object that is itself a copy made for this call (``config = copy.deepcopy(self.config)``,
        changed, then copied again, as Hugging Face models do): made now, with the program's changes, and kept as a
        constant, valid while what the first copy was made from compares equal (``==``) to its state now, which
        the prologue checks. None (refused by the caller) for anything else, or when the changes hold traced
        values."""
        source = self._copied_from.get(id(value))
        if source is None or holds(value, lambda v: isinstance(v, Proxy), depth=4):
            return None
        source_holder, source_value = source
        if holds_tensors(source_value):
            return None
        self._check(prims.check_value, source_holder, copy_module.deepcopy(source_value))
        made = fn(value)
        self._keepalive.append(made)
        return made

    def _copy_own_tensor(self, fn: Callable, x: TensorProxy, memo: dict | None) -> TensorProxy:
        """A copy of a tensor the program computed, as eager makes it: ``copy.copy`` shares the storage (the same
        proxy), ``copy.deepcopy`` is a new tensor (a clone) and refuses a tensor that requires grad, which inside
        the program is never a graph leaf."""
        if fn is copy_module.copy:
            return x
        if memo is not None and id(x) in memo:
            return memo[id(x)]
        if x.requires_grad:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol at the "
                f"moment (copy.deepcopy of {x.name}, computed inside the function and requiring grad); "
                "use .detach().clone() or .clone()"
            )
        out = interpreter_call(current_runtime(), deepcopy_tensor, (x,), None)
        if memo is not None:
            memo[id(x)] = out
            memo.setdefault(id(memo), []).append(x)
        return out

    def _outside_as_is(self, x: Any) -> tuple[Proxy, Any] | None:
        """(its prologue proxy, the object) for an input tensor, or an outside object the program sees as itself
        (a module, an object of the user's class); None for anything else."""
        found = self._tensor_inputs.get(id(x))
        if found is not None:
            return found
        holder = self._provenance.get(id(x))
        if holder is None or self._proxy_for.get(id(x)) is not x or isinstance(x, (type, types.ModuleType)):
            return None
        return holder, x
