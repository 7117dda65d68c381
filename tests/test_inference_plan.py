"""Planning a call: batches by length within the token budget, workers and threads from the cores."""

import pytest

from nmt.config_checks import ConfigError
from nmt.inference.contract import EngineOptions
from nmt.inference.plan import (
    DEFAULT_POLICY,
    batch_budget,
    batches_by_length,
    cut_batches,
    decoder_step_bytes,
    plan_call,
    plan_workers,
)
from nmt.model import ModelConfig, Transformer
from nmt.search_settings import Sampling, SearchRequest, check_length_penalty


def test_plan_gives_one_single_threaded_worker_per_core_but_no_idle_workers():
    assert plan_workers(batches=10, cores=2, workers=None, threads=None) == (2, 1)
    assert plan_workers(batches=1, cores=2, workers=None, threads=None) == (1, 2)  # one sentence: latency
    assert plan_workers(batches=10, cores=8, workers=None, threads=2) == (4, 2)
    assert plan_workers(batches=10, cores=2, workers=3, threads=None) == (3, 1)
    assert plan_workers(batches=100, cores=64, workers=None, threads=None) == (8, 8)  # 8 model copies at most
    assert plan_workers(batches=100, cores=64, workers=16, threads=None) == (16, 4)  # unless asked for
    assert plan_workers(batches=100, cores=64, workers=None, threads=1) == (64, 1)  # or threads are given


def test_the_batch_budget_is_shared_by_the_beams_and_shrinks_to_make_enough_batches():
    assert batch_budget(8000, beam=5, total_tokens=100_000) == 1600
    assert batch_budget(8000, beam=1, total_tokens=16_000, min_batches=8) == 2000  # parallel workers: 8 batches
    assert batch_budget(8000, beam=5, total_tokens=100_000, min_batches=8) == 1600  # never above the beams' share
    assert batch_budget(8000, beam=1, total_tokens=3, min_batches=8) == 1  # at least one token


def test_batches_stay_within_the_budget_and_keep_every_sentence_once():
    lengths = [7, 3, 12, 5, 5, 9, 1, 30]
    batches = batches_by_length(lengths, beam=1, batch_tokens=24)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 24
    assert [lengths[b[0]] for b in batches] == sorted((lengths[b[0]] for b in batches), reverse=True)
    assert cut_batches([0, 1], [100, 1], budget=10) == [[0], [1]]  # too long for the budget: a batch alone


def test_a_call_is_cut_for_its_workers_only_when_its_rows_are_worth_it():
    request = SearchRequest(beam=1)
    few = plan_call([10] * 50, request, batch_tokens=8000, cores=2, workers=None, threads=None, processes=False)
    assert (len(few.batches), few.workers, few.threads) == (1, 1, 2)  # 50 rows: below 2 x 100 for threads
    many = plan_call([10] * 50, request, batch_tokens=8000, cores=2, workers=None, threads=None, processes=True)
    assert (many.workers, many.threads) == (1, 2)  # 50 rows: worth one batch of 32 rows for processes
    more = plan_call([10] * 64, request, batch_tokens=8000, cores=2, workers=None, threads=None, processes=True)
    assert (more.workers, more.threads) == (2, 1) and len(more.batches) == 2
    cuda = plan_call([10] * 640, request, batch_tokens=8000, cores=None, workers=None, threads=None, processes=True)
    assert (cuda.workers, cuda.threads) == (1, None) and len(cuda.batches) == 1


def test_a_model_whose_steps_read_more_weights_than_the_bound_runs_as_one_stream_of_whole_budget_batches():
    lengths = [10] * 640

    def plan(workers=None, threads=None, step_bytes=None):
        return plan_call(
            lengths,
            SearchRequest(beam=1),
            batch_tokens=8000,
            cores=2,
            workers=workers,
            threads=threads,
            processes=True,
            step_bytes=step_bytes,
        )

    light = plan()
    assert light.workers == 2 and len(light.batches) == 8  # cut for two workers
    bound = DEFAULT_POLICY.max_parallel_step_mib * 2**20
    assert plan(step_bytes=bound) == light
    heavy = plan(step_bytes=bound + 1)
    assert (heavy.workers, heavy.threads) == (1, 2) and heavy.batches == batches_by_length(lengths, 1, 8000)
    for workers, threads in ((2, None), (None, 1), (1, 1)):  # a layout the user named is kept as it was
        assert plan(workers, threads) == plan(workers, threads, step_bytes=2 * bound)


