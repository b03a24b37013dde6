"""Library wrappers the tracer runs itself: a wrapper whose outcome, on the path a call takes, depends on a few values
it reads from outside, which are read (and checked) as the interpreter reads them, and nothing else of it is run.

Note [deprecate_kwarg's wrapper]
transformers wraps most model, decoder-layer and attention forwards in ``deprecate_kwarg``'s ``wrapped_func``.
Interpreted, each call runs about 100 instructions (410 per Qwen2 trace) and the prologue checks every closure cell
it reads (``func``, ``is_instance_method``, ``old_name``, ``is_greater_or_equal_version``, ...) and the members of the
``Action`` enum. Where the call does not pass the deprecated keyword, the wrapper builds a name for a message it
does not make and calls ``func(*args, **kwargs)``: its outcome depends on ``old_name`` (whether the call passes it),
``func``, ``is_instance_method`` and ``is_class_method`` (the name reads ``args[0]``, which fails without positional
arguments) and the ``Action`` global (its members compared: an enum's members cannot be reassigned, so the class
fixes them). Those are read as the interpreter reads them (the same checks: a cell or global changed after tracing
retraces) and ``func`` is called under the interpreter; the other cells only matter once the keyword is passed,
and such a call, or one whose first argument's name could not be read plainly, is interpreted as before.
The wrapper is recognised by its code object and that code's digest (``_code_digest``): another transformers or Python
version (whose wrapper may do something else) is interpreted (``tests/test_program_forms.py`` checks the digest
still matches the installed version).

Note [ModelOutput construction]
A transformers model returns its outputs as a ``ModelOutput`` dataclass (``CausalLMOutputWithPast(logits=...,
past_key_values=...)``), several per forward. Interpreted, one construction runs the metaclass's ``__init__`` wrapper,
the dataclass's generated ``__init__``, and for each field ``ModelOutput.__setattr__`` (``fields(self)``, a set of the
names), then ``__post_init__`` and ``__setitem__`` per value: 62 of the 306 frames
that a first Qwen2 generation's two traces interpreted (99 -> 90 ms of tracing, medians of 5 processes on a loaded
2-core machine, 2026-12-07).
What it does with the values is store them (as attributes and items) and compare them with None, except where every
field after the first is None: then ``__post_init__`` asks whether the first is a tensor, iterates it or reads its
items, which a traced value answers otherwise natively. So the wrapper's renaming of the old cache keywords
(``_rename_kwargs_for_bc``, which may warn) is interpreted as before, and the generated ``__init__`` runs natively
where: the call passes ``self`` alone by position and only field names by keyword, one of them after the first field
with a value that is not None (so ``__post_init__`` takes the branch that only stores); the generated ``__init__``
takes exactly the fields (each with ``init``, no default factory, no ``InitVar``; the fields after the first default
to None, as ``__post_init__`` requires), the class is not frozen, ``ModelOutput`` is followed by ``OrderedDict`` in
its MRO and no class before it defines ``__setattr__``, ``__setitem__``, ``__post_init__`` or
``_replace_old_cache_name`` (so the native run calls the methods the digest names). The wrapper's cell ``init``,
that function's defaults and the globals the native run reads (``fields``, ``_register_model_output_pytree_node``)
are read as the interpreter reads them (checked). ``_register_model_output_pytree_node`` registers a class once (at
its definition already), so running it natively at tracing is what eager's first call does. Otherwise the
generated ``__init__`` is interpreted as before. Recognised by the digest of the wrapper and of the
``ModelOutput`` methods it runs, as ``deprecate_kwarg``'s wrapper is.

Note [The kernels hub's forward wrapper]
transformers decorates attention classes with the ``kernels`` package's ``use_kernelized_func(fn)`` (Qwen2, Llama:
``apply_rotary_pos_emb``), whose ``new_forward`` routes ``fn``'s calls to this model's private copy of ``fn`` (a
module that ``kernelize`` may give another forward): it copies the active routing (``_ACTIVE_KERNEL_FUNCS``, a
``CompileableContextVar``, which keeps it in an attribute when asked under a compiler, as traced code is), adds the
copies, sets it, calls the class's forward and resets it. Interpreted, that is about 6 ms of a Qwen2 generation's two
traces, prologue checks of the context variable's state, and four attribute writes per layer replayed on every call.
Where no routing is active (``global_var`` None and ``uses_global_var`` False, so that the reset leaves that state
as it was) and no private copy has another forward than ``fn``'s class (``kernel_func.forward.__func__ is
type(fn).forward``, as each is made), the routing only makes ``fn``'s forward call ``fn`` itself, as it does with
no routing: then the class's forward is called under the interpreter without it. What decides it is read under
the interpreter (``_kernel_routing_is_plain``), so the prologue checks it; otherwise the wrapper is interpreted. The
digest covers ``new_forward``, the routed module's ``forward`` and the context variable's ``get``, ``set`` and
``reset``.

Note [A sliding window's mask sizes]
``DynamicSlidingWindowLayer.get_mask_sizes`` (Mistral, Qwen2, Gemma3, ...: a decoding step's KV length and offset)
branches on ``is_full = cumulative_length >= sliding_window``: ``sliding_window - 1 + query_length`` once full,
``cumulative_length + query_length`` before. The mask code then branches on that length reaching the window
(``_ignore_causal_mask_sdpa``'s ``kv_length >= local_attention_size``), one step earlier: with the length
symbolic, a generation past the window compiled four entries (the prefill, the steps below the window, the one step
where only the second branch flipped, the full window). For ints both arms are ``min(cumulative_length,
sliding_window - 1) + query_length`` (``cumulative_length <= sliding_window - 1`` exactly when not full), and the
offset is ``max(...)`` already: guard-free (Note [Guard-free min and max] in ``thunder.core.symbolic``), so the
length is one expression whose comparison with the window flips once, and three entries serve the generation, each
giving eager's values for every length its prologue accepts. Where both attributes are plain instance ints (no
descriptor, no ``__getattribute__`` or ``__getattr__`` of the class's: reading them twice or once is the same),
``_mask_sizes`` reads them under the interpreter (checked as the method's own reads are) and computes that;
otherwise, and on another bytecode (the digest covers the method's code, constants and names), the method is
interpreted.

Note [A config's attribute reads]
Every attribute read of a transformers config (``config.hidden_size``, dozens per trace) runs two Python
``__getattribute__``s: ``PreTrainedConfig``'s (which maps the name through ``attribute_map``) calls
``HeterogeneousConfigMixin``'s, which asks ``super().__getattribute__("__dict__").get("_heterogeneity_spec")`` and,
where the config has none, returns ``super().__getattribute__(key)``. Interpreted, that second frame cost about a
tenth of a first GPT-2 generation's two traces (three ``super()`` calls and a ``dict.get`` through the tracer's
lookaside per read), and its native ``dict.get`` on the config's ``__dict__`` read the whole dict as an outside
container: the prologue checked every one of the config's forty-odd attributes (90 of a GPT-2 decode step's 740
lines, which the first reuse compiles), so changing one the program never reads retraced. Where the next
``__getattribute__`` after the mixin's in the object's MRO is ``object``'s, the config has a path (a prologue
proxy), the program has not written its ``__dict__`` or that key, and the key is absent, the read is what the
tracer makes of ``object.__getattribute__(config, key)`` (``_raw_getattr``, as the interpreted
``super().__getattribute__(key)`` gives), and the prologue checks that the key is still absent (once per config);
otherwise the method is interpreted. Recognised by its digest, as the wrappers above.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import sys
import types
from collections.abc import Callable
from typing import Any

from thunder.core import prims
from thunder.core.interpreter.errors import NULL
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.execution import enter_function, lookup_type_attr
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.proxies import Proxy

# ``_code_digest`` of: wrapped_func; the wrapper and ModelOutput's methods; new_forward, Func.forward and the context
# variable's methods; get_mask_sizes; HeterogeneousConfigMixin.__getattribute__
_DEPRECATE_KWARG_DIGEST = {(3, 11): "2a458f6854cfe149", (3, 12): "2ce6c34d3080a40e", (3, 13): "19a8ba797ca670cc"}
_MODEL_OUTPUT_DIGEST = {(3, 11): "ea59713d85d204b3", (3, 12): "f1d3a00a51578814", (3, 13): "8fcd40168c548cf0"}
_KERNELIZED_DIGEST = {(3, 11): "44a01b8f77d1fcfc", (3, 12): "522a91d632f78c1a", (3, 13): "5709e3047e97c402"}
_MASK_SIZES_DIGEST = {(3, 11): "b680bff06dbfd675", (3, 12): "31bb225677683606", (3, 13): "af30b6f37fd31872"}
_CONFIG_GETATTRIBUTE_DIGEST = {(3, 11): "c604aae4eb9ed86d", (3, 12): "861677973c99a87c", (3, 13): "dd6362341a662063"}
_CONFIG_MODULE = "transformers.integrations.heterogeneity.configuration_utils"
_HETEROGENEITY_KEY = "_heterogeneity_spec"
_KERNELS_MODULE = "kernels._internals.layer.layer"
_MODEL_OUTPUT_METHODS = ("__setattr__", "__setitem__", "__post_init__", "_replace_old_cache_name")
_OBJECT_CLASS = object.__dict__["__class__"]
_TYPE_NAME = type.__dict__["__name__"]
_codes: dict[int, tuple[types.CodeType, Callable]] = {}
_looked_for: set[str] = set()


def _nested_code(code: types.CodeType, *names: str) -> types.CodeType | None:
    for name in names:
        code = next((c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name), None)
        if code is None:
            return None
    return code


def _plain_name(cls: type) -> bool:
    """``cls.__name__`` is read through ``type``'s own slot (no metaclass of the class's defines it)."""
    return lookup_type_attr(type(cls), "__name__") is _TYPE_NAME


def _find_deprecate_kwarg() -> None:
    module = sys.modules.get("transformers.utils.deprecation")
    outer = getattr(getattr(module, "deprecate_kwarg", None), "__code__", None)
    code = _nested_code(outer, "wrapper", "wrapped_func") if outer is not None else None
    if code is None or not isinstance(getattr(module, "Action", None), enum.EnumMeta):
        return
    if _code_digest(code) == _DEPRECATE_KWARG_DIGEST.get(sys.version_info[:2]):
        _codes[id(code)] = (code, _deprecate_kwarg_call)


def _model_output_codes(module: types.ModuleType) -> list[types.CodeType] | None:
    """The codes of ``ModelOutput``'s metaclass's ``__init__`` wrapper and of the methods a native construction runs
    (Note [ModelOutput construction]), or None."""
    meta, output = getattr(module, "_BCCacheNameMeta", None), getattr(module, "ModelOutput", None)
    register = getattr(module, "_register_model_output_pytree_node", None)
    if not isinstance(meta, type) or not isinstance(output, type) or not isinstance(register, types.FunctionType):
        return None
    setattr_fn = meta.__dict__.get("__setattr__")
    wrapper = _nested_code(setattr_fn.__code__, "__init__") if isinstance(setattr_fn, types.FunctionType) else None
    methods = [output.__dict__.get(name) for name in _MODEL_OUTPUT_METHODS]
    if wrapper is None or not all(isinstance(m, types.FunctionType) for m in methods):
        return None
    return [wrapper, *(m.__code__ for m in methods), register.__code__]


def _find_model_output() -> None:
    module = sys.modules.get("transformers.utils.generic")
    codes = _model_output_codes(module) if module is not None else None
    if codes is None:
        return
    digest = _code_digest(*codes)
    if digest == _MODEL_OUTPUT_DIGEST.get(sys.version_info[:2]):
        _codes[id(codes[0])] = (codes[0], functools.partial(_model_output_init, module.ModelOutput))


def _find_kernelized_forward() -> None:
    module = sys.modules.get(_KERNELS_MODULE)
    decorate, make = getattr(module, "use_kernelized_func", None), getattr(module, "_create_func_module", None)
    var = getattr(module, "CompileableContextVar", None)
    if not (
        isinstance(decorate, types.FunctionType) and isinstance(make, types.FunctionType) and isinstance(var, type)
    ):
        return
    methods = [var.__dict__.get(name) for name in ("get", "set", "reset")]
    codes = [
        _nested_code(decorate.__code__, "decorator", "new_forward"),
        _nested_code(make.__code__, "Func", "forward"),
    ]
    if None in codes or not all(isinstance(m, types.FunctionType) for m in methods):
        return
    codes += [m.__code__ for m in methods]
    digest = _code_digest(*codes)
    if digest == _KERNELIZED_DIGEST.get(sys.version_info[:2]):
        _codes[id(codes[0])] = (codes[0], functools.partial(_kernelized_forward, var))


def _code_digest(*codes: types.CodeType) -> str:
    """The first 16 digits of the sha256 of the codes' bytecode, names and constants (a nested code by its own
    digest, a frozenset sorted: neither's repr is the same in every process), so a library version that changed only
    a constant or a name (another wrapper) is not taken for the one recorded."""

    parts = [c.co_code + repr((c.co_names, [_constant_text(k) for k in c.co_consts])).encode() for c in codes]
    return hashlib.sha256(b"".join(parts)).hexdigest()[:16]


def _constant_text(c: Any) -> str:
    """A code constant as ``_code_digest`` hashes it (a module-level function: a recursive closure is a cycle)."""
    if isinstance(c, types.CodeType):
        return _code_digest(c)
    if isinstance(c, frozenset):
        return repr(sorted(map(_constant_text, c)))
    if isinstance(c, tuple):
        return repr(tuple(map(_constant_text, c)))
    return repr(c)


def _find_sliding_window_mask_sizes() -> None:
    layer = getattr(sys.modules.get("transformers.cache_utils"), "DynamicSlidingWindowLayer", None)
    method = layer.__dict__.get("get_mask_sizes") if isinstance(layer, type) else None
    if isinstance(method, types.FunctionType) and _code_digest(method.__code__) == _MASK_SIZES_DIGEST.get(
        sys.version_info[:2]
    ):
        _codes[id(method.__code__)] = (method.__code__, _sliding_window_mask_sizes)


def _find_config_getattribute() -> None:
    mixin = getattr(sys.modules.get(_CONFIG_MODULE), "HeterogeneousConfigMixin", None)
    method = mixin.__dict__.get("__getattribute__") if isinstance(mixin, type) else None
    if isinstance(method, types.FunctionType) and _code_digest(method.__code__) == _CONFIG_GETATTRIBUTE_DIGEST.get(
        sys.version_info[:2]
    ):
        _codes[id(method.__code__)] = (method.__code__, functools.partial(_config_getattribute, mixin))


def _config_getattribute(mixin: type, tracer: Any, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
    """``HeterogeneousConfigMixin.__getattribute__(config, key)`` of a config with no heterogeneity spec: the tracer's
    read of ``object.__getattribute__(config, key)`` (Note [A config's attribute reads]); otherwise interpreted."""
    runtime = current_runtime()
    if len(args) != 2 or kwargs or type(args[1]) is not str:
        return enter_function(runtime, fn, args, kwargs)
    config, key = args
    mro = type(config).__mro__
    after = mro[mro.index(mixin) + 1 :] if mixin in mro else (None,)
    holder = tracer._provenance.get(id(config))
    table = getattr(type(config), "__dictoffset__", 0) and object.__getattribute__(config, "__dict__")
    plain = (
        next((k for k in after if k is None or "__getattribute__" in k.__dict__), None) is object
        and holder is not None
        and type(table) is dict
        and _HETEROGENEITY_KEY not in table
        and id(config) not in tracer._dict_copies  # the program read or wrote its ``__dict__``
        and ("attr", id(config), _HETEROGENEITY_KEY) not in tracer._written
    )
    if not plain:
        return enter_function(runtime, fn, args, kwargs)
    asked = ("no heterogeneity spec", id(config))
    if asked not in tracer._asked_hasattr:
        tracer._asked_hasattr.add(asked)
        expr = f"{_HETEROGENEITY_KEY!r} not in object.__getattribute__({holder.name}, '__dict__')"
        tracer._check(prims.check_expr, expr, (holder,))
    return tracer._raw_getattr(config, key)


def native_wrapper(fn: types.FunctionType) -> Callable | None:
    """The tracer's own run of ``fn`` (taking the tracer, ``fn`` and the call's arguments), or None."""
    if "transformers.utils.deprecation" not in _looked_for and "transformers.utils.deprecation" in sys.modules:
        _looked_for.add("transformers.utils.deprecation")
        _find_deprecate_kwarg()
    if "transformers.utils.generic" not in _looked_for and "transformers.utils.generic" in sys.modules:
        _looked_for.add("transformers.utils.generic")
        _find_model_output()
    if _KERNELS_MODULE not in _looked_for and _KERNELS_MODULE in sys.modules:
        _looked_for.add(_KERNELS_MODULE)
        _find_kernelized_forward()
    if "transformers.cache_utils" not in _looked_for and "transformers.cache_utils" in sys.modules:
        _looked_for.add("transformers.cache_utils")
        _find_sliding_window_mask_sizes()
    if _CONFIG_MODULE not in _looked_for and _CONFIG_MODULE in sys.modules:
        _looked_for.add(_CONFIG_MODULE)
        _find_config_getattribute()
    found = _codes.get(id(fn.__code__))
    return found[1] if found is not None and found[0] is fn.__code__ else None


def _deprecate_kwarg_call(tracer: Any, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
    """``deprecate_kwarg``'s ``wrapped_func`` called without the deprecated keyword (Note [deprecate_kwarg's
    wrapper]); otherwise interpreted."""
    code, cells = fn.__code__, dict(zip(fn.__code__.co_freevars, fn.__closure__))

    def read(name: str) -> Any:
        cell = cells[name]
        return tracer.load_deref(code, name, cell.cell_contents, cell)

    runtime = current_runtime()
    old_name = read("old_name")
    plain = type(old_name) is str and old_name not in kwargs
    if plain:
        if read("is_instance_method"):  # ``args[0].__class__.__name__``
            plain = bool(args) and not isinstance(args[0], Proxy)
            plain = (
                plain and lookup_type_attr(type(args[0]), "__class__") is _OBJECT_CLASS and _plain_name(type(args[0]))
            )
        elif read("is_class_method"):  # ``args[0].__name__``
            plain = bool(args) and isinstance(args[0], type) and _plain_name(args[0])
    globals_dict = fn.__globals__
    if plain and "Action" in globals_dict:
        action = tracer.load_global(globals_dict, "Action", globals_dict["Action"], False)
        plain = (
            isinstance(action, enum.EnumMeta)
            and len({action.NONE, action.RAISE, action.NOTIFY, action.NOTIFY_ALWAYS}) == 4
        )
    else:
        plain = False
    if not plain:
        return enter_function(runtime, fn, args, kwargs)
    return interpreter_call(runtime, read("func"), args, kwargs)


def _model_output_init(output: type, tracer: Any, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
    """``ModelOutput``'s metaclass's ``__init__`` wrapper (Note [ModelOutput construction]): the keywords renamed
    under the interpreter, then the dataclass's ``__init__`` run natively where that is what interpreting it does."""
    code, runtime, globals_dict = fn.__code__, current_runtime(), fn.__globals__
    if "_rename_kwargs_for_bc" not in globals_dict or fn.__closure__ is None:
        return enter_function(runtime, fn, args, kwargs)
    rename = tracer.load_global(globals_dict, "_rename_kwargs_for_bc", globals_dict["_rename_kwargs_for_bc"], False)
    interpreter_call(runtime, rename, (kwargs,), None)
    cell = fn.__closure__[code.co_freevars.index("init")]
    init = tracer.load_deref(code, "init", cell.cell_contents, cell)
    if not _stores_only(output, init, args, kwargs):
        return interpreter_call(runtime, init, args, kwargs)
    for name in ("fields", "_register_model_output_pytree_node"):
        if name not in globals_dict:
            return interpreter_call(runtime, init, args, kwargs)
        tracer.load_global(globals_dict, name, globals_dict[name], False)
    tracer._guard_function(init)  # its defaults, as a call under the interpreter checks them
    init(*args, **kwargs)


def _stores_only(output: type, init: Any, args: tuple, kwargs: dict) -> bool:
    """Whether ``init(*args, **kwargs)`` is a dataclass ``__init__`` of a ``ModelOutput`` subclass that stores the
    values and compares them with None only (Note [ModelOutput construction])."""
    if len(args) != 1 or type(init) is not types.FunctionType:
        return False
    cls = type(args[0])
    init_code = init.__code__
    if init_code.co_filename != "<string>" or init_code.co_name != "__init__" or init.__kwdefaults__:
        return False
    mro = cls.__mro__
    at = mro.index(output) if output in mro else -1
    if at < 0 or mro[at + 1 :] != output.__mro__[1:] or not dataclasses.is_dataclass(cls):
        return False
    if any(lookup_type_attr(cls, name) is not output.__dict__[name] for name in _MODEL_OUTPUT_METHODS):
        return False
    if any(
        lookup_type_attr(cls, name) is not lookup_type_attr(output, name)
        for name in ("__getattribute__", "__getattr__")
    ):
        return False
    params = getattr(cls, "__dataclass_params__", None)
    declared = cls.__dict__.get("__dataclass_fields__")
    if params is None or params.frozen or type(declared) is not dict:
        return False
    fields = dataclasses.fields(cls)
    names = tuple(f.name for f in fields)
    if len(fields) != len(declared) or not names or init_code.co_kwonlyargcount or init_code.co_flags & 0x0C:
        return False
    if init_code.co_argcount != 1 + len(names) or init_code.co_varnames[1 : 1 + len(names)] != names:
        return False
    if any(not f.init or f.default_factory is not dataclasses.MISSING for f in fields):
        return False
    first = fields[0].default
    if (first is not None and first is not dataclasses.MISSING) or any(f.default is not None for f in fields[1:]):
        return False
    if not all(type(k) is str and k in declared for k in kwargs):
        return False
    return any(k != names[0] and v is not None for k, v in kwargs.items())


def _kernelized_forward(var: type, tracer: Any, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
    """``use_kernelized_func``'s ``new_forward`` (Note [The kernels hub's forward wrapper]): the class's forward called
    without setting the routing where the routing would change nothing; otherwise interpreted."""
    code, runtime, globals_dict = fn.__code__, current_runtime(), fn.__globals__
    if not args or fn.__closure__ is None or "_ACTIVE_KERNEL_FUNCS" not in globals_dict:
        return enter_function(runtime, fn, args, kwargs)
    cells = dict(zip(code.co_freevars, fn.__closure__))
    routed, forward = (
        tracer.load_deref(code, name, cells[name].cell_contents, cells[name])
        for name in ("decorator_args", "orig_forward")
    )
    active = tracer.load_global(globals_dict, "_ACTIVE_KERNEL_FUNCS", globals_dict["_ACTIVE_KERNEL_FUNCS"], False)
    plain = type(active) is var and interpreter_call(runtime, _kernel_routing_is_plain, (args[0], routed, active), None)
    if not plain:
        return enter_function(runtime, fn, args, kwargs)
    return interpreter_call(runtime, forward, args, kwargs)


def _kernel_routing_is_plain(module: Any, routed: tuple, active: Any) -> bool:
    """Whether ``new_forward``'s routing of ``routed`` for ``module`` would make each routed function call itself and
    leave ``active`` as it was (Note [The kernels hub's forward wrapper]). Interpreted: what it reads is checked."""
    if type(routed) is not tuple or active.uses_global_var or active.global_var is not None:
        return False
    for fn in routed:
        name = getattr(fn, "__name__", None) or getattr(fn, "kernel_layer_name", None)
        if name is None or module._kernel_funcs[name].forward.__func__ is not type(fn).forward:
            return False
    return True


_OBJECT_GETATTRIBUTE = object.__dict__["__getattribute__"]


def _sliding_window_mask_sizes(tracer: Any, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
    """``DynamicSlidingWindowLayer.get_mask_sizes`` without its branch where its attributes are plain (Note [A
    sliding window's mask sizes]); otherwise interpreted."""
    runtime = current_runtime()
    cls = type(args[0]) if len(args) == 2 and not kwargs else None
    plain = cls is not None and lookup_type_attr(cls, "__getattribute__") is _OBJECT_GETATTRIBUTE
    plain = plain and lookup_type_attr(cls, "__getattr__") is NULL
    plain = plain and not any(
        hasattr(type(lookup_type_attr(cls, name)), "__get__") for name in ("cumulative_length", "sliding_window")
    )
    sizes = interpreter_call(runtime, _mask_sizes, args, None) if plain else None
    return enter_function(runtime, fn, args, kwargs) if sizes is None else sizes


def _mask_sizes(layer: Any, query_length: Any) -> tuple | None:
    """The KV length and offset of a sliding-window layer's mask, without a branch on its being full; None where its
    attributes are not ints. Interpreted: what it reads is checked."""
    cumulative, window = layer.cumulative_length, layer.sliding_window
    if type(cumulative) is not int or type(window) is not int:
        return None
    return min(cumulative, window - 1) + query_length, max(cumulative - window + 1, 0)
