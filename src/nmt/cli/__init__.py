"""The `nmt` command: a thin shell over the Python API, a module per command group.

    common.py     the parser class, CommandError, option groups shared by commands, their checks
    train.py      nmt train
    translate.py  nmt translate, evaluate, tune-length-penalty
    data.py       nmt data list|get
    models.py     nmt export, average
    serve.py      nmt serve (its options generated from nmt.server.settings)
    pictures.py   nmt plot, attention, positions
    quality.py    nmt calibrate (what a model's quality scores mean)
    main.py       the parser and `main`

Every module imports torch only inside its commands, so `nmt --help` and argument errors are fast.
"""

from .common import CommandError, load_translator
from .main import build_parser, describe_error, main

__all__ = ["CommandError", "build_parser", "describe_error", "load_translator", "main"]
