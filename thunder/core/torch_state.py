"""Global torch state a trace may depend on, and how the tracer notices that the program read it.

Note [Torch state]
Global torch state the program reads (``torch.is_grad_enabled()``, ``torch.is_inference_mode_enabled()``,
``torch.get_default_dtype()``, the deterministic and backend flags: ``torch.are_deterministic_algorithms_enabled()``,
``torch.backends.cudnn.deterministic``; the thread counts, anomaly mode, the float32 matmul precision; a device's
autocast state) decides what the trace computes. So the prologue checks each piece the trace read, as it was when
the call began, and nothing else: a program that reads none pays for no check. The tracer looks aside the calls that read it (``reader``) and the
``torch.backends`` flags the program reads as attributes (``backend_flag``) and notes them: a key of
``TORCH_STATE`` (the expression the prologue reads it with, checked by ``prims.check_torch_state``), or a
device type whose autocast state was read (checked by ``prims.check_autocast``, as the trace's own autocast
casts are: Note [Autocast] in ``thunder.core.trace``). Reads made by the torch language itself (a factory's
default dtype, requires_grad under grad mode) are noted where they happen (``dtypes.default_dtype``,
``TraceCtx.grad_mode_read``). Grad mode records autograd only outside inference mode, so a trace that read grad
mode also checks inference mode unless it was made with both off (its answers, no autograd, hold in inference mode
too). The prologue calls each reader through a global name of its own (``torch_is_grad_enabled()``, not
``torch.is_grad_enabled()``): the attribute look-up would cost a cached call about as much as the call itself.

One piece is Python's: ``isinstance``/``issubclass`` of an ABC (``ABCMeta``'s ``__instancecheck__`` is interpreted,
but the registry of virtual subclasses and the caches it reads live in C, in ``_abc``) answer from state that
``Base.register(C)`` changes. Every ``register`` changes ``abc.get_cache_token()``, so a trace whose program asked
an ABC (``_abc_instancecheck``/``_abc_subclasscheck`` are noted as readers of it) checks that token: a cached call pays
one C call, and a registration anywhere recompiles such entries once. The token can change while the call is traced:
the first aten meta kernel tracing runs imports sympy and ``torch._dynamo`` (which register their number types and
NumPy's seed sequences), as may a module the program imports. The token the trace holds for is the one its answers
were given under (``AbcReads``): the token now, when each answer, asked again, is still the same (the usual case: a
registration of classes just made), else the token at the first answer (an entry no later call meets).

Note [Torch state the program sets]
A program may set a piece of that state and leave it so (``torch.set_num_threads(1)``,
``torch.backends.cudnn.benchmark = True``, ``torch.use_deterministic_algorithms(True)`` in a training step): the
setter runs natively while traced, once, so a cached call left the state as it found it where eager's set it again.
So tracing puts each piece of ``SETTERS`` back as it was when the call began (the prologue checks, the compilation and
a program that raised and runs eagerly all see the state the call began in), and the computation ends by setting what
the program left (``prims.set_torch_state``, a replay), on every call. A piece set and put back (a context manager:
``torch.autograd.detect_anomaly()``, ``torch.backends.cudnn.flags(...)``) needs nothing. Grad mode has its own
handling (the trace's switches), the default dtype is refused (``refusals.DEFAULTS``), the interop thread count can be
set only once.

Layer: core. Imports: torch and the standard library only.
"""

from __future__ import annotations

import _abc
import abc
import inspect
from collections.abc import Callable
from typing import Any

import torch

# The expression the prologue reads a piece of state with (the cheapest spelling) -> the function that reads it.
TORCH_STATE: dict[str, Callable[[], Any]] = {
    "torch.is_grad_enabled()": torch.is_grad_enabled,
    "torch.is_inference_mode_enabled()": torch.is_inference_mode_enabled,
    "torch.get_default_dtype()": torch.get_default_dtype,
    "torch._C._get_deterministic_algorithms()": torch._C._get_deterministic_algorithms,
    "torch._C._get_deterministic_algorithms_warn_only()": torch._C._get_deterministic_algorithms_warn_only,
    "torch._C._get_cudnn_deterministic()": torch._C._get_cudnn_deterministic,  # torch.backends.cudnn.deterministic
    "torch._C._get_mkldnn_deterministic()": torch._C._get_mkldnn_deterministic,
    "torch._C._get_cudnn_enabled()": torch._C._get_cudnn_enabled,
    "torch._C._get_cudnn_benchmark()": torch._C._get_cudnn_benchmark,
    "torch._C._get_cudnn_allow_tf32()": torch._C._get_cudnn_allow_tf32,
    "torch._C._get_mkldnn_enabled()": torch._C._get_mkldnn_enabled,
    # what the program may branch on or compute with: ``torch.get_num_threads()`` (a data loader sizing its work),
    # anomaly mode, the matmul precision (a model choosing its attention kernel), cuBLAS's TF32 flag
    "torch.get_num_threads()": torch.get_num_threads,
    "torch.get_num_interop_threads()": torch.get_num_interop_threads,
    "torch.is_anomaly_enabled()": torch.is_anomaly_enabled,
    "torch.is_anomaly_check_nan_enabled()": torch.is_anomaly_check_nan_enabled,
    "torch._C._get_float32_matmul_precision()": torch._C._get_float32_matmul_precision,
    "torch._C._get_cublas_allow_tf32()": torch._C._get_cublas_allow_tf32,
    "abc.get_cache_token()": abc.get_cache_token,
}
_READERS = {read: expr for expr, read in TORCH_STATE.items()}


