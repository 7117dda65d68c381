"""Two hosts (network namespaces on one veth link), one torchrun each, as docs/distributed.md tells users.

The c10d rendezvous and gloo's all-reduces cross the link between 10.83.0.1 and 10.83.0.2; --out
and NMT_DATA_HOME sit on the file system both see, as a cluster's shared file system would.
Skipped where network namespaces are not allowed (not root).
"""

import json
import shutil
import subprocess
import time
from itertools import count

import pytest

from nmt.config import load_config
from nmt.training.run import train

from multi_host import Host, host_environment, namespaces_allowed, torchrun_command, two_hosts, wait_all
from test_training_distributed import QUIET, assert_trained_alike, weights

RUN_TIMEOUT = 120  # seconds for a whole two-host run: far above its ~15 s, far below a hang's
COLLECTIVE_TIMEOUT = 5  # NMT_COLLECTIVE_TIMEOUT for the fault tests: seconds, not torch's 30 minutes
_ports = count(29583)  # a new rendezvous port per launch: the last one's may still be in TIME_WAIT

pytestmark = pytest.mark.skipif(namespaces_allowed() is not None, reason=str(namespaces_allowed()))


@pytest.fixture
def hosts():
    with two_hosts() as pair:
        yield pair


def start(hosts: tuple[Host, Host], model_dir, sets, tmp_path, *, resume=False, env=None, only=None):
    """One torchrun per host training into model_dir; (processes, log files). `only`: start on those hosts."""
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
    for host in only or hosts:
        log = tmp_path / f"{model_dir.name}-{host.address}-{port}.log"
        logs.append(log)
        procs.append(
            subprocess.Popen(
                torchrun_command(host, hosts[0], args, port=port, run_id=f"{model_dir.name}{port}"),
                env=host_environment(host, env),
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


def logged_steps(model_dir) -> int:
    path = model_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    records = [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return max((r["step"] for r in records if r["kind"] == "train"), default=0)


def test_two_hosts_train_what_one_process_trains(hosts, overrides, tmp_path):
    """2 hosts x 1 process x accumulation 1 == 1 process x accumulation 2: weights and logged losses."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.max_steps=3"]
    single = tmp_path / "single"
    train(load_config(None, sets + ["train.accumulate=2"]), single, progress_bar=False)
    double = tmp_path / "double"
    double.mkdir()
    shutil.copy(single / "tokenizer.json", double / "tokenizer.json")  # the same vocabulary for both runs
    first, _ = finish(*start(hosts, double, sets + ["train.accumulate=1"], tmp_path))
    assert "all 2 processes hold identical parameters" in first
    assert_trained_alike(single, double, steps=3)


def test_a_killed_host_stops_the_survivor_and_resume_continues(hosts, overrides, tmp_path):
    """SIGKILL of host 2's torchrun and worker: host 1 exits within seconds, naming what it lost;
    --resume on both hosts continues from the last checkpoint to the model an unbroken run trains."""
    sets = overrides + QUIET + ["model.dropout=0.0", "train.valid_every=5"]
    double = tmp_path / "double"
    env = {"NMT_COLLECTIVE_TIMEOUT": str(COLLECTIVE_TIMEOUT)}
    procs, logs = start(hosts, double, sets + ["train.max_steps=100000"], tmp_path, env=env)
    try:
        deadline = time.monotonic() + RUN_TIMEOUT
        while logged_steps(double) < 7 and time.monotonic() < deadline and procs[0].poll() is None:
            time.sleep(0.05)
        assert logged_steps(double) >= 7, logs[0].read_text()[-3000:]
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
    finish(*start(hosts, double, [f"train.max_steps={end}"], tmp_path, resume=True, env=env))
    single = tmp_path / "single"
    single.mkdir()
    shutil.copy(double / "tokenizer.json", single / "tokenizer.json")
    train(load_config(None, sets + ["train.accumulate=2", f"train.max_steps={end}"]), single, progress_bar=False)
    assert_trained_alike(single, double, steps=end)
