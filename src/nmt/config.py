"""The experiment configuration: one YAML file with sections data, tokenizer, model, train, decode.

Every field has a default and a one-line comment beside it. Unknown keys are an error
listing the valid ones, and so are values of the wrong type or out of range. Any field can be
overridden with `section.field=value` (`--set train.max_steps=200`), the value parsed
as YAML (so `true`, `0.1`, `null` and `[1, 2]` mean what they look like).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import yaml

from . import search_settings
from .config_checks import FRACTION, NOT_EMPTY, ConfigError, Rule, above, at_least, check_fields, check_type, one_of
from .files import atomic_write_text
from .model.config import PRESETS, ModelConfig
from .search_settings import SearchSettings
from .tokenizer import BOS_ID, EOS_ID, PAD_ID, TokenizerConfig

# A torch device this code knows how to use (distributed.py and the Translator: CPU or CUDA).
DEVICE = Rule(lambda v: re.fullmatch(r"auto|cpu|cuda(:\d+)?", v) is not None, "auto, cpu, cuda or cuda:N")
# Each epoch's batch order comes from np.random.default_rng([seed, epoch]), which refuses seeds < 0.
SEED = Rule(lambda v: 0 <= v < 2**63, "in [0, 2**63)")
SHARING_ALL_NEEDS_JOINT = "model.sharing=all shares one embedding between the languages: it needs tokenizer.joint=true"


@dataclass
class DataConfig:
    """Where the parallel corpus comes from and which pairs to keep."""

    corpus: str | None = "multi30k"  # a registered corpus (see nmt.data.registry), or null to use the file paths
    src_lang: str = "de"  # source language code
    tgt_lang: str = "en"  # target language code
    train_split: str = "train"  # split of the named corpus used for training
    valid_split: str = "val"  # split of the named corpus used for validation
    train_src: str | None = None  # training source file (plain text, .gz ok); overrides the corpus
    train_tgt: str | None = None  # training target file
    valid_src: str | None = None  # validation source file
    valid_tgt: str | None = None  # validation target file
    max_src_len: int = 128  # drop training pairs whose source is longer (tokens, incl. [START]/[END])
    max_tgt_len: int = 128  # drop training pairs whose target is longer (tokens, incl. [START]/[END])
    max_ratio: float | None = 3.0  # drop training pairs whose length ratio exceeds this (null: keep all)
    bpe_dropout: float = 0.0  # re-segment the training pairs each epoch, skipping each BPE merge with this chance
    strip_annotations: bool = False  # take transcript annotations ("( laughter )") out of the training pairs
    # Several directions in one model (nmt.training.multilingual): "corpus:src-tgt" each, ":N" after
    # one to keep N of its pairs, e.g. [multi30k:de-en, multi30k:fr-en, "multi30k:cs-en:3000"]; a
    # corpus with a "/" is a directory of one's own files ("corpora/:gl-en": train.gl, train.en,
    # valid.gl, valid.en). The corpus, src_lang, tgt_lang and file fields above are then not read.
    # null: one pair.
    pairs: list[str] | None = None
    temperature: float = 5.0  # with pairs: direction p sampled with probability ~ size_p^(1/T) (1: as sized)

    # Lengths count [START] and [END]: a limit under 3 would drop every pair.
    RULES: ClassVar[dict[str, Rule]] = {
        "src_lang": NOT_EMPTY,
        "tgt_lang": NOT_EMPTY,
        "train_split": NOT_EMPTY,
        "valid_split": NOT_EMPTY,
        "max_src_len": at_least(3),
        "max_tgt_len": at_least(3),
        "max_ratio": at_least(1),
        "bpe_dropout": Rule(lambda v: 0 <= v < 1, "in [0, 1)"),
        "pairs": Rule(lambda v: len(v) >= 1, "a list of one or more corpus:src-tgt"),
        "temperature": above(0),
    }

    def __post_init__(self) -> None:
        check_fields(self, "data")
        for split in ("train", "valid"):
            if getattr(self, f"{split}_tgt") is not None and getattr(self, f"{split}_src") is None:
                raise ConfigError(f"data.{split}_tgt needs data.{split}_src")
            if self.corpus is None and getattr(self, f"{split}_src") is None and self.pairs is None:
                raise ConfigError(f"data.corpus is null: set data.{split}_src (and data.{split}_tgt)")
        if self.pairs is not None:
            directions = self.directions  # each entry parsed: a bad one is an error now
            names = [d.name for d in directions]
            if len(set(names)) < len(names):
                raise ConfigError(f"data.pairs names a direction twice: {', '.join(names)}")

    def with_absolute_paths(self) -> DataConfig:
        """A copy whose files and pair directories are absolute (resolved where this process runs):
        a run's config.yaml then finds them from anywhere (--resume, nmt shortlist, the decoding
        settings chosen after training)."""
        keys = ("train_src", "train_tgt", "valid_src", "valid_tgt")
        files = {key: str(Path(value).absolute()) for key in keys if (value := getattr(self, key))}
        pairs = self.pairs and [d.with_absolute_directory().written() for d in self.directions]
        return dataclasses.replace(self, **files, pairs=pairs)

    @property
    def directions(self) -> list[PairSpec]:
        """The directions this model learns: data.pairs, or the one pair of src_lang and tgt_lang."""
        if self.pairs is None:
            return [PairSpec(self.corpus, self.src_lang, self.tgt_lang, None)]
        return [PairSpec.parse(text, f"data.pairs[{i}]") for i, text in enumerate(self.pairs)]

    @property
    def target_languages(self) -> list[str]:
        """The target languages of a model with several (each source then starts with >>xx<<); else []."""
        targets = sorted({d.tgt_lang for d in self.directions})
        return targets if len(targets) > 1 else []


@dataclass(frozen=True)
class PairSpec:
    """One direction of data.pairs: a registered corpus or a directory of files, its two languages,
    at most max_pairs pairs."""

    corpus: str | None  # a registered corpus's name, or a directory (a name with a "/")
    src_lang: str
    tgt_lang: str
    max_pairs: int | None = None

    @property
    def name(self) -> str:
        return f"{self.src_lang}-{self.tgt_lang}"

    def written(self) -> str:
        """As a data.pairs entry: "multi30k:cs-en:3000"."""
        return f"{self.corpus}:{self.name}" + (f":{self.max_pairs}" if self.max_pairs is not None else "")

    def with_absolute_directory(self) -> PairSpec:
        """This direction with its directory (if it names one) absolute, a "/" still at its end."""
        if not self.is_directory:
            return self
        return dataclasses.replace(self, corpus=str(Path(self.corpus).absolute()) + "/")

    @property
    def is_directory(self) -> bool:
        """Whether `corpus` names a directory of the user's files rather than a registered corpus."""
        return self.corpus is not None and "/" in self.corpus

    @classmethod
    def parse(cls, text: str, key: str = "data.pairs") -> PairSpec:
        """'multi30k:cs-en', 'multi30k:cs-en:3000' or 'corpora/gl-en/:gl-en'; ConfigError naming `key` otherwise."""
        match = re.fullmatch(r"(.+):([A-Za-z_]+)-([A-Za-z_]+)(?::(\d+))?", text.strip())
        if match is None or not ("/" in match.group(1) or re.fullmatch(r"[\w.-]+", match.group(1))):
            raise ConfigError(
                f"{key} must look like corpus:src-tgt or corpus:src-tgt:N (e.g. multi30k:cs-en:3000), "
                f"where corpus is a registered name or a directory with a / (e.g. corpora/gl-en/), got {text!r}"
            )
        corpus, src, tgt, cap = match.groups()
        if src == tgt:
            raise ConfigError(f"{key}: {text!r} translates {src} into itself")
        if cap is not None and int(cap) < 1:
            raise ConfigError(f"{key}: {text!r} keeps no pairs")
        return cls(corpus, src, tgt, int(cap) if cap is not None else None)


