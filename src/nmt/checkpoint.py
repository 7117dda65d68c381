"""Self-describing, atomic checkpoints.

A model directory holds everything needed to use or resume a model:

    model.json            the ModelConfig (rebuilds the network)
    model.safetensors     the weights used for translation (the best checkpoint so far)
    checkpoints/
        step_00001000.safetensors   weights at that step
        step_00001000.state.pt      optimizer, schedule, RNG and data position
        latest                      name of the newest complete checkpoint

Every file is written to a temporary name, flushed to disk and renamed into place, and
`latest` is updated only after both files of a checkpoint exist, so a crash at any
moment leaves the previous checkpoint loadable. State files hold only tensors and plain
Python values, so they load with torch.load(weights_only=True).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, load_model, save_model

from .files import atomic_write, atomic_write_text
from .model import ModelConfig, Transformer

MODEL_CONFIG = "model.json"
WEIGHTS = "model.safetensors"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
_STEP_NAME = re.compile(r"^step_(\d+)$")


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Weights as safetensors; shared matrices (tied embeddings) are stored once."""
    atomic_write(path, lambda tmp: save_model(model, tmp))


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load safetensors weights into `model`, re-tying shared matrices; strict about names."""
    missing, unexpected = load_model(model, str(path), strict=False)
    if missing or unexpected:
        raise ValueError(f"{path}: weights do not fit the model (missing {sorted(missing)[:5]}, "
                         f"unexpected {sorted(unexpected)[:5]})")


def save_state(state: dict[str, Any], path: str | Path) -> None:
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def load_state(path: str | Path) -> dict[str, Any]:
    return torch.load(path, map_location="cpu", weights_only=True)


# --- numbered checkpoints ------------------------------------------------------------
def checkpoint_name(step: int) -> str:
    return f"step_{step:08d}"


def save_checkpoint(model_dir: str | Path, step: int, model: torch.nn.Module, state: dict[str, Any],
                    keep_last: int) -> Path:
    """Write weights + state for `step`, point `latest` at it, delete all but the newest `keep_last`."""
    folder = Path(model_dir) / CHECKPOINTS
    name = checkpoint_name(step)
    save_weights(model, folder / f"{name}.safetensors")
    save_state(state, folder / f"{name}.state.pt")
    atomic_write_text(folder / LATEST, name + "\n")
    for old in list_checkpoints(model_dir)[:-keep_last] if keep_last > 0 else []:
        for suffix in (".safetensors", ".state.pt"):
            (folder / f"{old}{suffix}").unlink(missing_ok=True)
    return folder / f"{name}.safetensors"


def list_checkpoints(model_dir: str | Path) -> list[str]:
    """Names of complete checkpoints (both files present), oldest first."""
    folder = Path(model_dir) / CHECKPOINTS
    names = {p.name.removesuffix(".safetensors") for p in folder.glob("step_*.safetensors")}
    complete = [n for n in names if _STEP_NAME.match(n) and (folder / f"{n}.state.pt").exists()]
    return sorted(complete, key=lambda n: int(_STEP_NAME.match(n).group(1)))


def latest_checkpoint(model_dir: str | Path) -> tuple[Path, Path] | None:
    """(weights, state) of the checkpoint that `latest` names, or None when there is none."""
    folder = Path(model_dir) / CHECKPOINTS
    pointer = folder / LATEST
    if not pointer.exists():
        return None
    name = pointer.read_text().strip()
    weights, state = folder / f"{name}.safetensors", folder / f"{name}.state.pt"
    if not (weights.exists() and state.exists()):
        raise FileNotFoundError(f"{pointer} names {name}, but its files are missing in {folder}")
    return weights, state


def average_checkpoints(paths: list[str | Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several weight files (Vaswani et al. average the last checkpoints)."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        tensors = load_file(str(path))
        if total and set(tensors) != set(total):
            raise ValueError(f"{path}: tensor names differ from {paths[0]}")
        for key, value in tensors.items():
            total[key] = total[key] + value.double() if key in total else value.double()
    return {key: (value / len(paths)).float() for key, value in total.items()}


# --- whole models ------------------------------------------------------------------
def save_model_dir(model: Transformer, model_dir: str | Path, weights_name: str = WEIGHTS) -> None:
    """The config and the translation weights: what `load_model_dir` needs."""
    model_dir = Path(model_dir)
    atomic_write(model_dir / MODEL_CONFIG, lambda tmp: model.config.save(tmp))
    save_weights(model, model_dir / weights_name)


def load_model_dir(model_dir: str | Path, weights: str | Path | None = None,
                   device: str | torch.device = "cpu") -> Transformer:
    """Rebuild the Transformer from model.json and load its weights (default: model.safetensors)."""
    model_dir = Path(model_dir)
    config_path = model_dir / MODEL_CONFIG
    if not config_path.exists():
        raise FileNotFoundError(f"{model_dir} is not a model directory: {MODEL_CONFIG} is missing")
    model = Transformer(ModelConfig.load(config_path))
    weights = Path(weights) if weights is not None else model_dir / WEIGHTS
    if not weights.exists():
        raise FileNotFoundError(f"{weights} is missing: has training saved a checkpoint yet?")
    load_weights(model, weights)
    return model.to(device).eval()
