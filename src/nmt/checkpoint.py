"""Self-describing, atomic checkpoints.

A model directory holds everything needed to use or resume a model:

    model.json            the ModelConfig (rebuilds the network)
    model.safetensors     the weights used for translation (the best checkpoint so far)
    checkpoints/
        step_00001000.safetensors   weights at that step
        step_00001000.state.pt      optimizer, schedule, RNG and data position
        latest                      name of the newest complete checkpoint
    metrics.jsonl         training and validation records (which checkpoints validated best)

Every file is written to a temporary name, flushed to disk and renamed into place, and
`latest` is updated only after both files of a checkpoint exist, so a crash at any
moment leaves the previous checkpoint loadable. State files hold only tensors and plain
Python values, so they load with torch.load(weights_only=True).
"""

from __future__ import annotations

import logging
import math
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from .files import atomic_write, atomic_write_text
from .model import ModelConfig, Transformer
from .model_dir import CHECKPOINTS, LATEST, METRICS, MODEL_CONFIG, WEIGHTS, read_metrics

TIED_METADATA = "tied"  # "alias=stored alias=stored": the names a tied matrix is not stored under
_STEP_NAME = re.compile(r"^step_(\d+)$")
_CHECKPOINT_FILE = re.compile(r"^step_(\d+)\.(?:safetensors|state\.pt)$")

log = logging.getLogger(__name__)


def tied_aliases(state: dict[str, torch.Tensor]) -> dict[str, str]:
    """{alias: stored name} for each matrix a state dict holds under several names (tied embeddings).

    The stored name is the first of a matrix's names in sorted order; the aliases are sorted too.
    """
    groups: dict[tuple, list[str]] = {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape), tensor.dtype)
        groups.setdefault(key, []).append(name)
    aliases = {}
    for names in groups.values():
        kept, *others = sorted(names)
        aliases.update({other: kept for other in others})
    return dict(sorted(aliases.items()))


def save_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Weights as safetensors; shared matrices (tied embeddings) are stored once."""
    state = model.state_dict()
    aliases = tied_aliases(state)
    tensors = {name: t.detach().contiguous() for name, t in state.items() if name not in aliases}
    # One metadata entry, not one per alias: safetensors writes a metadata map in a random order
    # per process, and equal weights must give byte-identical files.
    metadata = {TIED_METADATA: " ".join(f"{a}={k}" for a, k in aliases.items())} if aliases else None
    atomic_write(path, lambda tmp: save_file(tensors, tmp, metadata=metadata))


def read_weights(path: str | Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; an unreadable file is a ValueError naming it."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file not found: {path}")
    try:
        return load_file(str(path))
    except Exception as err:  # safetensors raises its own error types for a cut or foreign file
        raise ValueError(f"{path}: not a readable safetensors weights file ({err})") from None


def apply_weights(model: torch.nn.Module, tensors: dict[str, torch.Tensor], source: str | Path) -> None:
    """Copy `tensors` into `model`; every parameter must be given once (tied aliases need not be)."""
    state = model.state_dict()
    expected = set(state) - set(tied_aliases(state))
    missing, unexpected = sorted(expected - set(tensors)), sorted(set(tensors) - set(state))
    if missing or unexpected:
        raise ValueError(f"{source}: weights do not fit the model (missing {missing[:5]}, unexpected {unexpected[:5]})")
    wrong = [
        f"{k} {tuple(tensors[k].shape)} != {tuple(v.shape)}"
        for k, v in state.items()
        if k in tensors and tensors[k].shape != v.shape
    ]
    if wrong:
        raise ValueError(f"{source}: weights do not fit the model (shapes: {'; '.join(wrong[:3])})")
    model.load_state_dict(tensors, strict=False)


def load_weights(model: torch.nn.Module, path: str | Path) -> None:
    """Load safetensors weights into `model`, re-tying shared matrices; strict about names."""
    apply_weights(model, read_weights(path), path)


def save_state(state: dict[str, Any], path: str | Path) -> None:
    atomic_write(path, lambda tmp: torch.save(state, tmp))


def load_state(path: str | Path) -> dict[str, Any]:
    """A training state file; a cut or foreign file is a ValueError naming it."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise FileNotFoundError(f"training state not found: {path}") from None
    except Exception as err:  # a cut zip archive or a pickle that is not ours
        raise ValueError(f"{path}: not a readable training state ({str(err).splitlines()[0]})") from None


# --- numbered checkpoints ------------------------------------------------------------
def checkpoint_name(step: int) -> str:
    return f"step_{step:08d}"