@dataclass
class ModelSection:
    """A size preset plus optional overrides of its fields (null keeps the preset's value)."""

    preset: str = "small"  # reference | small | base | big | student-6-2 | student-6-1 | student-6-2-narrow (PRESETS)
    encoder_layers: int | None = None  # override the preset's encoder depth
    decoder_layers: int | None = None  # override the preset's decoder depth
    d_model: int | None = None  # override the model width
    num_heads: int | None = None  # override the number of attention heads
    d_ff: int | None = None  # override the feed-forward width
    dropout: float | None = None  # override the dropout rate
    attention_dropout: float | None = None  # override dropout on attention weights
    activation_dropout: float | None = None  # dropout on the feed-forward's hidden units (preset: 0)
    activation: str | None = None  # relu | gelu | swish
    norm_position: str | None = None  # post (paper) | pre
    sharing: str | None = None  # none | tgt_out | all (all needs tokenizer.joint)
    positional_base: float | None = None  # base of the sinusoidal positions
    layer_norm_eps: float | None = None  # epsilon inside every LayerNorm (ModelConfig's default: 1e-6)
    # What an imported model (Marian) sets; nmt's own models keep ModelConfig's defaults.
    scale_embeddings: bool | None = None  # multiply embeddings by sqrt(d_model) (default: true)
    position_layout: str | None = None  # interleaved (the paper) | halves (transformers' Marian) | marian
    output_bias: bool | None = None  # a learned bias on the output logits (default: false)

    RULES: ClassVar[dict[str, Rule]] = {"preset": one_of(*PRESETS)}  # ModelConfig checks the rest

    def __post_init__(self) -> None:
        """Check the preset with these overrides now (placeholder vocabularies): ModelConfig owns the rules."""
        check_fields(self, "model")
        try:
            self.build(8192, 8192, joint_vocabulary=True)
        except ValueError as err:
            raise ConfigError(f"model.{err}") from None

    def build(self, src_vocab_size: int, tgt_vocab_size: int, *, joint_vocabulary: bool) -> ModelConfig:
        """The ModelConfig for these vocabularies, with the tokenizer's special-token ids: preset, then overrides."""
        overrides = {k: v for k, v in dataclasses.asdict(self).items() if k != "preset" and v is not None}
        if not joint_vocabulary:
            if overrides.get("sharing") == "all":
                raise ConfigError(SHARING_ALL_NEEDS_JOINT)
            # Two vocabularies: row i means different pieces on each side, so only target and output tie.
            overrides.setdefault("sharing", "tgt_out")
        return ModelConfig.preset(
            self.preset,
            src_vocab_size=src_vocab_size,
            tgt_vocab_size=tgt_vocab_size,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            **overrides,
        )


