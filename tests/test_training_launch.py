"""nmt train's own worker processes on CPU (training/launch.py): the layout it picks, the same
model as one process with accumulation, kills of the launcher, failures said once, two runs at once."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from nmt.config import TrainConfig, load_config
from nmt.training.launch import Layout, choose_layout
from nmt.training.run import train

QUIET = [
    "train.valid_bleu_sentences=0",
    "train.best_metric=loss",
    "train.valid_every=1000",
    "train.tune_decoding=false",
]


@pytest.fixture
def no_process_group(monkeypatch):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def layout(cores=2, on_cuda=False, **fields) -> Layout:
    return choose_layout(TrainConfig(**{"batch_tokens": 2048, **fields}), on_cuda=on_cuda, cores=cores)


def test_auto_is_one_single_threaded_worker_per_core(no_process_group):
    assert (layout().processes, layout().threads) == (2, 1)
    assert (layout(cores=8).processes, layout(cores=8).threads) == (2, 4)  # at least 1,024 batch tokens each
    assert (layout(cores=8, batch_tokens=8192).processes, layout(cores=8, batch_tokens=8192).threads) == (8, 1)


def test_auto_keeps_one_process_where_workers_do_not_pay(no_process_group):
    assert layout(cores=1).processes == 1
    assert layout(batch_tokens=1500).processes == 1  # too small a batch to split
    assert layout(threads=2).processes == 1  # the user chose threads
    assert layout(on_cuda=True).processes == 1  # GPUs: torchrun's job


def test_an_explicit_count_is_obeyed_and_refused_on_cuda(no_process_group):
    assert (layout(processes=3).processes, layout(processes=3).threads) == (3, 1)
    assert layout(processes=1).processes == 1
    with pytest.raises(ValueError, match="torchrun --nproc_per_node"):
        layout(processes=2, on_cuda=True)


def test_inside_a_process_group_nothing_more_is_started(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert layout(processes=2).processes == 1


def nmt_train(out: Path, sets: list[str], *extra: str, background=False):
    command = [sys.executable, "-m", "nmt", "train", "--out", str(out), "--quiet", *extra]
    if "--resume" not in extra:  # a resume reads the run's own config.yaml
        config = out.parent / "empty.yaml"
        config.write_text("{}\n")
        command.insert(4, str(config))
    for item in sets:
        command += ["--set", item]
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    if background:
        return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def checkpoint(model_dir: Path, step: int) -> dict:
    return load_file(str(model_dir / "checkpoints" / f"step_{step:08d}.safetensors"))


def test_two_workers_train_the_model_of_one_process_with_half_batches_and_accumulation(overrides, tmp_path):
    """The split batch is the whole point: N workers of batch_tokens / N == one process, accumulate N."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.max_steps=3", "train.batch_tokens=600"]
    single = tmp_path / "single"
    train(load_config(None, sets + ["train.batch_tokens=300", "train.accumulate=2"]), single, progress_bar=False)
    workers = tmp_path / "workers"
    workers.mkdir()
    (workers / "tokenizer.json").write_bytes((single / "tokenizer.json").read_bytes())  # one vocabulary
    result = nmt_train(workers, sets + ["train.processes=2"])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "training in 2 processes of 1 thread(s)" in result.stderr
    assert "each on 300 of the batch's 600 tokens" in result.stderr
    assert "all 2 processes hold identical parameters" in result.stderr
    assert result.stderr.count("training stopped:") == 2  # rank 0's log line and its summary, no other rank's
    a, b = checkpoint(single, 3), checkpoint(workers, 3)
    for key in a:
        x, y = a[key], b[key]
        if key.endswith("in_proj.bias"):  # the key bias's gradient is rounding noise (test_training_distributed.py)
            d = x.numel() // 3
            x, y = torch.cat([x[:d], x[2 * d :]]), torch.cat([y[:d], y[2 * d :]])
        # The same sums in another order (the all-reduce adds the two halves): float tolerance, not bits.
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-6), key


def worker_pids(out: Path) -> list[int]:
    """Processes whose command line names this run's directory (the launcher and its workers)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if str(out).encode() in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; the parent-death signal is Linux's")
def test_sigkill_of_the_launcher_takes_its_workers_and_resume_gives_the_uninterrupted_weights(overrides, tmp_path):
    sets = overrides + QUIET + ["train.processes=2", "train.valid_every=1", "train.keep_last=1"]
    reference = tmp_path / "reference"
    result = nmt_train(reference, sets + ["train.max_steps=8"])
    assert result.returncode == 0, result.stderr[-3000:]

    killed = tmp_path / "killed"
    proc = nmt_train(killed, sets + ["train.max_steps=8"], background=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((killed / "checkpoints").glob("step_0000000[2-9].safetensors")):
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.time() + 30
    while worker_pids(killed) and time.time() < deadline:
        time.sleep(0.1)
    assert worker_pids(killed) == [], "a worker trained on after its launcher was killed"

    result = nmt_train(killed, ["train.max_steps=8"], "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    a, b = checkpoint(reference, 8), checkpoint(killed, 8)
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_sigterm_to_the_launcher_saves_every_worker_and_exits_143_saying_how_to_continue(overrides, tmp_path):
    run = tmp_path / "run"
    proc = nmt_train(run, overrides + QUIET + ["train.processes=2", "train.max_steps=100000"], background=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and len(metrics_lines(run)) < 3:
        time.sleep(0.05)
    assert len(metrics_lines(run)) >= 3, "the workers never trained"  # a signal now lands in the loop
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert err.count("to continue it: nmt train --out") == 1, err[-3000:]  # said once, not per worker
    assert list((run / "checkpoints").glob("step_*.safetensors"))


def metrics_lines(run: Path) -> list[str]:
    path = run / "metrics.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def test_a_failure_in_the_workers_is_said_once_and_exits_with_its_status(overrides, tmp_path):
    missing = tmp_path / "nowhere.de"
    sets = overrides + QUIET + ["train.processes=2", "train.max_steps=2", f"data.train_src={missing}"]
    result = nmt_train(tmp_path / "run", sets)
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "nowhere.de" in errors[0], result.stderr[-2000:]
    assert not (tmp_path / "run").exists()


def test_two_runs_started_at_once_both_finish(overrides, tmp_path):
    sets = overrides + QUIET + ["train.processes=2", "train.max_steps=3"]
    runs = [nmt_train(tmp_path / name, sets, background=True) for name in ("a", "b")]
    for proc in runs:
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
    for name in ("a", "b"):
        assert (tmp_path / name / "checkpoints" / "step_00000003.safetensors").exists()
