"""Resume survives what a crash leaves behind: orphan checkpoints, cut files, torn metrics, dead temp files.

Each test damages a run the way a SIGKILL or a full disk would, resumes it, and checks that the
final tensors equal an uninterrupted run's.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from nmt import checkpoint as checkpoint_module
from nmt.checkpoint import latest_checkpoint, list_checkpoints
from nmt.config import load_config
from nmt.model_dir import read_metrics
from nmt.training.run import train

from conftest import own_data_home, tiny_training

QUIET = ["train.valid_bleu_sentences=0", "train.best_metric=loss", "train.tune_decoding=false"]


def run(overrides, model_dir, steps, *extra, resume=False):
    config = load_config(None, overrides + QUIET + [f"train.max_steps={steps}", *extra])
    return train(config, model_dir, resume=resume, progress_bar=False)


def assert_same_weights(a_dir, b_dir, step):
    name = f"step_{step:08d}.safetensors"
    a, b = (load_file(str(d / "checkpoints" / name)) for d in (a_dir, b_dir))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), key
    # Equal weights, equal bytes: nothing in the file depends on the process that wrote it.
    assert (a_dir / "checkpoints" / name).read_bytes() == (b_dir / "checkpoints" / name).read_bytes()


@pytest.fixture(scope="module")
def reference(tiny_corpus, tmp_path_factory):
    """An uninterrupted 6-step run with a checkpoint every 2 steps, trained once for the module
    (the tests only read it), on the CPU by name: a module's fixture is built before conftest hides the GPU."""
    root = tmp_path_factory.mktemp("reference")
    with own_data_home(root / "data_home"):
        run(tiny_training(tiny_corpus), root / "reference", 6, "train.valid_every=2", "train.device=cpu")
    return root / "reference"


def test_orphan_newer_checkpoint_with_keep_last_1_resumes(overrides, tmp_path, reference, monkeypatch):
    # Killed after step 4's two files were written, before `latest` moved to it.
    model_dir = tmp_path / "orphan"
    real = checkpoint_module.atomic_write_text

    def killed_at_step_4(path, text):
        if text.startswith("step_00000004"):
            raise KeyboardInterrupt  # stands for the SIGKILL
        real(path, text)

    monkeypatch.setattr(checkpoint_module, "atomic_write_text", killed_at_step_4)
    with pytest.raises(KeyboardInterrupt):
        run(overrides, model_dir, 6, "train.valid_every=2", "train.keep_last=1")
    monkeypatch.setattr(checkpoint_module, "atomic_write_text", real)
    assert (model_dir / "checkpoints" / "latest").read_text().strip() == "step_00000002"
    assert list_checkpoints(model_dir) == ["step_00000002", "step_00000004"]
    run(overrides, model_dir, 6, "train.valid_every=2", "train.keep_last=1", resume=True)
    assert list_checkpoints(model_dir) == ["step_00000006"]
    assert_same_weights(reference, model_dir, 6)


def test_a_kill_before_the_last_checkpoint_s_pruning_is_pruned_on_resume(overrides, tmp_path, monkeypatch):
    # Killed after the last step's checkpoint was written and `latest` moved to it, before the one
    # before it was deleted: the resumed run has nothing left to train, and still prunes.
    model_dir = tmp_path / "unpruned"
    real = checkpoint_module.prune_checkpoints

    def killed_before_pruning_step_4(model_dir, keep_last, current, **kwargs):
        if current == 4:
            raise KeyboardInterrupt  # stands for the SIGKILL
        real(model_dir, keep_last, current, **kwargs)

    monkeypatch.setattr(checkpoint_module, "prune_checkpoints", killed_before_pruning_step_4)
    with pytest.raises(KeyboardInterrupt):
        run(overrides, model_dir, 4, "train.valid_every=2", "train.keep_last=1")
    monkeypatch.setattr(checkpoint_module, "prune_checkpoints", real)
    assert list_checkpoints(model_dir) == ["step_00000002", "step_00000004"]
    before = read_metrics(model_dir)
    run(overrides, model_dir, 4, "train.valid_every=2", "train.keep_last=1", resume=True)
    assert list_checkpoints(model_dir) == ["step_00000004"]
    assert read_metrics(model_dir) == before  # nothing trained or validated again


def test_unreadable_newest_checkpoint_falls_back_and_a_bad_latest_is_ignored(overrides, tmp_path, reference, caplog):
    model_dir = tmp_path / "cut"
    run(overrides, model_dir, 4, "train.valid_every=2")
    folder = model_dir / "checkpoints"
    state = folder / "step_00000004.state.pt"
    state.write_bytes(state.read_bytes()[:100])  # a disk that filled up mid-write (before atomic writes)
    (folder / "latest").write_text("../../etc/passwd\n")
    run(overrides, model_dir, 6, "train.valid_every=2", resume=True)
    assert "step_00000004.state.pt" in caplog.text and "trying the checkpoint before it" in caplog.text
    assert_same_weights(reference, model_dir, 6)
    with pytest.raises(ValueError, match="does not name a checkpoint"):
        (folder / "latest").write_text("../x\n")
        latest_checkpoint(model_dir)


