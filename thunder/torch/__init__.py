"""The torch language: one symbol per supported torch function, Tensor method and
``torch.nn.functional`` function, with PyTorch's semantics, decomposed into prims.

See Note [The torch language] in ``thunder.torch.base``.

Layer: language. Imports: core.
"""

import torch
import torch.utils.checkpoint
from torch.overrides import resolve_name

from thunder.core import proxies as _proxies
from thunder.core.errors import UnsupportedOpError
from thunder.core.symbol_lookup import register_symbol_table
from thunder.core.tracectx import current_source_location
from thunder.torch.base import inplace_twins, symbol_to_torch, torch_to_thunder_map, torchsymbol
from thunder.torch.conversions import *  # noqa: F403
from thunder.torch.custom_ops import custom_ops
from thunder.torch.data_dependent import *  # noqa: F403
from thunder.torch.data_dependent import one_hot as _one_hot
from thunder.torch.elementwise import *  # noqa: F403
from thunder.torch.factories import *  # noqa: F403
from thunder.torch.indexing import *  # noqa: F403
from thunder.torch.inplace import *  # noqa: F403
from thunder.torch.layout import *  # noqa: F403
from thunder.torch.linalg import *  # noqa: F403
from thunder.torch.nn import *  # noqa: F403
from thunder.torch.rearrange import *  # noqa: F403
from thunder.torch.reductions import *  # noqa: F403
from thunder.torch.reductions import sum_to_size  # noqa: F401  (a Tensor method only)
from thunder.torch.shape import *  # noqa: F403
from thunder.torch.strided import *  # noqa: F403


def _register_no_grad_results() -> None:
    import torch

    from thunder.core.trace import NO_GRAD_RESULTS
    from thunder.torch.conversions import _tensor_data

    for fn in (torch.zeros_like, torch.ones_like, torch.empty_like, torch.full_like, torch.rand_like, torch.randn_like,
               torch.randint_like, torch.Tensor.detach, torch.detach, _tensor_data, torch.Tensor.new_zeros, torch.Tensor.new_ones,
               torch.Tensor.new_full, torch.Tensor.new_empty, torch.Tensor.new_tensor):  # fmt: skip
        sym = torch_to_thunder_map.get(fn)
        if sym is not None:
            NO_GRAD_RESULTS.add(sym.id)


_register_no_grad_results()

from thunder.torch import amp as _amp  # noqa: E402, F401  (registers replacements)
from thunder.torch import autocast as _autocast  # noqa: E402  (needs the symbols above)
from thunder.torch import eager_saves as _eager_saves  # noqa: E402, F401  (installs the rule)
from thunder.torch import rng as _rng  # noqa: E402, F401
from thunder.torch import scans as _scans  # noqa: E402, F401  (registers a replacement)
from thunder.torch.eager_ops import declare_table as _declare_eager_ops  # noqa: E402

_declare_eager_ops()  # after every family: their symbols win

from thunder.torch.foreach import declare_foreach_ops as _declare_foreach_ops  # noqa: E402

_declare_foreach_ops()  # from the per-tensor ops, eager ones included (Note [Foreach ops])

