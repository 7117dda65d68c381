"""Metrics records: one JSON object a line in <model_dir>/metrics.jsonl, and TensorBoard when installed.

Reading the file back is nmt.model_dir.read_metrics (plots and resume use it).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ..files import atomic_write_text
from ..model_dir import METRICS as METRICS_FILE
from ..model_dir import read_metrics


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
