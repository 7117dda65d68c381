"""Field checks for settings dataclasses: each field's type from its hint, its range from a Rule.

The one way nmt checks a settings dataclass (config sections, engine options, search requests,
server limits): it lists its rules declaratively (`RULES = {"clip_norm": above(0), ...}`) and
calls `check_fields(self, "train")` in `__post_init__`, so a value built in code is held to the
same rules as one read from a file or a command line. Every message is one line that names the
key, `train.clip_norm must be > 0 or null, got -1`; the error also carries the field and the
problem apart, so that the CLI can name its own option instead (`--workers must be >= 1, got 0`).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A bad configuration value, naming the key (and file) at fault.

    key / problem: set where one field is at fault ("train.clip_norm" or "workers", "must be > 0, got 0").
    """

    def __init__(self, message: str, *, key: str | None = None, problem: str | None = None):
        super().__init__(message)
        self.key, self.problem = key, problem

    @property
    def field(self) -> str | None:
        """The field at fault, without its section ("clip_norm")."""
        return self.key.rpartition(".")[2] if self.key else None


# --- range rules: what a good (non-null) value of a field is -----------------------------------
@dataclass(frozen=True)
class Rule:
    """A test on a field's value (already of the right type, never null) and the words for it."""

    test: Callable[[Any], bool]
    says: str  # completes "train.clip_norm must be ...", e.g. "> 0"
    bounds: tuple[float, float] | None = None  # (low, high), both allowed, where the rule is a range


def between(low: float, high: float) -> Rule:
    """low <= value <= high, with its bounds for the edges that state them (an OpenAPI description)."""
    return Rule(lambda v: low <= v <= high, f"between {low} and {high}", (low, high))


def at_least(low: float) -> Rule:
    """The value is >= low."""
    return Rule(lambda v: v >= low, f">= {low}")


def above(low: float) -> Rule:
    """The value is > low."""
    return Rule(lambda v: v > low, f"> {low}")


def one_of(*choices: str) -> Rule:
    """The value is one of the choices."""
    return Rule(lambda v: v in choices, f"one of {' | '.join(choices)}")


FRACTION = Rule(lambda v: 0 <= v < 1, "in [0, 1)")
NOT_EMPTY = Rule(lambda v: v.strip() != "", "a non-empty string")


# --- applying them ------------------------------------------------------------------------------
def problem(key: str, text: str) -> ConfigError:
    """ConfigError "`key` `text`" about one field."""
    return ConfigError(f"{key} {text}", key=key, problem=text)


def check_type(key: str, value: Any, hint: Any) -> Any:
    """The value, ints turned into floats where a float is wanted; ConfigError for a wrong type.

    bool is never an int here (YAML's `true` is not a count), and a float must be finite.
    """
    if value is None:
        if type(None) in typing.get_args(hint):
            return None
        raise problem(key, "may not be null")
    options = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    for option in options:
        origin = typing.get_origin(option) or option
        if origin is int and isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)  # a numpy integer is a count too
        if origin is float and isinstance(value, numbers.Real) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise problem(key, f"must be a finite number, got {value!r}")
            return float(value)
        if origin is list and isinstance(value, list):
            (item,) = typing.get_args(option)
            return [check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
        if origin is not type(None) and isinstance(value, origin) and not (origin is int and isinstance(value, bool)):
            return value
    names = " or ".join(getattr(o, "__name__", str(o)).replace("NoneType", "null") for o in options)
    raise problem(key, f"must be {names}, got {value!r}")


def check_fields(section: Any, name: str = "") -> None:
    """Type-check every field of a settings dataclass (in place: ints become floats) and apply its RULES.

    Called by each one's __post_init__, so a value built in code is held to the same rules as one
    read from a file. Raises ConfigError naming `name.field` (`field` alone where name is "").
    Frozen dataclasses too.
    """
    hints = typing.get_type_hints(type(section))
    for f in dataclasses.fields(section):
        key, given = f"{name}.{f.name}" if name else f.name, getattr(section, f.name)
        value = check_type(key, given, hints[f.name])
        if value is not given:
            object.__setattr__(section, f.name, value)  # works on frozen dataclasses too
        rule = section.RULES.get(f.name)
        if rule is not None and value is not None and not rule.test(value):
            # "or null" for a file's reader; an option left out is null already (see ConfigError)
            null = " or null" if type(None) in typing.get_args(hints[f.name]) else ""
            text = f"must be {rule.says}, got {given!r}"
            raise ConfigError(f"{key} must be {rule.says}{null}, got {given!r}", key=key, problem=text)
