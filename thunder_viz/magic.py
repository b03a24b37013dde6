"""The ``%thunder_jit`` line magic and ``%%thunder_jit`` cell magic (``%load_ext thunder_viz``).

``%thunder_jit f(x, y)`` jits the callee (a function or an ``nn.Module``), calls it with the
arguments, shows the explorer and returns the result. ``%%thunder_jit`` does the same for the
call that ends the cell, after running the statements above it. Options, before the call on
the line or on the ``%%thunder_jit`` line:

- ``--executors torchcompile,torch``: executors to jit with (highest priority first);
- ``--cache "no caching"``: the cache option;
- ``--name jf``: also store the jitted callable in the namespace as ``jf``.

When tracing or running fails, the explorer shows the error with the user's source line and
the steps that completed, one line says what failed, and the magic returns None.

Layer: thunder_viz entry points. Imports: IPython, thunder, thunder_viz.session,
thunder_viz.widget.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.display import display

import thunder
from thunder_viz.session import Session
from thunder_viz.widget import ExplorerWidget

__all__ = ["ThunderJitMagics", "parse_options", "split_call"]

_OPTION_NAMES = ("executors", "cache", "name")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="%thunder_jit", add_help=False, exit_on_error=False)
    parser.add_argument("--executors", default=None, help="comma-separated executor names")
    parser.add_argument("--cache", default=None, help="the cache option")
    parser.add_argument("--name", default=None, help="store the jitted callable under this name")
    return parser


def parse_options(text: str) -> argparse.Namespace:
    """Options of the ``%%thunder_jit`` line (or the leading options of the line magic)."""
    try:
        options, rest = _parser().parse_known_args(shlex.split(text))
    except (argparse.ArgumentError, ValueError) as exc:
        raise UsageError(f"%thunder_jit: {exc}") from exc
    if rest:
        raise UsageError(f"%thunder_jit: unknown options {rest}; known are {['--' + n for n in _OPTION_NAMES]}")
    if options.name is not None and not options.name.isidentifier():
        raise UsageError(f"%thunder_jit: --name needs a Python identifier, got {options.name!r}")
    return options


_LEADING_OPTION = re.compile(r"""\s*--\w+(?:=|\s+)(?:"[^"]*"|'[^']*'|\S+)""")


def split_line(line: str) -> tuple[str, str]:
    """(leading options, the call expression) of a line magic."""
    end = 0
    while match := _LEADING_OPTION.match(line, end):
        end = match.end()
    return line[:end], line[end:]


def split_call(source: str, filename: str = "<thunder_jit>") -> tuple[ast.Module, ast.Call]:
    """(the statements before the call, the call) of a cell or line whose last statement is a call."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        raise UsageError(f"%thunder_jit: not Python: {exc}") from exc
    last = tree.body[-1] if tree.body else None
    if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)):
        raise UsageError("%thunder_jit needs a call to compile, like `%thunder_jit f(x, y)` or `model(x)`")
    return ast.Module(body=tree.body[:-1], type_ignores=[]), last.value


def _evaluate(node: ast.expr, namespace: dict, filename: str) -> Any:
    return eval(compile(ast.Expression(body=node), filename, "eval"), namespace)


def evaluate_call(call: ast.Call, namespace: dict, filename: str) -> tuple[Any, tuple, dict]:
    """The callee and the arguments of ``call``, evaluated in ``namespace``."""
    callee = _evaluate(call.func, namespace, filename)
    args: list = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            args.extend(_evaluate(arg.value, namespace, filename))
        else:
            args.append(_evaluate(arg, namespace, filename))
    kwargs: dict = {}
    for keyword in call.keywords:
        value = _evaluate(keyword.value, namespace, filename)
        if keyword.arg is None:
            kwargs.update(value)
        else:
            kwargs[keyword.arg] = value
    return callee, tuple(args), kwargs


def jit_callee(callee: Any, options: argparse.Namespace) -> Any:
    """``callee`` jitted with the options; an already jitted callable is used as it is."""
    if getattr(callee, "_thunder", None) is not None and options.executors is None and options.cache is None:
        return callee
    if getattr(callee, "_thunder", None) is not None:
        from thunder_viz.session import _original_of

        callee = _original_of(callee)
    executors = None if options.executors is None else [e.strip() for e in options.executors.split(",") if e.strip()]
    return thunder.jit(callee, executors=executors, cache=options.cache)


@magics_class
class ThunderJitMagics(Magics):
    """``%thunder_jit`` and ``%%thunder_jit``."""

    @line_cell_magic
    def thunder_jit(self, line: str = "", cell: str | None = None) -> Any:
        """Jit the called function or module, run it, show the explorer, return its result."""
        if cell is None:
            option_text, source = split_line(line)
            filename = "<thunder_jit>"
        else:
            option_text, source = line, cell
            filename = self.shell.compile.cache(cell) if self.shell is not None else "<thunder_jit>"
        options = parse_options(option_text)
        prefix, call = split_call(source.strip() if cell is None else source, filename)
        namespace = self.shell.user_ns
        if prefix.body:
            exec(compile(prefix, filename, "exec"), namespace)
        callee, args, kwargs = evaluate_call(call, namespace, filename)
        if not callable(callee):
            raise UsageError(f"%thunder_jit: {ast.unparse(call.func)} is a {type(callee).__name__}, not callable")
        jitted = jit_callee(callee, options)
        if options.name is not None:
            namespace[options.name] = jitted
        session = Session(jitted)
        try:
            result = session(*args, **kwargs)
        except Exception:
            _show(session)
            print(f"thunder_jit: {session.error.one_line()}")
            return None
        _show(session)
        return result


def _show(session: Session) -> None:
    """Displays the explorer; if that fails, says so in one line (the call's result still counts)."""
    try:
        widget = ExplorerWidget(session)
    except Exception as exc:
        print(f"thunder_jit: could not show the explorer: {type(exc).__name__}: {exc}")
        return
    display(widget)
