"""Turn encoded sentence pairs into padded tensor batches.

The pipeline, in order:

1. ``filter_by_length`` drops pairs that are too long or badly aligned.
2. ``TokenBatchSampler`` decides *which* examples go together: batches
   sized by a token budget, built from length-sorted pools so that little
   of each batch is padding. Its order is a pure function of
   ``(seed, epoch)``, so training can resume mid-epoch exactly.
3. ``collate`` turns one batch of id lists into padded tensors.
4. ``iterate_batches`` runs 3 for the batches of 2 in a background thread.

Every length here counts tokens *including* BOS and EOS, because that is
what the encoded sequences hold and what the tensors will be sized by.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .pair_sampling import direction_shares, epoch_examples

# Must equal nmt.tokenizer.PAD_ID (a test checks); not imported, so that
# this module stays usable without the tokenizer's dependencies.
PAD_ID = 0


@dataclass
class Batch:
    """One padded batch. ``tgt_in``/``tgt_out`` are the target shifted by one."""

    src: torch.Tensor  # (batch, src_len) int64, PAD_ID on the right
    tgt_in: torch.Tensor  # (batch, tgt_len) target[:-1]: BOS w1 .. wn
    tgt_out: torch.Tensor  # (batch, tgt_len) target[1:]:  w1 .. wn EOS
    indices: torch.Tensor  # (batch,) int64 positions of the examples in the corpus
    num_tgt_tokens: int  # non-pad labels in tgt_out: what the loss is averaged over

    def _map(self, fn) -> Batch:
        return dataclasses.replace(
            self, src=fn(self.src), tgt_in=fn(self.tgt_in), tgt_out=fn(self.tgt_out), indices=fn(self.indices)
        )

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        """Copy of the batch on ``device`` (non_blocking pays off only from pinned memory)."""
        return self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Batch:
        """Copy of the batch in page-locked memory, for asynchronous host-to-GPU copies."""
        return self._map(lambda t: t.pin_memory())


def _pad(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad ``seqs`` into a (n, max_len) int64 array; also return the lengths (n,)."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    out = np.full((len(seqs), int(lengths.max(initial=0))), pad_id, dtype=np.int64)
    if out.size:
        flat = np.concatenate([np.asarray(s, dtype=np.int64) for s in seqs])
        # A boolean mask fills row by row, which is exactly the order of `flat`.
        out[np.arange(out.shape[1]) < lengths[:, None]] = flat
    return out, lengths


def collate(
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    indices: Sequence[int] | np.ndarray,
    *,
    pad_id: int = PAD_ID,
) -> Batch:
    """Pad a batch to its longest sentence on each side and shift the target.

    Every target must hold at least BOS and EOS. For a target of length L,
    ``tgt_in`` row is its first L-1 ids and ``tgt_out`` row its last L-1,
    each followed by padding.
    """
    if not (len(src_seqs) == len(tgt_seqs) == len(indices)):
        raise ValueError("src_seqs, tgt_seqs and indices must have the same length")
    src, _ = _pad(src_seqs, pad_id)
    tgt, tgt_len = _pad(tgt_seqs, pad_id)  # (batch, T)
    if tgt.size and tgt_len.min() < 2:
        raise ValueError("every target needs at least BOS and EOS")
    # tgt[:, :-1] would still hold each shorter row's EOS: blank it, so that
    # tgt_in row i is exactly target[:-1] followed by padding.
    real_in = np.arange(tgt.shape[1] - 1) < (tgt_len - 1)[:, None]  # (batch, T-1)
    tgt_in = np.where(real_in, tgt[:, :-1], pad_id)
    tgt_out = tgt[:, 1:]
    return Batch(
        src=torch.from_numpy(src),
        tgt_in=torch.from_numpy(np.ascontiguousarray(tgt_in)),
        tgt_out=torch.from_numpy(np.ascontiguousarray(tgt_out)),
        indices=torch.as_tensor(np.asarray(indices, dtype=np.int64)),
        num_tgt_tokens=int((tgt_len - 1).sum()),
    )


@dataclass
class LengthFilterReport:
    """Counts from ``filter_by_length``; each dropped pair counts under its first failing test."""

    kept: int
    too_long_src: int
    too_long_tgt: int
    bad_ratio: int

    def report(self) -> str:
        total = self.kept + self.too_long_src + self.too_long_tgt + self.bad_ratio
        return (
            f"kept {self.kept}/{total} pairs; dropped {self.too_long_src} (source too long), "
            f"{self.too_long_tgt} (target too long), {self.bad_ratio} (length ratio)"
        )


def filter_by_length(
    src_lengths: Sequence[int] | np.ndarray,
    tgt_lengths: Sequence[int] | np.ndarray,
    *,
    max_src_len: int | None,
    max_tgt_len: int | None,
    max_ratio: float | None,
) -> tuple[np.ndarray, LengthFilterReport]:
    """Indices (int64, ascending) of the pairs that pass the length limits, and why the others failed.

    Lengths are in tokens *including BOS and EOS*. A pair passes when
    ``src_len <= max_src_len``, ``tgt_len <= max_tgt_len`` and
    ``max(src_len, tgt_len) / min(src_len, tgt_len) <= max_ratio``; None
    switches a test off. Tests run in that order, and a dropped pair is
    counted under the first one it fails.
    """
    ls = np.asarray(src_lengths, dtype=np.int64)
    lt = np.asarray(tgt_lengths, dtype=np.int64)
    if ls.shape != lt.shape:
        raise ValueError("src_lengths and tgt_lengths must have the same length")
    alive = np.ones(len(ls), dtype=bool)
    counts = []
    for fails in (
        ls > max_src_len if max_src_len is not None else None,
        lt > max_tgt_len if max_tgt_len is not None else None,
        # max(1, ...) guards against empty sequences, which have no ratio.
        np.maximum(ls, lt) > max_ratio * np.maximum(np.minimum(ls, lt), 1) if max_ratio is not None else None,
    ):
        dropped = alive & fails if fails is not None else np.zeros_like(alive)
        counts.append(int(dropped.sum()))
        alive &= ~dropped
    kept = np.flatnonzero(alive)  # an array: millions of pairs are no Python list
    return kept, LengthFilterReport(len(kept), *counts)


class TokenBatchSampler:
    """Batches by a token budget with length bucketing; deterministic per (seed, epoch); resumable.

    One epoch, with ``shuffle=True`` (training):

    1. shuffle all examples with ``np.random.default_rng([seed, epoch])``;
    2. cut the shuffled order into pools of ``pool_size`` examples and sort
       each pool stably by (cost, target length, source length), where an
       example's cost is ``max(src_len, tgt_len)``;
    3. cut each sorted pool greedily into batches whose cost
       ``n * max(longest source, longest target)`` stays within
       ``max_tokens`` (padding included) and ``n <= max_sentences``;
    4. shuffle the order of the batches.

    Sorting by the cost first, rather than by (target, source) length,
    groups examples the way the budget measures them; on synthetic lengths
    with realistic source/target noise it roughly halves the padding.
    Bigger pools pad less (``pool_size >= len`` is one global sort with
    random tie-breaks) but vary batch composition less across epochs. The
    cost ignores that the decoder sees L-1 tokens: simpler, and at most one
    token per sentence conservative.

    An example whose own cost exceeds ``max_tokens`` becomes a batch of one
    (with one warning at construction) rather than an error, so that
    translation never loses a sentence; filter training data with
    ``filter_by_length`` beforehand.

    With ``shuffle=False`` (validation, translation) all examples are sorted
    globally and the batches keep that order. For translation, where no
    target exists, pass the source lengths as ``tgt_lengths``.

    Sharding (DDP): every rank builds the same epoch, drops the last
    ``num_batches % num_shards`` batches (fewer than ``num_shards``) so that
    all ranks take the same number of steps, and takes every
    ``num_shards``-th batch from ``shard_index``. In training the dropped
    batches are a different random few each epoch; for evaluation use
    ``num_shards=1`` if no example may be skipped.

    Several directions (``groups``: each example's, 0 .. k-1): step 1 draws the epoch's examples
    by ``temperature`` (nmt.data.pair_sampling) instead of taking each once.
    """

    def __init__(
        self,
        src_lengths: Sequence[int] | np.ndarray,
        tgt_lengths: Sequence[int] | np.ndarray,
        *,
        max_tokens: int,
        pool_size: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        num_shards: int = 1,
        shard_index: int = 0,
        max_sentences: int | None = None,
        groups: np.ndarray | None = None,
        temperature: float = 1.0,
    ) -> None:
        """``pool_size=None`` means about 100 batches' worth of examples (Marian's maxi-batch)."""
        self.src_lengths = np.asarray(src_lengths, dtype=np.int64)
        self.tgt_lengths = np.asarray(tgt_lengths, dtype=np.int64)
        if self.src_lengths.shape != self.tgt_lengths.shape or self.src_lengths.ndim != 1:
            raise ValueError("src_lengths and tgt_lengths must be 1-d and of the same length")
        if max_tokens < 1 or (max_sentences is not None and max_sentences < 1):
            raise ValueError("max_tokens and max_sentences must be positive")
        if not 0 <= shard_index < num_shards:
            raise ValueError(f"shard_index {shard_index} out of range for {num_shards} shards")
        self.cost = np.maximum(self.src_lengths, self.tgt_lengths)  # (n,) tokens one example adds
        if groups is not None and len(groups) != len(self.cost):
            raise ValueError(f"{len(groups)} directions for {len(self.cost)} examples")
        self.groups, self.temperature = groups, temperature
        self.shares = None if groups is None else direction_shares(np.bincount(groups), temperature)
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.seed = seed
        self.shuffle = shuffle
        self.num_shards = num_shards
        self.shard_index = shard_index
        if pool_size is None:
            per_batch = max_tokens // max(1, int(self.cost.mean())) if len(self.cost) else 1
            pool_size = 100 * max(1, min(per_batch, max_sentences or per_batch))
        self.pool_size = pool_size
        self._cached: tuple[int, list[np.ndarray]] | None = None
        oversize = int((self.cost > max_tokens).sum())
        if oversize:
            warnings.warn(
                f"{oversize} examples are longer than max_tokens={max_tokens}; each will form a batch of its own",
                stacklevel=2,
            )

    def for_lengths(self, src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> TokenBatchSampler:
        """The same sampler (budget, seed, pool, shard) over new lengths of the same examples.

        For an epoch whose examples were segmented afresh (BPE-dropout): batches planned on the
        old lengths would pad to the longest new one in each batch.
        """
        if len(src_lengths) != len(self.src_lengths):
            raise ValueError(f"{len(src_lengths)} examples, where the sampler has {len(self.src_lengths)}")
        return TokenBatchSampler(
            src_lengths,
            tgt_lengths,
            max_tokens=self.max_tokens,
            pool_size=self.pool_size,
            seed=self.seed,
            shuffle=self.shuffle,
            num_shards=self.num_shards,
            shard_index=self.shard_index,
            max_sentences=self.max_sentences,
            groups=self.groups,
            temperature=self.temperature,
        )

    def _sort(self, idx: np.ndarray) -> np.ndarray:
        # lexsort is stable and sorts by its last key first: (cost, tgt, src).
        return idx[np.lexsort((self.src_lengths[idx], self.tgt_lengths[idx], self.cost[idx]))]

    def _cut(self, idx: np.ndarray) -> list[np.ndarray]:
        """Greedily cut sorted example indices into batches within the budget."""
        costs = self.cost[idx]
        batches, i = [], 0
        while i < len(idx):
            # n * (running max) >= n * costs[i], so no batch can outgrow this.
            limit = min(len(idx) - i, max(1, self.max_tokens // max(1, int(costs[i]))))
            if self.max_sentences is not None:
                limit = min(limit, self.max_sentences)
            # spend[k] is the cost of a batch of the next k+1 examples.
            spend = np.maximum.accumulate(costs[i : i + limit]) * np.arange(1, limit + 1)
            over = spend > self.max_tokens
            size = max(1, int(over.argmax()) if over.any() else limit)
            batches.append(idx[i : i + size])
            i += size
        return batches

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of an epoch, before sharding."""
        if not self.shuffle:
            return self._cut(self._sort(np.arange(len(self.cost))))
        rng = np.random.default_rng([self.seed, epoch])
        order = (
            rng.permutation(len(self.cost)) if self.groups is None else epoch_examples(self.groups, self.shares, rng)
        )
        batches = []
        for start in range(0, len(order), self.pool_size):
            batches.extend(self._cut(self._sort(order[start : start + self.pool_size])))
        return [batches[k] for k in rng.permutation(len(batches))]

    def batches(self, epoch: int) -> list[np.ndarray]:
        """This shard's batches for ``epoch``: a list of int64 example-index arrays."""
        if self._cached is None or self._cached[0] != epoch:
            everything = self._epoch_batches(epoch)
            usable = len(everything) - len(everything) % self.num_shards
            self._cached = (epoch, everything[self.shard_index : usable : self.num_shards])
        return self._cached[1]

    def num_batches(self, epoch: int) -> int:
        """How many batches this shard gets in ``epoch`` (it varies a little by epoch)."""
        return len(self.batches(epoch))

    def iter_from(self, epoch: int, start: int = 0) -> Iterator[tuple[int, np.ndarray]]:
        """Yield ``(index_in_epoch, example_indices)`` for this shard, skipping the first ``start`` batches."""
        batches = self.batches(epoch)
        for i in range(start, len(batches)):
            yield i, batches[i]


