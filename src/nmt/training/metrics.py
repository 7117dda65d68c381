"""Metrics records: one JSON object a line in <model_dir>/metrics.jsonl, and TensorBoard when installed."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

from ..files import atomic_write_text
from ..model_dir import METRICS as METRICS_FILE

log = logging.getLogger(__name__)



class MetricsLog:
    """Append-only log of {"kind": "train" | "valid", "step": ..., metric: value} records."""

    def __init__(self, model_dir: str | Path, enabled: bool = True):
        self.path = Path(model_dir) / METRICS_FILE
        self.enabled = enabled
        self._tensorboard = None
        if enabled:
            try:  # optional: only when the tensorboard package is installed
                from torch.utils.tensorboard import SummaryWriter

                self._tensorboard = SummaryWriter(str(Path(model_dir) / "tensorboard"))
            except ImportError:
                pass

    def truncate_after(self, step: int) -> None:
        """On resume, forget records written after the checkpoint we resume from."""
        if not (self.enabled and self.path.exists()):
            return
        kept = [record for record in read_metrics(self.path.parent) if record["step"] <= step]
        atomic_write_text(self.path, "".join(json.dumps(record) + "\n" for record in kept))

    def write(self, kind: str, step: int, **values: Any) -> None:
        if not self.enabled:
            return
        record = {"kind": kind, "step": step, **{k: _plain(v) for k, v in values.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if self._tensorboard is not None:
            for key, value in values.items():
                if isinstance(value, (int, float)) and math.isfinite(value):
                    self._tensorboard.add_scalar(f"{kind}/{key}", value, step)

    def close(self) -> None:
        if self._tensorboard is not None:
            self._tensorboard.close()


def _plain(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else str(value)
    return value


def read_metrics(model_dir: str | Path) -> list[dict[str, Any]]:
    """All records of a model directory's metrics log.

    A last line cut short (the process was killed while appending it) is skipped with a
    warning; a bad line anywhere else is an error naming the file and line.
    """
    path = Path(model_dir) / METRICS_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path} not found: train a model into {model_dir} first")
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not (isinstance(record, dict) and isinstance(record.get("step"), int)):
                raise ValueError("not a record with a step")
        except ValueError as err:
            if number == len(lines):  # no newline after it: a torn append
                log.warning("%s:%d: skipping a metrics record cut short (%s)", path, number, err)
                continue
            raise ValueError(f"{path}:{number}: not a metrics record ({err})") from None
        records.append(record)
    return records