def set_deterministic_algorithms(mode: bool) -> None:
    torch._C._set_deterministic_algorithms(mode, warn_only=torch._C._get_deterministic_algorithms_warn_only())


def set_deterministic_warn_only(warn_only: bool) -> None:
    torch._C._set_deterministic_algorithms(torch._C._get_deterministic_algorithms(), warn_only=warn_only)


def set_anomaly_enabled(mode: bool) -> None:
    torch.set_anomaly_enabled(mode, torch.is_anomaly_check_nan_enabled())


def set_anomaly_check_nan(check_nan: bool) -> None:
    torch.set_anomaly_enabled(torch.is_anomaly_enabled(), check_nan)


# The setter of each piece of ``TORCH_STATE`` a program may leave changed (Note [Torch state the program sets]).
SETTERS: dict[str, Callable[[Any], None]] = {
    "torch._C._get_deterministic_algorithms()": set_deterministic_algorithms,
    "torch._C._get_deterministic_algorithms_warn_only()": set_deterministic_warn_only,
    "torch._C._get_cudnn_deterministic()": torch._C._set_cudnn_deterministic,
    "torch._C._get_mkldnn_deterministic()": torch._C._set_mkldnn_deterministic,
    "torch._C._get_cudnn_enabled()": torch._C._set_cudnn_enabled,
    "torch._C._get_cudnn_benchmark()": torch._C._set_cudnn_benchmark,
    "torch._C._get_cudnn_allow_tf32()": torch._C._set_cudnn_allow_tf32,
    "torch._C._get_mkldnn_enabled()": torch._C._set_mkldnn_enabled,
    "torch.get_num_threads()": torch.set_num_threads,
    "torch.is_anomaly_enabled()": set_anomaly_enabled,
    "torch.is_anomaly_check_nan_enabled()": set_anomaly_check_nan,
    "torch._C._get_float32_matmul_precision()": torch._C._set_float32_matmul_precision,
    "torch._C._get_cublas_allow_tf32()": torch._C._set_cublas_allow_tf32,
}


# A piece torch refuses to read: the float32 matmul precision after the program mixed its API with the TF32 flags'
# (``torch.set_float32_matmul_precision("medium")``, then ``torch.backends.cuda.matmul.allow_tf32 = False``), which
# eager reads only where the program does. Neither compared nor set.
UNREADABLE = object()


def _read(expr: str) -> Any:
    try:
        return TORCH_STATE[expr]()
    except RuntimeError:
        return UNREADABLE


def put_back(entry: dict[str, Any]) -> None:
    """Sets the pieces of ``SETTERS`` that differ from ``entry``'s values (``state_now()``) back to them."""
    for expr, setter in SETTERS.items():
        value = _read(expr)
        if value is not UNREADABLE and entry[expr] is not UNREADABLE and value != entry[expr]:
            setter(entry[expr])


def set_since(entry: dict[str, Any]) -> list[tuple[Callable[[Any], None], Any]]:
    """The setter calls that take the state from ``entry``'s to what it is now. One setter may set several pieces (the
    float32 matmul precision sets cuBLAS's TF32 flag, and setting that flag too would mix the two APIs, which torch
    refuses): each is called only where those before it left its piece different."""
    now = {expr: _read(expr) for expr in SETTERS}
    if all(now[expr] is UNREADABLE or now[expr] == entry[expr] for expr in SETTERS):
        return []
    put_back(entry)
    calls = []
    for expr, setter in SETTERS.items():
        value = _read(expr)
        if now[expr] is not UNREADABLE and value is not UNREADABLE and value != now[expr]:
            setter(now[expr])
            calls.append((setter, now[expr]))
    return calls


# An ABC's answers depend on the registry behind its token (above).
_READERS.update({_abc._abc_instancecheck: "abc.get_cache_token()", _abc._abc_subclasscheck: "abc.get_cache_token()"})

# Settings torch keeps on a class of its own, which a public function changes between calls
# (``torch.distributions.Distribution.set_default_validate_args(False)``, read as ``self._validate_args`` by every
# distribution made without ``validate_args=``). A library's classes are otherwise taken as fixed (Note [Class
# attributes read through an instance] in thunder.core.outside_reads), so a read of one of these is checked as a
# class attribute of the user's is.
_CLASS_SETTINGS = frozenset({(torch.distributions.Distribution, "_validate_args")})
_CLASS_SETTING_NAMES = frozenset(name for _, name in _CLASS_SETTINGS)


