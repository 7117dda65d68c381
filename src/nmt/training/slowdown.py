"""Noticing that training has slowed far below its own starting speed, and saying so once.

On a few CPU cores, intra-op threads collapse when another process takes a core (an OpenMP team
waits for its slowest thread): a run can fall to a fraction of its speed, and nothing tells the
user why their budget bought so few steps. The first windows of a run set its reference speed;
a window far below it is worth one warning line, repeated only after the speed has come back.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SlowdownWatch:
    """Feed it each logging window's tokens/s; it answers with a warning to log, or None.

    start_windows: how many windows (after the first, which includes start-up costs) set the
    reference: their best. slow: a window below this fraction of the reference is a slowdown;
    recovered: back above this fraction re-arms the warning.
    """

    start_windows: int = 4
    slow: float = 0.5
    recovered: float = 0.8
    seen: int = 0
    reference: float = 0.0
    warned: bool = False
    _start: list[float] = field(default_factory=list)

    def observe(self, tokens_per_s: float, threads: int) -> str | None:
        self.seen += 1
        if self.seen == 1:
            return None  # the first window pays for start-up (allocations, caches): not a reference
        if len(self._start) < self.start_windows:
            self._start.append(tokens_per_s)
            self.reference = max(self._start)
            return None
        if self.warned:
            self.warned = tokens_per_s < self.recovered * self.reference
            return None
        if tokens_per_s >= self.slow * self.reference:
            return None
        self.warned = True
        waiting = (
            f"{threads} intra-op threads here wait for each other when one core is busy"
            if threads > 1
            else "each worker process waits for the slowest at every step"
        )
        return (
            f"training runs at {tokens_per_s:,.0f} target tokens/s, {tokens_per_s / self.reference:.0%} of the "
            f"{self.reference:,.0f} it measured at its start: another process is probably taking the cores "
            f"({waiting})"
        )
