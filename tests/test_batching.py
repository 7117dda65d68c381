"""Properties of collation, length filtering, token-budget batching and prefetching."""

import threading
import time

import numpy as np
import pytest
import torch

from nmt.data.batching import (
    PAD_ID,
    TokenBatchSampler,
    collate,
    filter_by_length,
    iterate_batches,
    padding_stats,
)

BOS, EOS = 2, 3


def random_lengths(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(src, tgt) lengths shaped like a real corpus.

    Target lengths are lognormal within 5..40; each source length is the
    target's times some noise, as translations are correlated in length.
    """
    tgt_len = np.clip(rng.lognormal(np.log(14), 0.5, n), 5, 40).astype(int)
    src_len = np.clip(tgt_len * rng.lognormal(0, 0.15, n), 3, 45).astype(int)
    return src_len, tgt_len


def random_corpus(n: int, seed: int = 0) -> tuple[list[list[int]], list[list[int]]]:
    """Id sequences wrapped in BOS ... EOS, with lengths from ``random_lengths``."""
    rng = np.random.default_rng(seed)
    src_len, tgt_len = random_lengths(n, rng)

    def seq(length: int) -> list[int]:
        return [BOS, *rng.integers(4, 1000, length - 2).tolist(), EOS]

    return [seq(k) for k in src_len], [seq(k) for k in tgt_len]


def lengths(seqs) -> np.ndarray:
    return np.array([len(s) for s in seqs])


@pytest.fixture(scope="module")
def corpus():
    return random_corpus(5000)


# --- collate -----------------------------------------------------------------


def test_collate_pads_and_shifts():
    src = [[BOS, 5, 6, EOS], [BOS, 7, EOS]]
    tgt = [[BOS, 8, EOS], [BOS, 9, 10, 11, EOS]]
    batch = collate(src, tgt, [4, 9])
    assert batch.src.shape == (2, 4) and batch.src.dtype == torch.int64
    assert batch.tgt_in.shape == batch.tgt_out.shape == (2, 4)
    for i, t in enumerate(tgt):
        real = len(t) - 1
        assert batch.tgt_in[i, :real].tolist() == t[:-1]
        assert batch.tgt_out[i, :real].tolist() == t[1:]
        assert (batch.tgt_in[i, real:] == PAD_ID).all() and (batch.tgt_out[i, real:] == PAD_ID).all()
    assert batch.src[1].tolist() == [BOS, 7, EOS, PAD_ID]
    assert batch.tgt_in[:, 0].tolist() == [BOS, BOS]
    assert batch.indices.tolist() == [4, 9]
    assert batch.num_tgt_tokens == int((batch.tgt_out != PAD_ID).sum()) == 2 + 4


def test_collate_accepts_arrays_and_custom_pad():
    src = [np.array([BOS, 5, EOS], dtype=np.int32), np.array([BOS, EOS], dtype=np.int32)]
    batch = collate(src, src, np.array([0, 1]), pad_id=-1)
    assert batch.src.tolist() == [[BOS, 5, EOS], [BOS, EOS, -1]]
    assert batch.tgt_in.tolist() == [[BOS, 5], [BOS, -1]]


def test_batch_to_moves_every_tensor():
    batch = collate([[BOS, EOS]], [[BOS, 5, EOS]], [0]).to("cpu")
    assert all(t.device.type == "cpu" for t in (batch.src, batch.tgt_in, batch.tgt_out, batch.indices))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinned memory needs CUDA")
def test_pinned_prefetch_copies_to_gpu(corpus):
    src, tgt = corpus
    for _, batch in iterate_batches(src, tgt, make_sampler(corpus), epoch=0, pin_memory=True):
        assert batch.src.is_pinned()
        on_gpu = batch.to("cuda", non_blocking=True)
        assert torch.equal(on_gpu.tgt_out.cpu(), batch.tgt_out)
        break


def test_pad_matches_tokenizer():
    tokenizer = pytest.importorskip("nmt.tokenizer")
    assert tokenizer.PAD_ID == PAD_ID


# --- filter_by_length ----------------------------------------------------------


def test_filter_by_length_counts_first_failure():
    src = [5, 50, 5, 5, 50, 10]
    tgt = [5, 5, 60, 30, 60, 12]
    kept, report = filter_by_length(src, tgt, max_src_len=20, max_tgt_len=40, max_ratio=2.0)
    assert kept.tolist() == [0, 5]
    assert (report.kept, report.too_long_src, report.too_long_tgt, report.bad_ratio) == (2, 2, 1, 1)
    assert "kept 2/6" in report.report()


def test_filter_by_length_none_disables():
    kept, report = filter_by_length([5, 500], [100, 5], max_src_len=None, max_tgt_len=None, max_ratio=None)
    assert kept.tolist() == [0, 1] and report.kept == 2


# --- TokenBatchSampler ----------------------------------------------------------


def make_sampler(corpus, **kw) -> TokenBatchSampler:
    src, tgt = corpus
    kw.setdefault("max_tokens", 1024)
    return TokenBatchSampler(lengths(src), lengths(tgt), **kw)


@pytest.mark.parametrize("pool_size", [None, 300])  # one pool / many pools
def test_batches_within_budget_and_cover_epoch_once(corpus, pool_size):
    sampler = make_sampler(corpus, max_sentences=50, pool_size=pool_size)
    cost = np.maximum(sampler.src_lengths, sampler.tgt_lengths)
    batches = sampler.batches(epoch=3)
    for idx in batches:
        assert len(idx) == 1 or len(idx) * cost[idx].max() <= 1024
        assert len(idx) <= 50
    seen = np.concatenate(batches)
    assert np.array_equal(np.sort(seen), np.arange(len(corpus[0])))


def test_oversize_example_gets_own_batch():
    with pytest.warns(UserWarning, match="1 examples"):
        sampler = TokenBatchSampler([5, 5, 300, 5], [5, 5, 5, 5], max_tokens=100)
    batches = sampler.batches(0)
    assert [2] in [b.tolist() for b in batches]
    assert sorted(np.concatenate(batches).tolist()) == [0, 1, 2, 3]


def test_order_is_a_function_of_seed_and_epoch(corpus):
    a, b = make_sampler(corpus, seed=7), make_sampler(corpus, seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches(1), b.batches(1), strict=True))
    first = [x.tolist() for x in a.batches(1)]
    assert first != [x.tolist() for x in a.batches(2)]
    assert first != [x.tolist() for x in make_sampler(corpus, seed=8).batches(1)]


def test_iter_from_skips_exactly(corpus):
    sampler = make_sampler(corpus)
    batches = sampler.batches(5)
    resumed = list(sampler.iter_from(5, 7))
    assert [i for i, _ in resumed] == list(range(7, len(batches)))
    assert all(np.array_equal(idx, batches[i]) for i, idx in resumed)
    assert sampler.num_batches(5) == len(batches)


def test_shards_are_disjoint_equal_and_drop_only_the_remainder(corpus):
    everything = make_sampler(corpus).batches(2)
    shards = [make_sampler(corpus, num_shards=3, shard_index=r).batches(2) for r in range(3)]
    assert len({len(s) for s in shards}) == 1  # every rank runs the same number of steps
    usable = len(everything) - len(everything) % 3
    assert sum(len(s) for s in shards) == usable
    taken = np.concatenate([np.concatenate(s) for s in shards])
    assert len(np.unique(taken)) == len(taken)  # disjoint
    assert np.array_equal(np.sort(taken), np.sort(np.concatenate(everything[:usable])))


def test_unshuffled_is_sorted_and_deterministic(corpus):
    sampler = make_sampler(corpus, shuffle=False)
    order = np.concatenate(sampler.batches(0))
    keys = list(zip(sampler.cost[order], sampler.tgt_lengths[order], sampler.src_lengths[order], order, strict=True))
    assert keys == sorted(keys)
    assert np.array_equal(order, np.concatenate(sampler.batches(9)))


def test_bucketing_keeps_padding_low():
    # Lengths only, and enough of them that the default pool (about 100
    # batches, ~29k examples here) is smaller than the corpus.
    src_len, tgt_len = random_lengths(50_000, np.random.default_rng(1))
    batches = TokenBatchSampler(src_len, tgt_len, max_tokens=4096).batches(0)
    bucketed = padding_stats(batches, src_len, tgt_len)
    assert bucketed["padding_fraction"] < 0.10
    # The same batch sizes over a random order: the metric must see the difference.
    order = np.random.default_rng(0).permutation(len(src_len))
    cuts = np.cumsum([len(b) for b in batches])[:-1]
    unsorted = padding_stats(np.split(order, cuts), src_len, tgt_len)
    assert unsorted["padding_fraction"] > 3 * bucketed["padding_fraction"]


def test_padding_stats_by_hand():
    stats = padding_stats([np.array([0, 1]), np.array([2])], [3, 5, 4], [2, 2, 6])
    # source slots 2*5 + 4, target slots 2*2 + 6; real 3+5+4 + 2+2+6
    assert stats["padded_tokens"] == 24 and stats["real_tokens"] == 22
    assert stats["pad_tokens"] == 2 and stats["padding_fraction"] == pytest.approx(2 / 24)


# --- iterate_batches -------------------------------------------------------------


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "nmt-batch-prefetch"]


def test_prefetch_matches_direct_collation(corpus):
    src, tgt = corpus
    sampler = make_sampler(corpus)
    got = list(iterate_batches(src, tgt, sampler, epoch=1, start=3))
    expected = list(sampler.iter_from(1, 3))
    assert [i for i, _ in got] == [i for i, _ in expected]
    for (_, batch), (_, idx) in zip(got, expected, strict=True):
        direct = collate([src[j] for j in idx], [tgt[j] for j in idx], idx)
        assert torch.equal(batch.src, direct.src) and torch.equal(batch.tgt_out, direct.tgt_out)
        assert torch.equal(batch.tgt_in, direct.tgt_in) and torch.equal(batch.indices, direct.indices)


def wait_until_no_prefetch_thread(seconds: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while prefetch_threads() and time.monotonic() < deadline:
        time.sleep(0.01)
    return not prefetch_threads()


def test_early_break_stops_the_thread(corpus):
    src, tgt = corpus
    batches = iterate_batches(src, tgt, make_sampler(corpus, max_tokens=256), epoch=0, prefetch=1)
    for i, _ in batches:
        if i == 2:
            break
    assert prefetch_threads()  # still referenced, so still open: the producer waits on the full queue
    batches.close()
    assert wait_until_no_prefetch_thread()
    for _ in iterate_batches(src, tgt, make_sampler(corpus, max_tokens=256), epoch=0):
        break  # the unreferenced generator is closed as the loop exits
    assert wait_until_no_prefetch_thread()


def test_errors_in_the_thread_reach_the_caller():
    sampler = TokenBatchSampler([3, 3], [1, 1], max_tokens=100)  # targets too short to shift
    with pytest.raises(ValueError, match="BOS and EOS"):
        list(iterate_batches([[BOS, 5, EOS]] * 2, [[EOS]] * 2, sampler, epoch=0))
    assert wait_until_no_prefetch_thread()