def class_setting(cls: type, name: str) -> bool:
    """Whether ``cls.name`` (or an instance's) is a setting of ``_CLASS_SETTINGS``, on ``cls`` or a base."""
    return name in _CLASS_SETTING_NAMES and any((k, name) in _CLASS_SETTINGS for k in cls.__mro__)


AUTOCAST_DEVICE_TYPES = tuple(torch._C._autocast_supported_devices())
# function -> the device type whose autocast state it reads (None: its ``device_type`` argument, "cuda" if
# none; a tuple: all of them)
_AUTOCAST_READERS = {
    torch.is_autocast_enabled: None,
    torch.get_autocast_dtype: None,
    torch.is_autocast_cpu_enabled: "cpu",
    torch.get_autocast_cpu_dtype: "cpu",
    torch.get_autocast_gpu_dtype: "cuda",
    torch.is_autocast_xla_enabled: "xla",
    torch.get_autocast_xla_dtype: "xla",
    torch.is_autocast_ipu_enabled: "ipu",
    torch.get_autocast_ipu_dtype: "ipu",
    torch._C._is_any_autocast_enabled: AUTOCAST_DEVICE_TYPES,
}


def grad_mode_on() -> bool:
    """Whether ops run now record autograd: grad mode on, inference mode off (``enable_grad()`` inside
    ``inference_mode()`` turns grad mode on, yet eager's results there require no grad)."""
    return torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def state_now() -> tuple[dict[str, Any], dict[str, tuple[bool, torch.dtype]]]:
    """The value of each piece of ``TORCH_STATE``, and each device type's autocast (enabled, dtype), now."""
    autocast = {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICE_TYPES}
    return {expr: _read(expr) for expr in TORCH_STATE}, autocast


class AbcReads:
    """The answers the ABC registry gave the traced program, and the token they were given under (Note [Torch
    state])."""

    def __init__(self):
        self.token: int | None = None
        self.answers: list[tuple[Callable, tuple, Any]] = []

    def ask(self, fn: Callable, *args) -> Any:
        if self.token is None:
            self.token = abc.get_cache_token()
        answer = fn(*args)
        self.answers.append((fn, args, answer))
        return answer

    def token_to_check(self) -> int:
        """The token a cache entry of this trace holds for: the token now, if every answer is the same under it."""
        now = abc.get_cache_token()
        if self.token is None or self.token == now:
            return now
        try:
            same = all(fn(*args) == answer for fn, args, answer in self.answers)
        except Exception:  # a __subclasshook__ that raises now
            same = False
        return now if same else self.token


def reader(
    fn: Callable, note_state: Callable[[str], None], note_autocast: Callable[[str], None], abc_reads: AbcReads
) -> Callable | None:
    """What traced code calls instead of ``fn`` when ``fn`` reads torch state: ``fn`` itself, after noting the
    read (a key of ``TORCH_STATE``, or each device type whose autocast state it reads; an ABC's answer goes to
    ``abc_reads``); None for other functions."""
    try:
        expr = _READERS.get(fn)
    except TypeError:  # an unhashable callable object
        return None
    if expr == "abc.get_cache_token()":

        def ask_abc(*args):
            note_state(expr)
            return abc_reads.ask(fn, *args)

        return ask_abc
    if expr is not None:

        def read_state(*args, **kwargs):
            note_state(expr)
            return fn(*args, **kwargs)

        return read_state
    if fn not in _AUTOCAST_READERS:
        return None

    def read_autocast(*args, **kwargs):
        device_type = _AUTOCAST_READERS[fn]
        if device_type is None:
            device_type = args[0] if args else kwargs.get("device_type", "cuda")
        for d in (device_type,) if type(device_type) is str else device_type:
            note_autocast(d)
        return fn(*args, **kwargs)

    return read_autocast


# Read once: ``torch.backends`` answers an attribute through its ``__getattr__``, about 9 us, and tracing asks for
# every attribute it reads from a module.
_PROP_MODULE, _CONTEXT_PROP = torch.backends.PropModule, torch.backends.ContextProp
_CUBLAS_MODULE = type(torch.backends.cuda.matmul)


def backend_flag(obj: Any, name: str) -> str | None:
    """The key of ``TORCH_STATE`` that ``obj.name`` reads, for a ``torch.backends`` flag
    (``torch.backends.cudnn.deterministic``), else None."""
    typ = type(obj)  # (not isinstance: a class's own ``__getattribute__`` would see ``__class__`` read)
    if issubclass(typ, _CUBLAS_MODULE):  # ``torch.backends.cuda.matmul``: a ``__getattr__`` in Python, read natively
        return "torch._C._get_cublas_allow_tf32()" if name == "allow_tf32" else None
    if not issubclass(typ, _PROP_MODULE):
        return None
    prop = inspect.getattr_static(typ, name, None)
    return _READERS.get(prop.getter) if type(prop) is _CONTEXT_PROP else None