def test_a_decoding_step_reads_the_decoder_s_per_step_weights_and_the_output_projection():
    config = ModelConfig(
        src_vocab_size=10, tgt_vocab_size=12, d_model=8, num_heads=2, d_ff=16, decoder_layers=2, sharing="none"
    )
    d, matrices = config.d_model, dict(Transformer(config).named_parameters())
    per_step = sum(  # every decoder weight matrix, less the source's keys and values: once per sentence
        p.numel() - (2 * d * d if ".cross_attn.in_proj" in name else 0)
        for name, p in matrices.items()
        if name.startswith("decoder_layers.") and name.endswith(".weight") and p.dim() == 2
    )
    output = matrices["output.weight"].numel()
    assert decoder_step_bytes(config, "fp32") == 4 * (per_step + output)
    assert decoder_step_bytes(config, "int8", shortlist=True) == per_step  # a shortlist reads its candidates' rows
    opus = ModelConfig(src_vocab_size=58101, tgt_vocab_size=58101, d_model=512, decoder_layers=6, d_ff=2048)
    assert decoder_step_bytes(opus, "fp32") >> 20 == 197  # the figures WorkerPolicy's docstring gives
    assert decoder_step_bytes(opus, "int8") >> 20 == 49
    assert (
        decoder_step_bytes(opus, "fp32") == 4 * decoder_step_bytes(opus, "int8") == 2 * decoder_step_bytes(opus, "bf16")
    )
    small = ModelConfig(tgt_vocab_size=8192, d_model=256, decoder_layers=3, d_ff=1024)  # the Multi30k recipes
    assert decoder_step_bytes(small, "fp32") < 20 * 2**20


def test_seeded_sampling_keeps_the_budget_s_batches_whatever_the_workers():
    seeded = SearchRequest(sampling=Sampling(seed=1))
    plans = [
        plan_call([10] * 400, seeded, batch_tokens=2000, cores=2, workers=w, threads=1, processes=True) for w in (1, 2)
    ]
    assert plans[0].batches == plans[1].batches == batches_by_length([10] * 400, 1, 2000)


@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: EngineOptions(workers=0), "workers must be >= 1 or null, got 0"),
        (lambda: EngineOptions(engine="onnx"), "engine must be one of auto | torch | ctranslate2, got 'onnx'"),
        (lambda: EngineOptions(precision="fp16"), "precision must be one of fp32 | int8 | bf16 or null"),
        (lambda: SearchRequest(beam=0), "beam must be between 1 and 256, got 0"),
        (lambda: SearchRequest(beam=2, n_best=3), "n_best (3) <= beam (2)"),
        (lambda: SearchRequest(length_penalty=float("nan")), "length_penalty must be a finite number"),
        (lambda: SearchRequest(beam=2, sampling=Sampling()), "takes no beam"),
        (lambda: check_length_penalty(-1), "length_penalty must be >= 0, got -1"),
        (lambda: Sampling(temperature=0), "temperature must be > 0, got 0"),
        (lambda: Sampling(top_k=-1), "top_k must be >= 0"),
        (lambda: Sampling(seed=2**63), "seed must be in [0, 2**63)"),
    ],
)
def test_bad_values_are_refused_with_one_line_naming_the_field(build, message):
    with pytest.raises(ValueError) as err:
        build()
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_field_error_names_its_field_apart_for_the_cli():
    with pytest.raises(ConfigError) as err:
        EngineOptions(threads=-2)
    assert (err.value.field, err.value.problem) == ("threads", "must be >= 1, got -2")


def test_the_policy_s_numbers_are_what_its_docstring_explains():
    doc = type(DEFAULT_POLICY).__doc__
    for name, value in vars(DEFAULT_POLICY).items():
        assert f"{name} ({value:g})" in doc, name


def test_numpy_numbers_are_numbers_and_a_torch_device_is_a_device():
    import numpy as np
    import torch

    request = SearchRequest(beam=np.int64(4), length_penalty=np.float32(1.5))
    assert (request.beam, type(request.beam), request.length_penalty) == (4, int, 1.5)
    assert Sampling(seed=np.int64(3)).seed == 3
    assert EngineOptions(device=torch.device("cpu")).device == "cpu"
    with pytest.raises(ValueError, match="beam must be int"):
        SearchRequest(beam=True)  # a flag is not a count