def save_checkpoint(
    model_dir: str | Path,
    step: int,
    model: torch.nn.Module,
    state: dict[str, Any],
    keep_last: int,
    *,
    keep_best: int = 0,
    metric: str = "bleu",
) -> Path:
    """Write weights + state for `step`, point `latest` at it, then prune (see prune_checkpoints)."""
    folder = Path(model_dir) / CHECKPOINTS
    name = checkpoint_name(step)
    save_weights(model, folder / f"{name}.safetensors")
    save_state(state, folder / f"{name}.state.pt")
    atomic_write_text(folder / LATEST, name + "\n")
    prune_checkpoints(model_dir, keep_last, current=step, keep_best=keep_best, metric=metric)
    return folder / f"{name}.safetensors"


def _checkpoint_files(folder: Path) -> dict[int, list[Path]]:
    """step -> the checkpoint files of that step found in `folder` (one or both)."""
    files: dict[int, list[Path]] = {}
    for path in folder.glob("step_*"):
        match = _CHECKPOINT_FILE.match(path.name)
        if match and path.name.startswith(checkpoint_name(int(match[1])) + "."):  # our spelling only
            files.setdefault(int(match[1]), []).append(path)
    return files


def prune_checkpoints(
    model_dir: str | Path, keep_last: int, current: int, *, keep_best: int = 0, metric: str = "bleu"
) -> None:
    """Keep the newest `keep_last` complete checkpoints up to step `current`, which is always kept,
    and the `keep_best` complete checkpoints up to `current` that validated best by `metric` (see
    `validation_ranking`).

    The rest go, and so do two kinds of leftovers: a checkpoint with one of its two files (its
    writer was killed in between), and any checkpoint after `current`: a run that was resumed
    from an earlier step (because a later checkpoint could not be read) overwrites that future.
    Never the checkpoint just written, and so never the one `latest` names.
    """
    folder = Path(model_dir) / CHECKPOINTS
    files = _checkpoint_files(folder)
    complete = sorted(step for step, paths in files.items() if len(paths) == 2 and step <= current)
    keep = set(complete[-keep_last:]) | {current}
    if keep_best > 0:
        try:
            keep |= set(_best_of(complete, validation_ranking(model_dir, metric), keep_best))
        except ValueError as err:  # a damaged metrics.jsonl must not cost the run, nor its best checkpoints
            log.warning("%s; no checkpoint is deleted until it can be read", err)
            return
    for step, paths in files.items():
        if step not in keep:
            for path in paths:
                path.unlink(missing_ok=True)


def validation_ranking(model_dir: str | Path, metric: str) -> list[int]:
    """The validated steps of a run, best first by `metric` ("bleu": highest first, "loss": lowest
    first; the later step first on a tie), from its metrics.jsonl; [] without one.

    The last record of a step is the one that counts; a step whose value is not a finite number
    (a NaN loss, or no BLEU because the run validated loss only) is left out.
    """
    if metric not in ("bleu", "loss"):
        raise ValueError(f"metric must be 'bleu' or 'loss', not {metric!r}")
    try:
        records = read_metrics(model_dir)
    except FileNotFoundError:
        return []
    last = {record["step"]: record.get(metric) for record in records if record.get("kind") == "valid"}
    scores = {
        step: value if metric == "bleu" else -value  # higher is better
        for step, value in last.items()
        if isinstance(value, (int, float)) and math.isfinite(value)
    }
    return sorted(scores, key=lambda step: (scores[step], step), reverse=True)


def best_checkpoints(model_dir: str | Path, count: int, metric: str) -> list[str]:
    """Names of the `count` complete checkpoints that validated best by `metric`, best first."""
    best = _best_of(_complete_steps(model_dir), validation_ranking(model_dir, metric), count)
    return [checkpoint_name(step) for step in best]


def _best_of(steps: list[int], ranking: list[int], count: int) -> list[int]:
    """The first `count` steps of `ranking` (best first) that are among `steps`."""
    present = set(steps)
    return [step for step in ranking if step in present][:count]


def list_checkpoints(model_dir: str | Path) -> list[str]:
    """Names of complete checkpoints (both files present), oldest first."""
    return [checkpoint_name(step) for step in _complete_steps(model_dir)]


def _complete_steps(model_dir: str | Path) -> list[int]:
    files = _checkpoint_files(Path(model_dir) / CHECKPOINTS)
    return sorted(step for step, paths in files.items() if len(paths) == 2)


