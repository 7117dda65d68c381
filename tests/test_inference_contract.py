"""The engine contract: what each engine can do is known before one loads, and refused in one place."""

import pytest

from nmt.inference.contract import ENGINE_CAPABILITIES, Capabilities, engine_for


def test_what_an_engine_lacks_is_named_with_the_way_out():
    ct2 = ENGINE_CAPABILITIES["ctranslate2"]
    assert ct2.missing(["alignment", "sampling", "constraints"]) == ["sampling", "constraints"]
    assert ENGINE_CAPABILITIES["torch"].missing(Capabilities.NAMES) == []
    with pytest.raises(ValueError) as refused:
        ct2.require(["sampling", "attention"], "ctranslate2")
    assert str(refused.value) == (
        "sampling (--sample), attention weights: the ctranslate2 engine cannot; "
        "nmt's engine can (engine torch, which auto picks where this is asked for before the model loads)"
    )
    ct2.require(["alignment"], "ctranslate2")  # has it: no error
    with pytest.raises(KeyError, match="no engine feature 'beams'"):
        ct2.missing(["beams"])


def test_auto_takes_nmt_s_engine_only_for_what_ctranslate2_lacks_and_a_named_engine_is_refused():
    assert engine_for("auto", []) == "auto"
    assert engine_for("auto", ["alignment"]) == "auto"  # the export returns the attention alignments read
    assert engine_for("auto", ["sampling"]) == engine_for("auto", ["transformers_stopping"]) == "torch"
    assert engine_for("torch", ["sampling", "constraints", "attention"]) == "torch"
    with pytest.raises(ValueError, match=r"a glossary \(--glossary\): the ctranslate2 engine cannot"):
        engine_for("ctranslate2", ["constraints"])


def test_each_engine_says_what_it_can(tiny_model_dir, tmp_path):
    from nmt.inference.export_ctranslate2 import ALIGNMENT, export_ctranslate2
    from nmt.translator import Translator

    assert Translator.load(tiny_model_dir).engine.capabilities == ENGINE_CAPABILITIES["torch"]
    pytest.importorskip("ctranslate2")
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    ct2 = Translator.load(tmp_path / "ct2", engine="ctranslate2")
    assert ct2.engine.capabilities == ENGINE_CAPABILITIES["ctranslate2"]
    (tmp_path / "ct2" / ALIGNMENT).unlink()  # an export from before alignment.json: less than the kind
    old = Translator.load(tmp_path / "ct2", engine="ctranslate2").engine.capabilities
    assert not old.alignment and old.missing(["alignment"]) == ["alignment"]
