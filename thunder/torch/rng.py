"""Torch's global random generator inside a jitted function: seeding, its state, and the ops that
draw from it beyond the factories (``bernoulli``, ``multinomial``, ``normal``, ``poisson``,
``randperm``, the in-place fills ``uniform_``, ``normal_``, ...).

Note [Random ops follow eager's generator]
Every draw is a trace op that the torch executor runs by calling the torch function eagerly does,
in program order, on torch's global generator: ``torch.manual_seed(0)`` (before the call or inside
the function) gives eager's numbers. The ops carry ``RANDOM`` (never merged by CSE) and
``DONT_DCE`` (an unused draw still advances the generator; no fusion executor takes them, so none
draws from a generator of its own). Seeding and ``torch.set_rng_state`` are ops too, and
``torch.get_rng_state()`` reads the state where the program reads it. What cannot follow eager is
refused with a clear error: ``torch.seed()`` (a nondeterministic seed the program would see) and
generator objects other than the default one (their state lives outside the trace).

Layer: language. Imports: core, torch.base, torch.eager_ops, torch.factories.
"""

from __future__ import annotations

import torch

from thunder.core.errors import ThunderTypeError, UnsupportedOpError
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.symbol import DONT_DCE, IN_PLACE, RANDOM
from thunder.core.symbol_lookup import register_interpreted_replacement
from thunder.core.tracectx import current_source_location
from thunder.torch import base
from thunder.torch.base import is_number, torchsymbol
from thunder.torch.eager_ops import eager_op
from thunder.torch.factories import check_generator

__all__ = ["manual_seed", "get_rng_state", "set_rng_state", "RANDOM_OPS"]

_STATEFUL = (RANDOM, DONT_DCE)


@torchsymbol(id="torch.manual_seed", tags=_STATEFUL, torch_impl=lambda seed: torch.manual_seed(seed) and None)
def manual_seed(seed):
    """``torch.manual_seed``: seeds the global generator at this point of the program."""
    if isinstance(pyval(seed), bool) or not is_number(seed) or not isinstance(pyval(seed), int):
        raise ThunderTypeError(f"manual_seed expected an int seed, but got {type(pyval(seed)).__name__} {seed!r}")
    return None


def _manual_seed(seed):
    """What a traced ``torch.manual_seed(seed)`` runs: the op, and eager's result (the default generator)."""
    manual_seed(seed)
    return torch.default_generator


register_interpreted_replacement(torch.manual_seed, _manual_seed)


_STATE_SHAPE = tuple(torch.get_rng_state().shape)


@torchsymbol(torch.get_rng_state, torch.random.get_rng_state, id="torch.get_rng_state", tags=_STATEFUL)
def get_rng_state():
    """``torch.get_rng_state``: the global generator's state, as of this point of the program."""
    return TensorProxy(shape=_STATE_SHAPE, dtype=torch.uint8, device=torch.device("cpu"))


@torchsymbol(torch.set_rng_state, torch.random.set_rng_state, id="torch.set_rng_state", tags=_STATEFUL)
def set_rng_state(new_state):
    """``torch.set_rng_state``: restores a state that ``get_rng_state`` returned."""
    if not isinstance(new_state, TensorProxy) or new_state.dtype != torch.uint8:
        raise ThunderTypeError(f"set_rng_state expected a torch.ByteTensor, but got {new_state!r}")
    return None


def _refused(fn, what: str, why: str):
    """``fn`` as a symbol that refuses, naming the call: eager's result is not something a trace can follow."""

    def meta(*args, **kwargs):
        loc = current_source_location()
        where = f" (at {loc})" if loc is not None else ""
        raise UnsupportedOpError(f"{what} {why}{where}; call it outside the jitted function")

    meta.__name__ = fn.__name__
    return torchsymbol(fn, id=f"torch.{fn.__name__}")(meta)


_REFUSED = {
    torch.seed: _refused(torch.seed, "torch.seed()", "seeds the generator with a nondeterministic number the program would see"),
    torch.initial_seed: _refused(torch.initial_seed, "torch.initial_seed()", "reads the generator's seed, which the trace does not follow"),
}


# Random draws of torch functions: one eager op each (Note [Eager ops]), run by torch.
_RANDOM_FUNCTIONS = (
    (torch.bernoulli, "bernoulli"),
    (torch.multinomial, "multinomial"),
    (torch.normal, None),
    (torch.poisson, None),
    (torch.randperm, None),
    (torch.rrelu, None),
    (torch.binomial, None),
    (torch._standard_gamma, None),
    (torch._sample_dirichlet, None),
)


def _declare_functions() -> dict:
    from thunder.torch.base import torch_to_thunder_map

    return {
        fn: eager_op(fn, method_name=method, random=True)
        for fn, method in _RANDOM_FUNCTIONS
        if fn not in torch_to_thunder_map
    }


def _dropout_variant(fn):
    """``fn(input, p, train)`` (``alpha_dropout``, ``feature_dropout``, ...): ``input`` itself when it
    draws nothing (not training, ``p == 0`` or an empty input), as in eager, else a random op."""
    draw = eager_op(fn, random=True, name=f"{fn.__name__}_draw")

    def meta(input, p, train):
        if not isinstance(input, TensorProxy):
            raise ThunderTypeError(f"{fn.__name__}: expected a tensor, but got {type(input).__name__}")
        if not pyval(train) or pyval(p) == 0 or input.numel() == 0:
            return input
        return draw(input, p, train)

    meta.__name__ = fn.__name__
    return torchsymbol(fn, id=f"torch.{fn.__name__}")(meta)


_DROPOUT_VARIANTS = {fn: _dropout_variant(fn) for fn in (torch.alpha_dropout, torch.feature_alpha_dropout, torch.feature_dropout)}


# In-place fills: ``a.uniform_(0, 1)`` draws a new tensor like ``a`` (same strides, so the same
# elements get the same numbers) and writes it into ``a``, as eager draws into ``a``'s memory.
_FILLS = ("uniform_", "normal_", "bernoulli_", "exponential_", "cauchy_", "log_normal_", "geometric_", "random_")


def _fill_draw(method: str):
    def draw(a, *args, **kwargs):
        return getattr(torch.empty_like(a), method)(*args, **kwargs)

    return draw


def _fill_symbol(method: str):
    draw = eager_op(_fill_draw(method), random=True, name=f"{method.rstrip('_')}_draw")

    def fill(a, *args, generator=None, **kwargs):
        check_generator(f"Tensor.{method}", generator)
        if not isinstance(a, TensorProxy):
            raise ThunderTypeError(f"Tensor.{method}: expected a tensor, but got {type(a).__name__}")
        return base.copy_(draw(a, *args, **kwargs), a)

    fill.__name__ = method
    return torchsymbol(method_name=method, id=f"Tensor.{method}", tags=(IN_PLACE, *_STATEFUL), torch_impl=getattr(torch.Tensor, method))(fill)


#: torch function or ``Tensor`` method name -> its random op.
RANDOM_OPS: dict = {**_REFUSED, torch.manual_seed: manual_seed, torch.get_rng_state: get_rng_state,
                    torch.set_rng_state: set_rng_state, **_declare_functions(), **_DROPOUT_VARIANTS, **{m: _fill_symbol(m) for m in _FILLS}}
