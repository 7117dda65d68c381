"""Two hosts (network namespaces on one veth link), one torchrun each, as docs/distributed.md tells users.

The c10d rendezvous and gloo's all-reduces cross the link between 10.83.0.1 and 10.83.0.2; --out
and NMT_DATA_HOME sit on the file system both see, as a cluster's shared file system would.
Skipped where network namespaces are not allowed (not root).
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time
from itertools import count

import pytest

from nmt.config import load_config
from nmt.training.run import train

from multi_host import host_environment, namespaces_allowed, torchrun_command, two_hosts, wait_all
from test_training_distributed import QUIET, assert_trained_alike, train_losses, weights

RUN_TIMEOUT = 120  # seconds for a whole two-host run: far above its ~15 s, far below a hang's
COLLECTIVE_TIMEOUT = 5  # NMT_COLLECTIVE_TIMEOUT for the fault tests: seconds, not torch's 30 minutes
_ports = count(29583)  # a new rendezvous port per launch: the last one's may still be in TIME_WAIT

pytestmark = pytest.mark.skipif(namespaces_allowed() is not None, reason=str(namespaces_allowed()))


@pytest.fixture
def hosts():
    with two_hosts() as pair:
        yield pair


def start(hosts, model_dir, sets, tmp_path, *, resume=False, env=None, per_host=None, torchrun=()):
    """One torchrun per host training into model_dir; (processes, log files).

    per_host: for each host, (its own --set items, its own environment); torchrun: more torchrun flags.
    """
    port = next(_ports)
    args = ["-m", "nmt", "train", "--out", str(model_dir), "--quiet"]
    if resume:
        args.append("--resume")
    else:
        config = tmp_path / f"{model_dir.name}.yaml"
        config.write_text("{}\n")
        args.insert(3, str(config))
    for item in sets:
        args += ["--set", item]
    procs, logs = [], []
    for host, (own_sets, own_env) in zip(hosts, per_host or [([], {})] * len(hosts), strict=True):
        log = tmp_path / f"{model_dir.name}-{host.address}-{port}.log"
        logs.append(log)
        command = torchrun_command(host, hosts[0], args, port=port, run_id=f"{model_dir.name}{port}")
        where = command.index("-m", command.index("torch.distributed.run"))  # torchrun's flags end there
        command[where:where] = list(torchrun)
        procs.append(
            subprocess.Popen(
                command + [item for own in own_sets for item in ("--set", own)],
                env=host_environment(host, {**(env or {}), **own_env}),
                stdout=subprocess.DEVNULL,
                stderr=log.open("w"),
                start_new_session=True,  # its own process group: a timeout below kills it whole
            )
        )
    return procs, logs


def finish(procs, logs, timeout=RUN_TIMEOUT) -> list[str]:
    """Wait for a run that must succeed; the hosts' logs."""
    statuses = wait_all(procs, timeout)
    texts = [log.read_text() for log in logs]
    assert statuses == [0] * len(procs), "\n----\n".join(text[-3000:] for text in texts)
    return texts


def metrics_snapshot(model_dir) -> tuple[int | None, int]:
    """(identity, last logged training step) of the run's metrics file, both read through one open
    file: a resumed run replaces the file (cut at its checkpoint), and two separate reads could pair
    the old file's steps with the new file's identity."""
    try:
        with (model_dir / "metrics.jsonl").open() as f:
            inode, text = os.fstat(f.fileno()).st_ino, f.read()
    except FileNotFoundError:
        return None, 0
    records = [json.loads(line) for line in text.splitlines() if line.endswith("}")]
    return inode, max((r["step"] for r in records if r["kind"] == "train"), default=0)


def metrics_file(model_dir) -> int | None:
    """The identity (inode) of the run's metrics file: a resumed run writes a new one, cut at its checkpoint."""
    return metrics_snapshot(model_dir)[0]


def wait_for_step(procs, logs, model_dir, step: int, *, not_in: int | None = None) -> None:
    """Until the run in model_dir has logged `step` (or failed: its log is then the assertion's message);
    not_in: in a metrics file other than that one (a resumed run's, not the records of the run before)."""

    def reached() -> bool:
        inode, logged = metrics_snapshot(model_dir)
        return logged >= step and (not_in is None or inode != not_in)

    deadline = time.monotonic() + RUN_TIMEOUT
    while not (done := reached()) and time.monotonic() < deadline and all(p.poll() is None for p in procs):
        time.sleep(0.02)
    done = done or reached()  # a run that finished between the last look and its exit
    statuses = [p.poll() for p in procs]
    assert done, f"exit statuses {statuses} (None: running)\n" + "\n----\n".join(
        log.read_text()[-3000:] for log in logs
    )


