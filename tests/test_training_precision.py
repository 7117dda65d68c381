"""Training's arithmetic: bf16 mixed precision where the hardware multiplies bf16 fast, fp32 elsewhere."""

import pytest
import torch
from safetensors.torch import load_file

from nmt.config import load_config
from nmt.model import Transformer
from nmt.model_dir import read_metrics
from nmt.training import precision as precision_module
from nmt.training.loss import sequence_loss
from nmt.training.precision import bf16_units, training_precision
from nmt.training.run import train

from fake_model import tiny_config

CPU = torch.device("cpu")


def test_the_cpu_s_bf16_units_are_read_from_its_flags(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8\n")
    assert bf16_units(cpuinfo) == "AMX"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512f avx512_bf16\n")  # Zen 4
    assert bf16_units(cpuinfo) == "AVX-512 BF16"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx2 fma\n")  # Zen 3
    assert bf16_units(cpuinfo) is None
    assert bf16_units(tmp_path / "missing") is None


def test_auto_takes_bf16_where_the_cpu_has_bf16_units_and_either_can_be_forced():
    assert training_precision("auto", CPU, units="AMX").dtype == torch.bfloat16
    assert training_precision("auto", CPU, units="AVX-512 BF16").dtype == torch.bfloat16
    chosen = training_precision("auto", CPU, units=None)
    assert chosen.dtype is None and chosen.name == "fp32" and "no bf16 units" in chosen.reason
    assert "train.precision=fp32 or bf16" in chosen.reason  # the log line says how to force either
    forced = training_precision("bf16", CPU, units=None)
    assert forced.dtype == torch.bfloat16 and "expect it slower" in forced.reason
    assert training_precision("fp32", CPU, units="AMX").dtype is None


def test_under_bf16_the_products_run_in_bf16_and_every_layer_norm_and_the_loss_in_fp32():
    torch.manual_seed(0)
    model = Transformer(tiny_config()).train()
    seen = {}

    def record(module, inputs, output):  # what a LayerNorm normalises; what a Linear's product gives
        kept = inputs[0] if isinstance(module, torch.nn.LayerNorm) else output
        seen.setdefault(type(module).__name__, set()).add(kept.dtype)

    for module in model.modules():
        if isinstance(module, (torch.nn.LayerNorm, torch.nn.Linear)):
            module.register_forward_hook(record)
    src, tgt = torch.randint(4, 24, (3, 7)), torch.randint(4, 24, (3, 6))
    with training_precision("bf16", CPU).autocast(CPU):
        out = sequence_loss(model, src, tgt[:, :-1], tgt[:, 1:], normaliser=15)
    assert seen["LayerNorm"] == {torch.float32}  # the residual stream stays fp32
    assert seen["Linear"] == {torch.bfloat16}
    assert out.loss.dtype == torch.float32
    out.loss.backward()
    assert all(p.dtype == torch.float32 for p in model.parameters())  # master weights and gradients
    assert all(p.grad is None or p.grad.dtype == torch.float32 for p in model.parameters())


def test_a_bf16_run_trains_like_fp32_keeps_fp32_weights_and_resumes_exactly(overrides, tmp_path):
    steps = ["train.max_steps=4", "train.valid_every=100", "train.valid_bleu_sentences=0", "train.best_metric=loss"]
    runs, losses = {}, {}
    for name in ("fp32", "bf16"):
        config = load_config(None, [*overrides, *steps, f"train.precision={name}", "train.processes=1"])
        train(config, tmp_path / name, progress_bar=False)
        runs[name] = load_file(tmp_path / name / "model.safetensors")
        losses[name] = [r["loss"] for r in read_metrics(tmp_path / name) if r["kind"] == "train"]
    assert all(t.dtype == torch.float32 for t in runs["bf16"].values())  # checkpoints stay fp32
    assert any(not torch.equal(runs["fp32"][k], runs["bf16"][k]) for k in runs["fp32"])  # bf16 did run
    # The same losses up to bf16's rounding (Adam's first steps move each weight by about the learning
    # rate whatever its gradient, so the weights themselves are no measure).
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=0.01) and len(losses["fp32"]) == 4
    half = [*overrides, *steps, "train.precision=bf16", "train.processes=1"]
    train(load_config(None, [*half, "train.max_steps=2"]), tmp_path / "resumed", progress_bar=False)
    train(load_config(None, half), tmp_path / "resumed", progress_bar=False, resume=True)
    resumed = load_file(tmp_path / "resumed" / "model.safetensors")
    assert all(torch.equal(resumed[k], runs["bf16"][k]) for k in resumed)


def test_the_log_says_which_precision_runs_and_why(overrides, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr(precision_module, "bf16_units", lambda: None)
    quiet = ["train.valid_bleu_sentences=0", "train.best_metric=loss", "train.processes=1"]
    config = load_config(None, [*overrides, "train.max_steps=1", *quiet, "train.precision=auto"])
    with caplog.at_level("INFO"):
        train(config, tmp_path / "run", progress_bar=False)
    assert "precision: fp32: auto, this CPU has no bf16 units" in caplog.text
