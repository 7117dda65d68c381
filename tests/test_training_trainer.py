import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from nmt.checkpoint import latest_checkpoint, list_checkpoints
from nmt.config import load_config
from nmt.model_dir import read_decode_config
from nmt.training import loss as loss_module
from nmt.training import trainer as trainer_module
from nmt.training.run import train
from nmt.training.trainer import TrainingDiverged


def train_losses(model_dir):
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["loss"]) for r in records if r["kind"] == "train"]


def final_weights(model_dir):
    weights, _ = latest_checkpoint(model_dir)
    return load_file(str(weights)), weights.name


def test_interrupted_and_resumed_run_equals_uninterrupted_run(overrides, tmp_path):
    full = tmp_path / "full"
    train(load_config(None, overrides + ["train.max_steps=8", "train.valid_every=4"]), full, progress_bar=False)
    part = tmp_path / "part"
    train(load_config(None, overrides + ["train.max_steps=4", "train.valid_every=4"]), part, progress_bar=False)
    train(
        load_config(None, overrides + ["train.max_steps=8", "train.valid_every=4"]),
        part,
        resume=True,
        progress_bar=False,
    )
    a, name_a = final_weights(full)
    b, name_b = final_weights(part)
    assert name_a == name_b == "step_00000008.safetensors"
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    assert train_losses(full) == train_losses(part)


def test_same_seed_gives_identical_loss_curve(overrides, tmp_path):
    config = overrides + [
        "train.max_steps=5",
        "train.valid_every=100",
        "train.valid_bleu_sentences=0",
        "train.best_metric=loss",
    ]
    train(load_config(None, config), tmp_path / "a", progress_bar=False)
    train(load_config(None, config), tmp_path / "b", progress_bar=False)
    curve = train_losses(tmp_path / "a")
    assert len(curve) == 5 and curve == train_losses(tmp_path / "b")
    assert curve[-1][1] < curve[0][1]  # it learns