def exit_times(procs, timeout: float) -> list[float]:
    """Seconds from now until each process exits (each must, within `timeout`)."""
    began, took = time.monotonic(), []
    for proc in procs:
        proc.wait(timeout=max(0.0, began + timeout - time.monotonic()))
        took.append(time.monotonic() - began)
    return took


def test_two_hosts_train_what_one_process_trains(hosts, overrides, tmp_path):
    """2 hosts x 1 process x accumulation 1 == 1 process x accumulation 2: weights and logged losses."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.max_steps=3"]
    single = tmp_path / "single"
    train(load_config(None, sets + ["train.accumulate=2"]), single, progress_bar=False)
    double = tmp_path / "double"
    double.mkdir()
    shutil.copy(single / "tokenizer.json", double / "tokenizer.json")  # the same vocabulary for both runs
    homes = [tmp_path / f"home_{n}" for n in (1, 2)]  # each host its own NMT_DATA_HOME: each encodes its corpus
    per_host = [([], {"NMT_DATA_HOME": str(home)}) for home in homes]
    first, _ = finish(*start(hosts, double, sets + ["train.accumulate=1"], tmp_path, per_host=per_host))
    assert "all 2 processes hold identical parameters" in first
    assert_trained_alike(single, double, steps=3)
    for home in homes:
        assert list((home / "encoded").iterdir()), f"{home}: no encoded corpus"


def test_a_killed_host_stops_the_survivor_and_resume_continues(hosts, overrides, tmp_path, record_property):
    """SIGKILL of host 2's torchrun and worker: host 1 exits within seconds, naming what it lost;
    --resume on both hosts continues from the last checkpoint to the model an unbroken run trains."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.valid_every=5"]
    double = tmp_path / "double"
    env = {"NMT_COLLECTIVE_TIMEOUT": str(COLLECTIVE_TIMEOUT)}
    procs, logs = start(hosts, double, sets + ["train.max_steps=100000"], tmp_path, env=env)
    try:
        wait_for_step(procs, logs, double, 7)
        hosts[1].kill()
        killed = time.monotonic()
        (status,) = wait_all(procs[:1], 60)
        took = time.monotonic() - killed
    finally:
        for host in hosts:
            host.kill()
    message = logs[0].read_text()
    assert status not in (0, None), message[-3000:]
    assert took < COLLECTIVE_TIMEOUT + 10, f"{took:.1f} s"
    assert "rank 0 of 2 lost contact with host 10.83.0.2 (rank 1)" in message
    saved = int(weights(double)[0].split("_")[1].split(".")[0])
    assert saved >= 5
    end = saved + 3
    began, killed_runs = time.monotonic(), metrics_file(double)
    procs, logs = start(hosts, double, [f"train.max_steps={end}"], tmp_path, resume=True, env=env)
    wait_for_step(procs, logs, double, saved + 1, not_in=killed_runs)
    # the figures docs/results.md gives (pytest -o junit_family=xunit1 --junitxml=FILE keeps them)
    record_property("death_to_survivor_exit_s", round(took, 1))
    record_property("resume_to_first_step_s", round(time.monotonic() - began, 1))
    finish(procs, logs)
    single = tmp_path / "single"
    single.mkdir()
    shutil.copy(double / "tokenizer.json", single / "tokenizer.json")
    train(load_config(None, sets + ["train.accumulate=2", f"train.max_steps={end}"]), single, progress_bar=False)
    assert_trained_alike(single, double, steps=end)


@pytest.mark.parametrize("fault", ["a corpus file missing on host 1", "rank 0's data preparation failing"])
def test_an_early_failure_stops_every_host_with_its_message(hosts, overrides, tmp_path, fault, record_property):
    """With torch's 30-minute collective timeout, no host waits for a rank that failed before training:
    each exits within seconds of the other, and each says what went wrong, wherever it happened."""
    sets = overrides + QUIET + ["train.max_steps=3"]
    if fault == "a corpus file missing on host 1":
        missing = tmp_path / "not_on_host_1.de"
        per_host = [([f"data.train_src={missing}"], {}), ([], {})]
        said = f"data.train_src: {missing} does not exist"
    else:  # the files exist on every host; reading them fails on rank 0, which reads them first
        short = tmp_path / "short.en"
        source = next(item.split("=", 1)[1] for item in overrides if item.startswith("data.train_tgt="))
        short.write_text("".join(open(source).readlines()[:-1]))
        sets.append(f"data.train_tgt={short}")
        per_host = None
        said = "parallel files differ in length"
    procs, logs = start(hosts, tmp_path / "run", sets, tmp_path, per_host=per_host)
    try:
        first, *_ = exit_times(procs[:1], RUN_TIMEOUT)
        (after_first,) = exit_times(procs[1:], RUN_TIMEOUT)
    finally:
        for host in hosts:
            host.kill()
    texts = [log.read_text() for log in logs]
    assert [p.returncode for p in procs] == [1, 1], texts
    record_property("launch_to_exits_s", f"{first:.1f}, {first + after_first:.1f}")
    assert after_first < 5, f"host 2 exited {after_first:.1f} s after host 1"
    errors = [line for text in texts for line in text.splitlines() if line.startswith("nmt train: error:")]
    assert len(errors) == 2 and all(said in line for line in errors), errors
    assert sum("of 2 failed: " in line for line in errors) == 1, errors  # the other host names the failed rank


