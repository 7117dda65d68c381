"""What every harness holds its reader to, and the bounds it runs under.

A harness gives `fuzz` a check of one input. The check returns False where the reader read the input
and its output reopened, True where the reader gave its documented refusal, whose message must be
one line naming the file (`refused` holds it to that). Any other exception, a broken output
(`Broken`), an input that takes longer than MAX_SECONDS or raises the process's peak memory more than
MAX_MEMORY_MIB above what it held before is a crash: atheris prints it, writes the input to
crash-<sha1> and stops.

The bounds, for an input of at most MAX_INPUT bytes (libFuzzer's -max_len):
    time     MAX_SECONDS per input (libFuzzer's -timeout, and measured here too, so that a run over
             a file without libFuzzer's flags holds it)
    memory   MAX_MEMORY_MIB of new peak resident memory for one input (measured here; libFuzzer's
             -rss_limit_mb stops the whole process at RSS_LIMIT_MIB, the backstop)

Records: the slowest input and the largest rise in memory seen are written (JSON) to the file named
by $FUZZ_STATS, as they change and every few seconds with the count of inputs and refusals
(libFuzzer ends the process with exit(), so nothing written at exit would be seen); fuzz/run prints
them.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import resource
import sys
import time
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

MAX_INPUT = 1 << 20  # 1 MiB
MAX_SECONDS = 10
MAX_MEMORY_MIB = 256
RSS_LIMIT_MIB = 2048  # the whole process: Python, nmt and its parsers take ~150 MiB of it
FUZZ_DIR = Path(__file__).resolve().parent
LANG, TARGET = "de", "en"  # the languages every document is read and written in

Result = tuple[str, list[tuple[int, int]]]


class Broken(AssertionError):
    """The reader's output does not reopen, or it broke a promise about what it keeps."""


class OverBound(AssertionError):
    """One input took longer than MAX_SECONDS or more than MAX_MEMORY_MIB of new memory."""


# --- scripted translations (as tests/scripted.py: every word aligned, so placement is exercised) ---


def upper(sentences: list[str]) -> list[Result]:
    """Each word upper-cased and aligned to itself: the order kept."""
    return [(s.upper(), [(i, i) for i in range(len(s.split()))]) for s in sentences]


def reversed_words(sentences: list[str]) -> list[Result]:
    """The words in reverse, aligned crosswise: the hardest order for whatever sits between words."""
    out = []
    for s in sentences:
        words = s.split()
        n = len(words)
        out.append((" ".join(reversed(words)), [(n - 1 - j, j) for j in range(n)]))
    return out


def translation_for(data: bytes) -> Callable[[list[str]], list[Result]]:
    """One of the two scripted translations, chosen by the input itself so that a crash reproduces."""
    return reversed_words if hashlib.sha1(data).digest()[0] & 1 else upper


def instrumented(*modules: str) -> list[str]:
    """What a harness instruments for coverage: nmt's `modules` (all of nmt if none are named) and the
    Python libraries among them (bs4, polib, ruamel.yaml...). With $FUZZ_NMT_ONLY set, nmt's alone:
    instrumenting a large library takes seconds at each start, which the short runs in the test suite
    cannot spare, and which guide the fuzzer only over long runs."""
    ours = [m for m in modules if m == "nmt" or m.startswith("nmt.")] or ["nmt"]
    return ours if os.environ.get("FUZZ_NMT_ONLY") else [*ours, *(m for m in modules if m not in ours)]


# --- refusals --------------------------------------------------------------------------------------


def refused(err: BaseException, name: str) -> None:
    """Hold a documented refusal to its form: one line that names the file (Broken otherwise)."""
    message = str(err)
    if len(message.splitlines()) > 1:  # every line break Python knows, not only LF
        raise Broken(f"a refusal of more than one line: {message!r}") from err
    if name not in message:
        raise Broken(f"a refusal that does not name the file {name!r}: {message!r}") from err


# --- outputs that must reopen ----------------------------------------------------------------------


def zip_reopens(before: bytes, after: bytes) -> None:
    """A package written back: zipfile opens it, it holds the same members, and every member the
    reader changed that was well-formed XML still is (members it kept are the input's bytes; an EPUB's
    chapter is read as a web page, broken or not, and needs not have been XML)."""
    from lxml import etree  # noqa: PLC0415 - imported where the check runs, after instrumentation

    try:
        old, new = zipfile.ZipFile(io.BytesIO(before)), zipfile.ZipFile(io.BytesIO(after))
        if sorted(old.namelist()) != sorted(new.namelist()):
            raise Broken(f"members changed: {old.namelist()} -> {new.namelist()}")
        for member in new.namelist():
            content = new.read(member)
            if content != old.read(member) and parses(old.read(member), etree):
                xml_parses(content, member, etree)
    except zipfile.BadZipFile as err:
        raise Broken(f"the output is no zip file: {err}") from err


def parses(content: bytes, etree) -> bool:
    """Whether `content` is well-formed XML."""
    try:
        xml_parses(content, "", etree)
    except Broken:
        return False
    return True


def xml_parses(content: bytes, what: str, etree=None) -> None:
    """`content` is well-formed XML (no entity expanded, no network), or Broken."""
    if etree is None:
        from lxml import etree  # noqa: PLC0415
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=True)
    try:
        etree.fromstring(content, parser)
    except etree.XMLSyntaxError as err:
        raise Broken(f"{what}: written back as XML that does not parse: {err}") from err


def utf8(content: bytes) -> str:
    """The output as text: UTF-8, or Broken."""
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as err:
        raise Broken(f"the output is not UTF-8: {err}") from err


