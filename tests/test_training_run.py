"""Assembling a run (training/run.py): fine-tuning from a trained model with --init-from."""

import json

import pytest
import torch

from nmt.checkpoint import load_model_dir
from nmt.config import load_config
from nmt.training.distributed import Distributed
from nmt.training.loss import teacher_forced_states
from nmt.training.run import build_trainer, continues_after_restart, train
from nmt.training.validation import validation_loss

from conftest import own_data_home, tiny_training

SHORT = ["train.valid_every=100", "train.valid_bleu_sentences=0", "train.best_metric=loss"]


@pytest.fixture(scope="module")
def trained(tiny_corpus, tmp_path_factory):
    """The parent of the fine-tuning tests, trained once for the module: they only read it."""
    root = tmp_path_factory.mktemp("parent")
    with own_data_home(root / "data_home"):
        # on the CPU by name: a module's fixture is built before conftest hides the GPU
        sets = tiny_training(tiny_corpus) + SHORT + ["train.max_steps=6", "train.device=cpu"]
        train(load_config(None, sets), root / "parent", progress_bar=False)
    return root / "parent"


def test_fine_tuning_starts_with_the_parents_loss_on_its_own_data(overrides, trained, tmp_path):
    child = build_trainer(
        load_config(None, overrides + SHORT + ["train.max_steps=6", "model.dropout=0.3"]),
        tmp_path / "child",
        dist=Distributed(),
        init_from=trained,
    )
    assert (tmp_path / "child" / "tokenizer.json").read_bytes() == (trained / "tokenizer.json").read_bytes()
    assert child.progress.step == 0 and not child.optimizer.state  # fresh optimizer and schedule
    parent = load_model_dir(trained)  # in eval mode, as validation runs
    at_start = validation_loss(child.model.eval(), child.data, batch_tokens=512, device=torch.device("cpu"))
    own = validation_loss(parent, child.data, batch_tokens=512, device=torch.device("cpu"))
    assert at_start == own  # the same weights: step 0 of the child is the parent
    fresh = build_trainer(load_config(None, overrides + SHORT), tmp_path / "fresh", dist=Distributed())
    assert validation_loss(fresh.model.eval(), fresh.data, batch_tokens=512, device=torch.device("cpu")) != own


def test_fine_tuning_refuses_a_config_that_builds_another_model(overrides, trained, tmp_path):
    config = load_config(None, overrides + SHORT + ["model.d_ff=48", "model.activation=gelu"])
    with pytest.raises(ValueError, match=r"d_ff \(64 there, 48 here\); activation \('?relu'? there, '?gelu'? here\)"):
        build_trainer(config, tmp_path / "child", dist=Distributed(), init_from=trained)


def test_fine_tuning_refuses_a_directory_with_another_tokenizer(overrides, trained, tmp_path):
    child = tmp_path / "child"
    child.mkdir()
    (child / "tokenizer.json").write_text("{}")
    with pytest.raises(ValueError, match="differs from the tokenizer of"):
        build_trainer(load_config(None, overrides + SHORT), child, dist=Distributed(), init_from=trained)


def test_init_from_and_resume_are_refused_together(overrides, trained, tmp_path):
    with pytest.raises(ValueError, match="not both"):
        train(load_config(None, overrides + SHORT), tmp_path / "x", resume=True, init_from=trained)


def test_a_fine_tuning_run_resumed_before_its_first_checkpoint_starts_from_its_parent(overrides, trained, tmp_path):
    def first_loss(model_dir):
        return json.loads((model_dir / "metrics.jsonl").read_text().splitlines()[0])["loss"]

    config = load_config(None, overrides + SHORT + ["train.max_steps=2", "train.log_every=1"])
    child = tmp_path / "child"
    build_trainer(config, child, dist=Distributed(), init_from=trained)  # "killed" before any checkpoint
    assert (child / "init_from").read_text().strip() == str(trained.resolve())
    train(config, child, resume=True, progress_bar=False)  # plain --resume, as the CLI allows
    train(config, tmp_path / "uninterrupted", init_from=trained, progress_bar=False)
    train(config, tmp_path / "scratch", progress_bar=False)
    assert first_loss(child) == first_loss(tmp_path / "uninterrupted") != first_loss(tmp_path / "scratch")


def test_a_model_mismatch_is_refused_before_anything_is_written(overrides, trained, tmp_path):
    config = load_config(None, overrides + SHORT + ["model.d_ff=48"])
    with pytest.raises(ValueError, match=r"d_ff \(64 there, 48 here\)"):
        build_trainer(config, tmp_path / "child", dist=Distributed(), init_from=trained)
    assert not (tmp_path / "child").exists()


def test_train_compile_compiles_the_training_pass_and_not_validation_s_decoding(overrides, tmp_path, monkeypatch):
    """Incremental decoding recompiles at every length (seen on a GPU): only the whole-batch pass is compiled."""
    compiled = []

    def record(fn, **options):  # stands in for torch.compile, which takes minutes on CPU
        compiled.append((fn, options))
        return fn

    monkeypatch.setattr(torch, "compile", record)
    sets = ["train.compile=true", "train.max_steps=2", "train.valid_every=1"]  # validation decodes 8 sentences
    train(load_config(None, overrides + sets), tmp_path / "run", progress_bar=False)
    assert compiled == [(teacher_forced_states, {"dynamic": True})]


def test_a_run_logging_to_a_file_says_its_progress_every_log_every_steps(overrides, tmp_path, caplog):
    """Without a terminal there is no progress bar (tqdm turns it off): a line every log_every
    steps stands in for it, so a log file is not silent between validations."""
    caplog.set_level("INFO", logger="nmt.training.trainer")
    config = load_config(None, overrides + SHORT + ["train.max_steps=4", "train.log_every=2"])
    train(config, tmp_path / "run", progress_bar=True)  # pytest's stderr is no terminal
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("step ") and "/" in r.getMessage()]
    assert [line.split(":")[0] for line in lines] == ["step 1/4", "step 2/4", "step 4/4"]
    assert all("loss " in line and "tok/s " in line for line in lines)


def test_a_run_torchrun_restarted_resumes_and_one_it_did_not_is_refused(tmp_path, monkeypatch):
    """Under torchrun --max-restarts the ranks decide together (Distributed.restarted) whether a run
    already in the directory is theirs to resume; no process group is needed to check the decision."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "1")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    dist = Distributed(rank=1, world_size=2)
    monkeypatch.setattr(dist, "restarted", lambda: True)
    assert continues_after_restart(dist, run)
    assert not continues_after_restart(dist, tmp_path / "new")  # restarted before anything was written
    monkeypatch.setattr(dist, "restarted", lambda: False)
    with pytest.raises(ValueError, match="already holds a training run: add --resume"):
        continues_after_restart(dist, run)
    monkeypatch.setenv("TORCHELASTIC_MAX_RESTARTS", "0")  # nmt train's command line refuses it before
    assert not continues_after_restart(dist, run)
