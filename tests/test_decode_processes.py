"""Worker processes decode what the caller's thread would, and never lose a batch."""

import gc
import threading
import time

import pytest
import torch

import nmt.engine
from nmt.config import DecodeConfig
from nmt.decode_processes import DecodeProcesses, WorkerProcessError
from nmt.engine import Search, TorchEngine
from nmt.model import ModelConfig, Transformer
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
    seen, search = [], engine.search_batch

    def spy(batch_ids, search_, batch_index):
        seen.append(batch_index)
        return search(batch_ids, search_, batch_index)

    engine.search_batch = spy
    return seen


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_worker_processes_give_exactly_what_worker_threads_give(tiny_model_dir, sources, precision):
    threads = Translator.load(tiny_model_dir, workers=2, threads=1, precision=precision, worker_processes=False)
    processes = Translator.load(tiny_model_dir, workers=2, threads=1, precision=precision)
    threads.decode.batch_tokens = processes.decode.batch_tokens = 120  # many small batches to share
    children = processes.engine.worker_processes(1)
    assert children is not None and children.wait_ready(READY_S)
    here = batches_run_here(processes.engine)
    ids = [processes.encode_source(s)[0] for s in sources]
    for beam in (1, 2):
        batches = len(processes.engine.batches_by_length(ids, beam, min_batches=8))
        here.clear()
        a = threads.engine.translate_ids(ids, Search(beam=beam, n_best=beam))
        b = processes.engine.translate_ids(ids, Search(beam=beam, n_best=beam))
        assert [[(h.tokens, h.score, h.log_prob) for h in x] for x in a] == [
            [(h.tokens, h.score, h.log_prob) for h in x] for x in b
        ]
        assert 0 < len(here) < batches  # the child process searched the others
    sampled = [t.translate(sources, sampling=Sampling(seed=3)) for t in (threads, processes)]
    assert sampled[0] == sampled[1]  # each batch's draws follow its place, not the process it ran in
    children.close()


def test_a_worker_process_that_dies_leaves_its_batches_to_the_caller(tiny_model_dir, sources):
    translator = Translator.load(tiny_model_dir, workers=2, threads=1)
    expected = Translator.load(tiny_model_dir, workers=2, threads=1, worker_processes=False)
    translator.decode.batch_tokens = expected.decode.batch_tokens = 120
    processes = translator.engine.worker_processes(1)
    assert processes.wait_ready(READY_S)
    child = processes._children[0]
    child.process.kill()
    child.process.wait()
    here = batches_run_here(translator.engine)
    got = translator.translate(sources, beam=2)
    assert child.broken
    ids = [translator.encode_source(s)[0] for s in sources]
    assert sorted(here) == list(range(len(translator.engine.batches_by_length(ids, 2, min_batches=8))))
    assert got == expected.translate(sources, beam=2)


def test_a_child_that_cannot_start_is_left_out_and_a_thread_does_its_work(caplog):
    model = tiny_transformer()
    processes = DecodeProcesses(model.config, model.state_dict(), precision="no-such-precision")
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
    processes = DecodeProcesses(model.config, model.state_dict(), precision="fp32")
    processes.ensure(1)
    assert processes.wait_ready(READY_S) and not processes._children[0].broken
    here = []

    def run_here(job):
        here.append(job)
        time.sleep(0.05)  # the child takes the bad job meanwhile
        return job

    bad = (0, [[2, 999, 3]], Search(), DecodeConfig(), 1)  # token id 999: outside the 50-word vocabulary
    with pytest.raises(WorkerProcessError, match="IndexError"):
        processes.run(range(10), 1, run_here=run_here, request=lambda job: bad)
    assert len(here) < 9  # nobody took new jobs once the error was known
    processes.close()


def test_worker_processes_exit_when_their_engine_is_collected():
    engine = TorchEngine(tiny_transformer(), DecodeConfig(), workers=2, threads=1)
    processes = engine.worker_processes(1)
    assert processes.wait_ready(READY_S)
    child = processes._children[0].process
    del engine, processes
    gc.collect()
    assert child.wait(timeout=30) == 0


def test_a_model_in_training_is_never_copied_to_worker_processes():
    model = tiny_transformer().requires_grad_(True)  # its weights change between calls: a copy would go stale
    assert TorchEngine(model, DecodeConfig(), workers=2, threads=1).worker_processes(1) is None
    frozen = TorchEngine(tiny_transformer(), DecodeConfig(), workers=2, threads=1, processes=False)
    assert frozen.worker_processes(1) is None


def test_worker_processes_start_once_the_engine_has_worked_long_enough(tiny_model_dir, sources, monkeypatch):
    monkeypatch.setattr(nmt.engine, "PROCESSES_AFTER_SECONDS", 1e-6)  # instead of 30 s: any first call
    translator = Translator.load(tiny_model_dir, workers=2, threads=1)
    translator.decode.batch_tokens = 120  # several batches: both calls are parallel
    translator.translate(sources[:8], beam=1)
    assert translator.engine._processes is None  # a short run would spend on a start what it saves
    translator.translate(sources[:8], beam=1)
    assert translator.engine._processes is not None
    translator.engine._processes.close()
