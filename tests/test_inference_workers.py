"""Worker processes decode what the caller's thread would, and never lose a batch."""

import gc
import threading
import time

import pytest
import torch

from nmt.config import DecodeConfig
from nmt.decoding import SearchLimits
from nmt.inference import torch_engine
from nmt.inference.batch_search import BatchJob
from nmt.inference.plan import WorkerPolicy, batches_by_length
from nmt.inference.torch_engine import TorchEngine
from nmt.inference.workers import ProcessPool, WorkerProcessError
from nmt.model import ModelConfig, Transformer
from nmt.search_settings import SearchRequest
from nmt.translator import Sampling, Translator

from conftest import read_head

READY_S = 120  # a child imports torch and loads the weights; generous for a loaded CI machine


@pytest.fixture(scope="module")
def sources(multi30k_dir):
    return read_head(multi30k_dir / "data/task1/raw/val.de.gz", 24)


def tiny_transformer() -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=50, tgt_vocab_size=50, encoder_layers=1, decoder_layers=1, d_model=16, num_heads=2, d_ff=32
    )
    return Transformer(config).requires_grad_(False)


def batches_run_here(engine: TorchEngine) -> list[int]:
    """Patch `engine` to record the batches its own (caller's) thread searches."""
    seen, run_here = [], engine.runner.run_here

    def spy(job):
        seen.append(job.index)
        return run_here(job)

    engine.runner.run_here = spy
    return seen


def batch_count(translator: Translator, ids: list[list[int]], beam: int) -> int:
    """The batches a call of `ids` is cut into on two workers (8 batches wanted)."""
    return len(batches_by_length([len(s) for s in ids], beam, translator.decode.batch_tokens, min_batches=8))


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_worker_processes_give_exactly_what_worker_threads_give(tiny_model_dir, sources, precision):
    small = dict(workers=2, threads=1, precision=precision, batch_tokens=120)  # many small batches to share
    threads = Translator.load(tiny_model_dir, worker_processes=False, **small)
    processes = Translator.load(tiny_model_dir, **small)
    children = processes.engine.runner.start_processes(1)
    assert children is not None and children.wait_ready(READY_S)
    here = batches_run_here(processes.engine)
    ids = [processes.encode_source(s)[0] for s in sources]
    for beam in (1, 2):
        batches = batch_count(processes, ids, beam)
        here.clear()
        a = threads.engine.translate_ids(ids, SearchRequest(beam=beam, n_best=beam))
        b = processes.engine.translate_ids(ids, SearchRequest(beam=beam, n_best=beam))
        assert [[(h.tokens, h.score, h.log_prob) for h in x] for x in a] == [
            [(h.tokens, h.score, h.log_prob) for h in x] for x in b
        ]
        assert 0 < len(here) < batches  # the child process searched the others
    sampled = [t.translate(sources, sampling=Sampling(seed=3)) for t in (threads, processes)]
    assert sampled[0] == sampled[1]  # each batch's draws follow its place, not the process it ran in
    children.close()


def test_a_worker_process_that_dies_leaves_its_batches_to_the_caller(tiny_model_dir, sources):
    translator = Translator.load(tiny_model_dir, workers=2, threads=1, batch_tokens=120)
    expected = Translator.load(tiny_model_dir, workers=2, threads=1, worker_processes=False, batch_tokens=120)
    processes = translator.engine.runner.start_processes(1)
    assert processes.wait_ready(READY_S)
    child = processes._children[0]
    child.process.kill()
    child.process.wait()
    here = batches_run_here(translator.engine)
    got = translator.translate(sources, beam=2)
    assert child.broken
    ids = [translator.encode_source(s)[0] for s in sources]
    assert sorted(here) == list(range(batch_count(translator, ids, 2)))
    assert got == expected.translate(sources, beam=2)


def test_a_child_that_cannot_start_is_left_out_and_a_thread_does_its_work(caplog):
    model = tiny_transformer()
    processes = ProcessPool(model.config, model.state_dict(), precision="no-such-precision")
    processes.ensure(1)
    assert processes.wait_ready(READY_S)
    assert processes._children[0].broken
    assert "could not start" in caplog.text and "no-such-precision" in caplog.text
    seen = set()

    def run_here(job):
        seen.add(threading.get_ident())
        time.sleep(0.01)  # long enough for both threads to take jobs
        return job * 10

    done = processes.run(range(20), 1, run_here=run_here, request=lambda job: pytest.fail("sent"))
    assert done == {job: job * 10 for job in range(20)}
    assert len(seen) == 2  # the caller's thread and the one standing in for the child, in every call
    processes.close()


