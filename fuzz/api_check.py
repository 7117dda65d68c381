"""schemathesis against a real `nmt serve` on loopback: both APIs held to the schema the server publishes.

`serving` starts `nmt serve` in a process of its own, as a user starts it; `check` runs schemathesis'
command line (fuzz/schemathesis.toml: every check on) against its /openapi.json and reads the run's
JSON report. fuzz/api runs it for as long as asked; tests/test_api_schema.py for a bounded number of
examples, deterministically.

What every answer is held to (schemathesis' checks): no 5xx; its status is one the operation declares,
its content type one declared for that status, its body and headers valid against the declared
schema; a body the schema allows is accepted (2xx, or 400/413 for a file whose content decides), one
it forbids refused with a 4xx; a method not served is a 405 with Allow; and, following the OpenAPI
links (POST /translate_file -> GET /download_file/{name}), the stateful sequences hold too.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(FUZZ_DIR.parent / "tests"))
CONFIG = FUZZ_DIR / "schemathesis.toml"
LINKS = re.compile(r"API Links:\s+(\d+) covered / (\d+) selected")


@contextlib.contextmanager
def serving(model_dir: Path, *options: str) -> Iterator[str]:
    """`nmt serve --model model_dir --port 0 *options` in a process of its own (tests/served.py, as the
    server tests start it); yields its base URL once it answers."""
    from served import nmt_serve  # noqa: PLC0415 - tests/, put on the path above

    with nmt_serve(model_dir, *options) as (url, _log):
        yield url


@dataclass
class Outcome:
    """What one schemathesis run found."""

    exit_code: int
    output: str  # schemathesis' own report: each failure with a curl line to reproduce it
    report: dict = field(default_factory=dict)  # its JSON report
    links_covered: int = 0
    links: int = 0

    @property
    def failures(self) -> list[dict]:
        return self.report.get("failures", [])

    def per_operation(self) -> dict[str, int]:
        """Requests answered per operation (2xx and refused, every phase), from the report's valid_rates."""
        counts = {}
        for operation, phases in self.report.get("valid_rates", {}).items():
            counts[operation] = sum(phase.get("accepted", 0) + phase.get("rejected", 0) for phase in phases.values())
        return counts

    def summary(self) -> str:
        cases = self.report.get("test_cases", {})
        lines = [
            f"{cases.get('generated', 0):,} test cases, {len(self.failures)} kinds of failure, "
            f"links followed {self.links_covered}/{self.links}, exit status {self.exit_code}",
            *(
                f"  {operation:28} {count:>6,} (schemathesis valid_rates)"
                for operation, count in sorted(self.per_operation().items())
            ),
            *(f"  FAILED {f['code']} {f['title']}: {', '.join(f['operations'])}" for f in self.failures),
        ]
        return "\n".join(lines)


def check(
    url: str,
    *,
    examples: int,
    seed: int | None = None,
    phases: Sequence[str] = ("coverage", "fuzzing", "stateful"),
    max_time_s: int | None = None,
    extra: Sequence[str] = (),
) -> Outcome:
    """schemathesis over `url`'s /openapi.json: `examples` per operation (and stateful scenarios) in
    `phases`; deterministic where seed is None (the same requests every run)."""
    with tempfile.TemporaryDirectory() as reports:
        command = [
            *("-c", "from schemathesis.cli import schemathesis; schemathesis()"),
            *("--config-file", str(CONFIG), "run", f"{url}/openapi.json"),
            *("--max-examples", str(examples), "--phases", ",".join(phases)),
            *(["--generation-deterministic"] if seed is None else ["--seed", str(seed)]),
            *(["--max-time", str(max_time_s)] if max_time_s else []),
            *("--report", "json", "--report-dir", reports, "--no-color", "--workers", "1"),
            *extra,
        ]
        # run in the scratch folder: schemathesis keeps a cache (.schemathesis/) where it runs
        done = subprocess.run([sys.executable, *command], capture_output=True, text=True, errors="replace", cwd=reports)
        found = sorted(Path(reports).glob("json-*.json"))
        report = json.loads(found[-1].read_text()) if found else {}
    links = LINKS.search(done.stdout)
    return Outcome(
        done.returncode,
        done.stdout + done.stderr,
        report,
        int(links.group(1)) if links else 0,
        int(links.group(2)) if links else 0,
    )