# --- bounds and records ----------------------------------------------------------------------------


def _rss_mib() -> float:
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Records:
    """The slowest input and the largest rise in memory, written to $FUZZ_STATS (see the module)."""

    def __init__(self) -> None:
        self.path = os.environ.get("FUZZ_STATS")
        self.inputs = self.refusals = 0
        self.slowest = (0.0, "", 0)  # seconds, sha1 of the input, its size
        self.memory = (0.0, "", 0)  # MiB over the resident memory before the input
        self.written = time.monotonic()

    def note(self, data: bytes, seconds: float, rise_mib: float, was_refused: bool) -> None:
        self.inputs += 1
        self.refusals += was_refused
        changed = False
        if seconds > self.slowest[0]:
            self.slowest, changed = (seconds, hashlib.sha1(data).hexdigest(), len(data)), True
        if rise_mib > self.memory[0]:
            self.memory, changed = (rise_mib, hashlib.sha1(data).hexdigest(), len(data)), True
        if self.path and (changed or time.monotonic() - self.written > 5):
            self.write()

    def write(self) -> None:
        record = {
            "inputs": self.inputs,
            "refusals": self.refusals,
            "slowest_s": round(self.slowest[0], 4),
            "slowest_input": self.slowest[1],
            "slowest_bytes": self.slowest[2],
            "memory_rise_mib": round(self.memory[0], 1),
            "memory_input": self.memory[1],
            "memory_bytes": self.memory[2],
        }
        Path(self.path).write_text(json.dumps(record) + "\n")
        self.written = time.monotonic()


def bounded(check: Callable[[bytes], bool]) -> Callable[[bytes], None]:
    """`check` as libFuzzer's test function: each input timed and its memory measured, and one over
    the bounds a crash (OverBound)."""
    records = Records()

    def test_one_input(data: bytes) -> None:
        if len(data) > MAX_INPUT:  # libFuzzer's -max_len keeps to this; a file given by hand may not
            return
        rss, peak = _rss_mib(), _peak_mib()
        start = time.perf_counter()
        was_refused = check(data)
        seconds = time.perf_counter() - start
        # The peak only tells about this input when this input raised it; then the rise is exact.
        new_peak = _peak_mib()
        rise = new_peak - rss if new_peak > peak else 0.0
        records.note(data, seconds, rise, was_refused)
        if seconds > MAX_SECONDS:
            raise OverBound(f"{seconds:.1f} s for one input of {len(data)} bytes (bound: {MAX_SECONDS} s)")
        if rise > MAX_MEMORY_MIB:
            raise OverBound(f"{rise:.0f} MiB more memory for one input of {len(data)} bytes (bound: {MAX_MEMORY_MIB})")

    return test_one_input


def fuzz(
    check: Callable[[bytes], bool],
    *,
    mutator: Callable[[bytes, int, int], bytes] | None = None,
    argv: Sequence[str] | None = None,
) -> None:
    """Run libFuzzer over `check` with the bounds above (flags given on the command line win)."""
    import atheris  # noqa: PLC0415 - the harness imported it first, to instrument the code under test

    # A reader's warnings (a cue without a timing kept as it was) are part of the contract, not news:
    # printed for every input they would bury libFuzzer's own lines.
    logging.disable(logging.WARNING)
    args = list(sys.argv if argv is None else argv)
    given = {a.split("=", 1)[0] for a in args[1:] if a.startswith("-")}
    for flag, value in (("-max_len", MAX_INPUT), ("-timeout", MAX_SECONDS), ("-rss_limit_mb", RSS_LIMIT_MIB)):
        if flag not in given:
            args.insert(1, f"{flag}={value}")
    extra = {"custom_mutator": mutator} if mutator else {}
    atheris.Setup(args, bounded(check), **extra)
    atheris.Fuzz()


# --- a mutator for zip packages --------------------------------------------------------------------


def zip_mutator(data: bytes, max_size: int, seed: int) -> bytes:
    """Half of the time libFuzzer's byte mutation of the whole package (the zip reader's own paths);
    otherwise one member's bytes mutated and the package written again with correct checksums, so that
    the XML inside is fuzzed rather than refused at its CRC."""
    import atheris  # noqa: PLC0415

    if seed % 2 == 0:
        return atheris.Mutate(data, max_size)
    try:
        package = zipfile.ZipFile(io.BytesIO(data))
        members = [(info, package.read(info)) for info in package.infolist()]
    except Exception:  # noqa: BLE001 - anything unreadable is mutated as bytes
        return atheris.Mutate(data, max_size)
    if not members:
        return atheris.Mutate(data, max_size)
    chosen = (seed >> 1) % len(members)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as written:
        for k, (info, content) in enumerate(members):
            if k == chosen:  # a member grows by a little at a time, as libFuzzer grows whole inputs
                content = atheris.Mutate(content, len(content) + 64)
            written.writestr(info, content)  # each member compressed as it was
    result = out.getvalue()
    return result if len(result) <= max_size else atheris.Mutate(data, max_size)


# --- readers of paths ------------------------------------------------------------------------------


def scratch() -> Path:
    """A folder of this process's own for the files that path readers are given (in memory where the
    machine has /dev/shm: libFuzzer writes one for every input)."""
    import tempfile  # noqa: PLC0415

    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="nmt-fuzz-", dir=base))


def as_text(data: bytes) -> str:
    """The input as a Python string: UTF-8, encoded surrogates read as lone surrogates (a string from
    JSON or a form can hold them), bytes that are not UTF-8 replaced."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")
