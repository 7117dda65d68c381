"""nmt: Transformer neural machine translation, end to end.

The public names load on first use, so `import nmt` itself imports neither torch nor anything else:

    import nmt
    translator = nmt.Translator.load("runs/de_en")
    nmt.train(nmt.load_config("configs/multi30k_de_en.yaml"), "runs/new")
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> the module that defines it
_PUBLIC = {
    "Translator": "nmt.translator",
    "Translation": "nmt.translator",
    "Sampling": "nmt.translator",
    "EngineOptions": "nmt.translator",
    "ExperimentConfig": "nmt.config",
    "ConfigError": "nmt.config",
    "load_config": "nmt.config",
    "train": "nmt.training.run",
}
__all__ = [*_PUBLIC, "__version__"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'nmt' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