@dataclass
class TrainConfig:
    """The optimisation and the training loop."""

    max_steps: int | None = None  # stop after this many optimizer steps (null: no limit)
    max_epochs: int | None = None  # stop after this many epochs (null: no limit)
    max_time: str | float | None = None  # wall-clock budget: "20m", "1h30m", "90s" or seconds (null: no limit)
    seed: int = 1  # seeds parameters, dropout and batch order
    batch_tokens: int = 4096  # tokens per batch, padding included (the larger of source and target side)
    accumulate: int = 1  # micro-batches per optimizer step (gradient accumulation)
    threads: int | None = None  # torch intra-op threads on CPU (null: torch's default, one per core)
    # CPU: worker processes that nmt train starts, splitting each batch (auto: one per core, at least
    # 1,024 batch tokens each; 1 with train.threads set; see training/launch.py)
    processes: int | str = "auto"
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    compile: bool = False  # torch.compile the training pass (fuses element-wise work; CUDA: on CPU it was slower)
    # auto: bf16 mixed precision on CUDA and on CPUs with bf16 units (AMX, AVX-512 BF16), else fp32
    # (nmt.training.precision)
    precision: str = "auto"
    fsdp: bool = False  # under torchrun: shard parameters, gradients and optimizer state (FSDP2) instead of DDP
    schedule: str = "noam"  # noam (the paper's) | inverse_sqrt (peak_lr, then 1/sqrt decay)
    lr_scale: float = 1.0  # noam: multiplier of d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    peak_lr: float = 5e-4  # inverse_sqrt: the learning rate at the end of warm-up
    warmup: int = 4000  # warm-up steps
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.98])  # Adam beta1, beta2
    adam_eps: float = 1e-9  # Adam epsilon
    weight_decay: float = 0.0  # decoupled weight decay (AdamW); 0 is plain Adam
    label_smoothing: float = 0.1  # epsilon of label smoothing
    # R-Drop: each batch twice, + alpha/4 * symmetric KL of the two (0: off; each step costs about 2.5 times)
    r_drop_alpha: float = 0.0
    clip_norm: float | None = 1.0  # clip the global gradient norm to this (null: no clipping)
    log_every: int = 50  # steps between metric records
    valid_every: int = 1000  # steps between validations (and checkpoints)
    valid_bleu_sentences: int = 500  # validation sentences translated (greedy) for BLEU; 0 skips BLEU
    best_metric: str = "bleu"  # bleu | loss: which validation metric picks the best checkpoint (and keep_best's)
    # with data.pairs: the direction whose BLEU picks the best checkpoint (null: the directions' mean,
    # by which keep_best always ranks)
    best_direction: str | None = None
    keep_last: int = 5  # checkpoints kept on disk (the best is kept apart)
    keep_best: int = 0  # besides keep_last, keep the K best by best_metric (for nmt average --best; 0: off)
    patience: int | None = None  # stop after this many validations without improvement (null: never)
    max_bad_steps: int = 10  # consecutive non-finite losses before training stops
    # At the end of a run, choose decode.length_penalty (beam > 1) and the CPU precision (int8 where as
    # good and faster) on the validation set, written into the model's config.yaml (nmt.tuning);
    # false keeps the config's.
    tune_decoding: bool = True
    # ... unless the run's best validation BLEU is below this: a model that has barely trained writes
    # every output to the length limit (minutes of tuning), and its settings would be chosen on noise.
    tune_min_bleu: float = 1.0
    # Guided alignment (nmt.training.guided_alignment): head 0 of one decoder layer's cross-attention
    # learns a statistical aligner's word links, and word alignments (formatting in documents,
    # --alignments) read that head. auto: on where it applies (nmt's own model, no BPE-dropout, a
    # corpus the aligner can hold in memory); true: the same, or an error saying why not.
    guided_alignment: bool | str = "auto"
    alignment_weight: float = 0.1  # the alignment loss's weight beside the translation loss (Marian's)
    alignment_layer: int = -2  # whose head 0 learns: negative counts from the top; a 1-layer decoder: its own
    # true: the head learns each target word at the step after it, where the word is the decoder's
    # input (Chen et al. 2020's shift; alignment error 67.6 against 78.6 on RWTH's gold, 14.6 against
    # 23.6 on Multi30k: docs/benchmarks-log.md, "Real text"); false: at the step that outputs it
    alignment_shift: bool = True

    RULES: ClassVar[dict[str, Rule]] = {
        "guided_alignment": Rule(lambda v: v == "auto" or type(v) is bool, "auto, true or false"),
        "alignment_weight": above(0),
        "max_steps": at_least(1),
        "max_epochs": at_least(1),
        "seed": SEED,
        "batch_tokens": at_least(1),
        "accumulate": at_least(1),
        "threads": at_least(1),
        "processes": Rule(lambda v: v == "auto" or (type(v) is int and v >= 1), "auto or a whole number >= 1"),
        "tune_min_bleu": at_least(0),
        "device": DEVICE,
        "precision": one_of("auto", "fp32", "bf16"),
        "schedule": one_of("noam", "inverse_sqrt"),
        "lr_scale": above(0),
        "peak_lr": above(0),
        "warmup": at_least(1),
        "adam_betas": Rule(lambda v: len(v) == 2 and all(0 <= b < 1 for b in v), "two numbers in [0, 1)"),
        "adam_eps": above(0),
        "weight_decay": at_least(0),
        "label_smoothing": FRACTION,
        "r_drop_alpha": at_least(0),
        "clip_norm": above(0),
        "log_every": at_least(1),
        "valid_every": at_least(1),
        "valid_bleu_sentences": at_least(0),
        "best_metric": one_of("bleu", "loss"),
        "keep_last": at_least(1),
        "keep_best": at_least(0),
        "patience": at_least(1),
        "max_bad_steps": at_least(1),
    }

    def __post_init__(self) -> None:
        """Refuse settings that would only fail (or quietly misbehave) after training has started."""
        check_fields(self, "train")
        if self.best_metric == "bleu" and self.valid_bleu_sentences < 1:
            raise ConfigError("train.best_metric=bleu needs train.valid_bleu_sentences >= 1 (or use best_metric=loss)")
        if self.best_direction is not None and self.best_metric != "bleu":
            raise ConfigError("train.best_direction picks by a direction's BLEU: it needs train.best_metric=bleu")
        if self.max_time is not None and not parse_duration(self.max_time) > 0:  # a bad duration fails now
            raise ConfigError(f"train.max_time must be more than 0 seconds, got {self.max_time!r}")


