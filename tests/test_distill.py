"""Sequence-level distillation (training/distill.py, nmt distill): a resumable, line-aligned teacher
corpus; a teacher that does not fit refused before any translation; a student trained on it."""

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
import yaml

from nmt.cli import main
from nmt.config import load_config
from nmt.model_dir import read_decode_config, read_directions
from nmt.tokenizer import load_tokenizers
from nmt.training.distill import (
    DistillationPlan,
    complete_lines,
    n_best_lines,
    plan_distillation,
    translate_corpus,
)
from nmt.training.run import train
from nmt.translator import Translator

from conftest import TINY_TRAINING

QUIET = ["train.valid_bleu_sentences=0", "train.best_metric=loss", "train.processes=1"]
# a greedy student, as the shipped student configs: distill chooses its precision alone. A
# two-step student never ends a sentence: capped at 5 pieces, each precision's timed passes over
# the validation set take a second, not a minute (bf16 on nmt's engine, where the CPU has AMX).
CHOOSE_PRECISION = [
    "train.tune_decoding=true",
    "train.tune_min_bleu=0",
    "decode.beam=1",
    "decode.max_len_a=0",
    "decode.max_len_b=5",
]


def fake_teacher(batch):
    return [" ".join(reversed(s.split())).upper() for s in batch]


def test_a_crash_and_a_torn_line_resume_to_the_same_aligned_corpus(tmp_path):
    source = tmp_path / "source.de"
    lines = [f"satz {i} hier" for i in range(45)]
    lines[7] = ""  # an empty source line stays an empty line
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "teacher.en"
    calls = []

    def crashing(batch):
        calls.append(len(batch))
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed during the third chunk
        return fake_teacher(batch)

    with pytest.raises(KeyboardInterrupt):
        translate_corpus(crashing, source, out, chunk=8, progress=False)
    assert complete_lines(out) == 16
    with open(out, "a", encoding="utf-8") as f:
        f.write("HALF A LI")  # a write cut short by a kill
    assert translate_corpus(fake_teacher, source, out, chunk=8, progress=False) == 45 - 16
    assert out.read_text(encoding="utf-8").split("\n")[:-1] == fake_teacher(lines)
    assert out.read_text(encoding="utf-8").split("\n")[7] == ""


