"""nmt's own engine: parallel workers change nothing but speed; int8 stays close to fp32."""

import threading

import pytest
import torch

from nmt.config import DecodeConfig
from nmt.inference.plan import DEFAULT_POLICY, batches_by_length
from nmt.inference.precision import is_int8
from nmt.inference.torch_engine import TorchEngine
from nmt.inference.workers import intra_op_threads
from nmt.model import ModelConfig, Transformer
from nmt.search_settings import SearchRequest
from nmt.translator import Sampling, Translator

from conftest import read_head


@pytest.fixture(scope="module")
def sources(multi30k_dir):
    return read_head(multi30k_dir / "data/task1/raw/val.de.gz", 60)


def test_one_worker_keeps_a_batch_that_fits_whole(tiny_model_dir, sources):
    engine = Translator.load(tiny_model_dir, workers=1).engine
    lengths = [n + 2 for n in (30, 3, 3, 3)]  # padding makes it 4 x 32 = 128 tokens, within 8000
    assert batches_by_length(lengths, 5, engine.decode.batch_tokens) == [[0, 1, 2, 3]]
    assert len(batches_by_length(lengths, 5, engine.decode.batch_tokens, min_batches=4)) > 1
    seen = []
    run_here = engine.runner.run_here
    engine.runner.run_here = lambda job: seen.append(len(job.ids)) or run_here(job)
    engine.translate_ids([[2] + [9] * (n - 2) + [3] for n in lengths], SearchRequest(beam=5))
    assert seen == [4]


def test_parallel_workers_give_the_same_hypotheses_in_input_order(tiny_model_dir, sources):
    for beam in (1, 3):
        # many small batches, for the workers to share
        one = Translator.load(tiny_model_dir, workers=1, threads=1, batch_tokens=200)
        two = Translator.load(tiny_model_dir, workers=2, threads=1, batch_tokens=200)
        a = one.translate_detailed(sources, beam=beam, n_best=beam)
        b = two.translate_detailed(sources, beam=beam, n_best=beam)
        lengths = [len(one.encode_source(s)[0]) for s in sources]
        assert len(batches_by_length(lengths, beam, one.decode.batch_tokens)) > 2
        assert [[(h.tokens, round(h.score, 5)) for h in x] for x in a] == [
            [(h.tokens, round(h.score, 5)) for h in x] for x in b
        ]


def test_workers_run_on_separate_threads_and_restore_the_thread_count(tiny_model_dir, sources):
    translator = Translator.load(tiny_model_dir, workers=2, threads=1, worker_processes=False, batch_tokens=100)
    seen = set()
    run_here = translator.engine.runner.run_here

    def spy(job):
        seen.add((threading.get_ident(), torch.get_num_threads()))
        return run_here(job)

    translator.engine.runner.run_here = spy
    before = torch.get_num_threads()
    translator.translate(sources, beam=1)
    assert len({ident for ident, _ in seen}) == 2 and {n for _, n in seen} == {1}
    assert torch.get_num_threads() == before


def batches_seen(translator: Translator, texts: list[str], **options) -> list[tuple[int, int]]:
    """(sentences, intra-op threads) of every batch one translate call (with `options`) searches."""
    seen = []
    run_here = translator.engine.runner.run_here

    def spy(job):
        seen.append((len(job.ids), torch.get_num_threads()))
        return run_here(job)

    translator.engine.runner.run_here = spy
    translator.translate(texts, **options)
    translator.engine.runner.run_here = run_here
    return seen


def test_a_call_is_spread_over_workers_only_in_batches_of_enough_rows(tiny_model_dir, sources):
    # workers and threads: the default plan; every call below fits one batch of the token budget
    translator = Translator.load(tiny_model_dir, worker_processes=False, batch_tokens=100_000)
    translator.engine.cores = 2
    # Too few rows for two batches of DEFAULT_POLICY.min_rows_threads: one worker takes both cores.
    beam = DEFAULT_POLICY.min_rows_threads // len(sources) + 1
    assert batches_seen(translator, sources, beam=beam) == [(60, 2)]
    # Twice as many rows: worth two single-threaded workers, a batch each (cut by padded tokens, so the
    # longest sentences may get a batch more), not the 4 per worker of a large call.
    seen = batches_seen(translator, sources, beam=2 * beam)
    assert sum(n for n, _ in seen) == 60 and {t for _, t in seen} == {1} and 2 <= len(seen) <= 3
    # Two workers asked for: six sentences are cut for two batches (three where padding splits one), not
    # into one sentence each, as four batches per worker would.
    seen = batches_seen(Translator.load(tiny_model_dir, workers=2, worker_processes=False), sources[:6], beam=1)
    assert sum(n for n, _ in seen) == 6 and 2 <= len(seen) <= 3
    # Seeded sampling keeps the token budget's one batch (its draws follow the batches): every core on it.
    many = sources * 4  # 240 rows: worth two workers, were the batch cut
    assert batches_seen(translator, many, sampling=Sampling(seed=3)) == [(240, 2)]


