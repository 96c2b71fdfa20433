"""Jinja2's sandbox with bounded values: a template cannot build a string, list or integer bigger than
its render budget allows, so one expression cannot eat the gateway's memory before any timer fires.

The rule: no value a template computes may hold more than the budget's ``max_output_chars``
characters (or items), and no integer more than ``MAX_INT_DIGITS`` digits. It is checked

* *before* the operations that multiply sizes — ``*``, ``**``, ``+``, ``~``, ``%``-formatting,
  ``str.format`` widths and precisions, the width and count arguments of ``ljust``/``rjust``/
  ``center``/``zfill``/``expandtabs``/``replace``/``join``/``translate`` and of the ``center``,
  ``indent``, ``wordwrap``, ``batch``, ``slice``, ``replace``, ``join`` and ``format`` filters;
* *after* every other call and filter, on ``{% set ns.x %}`` and on captured blocks and macro output,
  where a value can at most double per step — so a value carried from one loop pass to the next
  (the only way to grow one step by step) stops at twice the budget at worst.

``range`` stays capped by jinja's own ``MAX_RANGE``; time is the renderer's job (``template_render``).
"""

from __future__ import annotations

import functools
import inspect
import re
import string
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any

from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Concat
from jinja2.sandbox import SandboxedEnvironment
from jinja2.utils import Namespace

DEFAULT_MAX_OUTPUT_CHARS = 2_000_000
MAX_INT_DIGITS = 4300  # Python's own limit for turning an int into text
_MAX_INT_BITS = 14_284  # ~ MAX_INT_DIGITS decimal digits
_SIZED = (str, bytes, bytearray, list, tuple, dict, set, frozenset)
_SEQUENCES = (str, bytes, list, tuple)
_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0 +\-]*(\*|\d+)?(?:\.(\*|\d+))?")
_SETTING = "SWITCHBOARD_TEMPLATE_MAX_OUTPUT_CHARS"

#: The value limit of the render in progress (set by the renderer in its thread).
value_limit: ContextVar[int] = ContextVar("template_value_limit", default=DEFAULT_MAX_OUTPUT_CHARS)