def latest_checkpoint(model_dir: str | Path) -> tuple[Path, Path] | None:
    """(weights, state) of the checkpoint that `latest` names, or None when there is none."""
    folder = Path(model_dir) / CHECKPOINTS
    pointer = folder / LATEST
    if not pointer.exists():
        return None
    name = pointer.read_text(errors="replace").strip()
    if not _STEP_NAME.match(name):  # never used as a path unless it is one of our names
        raise ValueError(f"{pointer} does not name a checkpoint (it holds {name[:40]!r})")
    weights, state = folder / f"{name}.safetensors", folder / f"{name}.state.pt"
    if not (weights.exists() and state.exists()):
        raise FileNotFoundError(f"{pointer} names {name}, but its files are missing in {folder}")
    return weights, state


def load_newest_checkpoint(model_dir: str | Path) -> tuple[str, dict[str, torch.Tensor], dict[str, Any]] | None:
    """(name, weights, state) of the newest checkpoint that reads whole; None when there is none.

    `latest` is written last, so a process killed just before it leaves a newer complete
    checkpoint that `latest` does not name yet: that one is the newest. A checkpoint that does
    not read (cut short by a full disk, say) is skipped with a warning for the one before it.
    """
    folder = Path(model_dir) / CHECKPOINTS
    names, failures = list_checkpoints(model_dir), []
    for name in reversed(names):
        try:
            weights = read_weights(folder / f"{name}.safetensors")
            state = load_state(folder / f"{name}.state.pt")
        except (OSError, ValueError) as err:
            log.warning("%s; trying the checkpoint before it", err)
            failures.append(str(err))
            continue
        return name, weights, state
    if failures:
        raise ValueError(f"no checkpoint in {folder} can be read: {'; '.join(failures)}")
    return None


def average_checkpoints(paths: list[str | Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of several weight files (Vaswani et al. average the last checkpoints)."""
    if not paths:
        raise ValueError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for path in paths:
        tensors = read_weights(path)
        if total and set(tensors) != set(total):
            raise ValueError(f"{path}: tensor names differ from {paths[0]}")
        for key, value in tensors.items():
            total[key] = total[key] + value.double() if key in total else value.double()
    return {key: (value / len(paths)).float() for key, value in total.items()}


def average_last_checkpoints(model_dir: str | Path, last: int) -> tuple[Transformer, list[str]]:
    """The model with the mean weights of the newest `last` checkpoints, and their names.

    Loaded as strictly as any checkpoint (every parameter given once, shapes equal), so a
    checkpoint from another model shape is refused rather than half applied.
    """
    if last < 1:
        raise ValueError(f"need at least one checkpoint to average, got last={last}")
    return _average_named(model_dir, list_checkpoints(model_dir)[-last:])


def average_best_checkpoints(model_dir: str | Path, best: int, metric: str) -> tuple[Transformer, list[str]]:
    """The model with the mean weights of the `best` checkpoints that validated best by `metric`
    (those kept on disk: train.keep_best keeps them), and their names, in step order."""
    if best < 1:
        raise ValueError(f"need at least one checkpoint to average, got best={best}")
    names = sorted(best_checkpoints(model_dir, best, metric))
    if not names:
        hint = " (a run that validated loss only: try --metric loss)" if metric == "bleu" else ""
        where = Path(model_dir)
        raise ValueError(f"no checkpoint in {where / CHECKPOINTS} has a validation {metric} in {where / METRICS}{hint}")
    return _average_named(model_dir, names)


def _average_named(model_dir: str | Path, names: list[str]) -> tuple[Transformer, list[str]]:
    folder = Path(model_dir) / CHECKPOINTS
    if not names:
        raise ValueError(f"no checkpoints in {folder}")
    paths = [folder / f"{name}.safetensors" for name in names]
    model = load_model_dir(model_dir, weights=paths[-1])
    apply_weights(model, average_checkpoints(paths), f"the mean of {', '.join(names)}")
    return model, names


# --- whole models ------------------------------------------------------------------
def save_model_dir(model: Transformer, model_dir: str | Path, weights_name: str = WEIGHTS) -> None:
    """The config and the translation weights: what `load_model_dir` needs."""
    model_dir = Path(model_dir)
    atomic_write(model_dir / MODEL_CONFIG, lambda tmp: model.config.save(tmp))
    save_weights(model, model_dir / weights_name)


def load_model_dir(
    model_dir: str | Path, weights: str | Path | None = None, device: str | torch.device = "cpu"
) -> Transformer:
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
