"""The CUDA paths (bf16 autocast in training, torch.compile, decoding on the GPU), checked against
the CPU. Skipped without a GPU; conftest.py keeps every other test on the CPU.

Run this file first whenever a GPU is lent (benchmarks/gpu_check.sh does): no CI machine has one."""

import json

import pytest
import torch

from nmt.config import load_config
from nmt.decoding import SearchLimits, beam_search
from nmt.training.loss import LossModule
from nmt.training.run import train
from nmt.translator import Translator

from conftest import read_head
from fake_model import tiny_model

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.fixture(scope="module")
def sources(multi30k_dir):
    return read_head(multi30k_dir / "data/task1/raw/val.de.gz", 12)


def first_losses(model_dir):
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if r["kind"] == "train"]


def test_training_on_cuda_in_bf16_follows_the_cpu_run(overrides, tmp_path):
    """Same seed, same batches, no dropout: the logged losses agree to bf16's precision."""
    sets = overrides + [
        "model.dropout=0.0",
        "train.max_steps=3",
        "train.valid_bleu_sentences=0",
        "train.best_metric=loss",
    ]
    train(load_config(None, sets + ["train.device=cpu"]), tmp_path / "cpu", progress_bar=False)
    train(load_config(None, sets + ["train.device=cuda"]), tmp_path / "cuda", progress_bar=False)
    cpu, cuda = first_losses(tmp_path / "cpu"), first_losses(tmp_path / "cuda")
    assert len(cpu) == len(cuda) == 3
    assert cuda == pytest.approx(cpu, rel=2e-2)


def test_compiled_training_pass_equals_the_eager_one():
    model = tiny_model().model.cuda()  # a seeded 2+2-layer model, vocabulary 24, no dropout
    src = torch.randint(4, 24, (3, 7), device="cuda")
    tgt = torch.randint(4, 24, (3, 6), device="cuda")
    results = []
    for compiled in (False, True):
        model.zero_grad()
        loss, _, _ = LossModule(model, 0.1, compile=compiled)(src, tgt[:, :-1], tgt[:, 1:], normaliser=15.0)
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
    (eager_loss, eager_grads), (compiled_loss, compiled_grads) = results
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-4, atol=1e-5)
    for a, b in zip(compiled_grads, eager_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-5)


def test_cached_decoding_equals_uncached_on_cuda(tiny_model_dir, sources):
    translator = Translator.load(tiny_model_dir, device="cuda")
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(translator.encode_source(s)[0]) for s in sources], batch_first=True
    ).cuda()
    limits = SearchLimits(max_len_b=5)
    with torch.inference_mode():
        cached = beam_search(translator.model, src, beam_size=3, limits=limits)
        uncached = beam_search(translator.model, src, beam_size=3, limits=limits, use_cache=False)
    assert [h[0].tokens for h in cached] == [h[0].tokens for h in uncached]


def test_translating_on_cuda_in_fp32_scores_as_on_the_cpu(tiny_model_dir, sources):
    """The same best scores (a near-tie may pick another text on either device, never a worse score)."""
    on_gpu = Translator.load(tiny_model_dir, device="cuda")
    assert on_gpu.engine.precision == "fp32"  # the default: bf16 decoding was slower (docs/benchmarks-log.md)
    on_cpu = Translator.load(tiny_model_dir, device="cpu")
    for beam in (1, 4):
        gpu = [x[0].score for x in on_gpu.translate_detailed(sources, beam=beam)]
        cpu = [x[0].score for x in on_cpu.translate_detailed(sources, beam=beam)]
        assert gpu == pytest.approx(cpu, abs=1e-3)


def test_bf16_decoding_on_cuda_casts_the_weights_once_and_stays_near_fp32(tiny_model_dir, sources):
    bf16 = Translator.load(tiny_model_dir, device="cuda", precision="bf16")
    assert all(m.weight.dtype == torch.bfloat16 for m in bf16.model.modules() if type(m) is torch.nn.Linear)
    fp32 = Translator.load(tiny_model_dir, device="cuda")
    a = [x[0].score for x in bf16.translate_detailed(sources, beam=4)]
    b = [x[0].score for x in fp32.translate_detailed(sources, beam=4)]
    assert a == pytest.approx(b, rel=0.05)