# torch's aliases: the same function under another name (``torch.special.expit`` is ``torch.sigmoid``).
_ALIASES = {
    torch.special.expit: torch.sigmoid, torch.special.xlogy: torch.xlogy, torch.special.logsumexp: torch.logsumexp,
    torch.special.i0: torch.i0, torch.special.erf: torch.erf, torch.special.erfc: torch.erfc,
    torch.special.erfinv: torch.erfinv, torch.special.exp2: torch.exp2, torch.special.expm1: torch.expm1,
    torch.special.log1p: torch.log1p, torch.special.psi: torch.digamma, torch.special.digamma: torch.digamma,
    torch.special.gammaln: torch.lgamma, torch.fix: torch.trunc, torch.Tensor.fix: torch.trunc,
    torch._is_all_true: torch.all, torch._is_any_true: torch.any,  # torch.distributions' argument validation
    torch.Tensor._is_all_true: torch.all, torch.Tensor._is_any_true: torch.any,  # torch._check_tensor_all
}  # fmt: skip
# Tensor methods (and their in-place forms, and the torch functions of the same names) that are torch's other names
# of a method: ``Tensor.arccos`` is ``Tensor.acos``.
_METHOD_ALIASES = {
    "absolute": "abs", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin", "arcsinh": "asinh", "arctan": "atan",
    "arctanh": "atanh", "arctan2": "atan2", "clip": "clamp", "divide": "div", "greater": "gt", "greater_equal": "ge",
    "less": "lt", "less_equal": "le", "multiply": "mul", "negative": "neg", "not_equal": "ne", "subtract": "sub",
}  # fmt: skip
# Tensor methods that are a torch function of the tensor (``x.prelu(w)`` is ``torch.prelu(x, w)``).
_METHODS_OF_FUNCTIONS = {"matrix_power": torch.linalg.matrix_power, "hardshrink": torch.hardshrink, "prelu": torch.prelu}


def _declare_aliases_and_in_place_twins() -> None:
    """The aliases of supported functions, and the in-place methods (``cumsum_``, ``addmm_``) of supported
    out-of-place ones that have no twin yet: computed out of place and copied in, as ``make_inplace`` does."""
    from thunder.core.proxies import register_method
    from thunder.torch.base import _as_method, make_inplace

    for alias, target in _ALIASES.items():
        if alias not in torch_to_thunder_map and target in torch_to_thunder_map:
            sym = torch_to_thunder_map[alias] = torch_to_thunder_map[target]
            if getattr(torch.Tensor, alias.__name__, None) is alias:  # ``x.fix()`` on a proxy, as ``Tensor.fix``
                register_method(alias.__name__, _as_method(sym, alias.__name__))
    for alias, target in _METHOD_ALIASES.items():  # ``x.arccos()``, ``x.multiply_(2)``, ``torch.negative(x)``
        for suffix in ("", "_"):
            sym = torch_to_thunder_map.get(getattr(torch.Tensor, target + suffix, None))
            if sym is None:
                continue
            method = getattr(torch.Tensor, alias + suffix, None)
            if method is not None and method not in torch_to_thunder_map:
                torch_to_thunder_map[method] = sym
                register_method(alias + suffix, _as_method(sym, alias + suffix))
            function = getattr(torch, alias + suffix, None)
            if function is not None and function not in torch_to_thunder_map:
                torch_to_thunder_map[function] = sym
    for name, function in _METHODS_OF_FUNCTIONS.items():  # ``x.matrix_power(3)``: ``torch.linalg.matrix_power(x, 3)``
        sym, method = torch_to_thunder_map[function], getattr(torch.Tensor, name)
        if method not in torch_to_thunder_map:
            torch_to_thunder_map[method] = sym
            register_method(name, _as_method(sym, name))
        if getattr(torch, name, None) is not None:
            torch_to_thunder_map.setdefault(getattr(torch, name), sym)
    for name in ("addmm", "addmv", "addbmm", "baddbmm", "addr", "cumsum", "cumprod", "scatter_reduce", "masked_scatter",
                 "put", "index_reduce", "logit", "fix", "renorm", "nan_to_num", "clamp_min", "clamp_max", "xlogy",
                 "hypot", "ldexp", "copysign", "nextafter", "float_power", "lerp", "logical_not", "fmod", "remainder",
                 "square", "sgn", "frac", "deg2rad", "rad2deg", "true_divide", "sinc", "heaviside", "i0", "igamma",
                 "igammac", "mvlgamma", "conj_physical"):  # fmt: skip
        method = getattr(torch.Tensor, f"{name}_", None)
        sym = torch_to_thunder_map.get(getattr(torch.Tensor, name, None)) or torch_to_thunder_map.get(getattr(torch, name, None))
        if method is not None and sym is not None and method not in torch_to_thunder_map:
            function = getattr(torch, f"{name}_", None)  # ``torch.square_(x)``, where torch has one
            function = function if function is not None and function not in torch_to_thunder_map else None
            twin = torch_to_thunder_map[method] = make_inplace(sym, torch_fn=function, method_name=f"{name}_")
            globals()[twin.name] = twin  # printed traces name it ltorch.<name>
    for name in ("celu", "selu"):  # no method: ``torch.celu_(x)``, which ``F.celu(x, inplace=True)`` calls
        function, sym = getattr(torch, f"{name}_"), torch_to_thunder_map.get(getattr(torch, name))
        if sym is not None and function not in torch_to_thunder_map:
            twin = torch_to_thunder_map[function] = make_inplace(sym, torch_fn=function)
            globals()[twin.name] = twin