@dataclass(frozen=True)
class DecodeConfig(SearchSettings):
    """A model's defaults for translation: its search settings, and how its searches are bounded and
    run (a call's settings replace the former: see SearchSettings)."""

    # on CPU, when a run names none: fp32 (null), int8, or bf16 on CPUs with AMX (`nmt tune-precision`)
    precision: str | None = None
    max_len_a: float = 1.5  # output length limit: a * source_len + b
    max_len_b: int = 10  # output length limit: a * source_len + b
    min_len: int = 1  # output tokens before the end token may come (see decoding.SearchLimits)
    batch_tokens: int = 8000  # source tokens per translation batch

    RULES: ClassVar[dict[str, Rule]] = {
        **SearchSettings.RULES,
        "max_len_a": at_least(0),
        "max_len_b": at_least(0),
        "min_len": at_least(0),
        "precision": one_of("fp32", "int8", "bf16"),
        "batch_tokens": at_least(1),
    }

    def __post_init__(self) -> None:
        check_fields(self, "decode")
        if self.max_len_a == 0 and self.max_len_b == 0:
            raise ConfigError("decode.max_len_a and decode.max_len_b are both 0: no output could be produced")


@dataclass
class ExperimentConfig:
    """The whole experiment: one section per stage, each checked when it is built."""

    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def __post_init__(self) -> None:
        # Checked again by ModelSection.build, but only once the tokenizer is trained: say it now.
        if self.model.sharing == "all" and not self.tokenizer.joint:
            raise ConfigError(SHARING_ALL_NEEDS_JOINT)
        names = [d.name for d in self.data.directions]
        if self.train.best_direction is not None and self.train.best_direction not in names:
            raise ConfigError(
                f"train.best_direction must be one of {', '.join(names)}, got {self.train.best_direction!r}"
            )
        if self.data.bpe_dropout > 0 and self.tokenizer.kind != "bpe":
            raise ConfigError(f"data.bpe_dropout needs tokenizer.kind=bpe (merges to drop), not {self.tokenizer.kind}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        """Write every section and key (so `load_config(path, complete=True)` can tell a cut file), atomically."""
        atomic_write_text(path, yaml.safe_dump(self.to_dict(), sort_keys=False))


SECTIONS: dict[str, type] = typing.get_type_hints(ExperimentConfig)


def _build_section(name: str, cls: type, values: Any) -> Any:
    """One section from its mapping: unknown keys and wrong types are errors, then the section's own checks."""
    if not isinstance(values, dict):
        raise ConfigError(f"section {name!r} must be a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(str(k) for k in set(values) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown key(s) {', '.join(f'{name}.{k}' for k in unknown)}; valid keys in {name!r}: {', '.join(known)}"
        )
    for key, value in values.items():  # check_fields does this too, but TokenizerConfig cannot import it
        check_type(f"{name}.{key}", value, hints[key])
    try:
        return cls(**values)
    except ValueError as err:  # a section's own check: its message names the key
        raise ConfigError(str(err)) from None


def config_from_dict(values: dict[str, Any]) -> ExperimentConfig:
    """Validate a nested dict (as read from YAML) into an ExperimentConfig."""
    values = {} if values is None else values
    if not isinstance(values, dict):
        raise ConfigError("a config file must be a mapping of sections")
    unknown = sorted(str(k) for k in set(values) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"unknown section(s) {unknown}; valid sections: {', '.join(SECTIONS)}")
    return ExperimentConfig(
        **{name: _build_section(name, cls, values.get(name) or {}) for name, cls in SECTIONS.items()}
    )


# Keys added after a release: a config.yaml saved before one lacks it without being cut short, and
# gets its default. A new field goes here, or every existing model directory stops loading.
ADDED_SINCE_SAVED: frozenset[str] = frozenset(
    {
        "model.layer_norm_eps",
        "model.activation_dropout",
        "model.scale_embeddings",
        "model.position_layout",
        "model.output_bias",
        *(f"decode.{name}" for name in search_settings.ADDED_SINCE_SAVED),
        "decode.min_len",
        "decode.precision",
        "train.tune_decoding",
        "train.tune_min_bleu",
        "train.precision",
        "train.r_drop_alpha",
        "data.bpe_dropout",
        "data.strip_annotations",
        "data.pairs",
        "data.temperature",
        "train.best_direction",
        "tokenizer.pretokenized",
        "tokenizer.sample_pairs",
        "tokenizer.src_vocab_size",
        "train.keep_best",
        "train.processes",
        "train.guided_alignment",
        "train.alignment_weight",
        "train.alignment_layer",
        "train.alignment_shift",
    }
)


def missing_keys(values: dict[str, Any]) -> list[str]:
    """The `section.key`s that a dict written by ExperimentConfig.save would have but `values` lacks."""
    return [
        f"{name}.{f.name}"
        for name, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
        if (not isinstance(values.get(name), dict) or f.name not in values[name])
        and f"{name}.{f.name}" not in ADDED_SINCE_SAVED
    ]


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings to a nested dict (the value parsed as YAML)."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) != 2 or not all(parts):
            raise ConfigError(f"override {item!r} must look like section.key=value, e.g. train.max_steps=200")
        section, name = parts
        if values.get(section) is None:  # absent, or a bare `train:` in the file
            values[section] = {}
        if not isinstance(values[section], dict):
            raise ConfigError(f"section {section!r} must be a mapping")
        try:
            values[section][name] = yaml.load(raw, Loader=ConfigLoader) if raw.strip() else None  # noqa: S506
        except yaml.YAMLError as err:
            raise ConfigError(
                f"override {item!r}: the value is not valid YAML ({getattr(err, 'problem', err)})"
            ) from None
    return values


class ConfigLoader(yaml.SafeLoader):
    """SafeLoader that reads 1e-5 as a number and refuses a key given twice in one mapping.

    PyYAML follows YAML 1.1, where a float needs a dot (1.0e-5) and `1e-5` is a string; every
    other YAML reader (and every user) takes it for a number. And plain YAML keeps the last of
    two equal keys, silently.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = []  # a list, not a set: YAML keys may be unhashable (the parent class refuses those)
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice", key_node.start_mark)
            seen.append(key)
        return super().construct_mapping(node, deep=deep)


# YAML 1.2's floats, exponent without a dot included (the resolver PyYAML ships is 1.1's).
ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][-+]?\d+)?$"),
    list("-+0123456789."),
)


def read_yaml(path: str | Path) -> Any:
    """The parsed YAML file; ConfigError naming the file (and the line, where known) if it cannot be."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line}: not valid UTF-8 (byte {err.start} is {err.object[err.start]:#04x})"
        ) from None
    except OSError as err:
        raise ConfigError(f"cannot read config {path}: {err.strerror}") from None
    try:
        return yaml.load(text, Loader=ConfigLoader)  # noqa: S506 - a SafeLoader
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        position = getattr(err, "position", None)  # a ReaderError (a control character) has no mark
        line = mark.line + 1 if mark else text[:position].count("\n") + 1 if position is not None else None
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', None) or err}") from None


