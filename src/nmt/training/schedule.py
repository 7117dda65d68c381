"""Learning-rate schedules: pure functions of the step number (steps count from 1)."""

from __future__ import annotations


def noam_lr(step: int, *, d_model: int, warmup: int, scale: float = 1.0) -> float:
    """The paper's schedule: scale * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5).

    Rises linearly for `warmup` steps, then decays as 1/sqrt(step); its peak, at
    step = warmup, is scale * (d_model * warmup)^-0.5.
    """
    step = max(step, 1)
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def inverse_sqrt_lr(step: int, *, peak_lr: float, warmup: int) -> float:
    """Linear warm-up to peak_lr, then peak_lr * sqrt(warmup / step) (fairseq's inverse_sqrt)."""
    step = max(step, 1)
    if step < warmup:
        return peak_lr * step / warmup
    return peak_lr * (warmup / step) ** 0.5
