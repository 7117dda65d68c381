"""Sequence-level knowledge distillation (Kim & Rush, 2016): a student trained on its teacher's output.

The teacher translates the training corpus's source side with its own beam and length penalty;
the student then trains on (source, teacher's translation) pairs, which are simpler and more
consistent than the human references: a small student with greedy search gets close to the
teacher with a beam. The student keeps the teacher's tokenizer (one vocabulary for both, so a
teacher whose tokenizer the student config would not build is refused before any translation).

    distillation = plan_distillation(teacher_dir, student_config, out_dir)   # checks, before any work
    for plan in distillation.plans:                                         # one per direction
        plan.write_source()
        translate_corpus(translate, plan.source, plan.distilled)           # resumable
    distillation.write_training_pairs()
    train(distillation.student_config(), out_dir)

A multilingual student (data.pairs) learns every direction of its teacher, each distilled in a
folder of its own (distilled/de-en/, distilled/cs-en.3000/ for a direction capped at 3,000 pairs,
which is distilled on its kept pairs only); its data.pairs then names a folder inside each
(student/, or student.2best.refs/ and the like with --hypotheses and --with-references), so that
a student started on other files is told apart. Or a student learns one direction of a
multilingual teacher.

The translation step appends whole lines, a chunk at a time, each chunk flushed to disk: killed
at any moment, it finds its place again by counting the complete lines already written (a torn
last line is cut off), so the distilled file stays line-aligned with the source.

With `hypotheses=N` the teacher keeps its N best translations of each sentence, N lines a
sentence, and the student trains on every one of them: more varied targets for the same source
(the n-best form of data diversification, Nguyen et al. 2020), which a small corpus seen for
dozens of epochs needs more than a large one does. A sentence whose beam finished fewer than N
(`n_best_lines`) repeats its best translation, which so weighs a little more in training.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from ..config import DataConfig, ExperimentConfig, PairSpec
from ..data.corpus import read_lines
from ..data.registry import is_pretokenized
from ..files import atomic_write_text
from ..model_dir import IMPORTED_FROM, read_run_config
from ..tokenizer import SubwordTokenizer, has_tokenizers, load_tokenizers, save_tokenizers
from .datasets import CorpusFiles, split_files
from .multilingual import capped_rows, direction_files, kept_rows

log = logging.getLogger(__name__)

DISTILLED = "distilled"  # the folder, in the student's directory, of the teacher's translations


@dataclass(frozen=True)
class DistillationPlan:
    """What the distillation of one direction reads and writes, settled before any translation."""

    config: ExperimentConfig  # the student's, as given
    corpus: CorpusFiles  # the training pairs, as the config names them
    folder: Path  # where the distilled corpus is written, in the student's directory
    with_references: bool = False
    hypotheses: int = 1  # the teacher's translations kept per sentence, best first
    direction: PairSpec | None = None  # one of a multilingual student's directions (None: the config's pair)
    rows: tuple[int, ...] | None = None  # a capped direction's kept pairs, in file order (None: all)
    target_lang: str | None = None  # what a multi-target teacher is asked to write

    @property
    def pair(self) -> PairSpec:
        """The direction distilled."""
        return self.direction or self.config.data.directions[0]

    @property
    def pretokenized(self) -> bool:
        """Whether the corpus is in a tokenised form (ted_hrlr): the teacher reads it as it is, and
        writes its translations in that form too, which the student trains on."""
        corpus = self.pair.corpus
        return corpus is not None and not self.pair.is_directory and is_pretokenized(corpus)

    @property
    def source(self) -> Path:  # the training pairs' source side, one sentence a line
        return self.folder / f"source.{self.pair.src_lang}"

    @property
    def reference(self) -> Path:  # their human translations
        return self.folder / f"reference.{self.pair.tgt_lang}"

    @property
    def distilled(self) -> Path:  # the teacher's translations of `source`, `hypotheses` lines a sentence
        n = "" if self.hypotheses == 1 else f"{self.hypotheses}best."
        return self.folder / f"teacher.{n}{self.pair.tgt_lang}"

    @property
    def distilled_source(self) -> Path:  # `source` line for line with `distilled` (each line n times)
        if self.hypotheses == 1:
            return self.source
        return self.folder / f"source.x{self.hypotheses}.{self.pair.src_lang}"

    def write_source(self) -> None:
        """The training pairs' two sides as plain files, once (the corpus may be a TSV, or gzipped)."""
        if self.source.exists() and self.reference.exists():
            return
        pairs = list(self.corpus.pairs())
        pairs = [pairs[i] for i in kept_rows(len(pairs), self.rows)]  # as the training run takes them
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.reference, "".join(f"{t}\n" for _, t in pairs))
        atomic_write_text(self.source, "".join(f"{s}\n" for s, _ in pairs))

    def student_config(self) -> ExperimentConfig:
        """The student's config, training on the teacher's output (and the references, if asked)."""
        src, tgt = self.training_files()
        data = dataclasses.replace(self.config.data, train_src=str(src), train_tgt=str(tgt))
        return dataclasses.replace(self.config, data=data)

    def mixed_files(self) -> tuple[Path, Path]:
        return self.folder / f"mixed.{self.pair.src_lang}", self.folder / f"mixed.{self.pair.tgt_lang}"

    def training_files(self) -> tuple[Path, Path]:
        """The student's training pairs of this direction: the teacher's (and the references, if asked)."""
        return self.mixed_files() if self.with_references else (self.distilled_source, self.distilled)

    @property
    def student_folder(self) -> Path:
        """A multilingual student's folder of this direction, named after what it trains on."""
        name = "student" + (f".{self.hypotheses}best" if self.hypotheses > 1 else "")
        return self.folder / (name + (".refs" if self.with_references else ""))

    def write_direction_files(self) -> None:
        """This direction as a multilingual student's data.pairs reads a directory (student_folder):
        train.xx and train.yy (copies of training_files), valid.xx and valid.yy (the corpus's
        validation pairs). Copies newer than what they are made from are left alone (a resumed
        student keeps its cache)."""
        src, tgt, folder = self.pair.src_lang, self.pair.tgt_lang, self.student_folder
        folder.mkdir(parents=True, exist_ok=True)
        made_from = zip((folder / f"train.{src}", folder / f"train.{tgt}"), self.training_files(), strict=True)
        for made, original in made_from:
            if is_stale(made, [original]):
                atomic_write_text(made, original.read_text(encoding="utf-8"))
        valid_src, valid_tgt = folder / f"valid.{src}", folder / f"valid.{tgt}"
        if not (valid_src.exists() and valid_tgt.exists()):
            files = direction_files(self.config.data, self.pair, "valid")
            pairs = list(CorpusFiles(files.src, files.tgt).pairs())  # the text, without a target token
            atomic_write_text(valid_src, "".join(f"{s}\n" for s, _ in pairs))
            atomic_write_text(valid_tgt, "".join(f"{t}\n" for _, t in pairs))

    def write_training_pairs(self) -> None:
        """The student's training files, once the teacher's translations are complete: each source
        sentence once per kept translation (`distilled_source`), and with `with_references` once more
        with its reference after them all (`mixed_files`). Files already newer than what they are made
        from are left as they are: rewriting them would make a resumed student encode them again."""
        inputs = (self.source, self.distilled, self.reference)
        sources = list(read_lines(self.source))
        repeated = [s for s in sources for _ in range(self.hypotheses)]
        if self.hypotheses > 1 and is_stale(self.distilled_source, inputs):
            atomic_write_text(self.distilled_source, "".join(f"{s}\n" for s in repeated))
        src_out, tgt_out = self.mixed_files()
        if self.with_references and (is_stale(src_out, inputs) or is_stale(tgt_out, inputs)):
            targets = list(read_lines(self.distilled)) + list(read_lines(self.reference))
            atomic_write_text(src_out, "".join(f"{s}\n" for s in repeated + sources))
            atomic_write_text(tgt_out, "".join(f"{t}\n" for t in targets))