def test_a_partition_stops_both_hosts_within_the_timeout(hosts, overrides, tmp_path, record_property):
    """Host 2's link down mid-run (no process dies, no socket closes): the workers on both hosts give
    up within NMT_COLLECTIVE_TIMEOUT and a few seconds, each naming the contact it lost, and so does
    host 1's torchrun. Host 2's torchrun, cut off from the rendezvous it reports to, waits out
    torchrun's own store timeout (--rdzv_conf read_timeout, 60 s by default: docs/distributed.md)."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.valid_every=5", "train.max_steps=100000"]
    env = {"NMT_COLLECTIVE_TIMEOUT": str(COLLECTIVE_TIMEOUT)}
    procs, logs = start(hosts, tmp_path / "run", sets, tmp_path, env=env)
    try:
        wait_for_step(procs, logs, tmp_path / "run", 3)
        hosts[1].link(up=False)
        cut = time.monotonic()
        deadline = cut + COLLECTIVE_TIMEOUT + 40
        while (hosts[0].workers() or hosts[1].workers() or procs[0].poll() is None) and time.monotonic() < deadline:
            time.sleep(0.05)
        took = time.monotonic() - cut
    finally:
        for host in hosts:
            host.kill()
    texts = [log.read_text() for log in logs]
    assert procs[0].returncode == 1, texts[0][-3000:]
    record_property("cut_to_exit_s", round(took, 1))
    assert took < COLLECTIVE_TIMEOUT + 20, f"{took:.1f} s"  # 15 s seen with the machine's load at 12
    for rank, text in enumerate(texts):
        assert f"rank {rank} of 2 lost contact with another host (rank {1 - rank}): Timed out" in text, text[-3000:]


def test_torchrun_restarts_a_killed_worker_which_resumes_by_itself(hosts, overrides, tmp_path, record_property):
    """torchrun --max-restarts=1: host 2's worker SIGKILLed (its torchrun lives on) is started again
    with the same command, as is host 1's, and both resume from the last checkpoint by themselves:
    the steps they train again log the losses the first workers logged, and the run ends where it was to."""
    end = 20
    sets = overrides + QUIET + ["model.dropout=0.0", "train.valid_every=5", f"train.max_steps={end}"]
    double = tmp_path / "double"
    # torchrun's shared store keeps the first workers' addresses, which restarted ones may read (pytorch#135712)
    env = {"NMT_COLLECTIVE_TIMEOUT": str(COLLECTIVE_TIMEOUT), "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
    procs, logs = start(hosts, double, sets, tmp_path, env=env, torchrun=["--max-restarts=1"])
    try:
        wait_for_step(procs, logs, double, 7)
        (worker,) = hosts[1].workers()
        os.kill(worker, signal.SIGKILL)
        killed, killed_runs = time.monotonic(), metrics_file(double)
        first = train_losses(double)  # rank 0 cannot finish another step without rank 1
        wait_for_step(procs, logs, double, 0, not_in=killed_runs)  # resumed: the metrics cut at the checkpoint
        record_property("kill_to_resume_s", round(time.monotonic() - killed, 1))
        texts = finish(procs, logs)
    finally:
        for host in hosts:
            host.kill()
    assert len(first) < end, "the run ended before the kill: give it more steps"
    resumed = [int(found) for found in re.findall(r"resumed from step_(\d+) at step", "\n".join(texts))]
    assert len(resumed) == 2 and resumed[0] == resumed[1] and 5 <= resumed[0] <= len(first), texts
    for text in texts:
        assert "torchrun restarted the workers: resuming from the last checkpoint" in text, text[-3000:]
    again = train_losses(double)
    assert len(again) == end and weights(double)[0] == f"step_{end:08d}.safetensors"
    assert again[: len(first)] == first  # bit-exact: the steps after the checkpoint trained again alike
