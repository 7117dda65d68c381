"""Field checks for the config sections: each field's type from its hint, its range from a Rule.

A section lists its rules declaratively (`RULES = {"clip_norm": above(0), ...}`) and calls
`check_fields(self, "train")` in `__post_init__`, so a section built in code is held to the same
rules as one read from a file. Every message is one line that names the key:
`train.clip_norm must be > 0 or null, got -1`.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A bad configuration value, naming the key (and file) at fault."""


# --- range rules: what a good (non-null) value of a field is -----------------------------------
@dataclass(frozen=True)
class Rule:
    """A test on a field's value (already of the right type, never null) and the words for it."""

    test: Callable[[Any], bool]
    says: str  # completes "train.clip_norm must be ...", e.g. "> 0"


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
def check_type(key: str, value: Any, hint: Any) -> Any:
    """The value, ints turned into floats where a float is wanted; ConfigError for a wrong type.

    bool is never an int here (YAML's `true` is not a count), and a float must be finite.
    """
    if value is None:
        if type(None) in typing.get_args(hint):
            return None
        raise ConfigError(f"{key} may not be null")
    options = (
        typing.get_args(hint)
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
        else (hint,)
    )
    for option in options:
        origin = typing.get_origin(option) or option
        if origin is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ConfigError(f"{key} must be a finite number, got {value!r}")
            return float(value)
        if origin is list and isinstance(value, list):
            (item,) = typing.get_args(option)
            return [check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
        if origin is not type(None) and isinstance(value, origin) and not (origin is int and isinstance(value, bool)):
            return value
    names = " or ".join(getattr(o, "__name__", str(o)).replace("NoneType", "null") for o in options)
    raise ConfigError(f"{key} must be {names}, got {value!r}")


def check_fields(section: Any, name: str) -> None:
    """Type-check every field of a config section (in place: ints become floats) and apply its RULES.

    Called by each section's __post_init__, so a section built in code is held to the same rules
    as one read from a file. Raises ConfigError naming `name.field`.
    """
    hints = typing.get_type_hints(type(section))
    for f in dataclasses.fields(section):
        key, given = f"{name}.{f.name}", getattr(section, f.name)
        value = check_type(key, given, hints[f.name])
        setattr(section, f.name, value)
        rule = section.RULES.get(f.name)
        if rule is not None and value is not None and not rule.test(value):
            null = " or null" if type(None) in typing.get_args(hints[f.name]) else ""
            raise ConfigError(f"{key} must be {rule.says}{null}, got {given!r}")