def load_config(path: str | Path | None, overrides: list[str] = (), *, complete: bool = False) -> ExperimentConfig:
    """Read a YAML config (or start from the defaults when path is None) and apply overrides.

    complete=True is for a config.yaml that ExperimentConfig.save wrote (a model directory's): such
    a file names every key, so a missing one means the file was cut short, and defaults must not
    quietly stand in for the run's real settings. A user's config may leave out any key.
    """
    values = read_yaml(path) if path is not None else {}
    if path is not None and not isinstance(values, dict):
        raise ConfigError(f"{path}: a config file must be a mapping of sections, got {type(values).__name__}")
    missing = missing_keys(values) if complete and path is not None else []
    if missing:
        listed = ", ".join(missing[:5]) + (f", ... {len(missing)} keys in all" if len(missing) > 5 else "")
        raise ConfigError(f"{path} is incomplete (missing {listed}): was it cut short?")
    try:
        return config_from_dict(apply_overrides(values, list(overrides)))
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}" if path else str(err)) from None


def parse_duration(text: str | float | None) -> float | None:
    """'20m' -> 1200.0 seconds; accepts combinations of h, m, s, or a plain number of seconds."""
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text)
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    match = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    if not text or not match:
        raise ConfigError(f"train.max_time {text!r} is not a duration like '20m', '1h30m', '90s' or 90 (seconds)")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s
