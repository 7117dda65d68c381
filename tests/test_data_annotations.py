"""Transcript annotations found by repetition and stripped from training pairs (nmt.data.annotations)."""

import gzip
from pathlib import Path

from nmt.data.annotations import AnnotationStats, frequent_asides, without_annotations
from nmt.text_form import strip_asides
from nmt.training.datasets import CorpusFiles

TED = Path(__file__).resolve().parents[2] / "shared" / "data" / "ted_hrlr" / "pt_to_en"


def head(path: Path, n: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [next(f).strip() for _ in range(n)]


def test_a_ted_training_sample_loses_its_annotations_and_counts_them():
    pt, en = head(TED / "pt.train.gz", 8000), head(TED / "en.train.gz", 8000)
    src_asides, tgt_asides = frequent_asides(pt), frequent_asides(en)
    assert {"(laughter)", "(applause)"} <= tgt_asides and {"(risos)", "(aplausos)"} <= src_asides
    assert len(tgt_asides) < 10  # annotations, not every aside the talks make
    held = sum(line.count("( laughter )") + line.count("( applause )") for line in en)
    stats = AnnotationStats()
    kept = list(without_annotations(zip(pt, en, strict=True), src_asides, tgt_asides, stats))
    assert held > 100 and stats.stripped >= held and stats.pairs_changed > 0
    assert not any("( laughter )" in t or "( applause )" in t or "( risos )" in s for s, t in kept)
    assert len(kept) == len(pt) - stats.pairs_dropped and all(s and t for s, t in kept)
    assert "stripped" in stats.report() and "(laughter)" in stats.report()


def test_an_aside_said_once_is_kept_and_spaces_close_up():
    asides = frequent_asides(["( laughter ) yes"] * 20 + ["it was ( in 1998 ) there", "the ( left one )"])
    assert asides == {"(laughter)"}
    assert strip_asides("so ( laughter ) we went .", asides) == ("so we went .", 1)
    assert strip_asides("the ( left one ) went", asides) == ("the ( left one ) went", 0)
    assert strip_asides("(Laughter) Yes.", asides) == ("Yes.", 1)  # running text's form too


def test_training_files_strip_them_only_when_asked_and_cache_apart(tmp_path):
    src, tgt = tmp_path / "train.pt", tmp_path / "train.en"
    src.write_text("( risos ) sim .\n" * 20 + "( risos )\n", encoding="utf-8")
    tgt.write_text("( laughter ) yes .\n" * 20 + "( laughter )\n", encoding="utf-8")
    plain, stripped = CorpusFiles(src, tgt), CorpusFiles(src, tgt, strip_annotations=True)
    assert list(plain.pairs())[0] == ("( risos ) sim .", "( laughter ) yes .")
    assert list(stripped.pairs()) == [("sim .", "yes .")] * 20  # the pair that was only annotations is gone
    assert plain.fingerprint() != stripped.fingerprint()  # the encoded-corpus cache keeps them apart