def test_start_workers_starts_a_process_per_core_beyond_the_first_up_to_the_cap(tiny_model_dir, monkeypatch):
    counts = []
    for workers, cores, expected in ((None, 4, [3]), (2, 4, [1]), (1, 4, []), (None, 1, []), (None, 64, [7])):
        translator = Translator.load(tiny_model_dir, workers=workers)
        translator.engine.cores = cores
        monkeypatch.setattr(translator.engine.runner, "start_processes", lambda count: counts.append(count))
        counts.clear()
        translator.start_workers()
        assert counts == expected, (workers, cores)


def test_seeded_sampling_does_not_depend_on_the_workers(tiny_model_dir, sources):
    draws = []
    for workers in (1, 2):
        # batch_tokens: two workers alone would cut these batches smaller
        translator = Translator.load(tiny_model_dir, workers=workers, threads=1, batch_tokens=600)
        draws.append(translator.translate(sources, sampling=Sampling(seed=7)))
    assert draws[0] == draws[1]


def test_intra_op_threads_is_restored_after_an_error():
    before = torch.get_num_threads()
    with pytest.raises(RuntimeError), intra_op_threads(1):
        assert torch.get_num_threads() == 1
        raise RuntimeError("boom")
    assert torch.get_num_threads() == before


def test_intra_op_threads_sets_mkl_s_count_too_when_openmp_already_reports_it():
    """Another OpenMP user (CTranslate2 creating a translator) can set OpenMP's count under torch
    without MKL's: the worker's matrix products must still run on the threads it was given."""
    import ctypes
    import os

    runtime = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so"))
    if not hasattr(runtime, "mkl_get_max_threads"):
        pytest.skip("this torch build has no MKL")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)  # both OpenMP and MKL at 2
        runtime.omp_set_num_threads(1)  # what a ctranslate2.Translator(intra_threads=1) does
        assert torch.get_num_threads() == 1 and runtime.mkl_get_max_threads() == 2
        with intra_op_threads(1):
            assert runtime.mkl_get_max_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_bad_worker_counts_are_refused(tiny_model_dir):
    with pytest.raises(ValueError, match="workers must be >= 1 or null, got 0"):
        Translator.load(tiny_model_dir, workers=0)


def test_engine_search_reports_what_it_ran():
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(
            src_vocab_size=300,
            tgt_vocab_size=300,
            encoder_layers=1,
            decoder_layers=1,
            d_model=32,
            num_heads=4,
            d_ff=64,
            dropout=0.0,
        )
    )
    engine = TorchEngine(model, DecodeConfig(max_len_b=3), precision="int8", workers=1, threads=1)
    (hyps,) = engine.translate_ids([[2, 10, 11, 3]], SearchRequest(beam=2, n_best=2))
    assert is_int8(engine.model) and not any(type(m) is torch.nn.Linear for m in engine.model.modules())
    assert len(hyps) == 2 and hyps[0].score >= hyps[1].score


def test_groups_are_batched_as_if_alone_and_the_later_ones_are_taken_first(tiny_model_dir, sources, monkeypatch):
    """What nmt.rare_numbers' second pass rests on: searched in the same call as the first, neither
    group's results move, not even in int8 (whose rounding depends on the batch), and the small
    later group does not wait for the first group's batches."""
    translator = Translator.load(tiny_model_dir, precision="int8", workers=2, worker_processes=False)
    engine, request = translator.engine, SearchRequest(beam=2, n_best=2)
    first = [translator.encode_source(s)[0] for s in sources[:40]]
    second = [translator.encode_source(s)[0] for s in sources[40:43]]
    tokens = lambda found: [[(h.tokens, h.score) for h in hyps] for hyps in found]  # noqa: E731
    alone = engine.translate_ids(first, request) + engine.translate_ids(second, request)
    taken = []
    run = engine.runner.map
    monkeypatch.setattr(engine.runner, "map", lambda jobs, *rest: taken.extend(jobs) or run(jobs, *rest))
    together = engine.translate_ids(first + second, request, [range(40), range(40, 43)])
    assert tokens(together) == tokens(alone)
    in_second = [all(list(ids) in second for ids in job.ids) for job in taken]
    assert in_second == sorted(in_second, reverse=True) and 0 < sum(in_second) < len(taken)  # the second's first
    merged = engine.translate_ids(first + second, request)  # one group: batches of both, which int8 tells apart
    assert tokens(merged) != tokens(alone)