class OverBudget(Exception):  # noqa: N818 - reads as "the render went over budget"
    """A render went over its budget; ``limit`` says which one: ``time``, ``output`` or ``value``."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_size(what: str, size: int) -> None:
    limit = value_limit.get()
    if size > limit:
        raise OverBudget("value", f"{what} would make a value of {size} characters or items, "
                                  f"over the budget of {limit} ({_SETTING})")


def _check_bits(what: str, bits: int) -> None:
    if bits > _MAX_INT_BITS:
        raise OverBudget("value", f"{what} would make an integer of more than {MAX_INT_DIGITS} digits")


def checked(what: str, value: Any) -> Any:
    if isinstance(value, _SIZED):
        _check_size(what, len(value))
    elif _is_int(value):
        _check_bits(what, value.bit_length())
    return value


def _check_width(what: str, width: Any) -> None:
    if _is_int(width):
        _check_size(what, width)


def _check_digits(what: str, digits: str) -> None:
    if len(digits) > 18 or int(digits) > value_limit.get():
        raise OverBudget("value", f"{what} asks for a width of {digits[:20]}, over the budget of "
                                  f"{value_limit.get()} ({_SETTING})")


def _check_percent(fmt: Any, args: Any) -> None:
    text = fmt.decode("latin-1") if isinstance(fmt, bytes) else str(fmt)
    values = args if isinstance(args, tuple) else (args,)
    for match in _PERCENT_SPEC.finditer(text):
        for part in match.groups():
            if part == "*":
                for value in values:
                    _check_width("'%' formatting", value)
            elif part:
                _check_digits("'%' formatting", part)


def _check_format(fmt: str, args: Iterable[Any]) -> None:
    for _, _, spec, _ in string.Formatter().parse(fmt):
        if not spec:
            continue
        for digits in re.findall(r"\d+", spec):
            _check_digits("str.format", digits)
        if "{" in spec:  # a width taken from the arguments
            for value in args:
                _check_width("str.format", value)


def _check_binop(op: str, left: Any, right: Any) -> None:
    if op == "*":
        for seq, times in ((left, right), (right, left)):
            if isinstance(seq, _SEQUENCES) and _is_int(times):
                _check_size("'*'", len(seq) * max(times, 0))
        if _is_int(left) and _is_int(right):
            _check_bits("'*'", left.bit_length() + right.bit_length())
    elif op == "**":
        if _is_int(left) and _is_int(right) and right > 0 and abs(left) > 1:
            _check_bits("'**'", (abs(left).bit_length() - 1) * right)
    elif op == "+":
        if isinstance(left, _SEQUENCES) and isinstance(right, _SEQUENCES):
            _check_size("'+'", len(left) + len(right))
    elif op == "%" and isinstance(left, (str, bytes)):
        _check_percent(left, right)


def _text_length(items: list[Any]) -> int:
    return sum(len(x) if isinstance(x, (str, bytes)) else len(str(x)) for x in items)


def _check_text_method(name: str, owner: str | bytes, args: tuple, kwargs: dict) -> tuple:
    """Checks a str/bytes method before it runs; returns the arguments to call it with."""
    what = f"{name}()"
    if name in ("ljust", "rjust", "center", "zfill"):
        _check_width(what, args[0] if args else kwargs.get("width"))
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if _is_int(size):
            tab = "\t" if isinstance(owner, str) else b"\t"
            _check_size(what, len(owner) + owner.count(tab) * size)
    elif name == "replace" and len(args) >= 2 and isinstance(args[0], type(owner)):
        old, new = args[0], args[1]
        count = args[2] if len(args) > 2 else kwargs.get("count", -1)
        found = owner.count(old) if old else len(owner) + 1
        if _is_int(count) and count >= 0:
            found = min(found, count)
        _check_size(what, len(owner) + found * max(len(new) - len(old), 0))
    elif name == "join" and args:
        items = list(args[0])
        _check_size(what, _text_length(items) + len(owner) * max(len(items) - 1, 0))
        args = (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], dict):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        _check_size(what, len(owner) * max(longest, 1))
    elif name == "format":
        _check_format(str(owner), (*args, *kwargs.values()))
    elif name == "format_map" and args and isinstance(args[0], dict):
        _check_format(str(owner), args[0].values())
    return args


def _check_filter(name: str, arguments: dict[str, Any]) -> None:
    what = f"the {name!r} filter"
    if name in ("center", "wordwrap"):
        _check_width(what, arguments.get("width"))
    elif name == "indent":
        width, text = arguments.get("width", 4), str(arguments.get("s", ""))
        step = len(width) if isinstance(width, str) else width if _is_int(width) else 0
        _check_size(what, len(text) + step * (text.count("\n") + 1))
    elif name == "batch":
        _check_width(what, arguments.get("linecount"))
    elif name == "slice":
        _check_width(what, arguments.get("slices"))
    elif name == "replace":
        text, old, new = str(arguments["s"]), str(arguments["old"]), str(arguments["new"])
        found = text.count(old) if old else len(text) + 1
        count = arguments.get("count")
        if _is_int(count) and count >= 0:
            found = min(found, count)
        _check_size(what, len(text) + found * max(len(new) - len(old), 0))
    elif name == "join" and arguments.get("attribute") is None:
        items = list(arguments["value"])
        _check_size(what, _text_length(items) + len(str(arguments.get("d", ""))) * max(len(items) - 1, 0))
        arguments["value"] = items
    elif name == "format":
        _check_percent(arguments["value"], arguments.get("args") or tuple(arguments.get("kwargs", {}).values()))


_PRECHECKED_FILTERS = {"center", "wordwrap", "indent", "batch", "slice", "replace", "join", "format"}


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(func) if name in _PRECHECKED_FILTERS else None

    @functools.wraps(func)  # keeps jinja's pass_context / pass_environment marker
    def bounded(*args: Any, **kwargs: Any) -> Any:
        if signature is not None:
            bound = signature.bind(*args, **kwargs)
            _check_filter(name, bound.arguments)
            args, kwargs = bound.args, bound.kwargs
        return checked(f"the {name!r} filter", func(*args, **kwargs))

    return bounded


class BoundedNamespace(Namespace):
    """``namespace()`` whose attributes (what carries a value from one loop pass to the next) are bounded."""

    def __setitem__(self, name: str, value: Any) -> None:
        super().__setitem__(name, checked(f"setting {name!r}", value))


class _BoundedCodeGenerator(CodeGenerator):
    def visit_Concat(self, node: Concat, frame: Frame) -> None:
        # ``a ~ b`` goes through the environment's bounded concat instead of jinja's str_join.
        self.write("environment.concat(map(str, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")))")


class BoundedSandbox(SandboxedEnvironment):
    """The sandbox (every escape it refuses stays refused) plus the value rule above."""

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}
        self.globals["namespace"] = BoundedNamespace

    @staticmethod
    def concat(parts: Iterable[Any]) -> str:  # captured blocks, macro output and ``~``
        buffer, size, limit = [], 0, value_limit.get()
        for part in parts:
            size += len(part)
            if size > limit:
                _check_size("joining text", size)
            buffer.append(part)
        return "".join(buffer)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        return checked(f"{operator!r}", super().call_binop(context, operator, left, right))

    def call(__self, __context: Any, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        target = getattr(__obj, "__wrapped__", __obj)  # str.format arrives wrapped by the sandbox
        owner, name = getattr(target, "__self__", None), getattr(target, "__name__", "call")
        if isinstance(owner, (str, bytes)):
            args = _check_text_method(name, owner, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(owner, (list, dict, set, bytearray)):
            checked(f"{name}()", owner)
        return checked(f"{name}()", result)
