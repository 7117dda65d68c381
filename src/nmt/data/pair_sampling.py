"""How much of each direction a multilingual epoch holds: sampling by temperature.

With directions of n_1 .. n_k pairs (N in all), an epoch of N examples draws direction p with
probability

    q_p = (n_p / N)^(1/T) / sum_j (n_j / N)^(1/T)

T = 1 keeps the data's own proportions; T = 5 (the balance Arivazhagan et al., 2019, settled on
for 100+ directions) lifts small directions; as T grows the directions tend to equal shares. A direction
given more than it holds repeats its pairs (each once before any twice); one given fewer takes a
fresh random subset each epoch.

The draw comes from the epoch's own generator (np.random.default_rng([seed, epoch])), so an epoch
is the same whenever it is rebuilt: a run resumed at any batch sees the batches it would have seen.
"""

from __future__ import annotations

import numpy as np


def direction_shares(sizes: list[int] | np.ndarray, temperature: float) -> np.ndarray:
    """(k,) probability of each direction, from the pairs each holds (see the module docstring)."""
    sizes = np.asarray(sizes, dtype=np.float64)
    if (sizes <= 0).any():
        raise ValueError(f"every direction needs pairs, got sizes {sizes.astype(int).tolist()}")
    if temperature <= 0:
        raise ValueError(f"temperature must be above 0, got {temperature}")
    weights = (sizes / sizes.sum()) ** (1.0 / temperature)
    return weights / weights.sum()


def epoch_examples(groups: np.ndarray, shares: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One epoch's example indices in random order: about shares[p] * len(groups) of direction p.

    groups: (n,) the direction of each example, 0 .. k-1. Each direction's count is rounded so
    that the epoch keeps len(groups) examples in all (largest remainders).
    """
    groups = np.asarray(groups)
    total = len(groups)
    wanted = shares * total
    counts = np.floor(wanted).astype(np.int64)
    counts[np.argsort(-(wanted - counts), kind="stable")[: total - counts.sum()]] += 1
    chosen = []
    for direction, count in enumerate(counts):
        members = np.flatnonzero(groups == direction)
        rounds = -(-count // len(members))  # whole passes over the direction, the last one cut short
        drawn = np.concatenate([rng.permutation(members) for _ in range(rounds)]) if rounds else members[:0]
        chosen.append(drawn[:count])
    return rng.permutation(np.concatenate(chosen))