def test_an_error_in_a_child_s_search_stops_the_call_with_the_child_s_traceback():
    model = tiny_transformer()
    processes = ProcessPool(model.config, model.state_dict(), precision="fp32")
    processes.ensure(1)
    assert processes.wait_ready(READY_S) and not processes._children[0].broken
    here = []

    def run_here(job):
        here.append(job)
        # the child takes the bad job meanwhile: 0.2 s a job leaves it time to fail and say so even
        # on a loaded 2-core machine
        time.sleep(0.2)
        return job

    bad = (BatchJob(0, [[2, 999, 3]], SearchRequest(), SearchLimits()), 1)  # token 999: outside the vocabulary
    with pytest.raises(WorkerProcessError, match="IndexError"):
        processes.run(range(10), 1, run_here=run_here, request=lambda job: bad)
    assert len(here) < 9  # nobody took new jobs once the error was known
    processes.close()


def test_worker_processes_exit_when_their_engine_is_collected():
    engine = TorchEngine(tiny_transformer(), DecodeConfig(), workers=2, threads=1)
    processes = engine.runner.start_processes(1)
    assert processes.wait_ready(READY_S)
    child = processes._children[0].process
    del engine, processes
    gc.collect()
    assert child.wait(timeout=30) == 0


def test_a_model_in_training_is_never_copied_to_worker_processes():
    model = tiny_transformer().requires_grad_(True)  # its weights change between calls: a copy would go stale
    assert TorchEngine(model, DecodeConfig(), workers=2, threads=1).runner.start_processes(1) is None
    frozen = TorchEngine(tiny_transformer(), DecodeConfig(), workers=2, threads=1, processes=False)
    assert frozen.runner.start_processes(1) is None


def test_worker_processes_start_once_the_engine_has_worked_long_enough(tiny_model_dir, sources):
    translator = Translator.load(tiny_model_dir, workers=2, threads=1, batch_tokens=120)  # several batches
    translator.engine.runner.policy = WorkerPolicy(processes_after_s=1e-6)  # instead of 30 s: any first call
    translator.translate(sources[:8], beam=1)
    assert translator.engine.runner.pool is None  # a short run would spend on a start what it saves
    translator.translate(sources[:8], beam=1)
    assert translator.engine.runner.pool is not None
    translator.close()
    assert translator.engine.runner.pool is None


def test_a_model_whose_steps_stream_its_weights_runs_one_worker_and_starts_no_processes(monkeypatch):
    """Above WorkerPolicy.max_parallel_step_mib (here 0 MiB): the same outputs as the parallel layout, on
    one worker with every core as its threads, in the token budget's batches."""
    monkeypatch.setattr(torch_engine, "available_cores", lambda: 2)  # a 1-core runner would plan one worker anyway
    torch.manual_seed(1)
    ids = [[2, *torch.randint(4, 50, (int(n),)).tolist(), 3] for n in torch.randint(1, 12, (40,))]
    decode = DecodeConfig(batch_tokens=120, max_len_b=6)
    parallel = TorchEngine(tiny_transformer(), decode, workers=2, threads=1, processes=False)
    streaming = TorchEngine(tiny_transformer(), decode, policy=WorkerPolicy(max_parallel_step_mib=0))
    assert streaming.one_stream
    streaming.start(wait=True)
    assert streaming.runner.pool is None  # no worker process holds a copy of a large model
    layouts = []
    run = streaming.runner.map

    def spy(jobs, workers, threads, processes):
        layouts.append((len(jobs), workers, threads))
        return run(jobs, workers, threads, processes)

    monkeypatch.setattr(streaming.runner, "map", spy)
    for beam in (1, 2):
        a = parallel.translate_ids(ids, SearchRequest(beam=beam, n_best=beam))
        b = streaming.translate_ids(ids, SearchRequest(beam=beam, n_best=beam))
        assert [[h.tokens for h in x] for x in a] == [[h.tokens for h in x] for x in b]
        assert [h.score for x in a for h in x] == pytest.approx([h.score for x in b for h in x], abs=1e-4)
        budget_batches = len(batches_by_length([len(s) for s in ids], beam, decode.batch_tokens))
        assert layouts[-1] == (budget_batches, 1, streaming.cores)
    assert not TorchEngine(tiny_transformer(), decode).one_stream  # the default bound: a tiny model is parallel
    named = TorchEngine(tiny_transformer(), decode, threads=1, policy=WorkerPolicy(max_parallel_step_mib=0))
    assert not named.one_stream  # a layout the user chose is kept