def test_an_n_best_corpus_cut_inside_a_sentence_resumes_at_that_sentence(tmp_path):
    source = tmp_path / "source.de"
    lines = [f"satz {i}" for i in range(10)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def three_each(batch):  # three translations a sentence, the sentence's together
        return [f"{s} #{k}" for s in batch for k in range(3)]

    out = tmp_path / "teacher.3best.en"
    translate_corpus(three_each, source, out, chunk=4, per_sentence=3, progress=False)
    expected = out.read_text(encoding="utf-8")
    assert expected.splitlines()[3:6] == ["satz 1 #0", "satz 1 #1", "satz 1 #2"]
    # Killed after two of sentence 4's three lines and inside the third: sentence 4 is done again.
    kept = "".join(f"{line}\n" for line in expected.splitlines()[:14]) + "satz 4 #"
    out.write_text(kept, encoding="utf-8")
    assert complete_lines(out, 3) == 12
    assert out.read_text(encoding="utf-8") == "".join(f"{line}\n" for line in expected.splitlines()[:12])
    assert translate_corpus(three_each, source, out, chunk=4, per_sentence=3, progress=False) == 10 - 4
    assert out.read_text(encoding="utf-8") == expected
    with pytest.raises(RuntimeError, match="not 3 each"):
        translate_corpus(fake_teacher, source, tmp_path / "short", per_sentence=3, progress=False)


@pytest.mark.parametrize(
    ("content", "kept"),
    [
        ("a\nb\nc\nd\n", "a\nb\nc\n"),  # a whole line too many, no torn tail
        ("a\nb\n", ""),  # less than one group
        ("a\nb\nc\nd\ne", "a\nb\nc\n"),  # a part group and a torn line
        ("a\nb\nc\n", "a\nb\nc\n"),
        ("", ""),
    ],
)
def test_complete_lines_keeps_whole_groups_only(tmp_path, content, kept):
    path = tmp_path / "t"
    path.write_text(content)
    assert complete_lines(path, 3) == kept.count("\n")
    assert path.read_text() == kept


def test_a_sentence_with_fewer_translations_repeats_its_best():
    assert n_best_lines([["a", "b"], ["c"], [], ["d", "e", "f"]], 2) == ["a", "b", "c", "c", "", "", "d", "e"]


def test_the_student_trains_on_the_n_best_alone_without_references(tiny_model_dir, overrides, tmp_path):
    config = load_config(None, overrides + ["tokenizer.vocab_size=8192"])
    (plan,) = plan_distillation(tiny_model_dir, config, tmp_path / "student", hypotheses=2).plans
    data = plan.student_config().data
    assert data.train_src == str(plan.folder / "source.x2.de") and data.train_tgt == str(
        plan.folder / "teacher.2best.en"
    )
    plan.folder.mkdir(parents=True)
    plan.source.write_text("eins\nzwei\n")
    plan.reference.write_text("one\ntwo\n")
    plan.distilled.write_text("1\nI\n2\nII\n")
    plan.write_training_pairs()
    assert plan.distilled_source.read_text() == "eins\neins\nzwei\nzwei\n"
    assert not plan.mixed_files()[0].exists()
    made = plan.distilled_source.stat().st_mtime_ns
    plan.write_training_pairs()  # newer than its inputs: left alone, so a resumed student need not encode it again
    assert plan.distilled_source.stat().st_mtime_ns == made


def test_a_translation_with_a_newline_still_takes_one_line(tmp_path):
    source = tmp_path / "s"
    source.write_text("a\nb\n")
    out = tmp_path / "o"
    translate_corpus(lambda batch: ["x\ny" for _ in batch], source, out, progress=False)
    assert out.read_text() == "x y\nx y\n"


def test_a_longer_file_than_the_source_is_refused(tmp_path):
    source, out = tmp_path / "s", tmp_path / "o"
    source.write_text("a\n")
    out.write_text("x\ny\n")
    with pytest.raises(ValueError, match="more than the 1"):
        translate_corpus(fake_teacher, source, out, progress=False)


def test_a_teacher_whose_vocabulary_the_student_would_not_build_is_refused(tiny_model_dir, overrides, tmp_path):
    config = load_config(None, overrides + ["tokenizer.vocab_size=400"])
    with pytest.raises(ValueError, match=r"tokenizer.vocab_size=400 where the teacher's is 8192"):
        plan_distillation(tiny_model_dir, config, tmp_path / "student")
    config = load_config(None, overrides + ["tokenizer.vocab_size=8192", "data.src_lang=fr"])
    with pytest.raises(ValueError, match="the teacher translates de-en; the student config asks for fr-en"):
        plan_distillation(tiny_model_dir, config, tmp_path / "student")


def lines_in(path):
    """Read-only (complete_lines would cut the writer's torn line under it)."""
    return path.read_bytes().count(b"\n") if path.exists() else 0


def nmt_distill(teacher, out, sets, *extra, background=False):
    config = out.parent / "student.yaml"
    config.write_text("{}\n")
    command = [sys.executable, "-m", "nmt", "distill", "--teacher", str(teacher), "--config", str(config)]
    command += ["--out", str(out), "--quiet", *extra, "--set", *sets]
    if background:
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_cli_refuses_a_misfit_teacher_before_writing_anything(tiny_model_dir, overrides, tmp_path):
    result = nmt_distill(tiny_model_dir, tmp_path / "student", overrides + ["tokenizer.vocab_size=400"])
    assert result.returncode == 2
    assert "tokenizer.vocab_size: 8192" in result.stderr
    assert not (tmp_path / "student").exists()


def test_sigkill_during_translation_then_the_same_command_gives_the_uninterrupted_corpus(
    tiny_model_dir, tiny_corpus, overrides, tmp_path
):
    # 600 sentences two at a time: long enough for a kill to land in the middle.
    corpus = [f"{t}\n" for t in (tiny_corpus / "train.de").read_text(encoding="utf-8").splitlines()] * 2
    (tmp_path / "long.de").write_text("".join(corpus), encoding="utf-8")
    (tmp_path / "long.en").write_text("".join(corpus), encoding="utf-8")
    long = [f"data.train_src={tmp_path / 'long.de'}", f"data.train_tgt={tmp_path / 'long.en'}"]
    sets = overrides + QUIET + long + ["tokenizer.vocab_size=8192"]
    args = ("--translate-only", "--chunk", "2", "--beam", "2")
    whole = nmt_distill(tiny_model_dir, tmp_path / "whole", sets, *args)
    assert whole.returncode == 0, whole.stderr[-2000:]
    expected = (tmp_path / "whole" / "distilled" / "teacher.en").read_text(encoding="utf-8")
    assert len(expected.splitlines()) == 600

    killed = tmp_path / "killed"
    teacher_file = killed / "distilled" / "teacher.en"
    for _ in range(5):  # a run that ends before the kill lands is started again from nothing
        shutil.rmtree(killed, ignore_errors=True)
        proc = nmt_distill(tiny_model_dir, killed, sets, *args, background=True)
        deadline = time.time() + 120
        while time.time() < deadline and proc.poll() is None and lines_in(teacher_file) < 8:
            time.sleep(0.01)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            break
        proc.communicate()
    assert 0 < complete_lines(teacher_file) < 600
    kept = teacher_file.read_bytes()
    other_beam = nmt_distill(tiny_model_dir, killed, sets, "--translate-only", "--chunk", "2", "--beam", "1")
    assert other_beam.returncode == 2, other_beam.stderr[-2000:]  # the corpus would mix beam 2 and greedy lines
    said = other_beam.stderr
    assert "with beam 2; this command asks" in said and "with beam 1: give them as then" in said
    assert teacher_file.read_bytes() == kept
    result = nmt_distill(tiny_model_dir, killed, sets, *args)
    assert result.returncode == 0, result.stderr[-2000:]
    assert teacher_file.read_text(encoding="utf-8") == expected


def test_the_student_trains_on_the_teachers_translations(tiny_model_dir, overrides, tmp_path):
    out = tmp_path / "student"
    sets = overrides + QUIET + CHOOSE_PRECISION + ["tokenizer.vocab_size=8192", "train.max_steps=2"]
    result = nmt_distill(tiny_model_dir, out, sets)
    assert result.returncode == 0, result.stderr[-2000:]
    assert (out / "model.safetensors").exists()
    assert (out / "tokenizer.json").read_bytes() == (tiny_model_dir / "tokenizer.json").read_bytes()
    run = yaml.safe_load((out / "config.yaml").read_text())
    assert run["data"]["train_tgt"] == str(out.resolve() / "distilled" / "teacher.en")
    assert (out / "shortlist.safetensors").is_file() and "shortlist written to" in result.stderr
    # int8 or fp32, measured on the validation set, written as the student's default
    choice = re.search(r"precision: (fp32|int8|bf16) on CPU \(fp32 BLEU [\d.]+ in [\d.]+ s, int8 BLEU", result.stderr)
    assert choice, result.stderr[-2000:]
    assert read_decode_config(out).precision == (None if choice.group(1) == "fp32" else choice.group(1))
    assert re.search(
        r"distill took [\d.]+ min in this run \(teacher's translation [\d.]+, student's training", result.stderr
    )
    # Run again: the corpus is complete and the student's run resumes, at its last step already.
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    again = nmt_distill(tiny_model_dir, out, sets)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "all 300 sentences translated already" in again.stderr
    assert "the teacher translates" not in again.stderr  # not even loaded
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == checkpoints
    # The same student with another corpus (the references added) is refused before any translation.
    other = nmt_distill(tiny_model_dir, out, sets, "--with-references")
    assert other.returncode == 2
    assert "holds a student that started on" in other.stderr and "give them as then, or another --out" in other.stderr
    assert not (out / "distilled" / "mixed.en").exists()


def test_a_student_stopped_by_sigterm_is_not_taken_for_a_finished_one(tiny_model_dir, overrides, tmp_path):
    """SIGTERM saves the student and exits 143: no shortlist or precision chosen from half-trained
    weights, and a script's next step does not run. The same command continues, then finishes."""
    out = tmp_path / "student"
    sets = overrides + QUIET + CHOOSE_PRECISION
    sets += ["tokenizer.vocab_size=8192", "train.max_steps=100000", "train.valid_every=100000"]
    proc = nmt_distill(tiny_model_dir, out, sets, background=True)
    metrics, deadline = out / "metrics.jsonl", time.time() + 240
    while time.time() < deadline and proc.poll() is None and lines_in(metrics) < 3:
        time.sleep(0.05)
    assert lines_in(metrics) >= 3, "the student never trained"  # a signal now lands in its training loop
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "to continue it: the same nmt distill command again" in err
    assert not (out / "shortlist.safetensors").exists() and "distill took" not in err
    stopped_at = max(int(p.stem.split("_")[1]) for p in (out / "checkpoints").glob("step_*.safetensors"))
    assert stopped_at >= 2

    finished = nmt_distill(tiny_model_dir, out, [*sets, f"train.max_steps={stopped_at + 2}"])
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert f"resumed from step_{stopped_at:08d}" in finished.stderr
    assert (out / "shortlist.safetensors").is_file() and "precision: " in finished.stderr


def test_the_teachers_n_best_are_kept_and_the_student_trains_on_each(tiny_model_dir, overrides, tmp_path):
    sets = overrides + QUIET + ["tokenizer.vocab_size=8192", "train.max_steps=2"]
    one = nmt_distill(tiny_model_dir, tmp_path / "one", sets, "--translate-only", "--beam", "3")
    assert one.returncode == 0, one.stderr[-2000:]
    best = (tmp_path / "one" / "distilled" / "teacher.en").read_text(encoding="utf-8").splitlines()

    out = tmp_path / "student"
    result = nmt_distill(tiny_model_dir, out, sets, "--beam", "3", "--hypotheses", "2", "--with-references")
    assert result.returncode == 0, result.stderr[-2000:]
    folder = out / "distilled"
    kept = (folder / "teacher.2best.en").read_text(encoding="utf-8").splitlines()
    assert len(kept) == 2 * len(best) == 600
    assert kept[0::2] == best  # the first of each sentence's two is its one best translation
    assert sum(a != b for a, b in zip(kept[0::2], kept[1::2], strict=True)) > len(best) // 2  # a second one
    sources = (folder / "source.de").read_text(encoding="utf-8").splitlines()
    references = (folder / "reference.en").read_text(encoding="utf-8").splitlines()
    mixed_src = (folder / "mixed.de").read_text(encoding="utf-8").splitlines()
    mixed_tgt = (folder / "mixed.en").read_text(encoding="utf-8").splitlines()
    # each source with each of its teacher's two translations, then once more with its reference
    assert mixed_src == [s for s in sources for _ in range(2)] + sources
    assert mixed_tgt == kept + references
    run = yaml.safe_load((out / "config.yaml").read_text())
    assert run["data"]["train_tgt"] == str(folder.resolve() / "mixed.en")
    assert (out / "shortlist.safetensors").is_file()  # built from the n-best, line for line with its sources
    assert (folder / "source.x2.de").read_text(encoding="utf-8").splitlines() == mixed_src[:600]


def test_more_hypotheses_than_the_beam_finds_are_refused_before_anything_is_written(
    tiny_model_dir, overrides, tmp_path
):
    sets = overrides + ["tokenizer.vocab_size=8192"]
    result = nmt_distill(tiny_model_dir, tmp_path / "student", sets, "--beam", "2", "--hypotheses", "3")
    assert result.returncode == 2
    assert "--hypotheses 3 asks for more translations than the beam (2) finds" in result.stderr
    assert not (tmp_path / "student").exists()


# --- several directions ---------------------------------------------------------------------------

EN_XX = "data.pairs=[multi30k:en-de:60, multi30k:en-fr:40]"


@pytest.fixture(scope="module")
def en_xx_teacher_and_data(tmp_path_factory):
    """(A one-to-many teacher (>>de<< and >>fr<< tokens), two steps on capped pairs; its data home).
    Built once for the module: the tests only read it, and training it took half a minute each."""
    root = tmp_path_factory.mktemp("en_xx")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("NMT_DATA_HOME", str(root / "data_home"))
        teacher = root / "teacher"
        # on the CPU by name: a module's fixture is built before conftest hides the GPU
        sets = [*TINY_TRAINING, *QUIET, EN_XX, "train.max_steps=2", "train.device=cpu"]
        train(load_config(None, sets), teacher, progress_bar=False)
    return teacher, root / "data_home"


@pytest.fixture
def en_xx_teacher(en_xx_teacher_and_data, monkeypatch):
    """The module's one-to-many teacher, its data home this test's (where its students find the pairs)."""
    teacher, data_home = en_xx_teacher_and_data
    monkeypatch.setenv("NMT_DATA_HOME", str(data_home))
    return teacher


def asked_targets(monkeypatch) -> list[tuple[str | None, int]]:
    """Record the target language and sentence count of every call the teacher gets. A two-step
    teacher's output is mostly empty (and an empty pair is skipped), so its text is replaced by
    the source's words reversed after the language asked for: which also shows where each went."""
    calls = []
    original = Translator.translate_detailed

    def recording(self, texts, *args, target_lang=None, **kwargs):
        calls.append((target_lang, len(texts)))
        found = original(self, texts, *args, target_lang=target_lang, **kwargs)
        for text, translations in zip(texts, found, strict=True):
            for t in translations:
                t.text = f"{target_lang} " + " ".join(reversed(text.split()))
        return found

    monkeypatch.setattr(Translator, "translate_detailed", recording)
    return calls


def distill_in_process(teacher, out, sets, *extra):
    config = out.parent / "student.yaml"
    config.write_text("{}\n")
    argv = ["distill", "--teacher", str(teacher), "--config", str(config), "--out", str(out), "--quiet", *extra]
    return main([*argv, "--beam", "1", "--no-int8", "--set", *sets])


def test_a_multilingual_student_learns_every_direction_each_from_its_kept_pairs(en_xx_teacher, tmp_path, monkeypatch):
    calls = asked_targets(monkeypatch)
    out = tmp_path / "student"
    assert distill_in_process(en_xx_teacher, out, [*TINY_TRAINING, *QUIET, EN_XX, "train.max_steps=2"]) == 0
    assert calls == [("de", 60), ("fr", 40)]  # each direction's capped pairs, into its own language
    distilled = out.resolve() / "distilled"
    for name, src, tgt, count in (("en-de", "en", "de", 60), ("en-fr", "en", "fr", 40)):
        folder = distilled / f"{name}.{count}"  # the cap in the name: another cap is another corpus
        student = folder / "student"
        assert lines_in(folder / f"teacher.{tgt}") == lines_in(folder / f"source.{src}") == count
        first = (folder / f"source.{src}").read_text().splitlines()[0]
        assert (folder / f"teacher.{tgt}").read_text().splitlines()[0] == f"{tgt} " + " ".join(reversed(first.split()))
        assert (student / f"train.{tgt}").read_text() == (folder / f"teacher.{tgt}").read_text()
        assert (student / f"train.{src}").read_text() == (folder / f"source.{src}").read_text()
        assert lines_in(student / f"valid.{src}") == lines_in(student / f"valid.{tgt}") == 1014
    run = yaml.safe_load((out / "config.yaml").read_text())
    folders = [distilled / "en-de.60" / "student", distilled / "en-fr.40" / "student"]
    assert run["data"]["pairs"] == [f"{folders[0]}/:en-de", f"{folders[1]}/:en-fr"]
    assert read_directions(out) == [("en", "de"), ("en", "fr")]
    assert (out / "shortlist.safetensors").is_file()  # from both directions' distilled pairs
    student = Translator.load(out, engine="torch")
    assert student.target_languages == ["de", "fr"] and student.translate(["A dog."], target_lang="fr", beam=1)


def test_a_student_of_one_direction_of_a_multi_target_teacher_has_no_target_tokens(
    en_xx_teacher, tmp_path, monkeypatch
):
    calls = asked_targets(monkeypatch)
    out = tmp_path / "student"
    sets = [*TINY_TRAINING, *QUIET, "data.pairs=[multi30k:en-fr:30]", "train.max_steps=2"]
    assert distill_in_process(en_xx_teacher, out, sets) == 0
    assert calls == [("fr", 30)]
    teacher_tokens, _ = load_tokenizers(en_xx_teacher)
    tokens, _ = load_tokenizers(out)
    assert tokens.target_languages == [] and tokens.vocab_size == teacher_tokens.vocab_size - 2
    everything = range(tokens.vocab_size)
    assert tokens.lookup(everything) == teacher_tokens.lookup(everything)  # every other piece keeps its id
    assert Translator.load(out, engine="torch").translate(["A dog."], beam=1)  # no target to choose
    assert distill_in_process(en_xx_teacher, out, sets) == 0  # run again: the tokenizer there is the same
    # The same student on other files (the references added) is refused before any translation.
    assert distill_in_process(en_xx_teacher, out, sets, "--with-references") == 2
    assert not (out / "distilled" / "en-fr.30" / "student.refs").exists()


def test_a_one_direction_student_of_a_teacher_with_two_vocabularies_keeps_both_without_target_tokens(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("NMT_DATA_HOME", str(tmp_path / "data_home"))
    separate = ["tokenizer.joint=false", "tokenizer.src_vocab_size=500"]
    teacher = tmp_path / "teacher"
    train(
        load_config(None, [*TINY_TRAINING, *QUIET, EN_XX, *separate, "train.max_steps=2"]), teacher, progress_bar=False
    )
    asked_targets(monkeypatch)
    out = tmp_path / "student"
    sets = [*TINY_TRAINING, *QUIET, "data.pairs=[multi30k:en-fr:30]", *separate, "train.max_steps=2"]
    assert distill_in_process(teacher, out, sets) == 0
    (teacher_src, teacher_tgt), (src, tgt) = load_tokenizers(teacher), load_tokenizers(out)
    assert src is not tgt and src.target_languages == [] and src.vocab_size == teacher_src.vocab_size - 2
    assert src.lookup(range(src.vocab_size)) == teacher_src.lookup(range(src.vocab_size))
    assert tgt.lookup(range(tgt.vocab_size)) == teacher_tgt.lookup(range(teacher_tgt.vocab_size))
    assert distill_in_process(teacher, out, sets) == 0  # run again: the tokenizers there are the same
    # a student config without the teacher's source vocabulary size is refused, naming the value to set
    capsys.readouterr()
    assert distill_in_process(teacher, tmp_path / "other", [*sets[:-2], "tokenizer.joint=false", sets[-1]]) == 2
    assert "tokenizer.src_vocab_size=null where the teacher's is 500: set tokenizer.src_vocab_size: 500" in (
        capsys.readouterr().err
    )


def test_a_student_of_other_or_some_of_the_teacher_s_directions_is_refused(tmp_path):
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    three = "data.pairs=[multi30k:en-de, multi30k:en-fr, multi30k:en-cs]"
    load_config(None, [*TINY_TRAINING, three]).save(teacher / "config.yaml")
    for pairs, message in (
        (
            "data.pairs=[multi30k:en-de, multi30k:de-en]",
            "the teacher translates en-de, en-fr, en-cs; the student config asks for de-en",
        ),
        ("data.pairs=[multi30k:en-de, multi30k:en-fr]", "asks for 2 of the teacher's 3 directions"),
    ):
        config = load_config(None, [*TINY_TRAINING, pairs])
        with pytest.raises(ValueError, match=re.escape(message)):
            plan_distillation(teacher, config, tmp_path / "student")


def test_a_tokenised_corpus_is_distilled_in_its_own_form(tmp_path):
    # the teacher reads ted_hrlr's tokenised, lower-cased source as it is and writes that form back
    ted = load_config(None, ["data.corpus=ted_hrlr", "data.src_lang=pt", "data.tgt_lang=en"])
    assert DistillationPlan(ted, None, tmp_path).pretokenized
    assert not DistillationPlan(load_config(None, []), None, tmp_path).pretokenized  # Multi30k is running text