_declare_aliases_and_in_place_twins()
torch_to_thunder_map[torch.nn.functional.one_hot] = _one_hot  # over the eager op: the classes may be inferred


def _export_by_name() -> None:
    """Printed traces name symbols ``ltorch.<name>``: the eager and random ops (and their VJPs) too."""
    from thunder.torch.eager_ops import ALL_EAGER_SYMBOLS
    from thunder.torch.rng import RANDOM_OPS

    methods = [torch_to_thunder_map[m] for m in (torch.Tensor.polygamma, torch.Tensor.polygamma_, torch.Tensor.lu)]
    for sym in (*ALL_EAGER_SYMBOLS, *RANDOM_OPS.values(), *methods):
        if sym.name in globals() and globals()[sym.name] is not sym:
            raise AssertionError(f"two symbols are named ltorch.{sym.name}")
        globals()[sym.name] = sym


_export_by_name()

_autocast.register(torch_to_thunder_map)


_STRIDED = _proxies.TensorProxy.UNTRACEABLE["as_strided_"]

#: Torch functions with no meaning in a trace, and why: calling one is a clear error, and
#: ``thunder.examine`` lists them so (Tensor methods: ``TensorProxy.UNTRACEABLE``).
UNTRACEABLE_FUNCTIONS: dict = {
    torch.as_strided_: _STRIDED,
    torch.as_strided_copy: _STRIDED,
}


def _torch_function(func, args, kwargs):
    """Handles a torch function called natively on a proxy (``TensorProxy.__torch_function__``)."""
    sym = torch_to_thunder_map.get(func) or custom_ops.get(func)
    if sym is None:
        name = resolve_name(func) or getattr(func, "__qualname__", None) or repr(func)
        loc = current_source_location()
        where = f" (called at {loc})" if loc is not None else ""
        if func in UNTRACEABLE_FUNCTIONS:
            raise UnsupportedOpError(
                f"{name} has no meaning in a trace: {UNTRACEABLE_FUNCTIONS[func]}{where}. Call it outside the "
                "jitted function."
            )
        raise UnsupportedOpError(
            f"torch function {name} is not supported by thunder yet{where}. Add a symbol for it with "
            "@thunder.torch.torchsymbol(<torch function>) (see thunder/torch/), or call it outside the jitted function."
        )
    return sym(*args, **kwargs)


from thunder.core.dtypes import to_torch_dtype  # noqa: E402, F401  (lightning-thunder spells it thunder.torch.to_torch_dtype)


def checkpoint(function, *args, **kwargs):
    """lightning-thunder's ``thunder.torch.checkpoint``: ``torch.utils.checkpoint.checkpoint``, not reentrant, whose
    region's results are recomputed in the backward instead of saved (Note [Activation checkpointing])."""
    return torch.utils.checkpoint.checkpoint(function, *args, use_reentrant=False, **kwargs)

_proxies.torch_function_handler = _torch_function
register_symbol_table(torch_to_thunder_map)  # the tracer records torch calls as these symbols
register_symbol_table(custom_ops)  # and, after them, torch.library ops (Note [Custom ops])
