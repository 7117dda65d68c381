"""Every fuzz harness (fuzz/) run briefly over its committed seeds: any crash fails the suite.

A short, deterministic run: libFuzzer's fixed -seed=1 and a fixed number of inputs (-runs), the seeds
first and then that many mutations of them, so that a reader change that breaks a contract on a seed
or near one is seen in CI; fuzz/run is for the long runs that find what is far away. Each harness runs
in its own process (libFuzzer runs once per process), one per test, so the suite's workers share them
out (a module-wide run of them all was made once in every worker). What a run grows goes to the
test's temporary folder, never into fuzz/seeds.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

FUZZ_DIR = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))

from harnesses import HARNESSES, command, seeds  # noqa: E402

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("atheris") is None,
    reason="atheris is not installed (a test extra on Linux x86_64: pip install -e '.[test]')",
)

# Mutations after the seeds: about a second of each harness's inputs on this machine (the packages'
# members are rewritten for each, and a page is parsed three times, so they get fewer).
RUNS = {"docx": 20, "pptx": 20, "xlsx": 60, "odt": 100, "odp": 100, "ods": 100, "epub": 100, "html_page": 300}
DEFAULT_RUNS = 500
PER_HARNESS_TIMEOUT = 120  # seconds: a hang fails the test rather than the suite


def short_run(name: str, grown: Path) -> subprocess.CompletedProcess:
    """Harness `name`'s short run in a process of its own, what it grows going to `grown`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(FUZZ_DIR.parent / "src"), os.environ.get("PYTHONPATH", "")]),
        "FUZZ_NMT_ONLY": "1",  # nmt instrumented, not the libraries: seconds less at each start (contract.py)
    }
    flags = [f"-runs={RUNS.get(name, DEFAULT_RUNS)}", "-seed=1", f"-artifact_prefix={grown}/", "-print_final_stats=1"]
    try:
        return subprocess.run(
            [*command(name), *flags, str(grown), str(seeds(name))],
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=PER_HARNESS_TIMEOUT,
        )
    except subprocess.TimeoutExpired as err:
        return subprocess.CompletedProcess(err.cmd, -1, "", f"no end after {PER_HARNESS_TIMEOUT} s")


@pytest.mark.parametrize("name", list(HARNESSES))
def test_the_harness_finds_no_crash_near_its_seeds(name, tmp_path):
    done = short_run(name, tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"fuzz harness {name} crashed:\n{output[-4000:]}"
    assert "stat::number_of_executed_units" in output  # it fuzzed, not merely started


def test_every_harness_has_seeds():
    for name in HARNESSES:
        assert any(seeds(name).iterdir()), f"no seeds for {name}: run fuzz/make_seeds.py"
