"""Harness: the experiment config loader, nmt.config.load_config, with `--set` overrides.

Contract: the input is cut at its NUL bytes: the first piece is the YAML file (config.yaml), each
other piece one `--set` override (as a command line gives it: bytes that are not UTF-8 read as
surrogate escapes). load_config either returns a config or raises what the CLI turns into exit 2,
"input the user can fix" (nmt.cli.main.BAD_INPUT: here a ValueError such as ConfigError, or an
OSError); nothing else. complete=True (a model directory's config.yaml) is tried on every other
input. The bounds are contract.py's.
"""

from __future__ import annotations

import os

import atheris

with atheris.instrument_imports(include=["nmt.config", "nmt.config_checks", "nmt.search_settings"]):
    from nmt.config import load_config

from contract import fuzz, scratch  # noqa: E402

PATH = scratch() / "config.yaml"
BAD_INPUT = (ValueError, OSError)  # nmt.cli.main.BAD_INPUT without the CLI's own CommandError and ImportError


def check(data: bytes) -> bool:
    text, *overrides = data.split(b"\0")
    PATH.write_bytes(text)
    try:
        load_config(PATH, [os.fsdecode(o) for o in overrides], complete=bool(len(data) & 1))
    except BAD_INPUT:
        return True
    return False


if __name__ == "__main__":
    fuzz(check)
