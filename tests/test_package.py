"""`import nmt` is cheap and gives the public API."""

import subprocess
import sys

import pytest


def test_import_nmt_loads_nothing_heavy_and_exposes_the_api():
    code = (
        "import sys, nmt; heavy = [m for m in ('torch', 'nmt.translator', 'nmt.training') if m in sys.modules]; "
        "print(heavy); print(nmt.Translator.__module__, nmt.train.__module__, nmt.load_config.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == ["[]", "nmt.translator nmt.training.run nmt.config"]


def test_unknown_name_is_an_attribute_error():
    import nmt

    with pytest.raises(AttributeError, match="Transformerr"):
        nmt.Transformerr  # noqa: B018


def test_nmt_help_of_every_command_loads_no_torch_and_is_quick():
    # Every command's parser is built (the choices and defaults come from their owners) and printed.
    code = (
        "import sys, time, contextlib, io; start = time.process_time(); from nmt.cli import build_parser\n"
        "parser = build_parser(); sub = next(a for a in parser._actions if a.dest == 'command')\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    for name in sub.choices:\n"
        "        try: build_parser().parse_args([name, '--help'])\n"
        "        except SystemExit: pass\n"
        "heavy = [m for m in ('torch', 'fastapi', 'uvicorn', 'nmt.translator') if m in sys.modules]\n"
        "print(heavy, len(sub.choices), out.getvalue().count('usage: nmt'), round(time.process_time() - start, 3))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    heavy, commands, usages, seconds = out[0], int(out[1]), int(out[2]), float(out[3])
    assert heavy == "[]" and commands == usages >= 10
    # CPU seconds of the process, not wall time: under pytest -n 2 the other worker shares the cores
    assert seconds < 1.0  # torch alone takes several seconds to import on these machines