def is_stale(made: Path, sources: Sequence[Path]) -> bool:
    """Whether `made` is missing or older than any of the files it is made from."""
    return not made.exists() or made.stat().st_mtime_ns < max(p.stat().st_mtime_ns for p in sources)


TOKENIZER_FIELDS = ("kind", "vocab_size", "joint", "src_vocab_size", "lowercase", "pretokenized")


@dataclass(frozen=True)
class Distillation:
    """Every direction's plan, and the student config that trains on what they write."""

    config: ExperimentConfig  # the student's, as given
    plans: list[DistillationPlan]

    @property
    def multilingual(self) -> bool:
        """Whether the student config names its directions in data.pairs (each distilled in a folder)."""
        return self.config.data.pairs is not None

    def write_training_pairs(self) -> None:
        """Each direction's training files (DistillationPlan.write_training_pairs), and for a
        multilingual student the directory each of its data.pairs entries reads."""
        for plan in self.plans:
            plan.write_training_pairs()
            if self.multilingual:
                plan.write_direction_files()

    def student_config(self) -> ExperimentConfig:
        """The student's config: training on the teacher's output (and the references, if asked)."""
        if not self.multilingual:
            return self.plans[0].student_config()
        pairs = [f"{plan.student_folder}/:{plan.pair.name}" for plan in self.plans]  # no caps: the kept pairs only
        return dataclasses.replace(self.config, data=dataclasses.replace(self.config.data, pairs=pairs))