def test_torn_metrics_line_and_dead_temp_files_do_not_block_resume(overrides, tmp_path, reference):
    model_dir = tmp_path / "torn"
    run(overrides, model_dir, 4, "train.valid_every=2")
    with (model_dir / "metrics.jsonl").open("a") as f:
        f.write('{"kind": "train", "st')  # the append a kill cut short
    code = f"from nmt.files import temp_path_for; temp_path_for({str(model_dir / 'checkpoints' / 'latest')!r})"
    subprocess.run([sys.executable, "-c", code], check=True)  # a writer that died before its rename
    assert len(read_metrics(model_dir)) > 0  # the torn line is skipped, not an error
    run(overrides, model_dir, 6, "train.valid_every=2", resume=True)
    assert not [p for p in (model_dir / "checkpoints").iterdir() if p.name.endswith(".tmp")]
    steps = [r["step"] for r in read_metrics(model_dir) if r["kind"] == "train"]
    assert steps == sorted(set(steps)) and steps[-1] == 6  # no record twice
    assert_same_weights(reference, model_dir, 6)


def test_resuming_a_finished_run_trains_and_validates_nothing(overrides, tmp_path):
    model_dir = tmp_path / "done"
    run(overrides, model_dir, 3, "train.valid_every=2")  # ends at 3 with a final validation
    before = read_metrics(model_dir)
    stamp = (model_dir / "checkpoints" / "step_00000003.safetensors").stat().st_mtime_ns
    run(overrides, model_dir, 3, "train.valid_every=2", resume=True)
    assert read_metrics(model_dir) == before
    assert (model_dir / "checkpoints" / "step_00000003.safetensors").stat().st_mtime_ns == stamp


def test_resume_before_the_first_checkpoint_does_not_repeat_records(overrides, tmp_path):
    model_dir = tmp_path / "early"
    run(overrides, model_dir, 2, "train.valid_every=100")  # saves at the end only
    for path in (model_dir / "checkpoints").iterdir():
        path.unlink()  # as if killed before its first checkpoint
    run(overrides, model_dir, 2, "train.valid_every=100", resume=True)
    steps = [r["step"] for r in read_metrics(model_dir) if r["kind"] == "train"]
    assert steps == [1, 2]


def test_sigkill_at_random_moments_then_resume_gives_the_uninterrupted_weights(overrides, tmp_path):
    """A few kills at random moments of a real `nmt train` process, each followed by --resume."""
    # A checkpoint every step: 12 steps give the kills 12 of each moment (a step, a validation, a
    # checkpoint's writes, the pruning of the one before) to land in, and each process's start-up
    # (the same however many steps) is most of a run.
    steps = 12
    sets = [
        x
        for o in overrides + QUIET + [f"train.max_steps={steps}", "train.valid_every=1", "train.keep_last=1"]
        for x in ("--set", o)
    ]
    config = tmp_path / "empty.yaml"
    config.write_text("{}\n")

    def start(out):
        command = [sys.executable, "-m", "nmt", "train", str(config), "--out", str(out), "--quiet", "--resume", *sets]
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def metrics_stamp(out):
        path = out / "metrics.jsonl"
        return (path.stat().st_ino, path.stat().st_size) if path.exists() else None

    def wait_for_training(proc, out, before):
        """Until this process writes its first metrics record (or ends)."""
        started = time.time()
        while proc.poll() is None and time.time() - started < 120 and metrics_stamp(out) == before:
            time.sleep(0.02)

    reference = tmp_path / "uninterrupted"
    proc = start(reference)
    wait_for_training(proc, reference, None)
    loop_started = time.time()
    assert proc.wait(timeout=300) == 0, proc.stderr.read()
    loop_seconds = time.time() - loop_started  # how long the training loop itself runs
    killed, rng, kills, reach = tmp_path / "killed", random.Random(0), 0, 0.8
    for _ in range(12):
        before = metrics_stamp(killed)
        proc = start(killed)
        if kills < 3:
            wait_for_training(proc, killed, before)
            time.sleep(rng.uniform(0.0, loop_seconds * reach))  # somewhere in the loop, writes included
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
                kills += 1
        _, err = proc.communicate(timeout=300)
        if proc.returncode == 0 and kills == 0:
            # It finished before any kill: this run went faster than the reference (a busy machine
            # times them unevenly). Start over from nothing, killing sooner.
            shutil.rmtree(killed)
            reach /= 2
            continue
        if proc.returncode == 0:
            break
        assert proc.returncode == -signal.SIGKILL, err  # only our kill may stop it
    assert proc.returncode == 0 and kills >= 1
    assert list_checkpoints(killed) == [f"step_{steps:08d}"]
    assert_same_weights(reference, killed, steps)
    assert (reference / "model.safetensors").read_bytes() == (killed / "model.safetensors").read_bytes()
