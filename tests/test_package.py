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