def plan_distillation(
    teacher: str | Path,
    config: ExperimentConfig,
    out: str | Path,
    *,
    with_references: bool = False,
    hypotheses: int = 1,
) -> Distillation:
    """Check that the teacher fits the student config; raise ValueError naming what differs.

    The student learns every direction of the teacher (data.pairs as the teacher's) or one of them."""
    teacher, out = Path(teacher), Path(out)
    if hypotheses < 1:
        raise ValueError(f"the teacher must keep at least 1 translation per sentence, not {hypotheses}")
    if (teacher / IMPORTED_FROM).is_file():
        raise ValueError(f"{teacher} was imported from another toolkit: distilling it is not supported yet")
    taught = read_run_config(teacher)
    if taught is None:
        raise ValueError(f"{teacher} has no config.yaml: not a model directory that nmt train wrote")
    taught_names = [d.name for d in taught.data.directions]
    wanted = config.data.directions
    missing = [d.name for d in wanted if d.name not in taught_names]
    if missing:
        raise ValueError(
            f"the teacher translates {', '.join(taught_names)}; the student config asks for {', '.join(missing)}"
        )
    if 1 < len(wanted) < len(taught_names):
        raise ValueError(
            f"the student config asks for {len(wanted)} of the teacher's {len(taught_names)} directions: a "
            f"student learns all of them ({', '.join(taught_names)}) or one"
        )
    for name in TOKENIZER_FIELDS:
        mine, theirs = getattr(config.tokenizer, name), getattr(taught.tokenizer, name)
        if mine != theirs:
            raise ValueError(
                f"the student keeps the teacher's vocabulary, but its config asks for "
                f"tokenizer.{name}={yaml_value(mine)} where the teacher's is {yaml_value(theirs)}: "
                f"set tokenizer.{name}: {yaml_value(theirs)} in the student config"
            )
    folder = out.resolve() / DISTILLED
    multi_target = bool(taught.data.target_languages)
    if config.data.pairs is None:
        target_lang = config.data.tgt_lang if multi_target else None
        corpus = split_files(config.data, "train")
        plan = DistillationPlan(config, corpus, folder, with_references, hypotheses, target_lang=target_lang)
        return Distillation(config, [plan])
    plans = []
    for direction in wanted:
        files = direction_files(config.data, direction, "train")
        rows = capped_rows(files.count(), direction.max_pairs)
        plans.append(
            DistillationPlan(
                config,
                CorpusFiles(files.src, files.tgt, files.strip_annotations),  # the text, without a target token
                folder / (direction.name if direction.max_pairs is None else f"{direction.name}.{direction.max_pairs}"),
                with_references,
                hypotheses,
                direction=direction,
                rows=None if rows is None else tuple(int(i) for i in rows),
                target_lang=direction.tgt_lang if multi_target else None,
            )
        )
    return Distillation(config, plans)


