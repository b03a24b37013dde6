"""Exception types: user errors and internal failures are kept apart.

Layer: core. Imports: stdlib only.
"""


class ThunderError(Exception):
    """Base of errors caused by the user's program or inputs."""


class ThunderTypeError(ThunderError, TypeError, RuntimeError):
    """An op received an argument of the wrong type or dtype.

    Also a RuntimeError: PyTorch raises RuntimeError for a dtype it rejects (``linear`` of a float64 input with
    float32 weights), and a program that catches it (``except RuntimeError:``, then another path) must take that
    path here too."""


class ThunderValueError(ThunderError, ValueError, RuntimeError):
    """An op received an argument with a bad value or shape.

    Also a RuntimeError: PyTorch raises RuntimeError for most shape errors, and code written
    against either type must catch it."""


class ThunderIndexError(ThunderError, IndexError):
    """An index or dim is out of range (where PyTorch raises IndexError)."""


class ThunderOverflowError(ThunderError, OverflowError):
    """A Python number too large for PyTorch (where PyTorch raises OverflowError)."""


class ThunderRuntimeError(ThunderError, RuntimeError):
    """Something the user's program did cannot be compiled (data-dependent control flow, ...)."""


class UnsupportedOpError(ThunderError, NotImplementedError):
    """The program calls a torch function that has no thunder symbol."""


class MakesParameters(UnsupportedOpError):
    """The program makes a new ``nn.Parameter`` (builds a module) while traced: its first such call runs eagerly, as a
    one-time setup (Note [Parameters made by the program] in thunder/__init__.py); a later one is refused with this."""


class SharpEdgeError(ThunderError, RuntimeError):
    """The program did something the trace cannot capture, under ``sharp_edges="error"``."""


#: Said where an op gets a real ``torch.Tensor``, not a traced one: a tensor that code thunder ran natively made.
NATIVE_TENSOR_HINT = (
    ": a torch.Tensor made inside the function by code thunder runs natively (torch.from_numpy of an array, "
    "a C extension), whose values the trace does not have. Make it with torch.tensor(...) of numbers, or outside "
    "the function and pass it in"
)


class InternalError(RuntimeError):
    """A bug in thunder itself: an invariant failed."""


def check(cond: bool, msg, exc_type: type[Exception] = ThunderValueError) -> None:
    """Raises ``exc_type(msg)`` (``msg`` may be a callable, evaluated lazily) unless ``cond``."""
    if not cond:
        raise exc_type(msg() if callable(msg) else msg)