def test_non_finite_losses_are_skipped_then_stop_training(overrides, tmp_path, monkeypatch):
    model_dir = tmp_path / "nan"
    config = load_config(
        None,
        overrides
        + [
            "train.max_steps=20",
            "train.valid_every=2",
            "train.max_bad_steps=3",
            "train.valid_bleu_sentences=0",
            "train.best_metric=loss",
        ],
    )
    real_loss, calls = loss_module.sequence_loss, {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        out = real_loss(*args, **kwargs)
        if calls["n"] in (3,) or calls["n"] >= 6:  # one isolated bad step, then bad for good
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(loss_module, "sequence_loss", poisoned)
    with pytest.raises(TrainingDiverged, match="intact"):
        train(config, model_dir, progress_bar=False)
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    assert sum(r["kind"] == "skipped" for r in records) == 4  # the isolated one + three in a row
    # steps 1, 2 (call 1, 2), skip (call 3), steps 3, 4 (calls 4, 5): the last checkpoint is step 4 and loads
    weights, state = latest_checkpoint(model_dir)
    assert weights.name == "step_00000004.safetensors"
    assert all(torch.isfinite(t).all() for t in load_file(str(weights)).values())


def test_checkpoints_keep_the_last_k(overrides, tmp_path):
    model_dir = tmp_path / "keep"
    train(
        load_config(
            None,
            overrides
            + [
                "train.max_steps=6",
                "train.valid_every=1",
                "train.keep_last=2",
                "train.valid_bleu_sentences=0",
                "train.best_metric=loss",
            ],
        ),
        model_dir,
        progress_bar=False,
    )
    assert list_checkpoints(model_dir) == ["step_00000005", "step_00000006"]
    assert (model_dir / "model.safetensors").exists() and (model_dir / "model.json").exists()


def test_keep_best_keeps_the_checkpoints_that_validated_best(overrides, tmp_path):
    model_dir = tmp_path / "best"
    settings = ["train.max_steps=6", "train.valid_every=1", "train.keep_last=1", "train.keep_best=2"]
    settings += ["train.valid_bleu_sentences=0", "train.best_metric=loss"]
    train(load_config(None, overrides + settings), model_dir, progress_bar=False)
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    losses = {r["step"]: r["loss"] for r in records if r["kind"] == "valid"}
    best_two = sorted(losses, key=losses.get)[:2]
    assert list_checkpoints(model_dir) == [f"step_{step:08d}" for step in sorted({*best_two, 6})]


def test_sigterm_saves_and_exits_cleanly_then_resumes(overrides, tmp_path):
    model_dir = tmp_path / "signal"
    args = [sys.executable, "-m", "nmt", "train", "--out", str(model_dir), "--quiet"]
    sets = [
        x
        for o in overrides
        + [
            "train.max_steps=100000",
            "train.valid_every=100000",
            "train.valid_bleu_sentences=0",
            "train.best_metric=loss",
            # A few steps' model never ends a sentence: 5 pieces each keep the tuning at the end
            # (a beam per alpha, then each precision twice over the validation set) to seconds.
            "decode.max_len_a=0",
            "decode.max_len_b=5",
        ]
        for x in ("--set", o)
    ]
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")
    proc = subprocess.Popen(
        args[:4] + [str(config)] + args[4:] + sets,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    metrics = model_dir / "metrics.jsonl"
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    # saved, but not finished: a non-zero status, so `nmt train && nmt average` stops there
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "training stopped: stopped by SIGTERM" in err
    assert f"to continue it: nmt train --out {model_dir} --resume" in err
    assert "choosing the decoding settings" not in err  # an unfinished model keeps its config's
    weights, _ = latest_checkpoint(model_dir)
    stopped_at = int(weights.stem.split("_")[1])
    assert stopped_at >= 3
    finish = ["--resume", "--set", f"train.max_steps={stopped_at + 2}", "train.tune_decoding=true"]
    resumed = subprocess.run(args[:4] + args[4:] + finish, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    assert latest_checkpoint(model_dir)[0].name == f"step_{stopped_at + 2:08d}.safetensors"
    # A finished run chooses its alpha and CPU precision on validation, says so, and keeps them.
    said = re.search(r"length penalty: ([\d.]+).*; BLEU on val.de by alpha: 0.6: [\d.]+, 1: ", resumed.stderr)
    precision = re.search(r"precision: (fp32|int8|bf16) on CPU \(fp32 BLEU [\d.]+ in [\d.]+ s, int8 ", resumed.stderr)
    assert said and precision, resumed.stderr
    decode = read_decode_config(model_dir)
    assert decode.length_penalty == float(said[1]) and (decode.precision or "fp32") == precision[1]
    # and what its quality scores mean, fitted last, under the settings chosen (nmt.quality)
    from nmt.quality import QualityCalibration

    assert "quality scores: fitted on validation (" in resumed.stderr
    assert QualityCalibration.load(model_dir).fitted_on == "validation"


def test_cli_refuses_to_overwrite_a_run_without_resume(overrides, tmp_path):
    from nmt.cli import main

    model_dir = tmp_path / "run"
    train(
        load_config(None, overrides + ["train.max_steps=1", "train.valid_bleu_sentences=0", "train.best_metric=loss"]),
        model_dir,
        progress_bar=False,
    )
    config = tmp_path / "c.yaml"
    config.write_text("{}\n")
    assert main(["train", str(config), "--out", str(model_dir)]) == 2


def test_early_stopping_after_patience_validations_without_improvement(overrides, tmp_path, monkeypatch):
    losses = iter([3.0, 2.0, 2.5, 2.6, 2.7, 2.8])
    monkeypatch.setattr(trainer_module, "validate", lambda *args, **kwargs: {"loss": next(losses)})
    model_dir = tmp_path / "early"
    stopped = train(
        load_config(
            None,
            overrides
            + [
                "train.max_steps=100",
                "train.valid_every=1",
                "train.patience=2",
                "train.best_metric=loss",
                "train.valid_bleu_sentences=0",
            ],
        ),
        model_dir,
        progress_bar=False,
    )
    assert stopped == "no improvement in 2 validations (train.patience)" and stopped.signum is None
    assert latest_checkpoint(model_dir)[0].name == "step_00000004.safetensors"  # best at 2, worse at 3 and 4


def copy_trainer(folder, **train_fields):
    """A Trainer built from parts: no config file, no tokenizer, no corpus, a tiny model and made-up
    data (a copy task) handed straight to the loop."""
    import numpy as np

    from nmt.config import DecodeConfig, TrainConfig
    from nmt.data.batching import TokenBatchSampler
    from nmt.data.encoded import EncodedCorpus, RaggedArray
    from nmt.model import ModelConfig, Transformer
    from nmt.training.datasets import TrainingData
    from nmt.training.distributed import Distributed
    from nmt.training.loss import LossModule
    from nmt.training.placement import place
    from nmt.training.run import build_optimizer
    from nmt.training.trainer import Trainer

    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    sentences = [[2, *rng.integers(4, 16, size=n).tolist(), 3] for n in rng.integers(1, 6, size=96)]
    copy_task = EncodedCorpus(RaggedArray.from_sequences(sentences), RaggedArray.from_sequences(sentences))
    data = TrainingData(None, None, copy_task, copy_task, [], [])  # BLEU off: no tokenizer needed
    model = Transformer(
        ModelConfig(
            src_vocab_size=16,
            tgt_vocab_size=16,
            encoder_layers=1,
            decoder_layers=1,
            d_model=32,
            num_heads=2,
            d_ff=64,
            dropout=0.0,
        )
    )
    placement = place(model, LossModule(model, 0.0), Distributed(), fsdp=False)
    fields = dict(
        max_steps=80,
        valid_every=20,
        log_every=20,
        batch_tokens=160,
        schedule="inverse_sqrt",
        peak_lr=3e-3,
        warmup=10,
        valid_bleu_sentences=0,
        best_metric="loss",
        keep_last=2,
        precision="fp32",  # the same arithmetic on every CPU (auto picks bf16 where it has bf16 units)
    )
    cfg = TrainConfig(**{**fields, **train_fields})
    sampler = TokenBatchSampler(
        copy_task.src_lengths(), copy_task.tgt_lengths(), max_tokens=cfg.batch_tokens, seed=cfg.seed
    )
    return Trainer(
        cfg,
        DecodeConfig(),
        folder,
        data=data,
        placement=placement,
        optimizer=build_optimizer(model, cfg, fused=True),
        sampler=sampler,
        progress_bar=False,
    )


def metric_records(folder, kind):
    return [r for r in map(json.loads, (folder / "metrics.jsonl").read_text().splitlines()) if r["kind"] == kind]


def test_a_trainer_built_from_parts_learns_to_copy(tmp_path):
    stopped = copy_trainer(tmp_path).run()
    assert stopped == "reached train.max_steps=80" and stopped.signum is None
    valid = [r["loss"] for r in metric_records(tmp_path, "valid")]
    assert len(valid) == 4 and valid[-1] < 0.5 * valid[0]  # it learns to copy
    assert list_checkpoints(tmp_path) == ["step_00000060", "step_00000080"]
    assert (tmp_path / "model.safetensors").exists() and (tmp_path / "model.json").exists()


@pytest.mark.parametrize("signal_at", [3, 7])
def test_sigterm_before_the_end_is_an_interruption_and_at_the_end_is_not(tmp_path, monkeypatch, signal_at):
    """Before max_steps: saved, no final validation, `signum` says the run is unfinished. During the
    last step: the run is finished (a caller may build on it), validated and saved as usual."""
    trainer = copy_trainer(tmp_path, max_steps=7, valid_every=5)
    take_step = trainer.train_step

    def step_then_signal(micro_batches):
        stats = take_step(micro_batches)
        if trainer.progress.step == signal_at:
            os.kill(os.getpid(), signal.SIGTERM)  # handled before the loop's next check
        return stats

    monkeypatch.setattr(trainer, "train_step", step_then_signal)
    stopped = trainer.run()
    assert list_checkpoints(tmp_path)[-1] == f"step_{signal_at:08d}"
    if signal_at == 3:
        assert stopped == "stopped by SIGTERM" and stopped.signum == signal.SIGTERM
        assert metric_records(tmp_path, "valid") == []  # quick: no validation on the way out
    else:
        assert stopped == "reached train.max_steps=7" and stopped.signum is None
        assert [r["step"] for r in metric_records(tmp_path, "valid")] == [5, 7]


def test_r_drop_trains_and_logs_the_plain_nll(overrides, tmp_path):
    config = load_config(
        None,
        overrides
        + [
            "train.max_steps=4",
            "train.valid_every=100",
            "train.log_every=1",
            "train.valid_bleu_sentences=0",
            "train.best_metric=loss",
            "train.r_drop_alpha=5.0",
            "model.dropout=0.3",
        ],
    )
    train(config, tmp_path / "rdrop", progress_bar=False)
    records = [json.loads(line) for line in (tmp_path / "rdrop" / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in records if r["kind"] == "train"]
    assert len(steps) == 4 and all(math.isfinite(r["loss"]) and r["loss"] >= r["nll"] * 0.9 for r in steps)


def test_bpe_dropout_runs_whole_epochs(overrides, tmp_path):
    config = load_config(
        None,
        overrides
        + ["data.bpe_dropout=0.1", "train.max_epochs=2", "train.max_steps=null", "train.valid_every=1000"]
        + ["train.valid_bleu_sentences=0", "train.best_metric=loss"],
    )
    assert train(config, tmp_path / "bpe_dropout", progress_bar=False) == "reached train.max_epochs=2"


def test_with_bpe_dropout_each_epoch_is_planned_on_its_own_lengths(overrides, tmp_path):
    """Batches planned on the deterministic lengths would overflow the budget once pieces are dropped."""
    from nmt.training.distributed import Distributed
    from nmt.training.run import build_trainer

    budget = 300
    config = load_config(None, overrides + ["data.bpe_dropout=0.3", f"train.batch_tokens={budget}"])
    trainer = build_trainer(config, tmp_path / "run", dist=Distributed(), progress_bar=False)
    sizes = []
    for index, batch in trainer.batches():
        rows = batch.src.size(0)
        sizes.append(rows * max(batch.src.size(1), batch.tgt_in.size(1) + 1))  # padded tokens, as planned
        assert sizes[-1] <= budget or rows == 1, (index, sizes[-1])
        if trainer.progress.epoch == 1:  # two epochs, two samples
            break
    assert len(sizes) > 10
