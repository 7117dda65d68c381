"""torchrun on CPU (gloo): 2 processes x accumulation 1 == 1 process x accumulation 2, and resume."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors.torch import load_file

from nmt.checkpoint import latest_checkpoint
from nmt.config import load_config
from nmt.training.distributed import Distributed
from nmt.training.run import train

QUIET = [
    "train.valid_bleu_sentences=0",
    "train.best_metric=loss",
    "train.valid_every=1000",
    "train.tune_decoding=false",
]


def torchrun(model_dir, sets, *, resume=False, background=False):
    args = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "nmt",
        "train",
        "--out",
        str(model_dir),
        "--quiet",
    ]
    if not resume:
        config = model_dir.parent / f"{model_dir.name}.yaml"
        config.write_text("{}\n")
        args.insert(args.index("--out"), str(config))
    else:
        args.append("--resume")
    for item in sets:
        args += ["--set", item]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if background:
        return subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def weights(model_dir):
    path, _ = latest_checkpoint(model_dir)
    return path.name, load_file(str(path))


def train_losses(model_dir):
    records = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if r["kind"] == "train"]


def assert_trained_alike(single, double, *, steps):
    """`double` (N processes) trained the model `single` (1 process, N times the accumulation) did:
    the same parameters to float tolerance and the same logged losses, after `steps` steps."""
    name_a, a = weights(single)
    name_b, b = weights(double)
    assert name_a == name_b == f"step_{steps:08d}.safetensors"
    for key in a:
        x, y = a[key], b[key]
        if key.endswith("in_proj.bias"):
            # The key bias adds q.b_k to every score of a row, which the softmax cancels: its
            # gradient is zero up to rounding, and Adam turns that rounding noise into +-lr
            # steps that depend on the order of the reduction. Compare the query and value biases.
            d = x.numel() // 3
            x, y = torch.cat([x[:d], x[2 * d :]]), torch.cat([y[:d], y[2 * d :]])
        assert torch.allclose(x, y, rtol=1e-4, atol=1e-6), key
    assert len(train_losses(single)) == steps
    assert train_losses(single) == pytest.approx(train_losses(double), rel=1e-5)


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_two_processes_equal_one_process_with_accumulation(overrides, tmp_path, mode):
    """Same parameters, and the same logged loss: normalised by the global batch's tokens."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.max_steps=3", f"train.fsdp={mode == 'fsdp'}"]
    single = tmp_path / "single"
    train(load_config(None, sets + ["train.accumulate=2"]), single, progress_bar=False)
    double = tmp_path / "double"
    double.mkdir()
    shutil.copy(single / "tokenizer.json", double / "tokenizer.json")  # the same vocabulary for both runs
    result = torchrun(double, sets + ["train.accumulate=1"])
    if mode == "ddp":
        assert "all 2 processes hold identical parameters" in result.stderr
    assert_trained_alike(single, double, steps=3)


def test_torchrun_run_stopped_by_sigterm_resumes(overrides, tmp_path):
    model_dir = tmp_path / "run"
    proc = torchrun(model_dir, overrides + QUIET + ["train.max_steps=100000"], background=True)
    metrics = model_dir / "metrics.jsonl"
    deadline = time.time() + 180
    while time.time() < deadline and not (metrics.exists() and len(metrics.read_text().splitlines()) >= 3):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    name, _ = weights(model_dir)
    stopped_at = int(name.split("_")[1].split(".")[0])
    assert stopped_at >= 3, err[-2000:]
    torchrun(model_dir, [f"train.max_steps={stopped_at + 2}"], resume=True)
    assert weights(model_dir)[0] == f"step_{stopped_at + 2:08d}.safetensors"


def test_fsdp_run_resumes_to_the_same_parameters(overrides, tmp_path):
    """Sharded optimizer state and weights are gathered into the usual files and scattered back."""
    sets = overrides + [
        "train.valid_every=2",
        "train.valid_bleu_sentences=0",
        "train.best_metric=loss",
        "train.fsdp=true",
    ]
    full, part = tmp_path / "full", tmp_path / "part"
    part.mkdir()
    torchrun(full, sets + ["train.max_steps=4"])
    shutil.copy(full / "tokenizer.json", part / "tokenizer.json")
    torchrun(part, sets + ["train.max_steps=2"])
    torchrun(part, ["train.max_steps=4"], resume=True)
    name_a, a = weights(full)
    name_b, b = weights(part)
    assert name_a == name_b == "step_00000004.safetensors"
    for key in a:
        assert torch.equal(a[key], b[key]), key


def test_more_processes_than_gpus_is_refused_naming_the_fix(monkeypatch):
    """Two processes on a one-GPU machine: one line naming both ways out, not NCCL's "invalid device ordinal"."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    for name, value in (("WORLD_SIZE", "2"), ("RANK", "1"), ("LOCAL_RANK", "1")):
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=r"local rank 1 but the machine has 1 CUDA device.*--nproc_per_node=1.*cpu"):
        Distributed.from_environment("auto")


def test_a_gpu_the_machine_lacks_is_refused_in_one_process_too(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert Distributed.from_environment("cuda:0").device == torch.device("cuda", 0)
    with pytest.raises(RuntimeError, match=r"train.device=cuda:1 but this machine has 1 CUDA device"):
        Distributed.from_environment("cuda:1")