def copy_teacher_tokenizer(teacher: Path, out: Path, data: DataConfig) -> None:
    """The teacher's tokenizer into `out` (a different one already there is refused). A student of
    one target language, of a teacher with several, takes it without the >>xx<< tokens: its
    sources hold none, and a model with them would ask for a target language."""
    from .run import copy_tokenizers  # noqa: PLC0415 (run imports the trainer, needed here only)

    tokenizer, tgt = load_tokenizers(teacher)
    if data.target_languages or not tokenizer.target_languages:
        copy_tokenizers(teacher, out)
        return
    plain = tokenizer.without_language_tokens()
    if not has_tokenizers(out):
        save_tokenizers(plain, plain if tgt is tokenizer else tgt, out)
        return
    mine, my_tgt = load_tokenizers(out)
    theirs = (plain, plain if tgt is tokenizer else tgt)
    if (mine is my_tgt) != (theirs[0] is theirs[1]) or not all(
        same_pieces(a, b) for a, b in zip((mine, my_tgt), theirs, strict=True)
    ):
        raise ValueError(f"{out} holds another tokenizer than the teacher's: distil into a new directory")


def same_pieces(a: SubwordTokenizer, b: SubwordTokenizer) -> bool:
    """Whether two tokenizers have the same pieces under the same ids."""
    everything = range(a.vocab_size)
    return a.vocab_size == b.vocab_size and a.lookup(everything) == b.lookup(everything)


def yaml_value(value: object) -> str:
    """A config value as YAML spells it (None as null, True as true)."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def n_best_lines(found: Sequence[Sequence[str]], n: int) -> list[str]:
    """Exactly `n` translations per sentence, a sentence's together: the first `n` of each, a
    sentence with fewer repeating its best (one with none gives ''), so the file stays aligned."""
    lines = []
    for best in found:
        best = list(best[:n]) or [""]
        lines += best + [best[0]] * (n - len(best))
    return lines


def complete_lines(path: Path, group: int = 1) -> int:
    """How many whole lines `path` holds, after cutting off a torn last one (a kill mid-write) and
    any lines after the last whole group of `group` lines (a sentence's n-best, part written)."""
    if not path.exists():
        return 0
    with open(path, "rb+") as f:
        data = f.read()
        whole = data.rfind(b"\n") + 1
        lines = data.count(b"\n", 0, whole)
        for _ in range(lines % group):  # back to the end of the last whole group
            whole = data.rfind(b"\n", 0, whole - 1) + 1
        if whole < len(data):
            f.truncate(whole)
    return lines - lines % group


def translate_corpus(
    translate: Callable[[Sequence[str]], list[str]],
    source: Path,
    out: Path,
    *,
    chunk: int = 512,
    progress: bool = True,
    per_sentence: int = 1,
) -> int:
    """Translate `source` line by line into `out`, continuing where an earlier call stopped.

    translate: `per_sentence` translations per sentence, a sentence's together, in the sentences'
    order (an empty sentence must give ''). Returns the number of sentences translated by this call.
    """
    sources = list(read_lines(source))
    out.parent.mkdir(parents=True, exist_ok=True)
    written = complete_lines(out, per_sentence)
    done = written // per_sentence
    if done > len(sources):
        each = "" if per_sentence == 1 else f" ({per_sentence} translations of each of its lines)"
        raise ValueError(
            f"{out} has {written} lines, more than the {len(sources) * per_sentence} of {source}{each}: "
            "not its translation"
        )
    if done == len(sources):
        log.info("%s: all %d sentences translated already", out, done)
    elif done:
        log.info("%s: %d of %d sentences translated already; continuing", out, done, len(sources))
    bar = tqdm(total=len(sources), initial=done, unit="sent", desc="teacher", disable=not progress or None)
    with open(out, "a", encoding="utf-8") as f:
        for start in range(done, len(sources), chunk):
            batch = sources[start : start + chunk]
            translations = translate(batch)
            if len(translations) != len(batch) * per_sentence:
                raise RuntimeError(
                    f"the teacher gave {len(translations)} translations for {len(batch)} sentences, "
                    f"not {per_sentence} each"
                )
            # One line per sentence, whatever the text holds: the file must stay aligned with the source.
            f.write("".join(" ".join(t.split()) + "\n" for t in translations))
            f.flush()
            os.fsync(f.fileno())
            bar.update(len(batch))
    bar.close()
    return len(sources) - done
