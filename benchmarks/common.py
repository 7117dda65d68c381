"""Shared set-up for the benchmarks: Multi30k from the local mirror, a joint tokenizer, batches."""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("NMT_MIRROR", str(REPO.parent / "shared" / "data" / "multi30k"))


def load_multi30k(split: str, src_lang: str = "de", tgt_lang: str = "en") -> list[tuple[str, str]]:
    from nmt.data.corpus import read_parallel
    from nmt.data.registry import parallel_files

    return list(read_parallel(*parallel_files("multi30k", split, src_lang, tgt_lang)))


def joint_tokenizer(cache_dir: Path, vocab_size: int = 8192):
    """The default tokenizer trained on Multi30k train de+en (cached in cache_dir)."""
    from nmt.tokenizer import TokenizerConfig, load_or_train_tokenizers

    pairs = load_multi30k("train")
    src, _ = load_or_train_tokenizers(
        cache_dir, lambda: (s for s, _ in pairs), lambda: (t for _, t in pairs), TokenizerConfig(vocab_size=vocab_size)
    )
    return src


def timed(fn, repeats: int) -> list[float]:
    """Wall-clock seconds of each of `repeats` calls."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median(values: list[float]) -> float:
    return statistics.median(values)


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants (nmt's worker processes), from /proc."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            for task in Path(f"/proc/{current}/task").iterdir():
                pending += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, StopIteration):  # it exited meanwhile
            continue
    return total