def padding_stats(
    batches: Sequence[np.ndarray],
    src_lengths: Sequence[int] | np.ndarray,
    tgt_lengths: Sequence[int] | np.ndarray,
) -> dict[str, float]:
    """How much of the padded tensors is real data, over both sides.

    Returns ``real_tokens`` (sum of lengths), ``padded_tokens`` (sum over
    batches of n * longest, i.e. tensor slots), ``pad_tokens`` and
    ``padding_fraction = pad_tokens / padded_tokens``.
    """
    real = slots = 0
    for lengths in (np.asarray(src_lengths, dtype=np.int64), np.asarray(tgt_lengths, dtype=np.int64)):
        for idx in batches:
            if len(idx):
                lens = lengths[idx]
                real += int(lens.sum())
                slots += len(lens) * int(lens.max())
    return {
        "real_tokens": real,
        "padded_tokens": slots,
        "pad_tokens": slots - real,
        "padding_fraction": (slots - real) / slots if slots else 0.0,
    }


_DONE = object()  # queue sentinel: the producer has no more batches


def iterate_batches(
    src_seqs: Sequence[Sequence[int]],
    tgt_seqs: Sequence[Sequence[int]],
    sampler: TokenBatchSampler,
    *,
    epoch: int,
    start: int = 0,
    pad_id: int = PAD_ID,
    prefetch: int = 2,
    pin_memory: bool = False,
) -> Iterator[tuple[int, Batch]]:
    """Yield ``(index_in_epoch, Batch)`` from ``sampler.iter_from(epoch, start)``.

    Batches are collated (and pinned, if asked) ``prefetch`` ahead in a
    daemon thread, so the training step does not wait for them. Closing the
    generator stops the thread: leaving a ``for`` loop early does this as
    soon as the generator is dropped; call ``.close()`` if you keep it.
    Errors in the thread are re-raised here.
    """
    slots: queue.Queue = queue.Queue(maxsize=max(1, prefetch))
    stop = threading.Event()

    def offer(item) -> bool:
        # A bounded wait, so a consumer that went away cannot block us forever.
        while not stop.is_set():
            try:
                slots.put(item, timeout=0.05)
                return True
            except queue.Full:
                pass
        return False

    def produce() -> None:
        try:
            for i, idx in sampler.iter_from(epoch, start):
                batch = collate([src_seqs[j] for j in idx], [tgt_seqs[j] for j in idx], idx, pad_id=pad_id)
                if pin_memory:
                    batch = batch.pin_memory()
                if not offer((i, batch)):
                    return
            offer(_DONE)
        except BaseException as error:  # hand it to the consumer, which re-raises
            offer(error)

    worker = threading.Thread(target=produce, name="nmt-batch-prefetch", daemon=True)
    worker.start()
    try:
        while (item := slots.get()) is not _DONE:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join(timeout=5.0)
