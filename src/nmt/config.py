"""The experiment configuration: one YAML file with sections data, tokenizer, model, train, decode.

Every field has a default and a one-line comment beside it. Unknown keys are an error
listing the valid ones, and so are values of the wrong type or out of range. Any field can be
overridden with `section.field=value` (`--set train.max_steps=200`), the value parsed
as YAML (so `true`, `0.1`, `null` and `[1, 2]` mean what they look like).
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .model.config import ModelConfig
from .tokenizer import TokenizerConfig


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


@dataclass
class ModelSection:
    """A size preset plus optional overrides of its fields (null keeps the preset's value)."""

    preset: str = "small"  # reference | small | base | big (see nmt.model.config.PRESETS)
    encoder_layers: int | None = None  # override the preset's encoder depth
    decoder_layers: int | None = None  # override the preset's decoder depth
    d_model: int | None = None  # override the model width
    num_heads: int | None = None  # override the number of attention heads
    d_ff: int | None = None  # override the feed-forward width
    dropout: float | None = None  # override the dropout rate
    attention_dropout: float | None = None  # override dropout on attention weights
    activation: str | None = None  # relu | gelu
    norm_position: str | None = None  # post (paper) | pre
    sharing: str | None = None  # none | tgt_out | all (all needs tokenizer.joint)
    positional_base: float | None = None  # base of the sinusoidal positions

    def build(self, src_vocab_size: int, tgt_vocab_size: int, *, joint_vocabulary: bool,
              pad_id: int = 0) -> ModelConfig:
        """The ModelConfig for these vocabularies: preset, then overrides."""
        overrides = {k: v for k, v in dataclasses.asdict(self).items() if k != "preset" and v is not None}
        if not joint_vocabulary:
            if overrides.get("sharing") == "all":
                raise ConfigError("model.sharing=all shares one embedding between the languages: it needs "
                                  "tokenizer.joint=true")
            # Two vocabularies: row i means different pieces on each side, so only target and output tie.
            overrides.setdefault("sharing", "tgt_out")
        return ModelConfig.preset(self.preset, src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                                  pad_id=pad_id, **overrides)


@dataclass
class TrainConfig:
    """The optimisation and the training loop."""

    max_steps: int | None = None  # stop after this many optimizer steps (null: no limit)
    max_epochs: int | None = None  # stop after this many epochs (null: no limit)
    max_time: str | None = None  # wall-clock budget, e.g. "20m", "1h30m", "90s" (null: no limit)
    seed: int = 1  # seeds parameters, dropout and batch order
    batch_tokens: int = 4096  # tokens per batch, padding included (the larger of source and target side)
    accumulate: int = 1  # batches per optimizer step (gradient accumulation)
    threads: int | None = None  # torch intra-op threads on CPU (null: torch's default, one per core)
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    compile: bool = False  # torch.compile the model (fuses element-wise work)
    fsdp: bool = False  # under torchrun: shard parameters, gradients and optimizer state (FSDP2) instead of DDP
    schedule: str = "noam"  # noam (the paper's) | inverse_sqrt (peak_lr, then 1/sqrt decay)
    lr_scale: float = 1.0  # noam: multiplier of d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)
    peak_lr: float = 5e-4  # inverse_sqrt: the learning rate at the end of warm-up
    warmup: int = 4000  # warm-up steps
    adam_betas: list[float] = field(default_factory=lambda: [0.9, 0.98])  # Adam beta1, beta2
    adam_eps: float = 1e-9  # Adam epsilon
    weight_decay: float = 0.0  # decoupled weight decay (AdamW); 0 is plain Adam
    label_smoothing: float = 0.1  # epsilon of label smoothing
    clip_norm: float | None = 1.0  # clip the global gradient norm to this (null: no clipping)
    log_every: int = 50  # steps between metric records
    valid_every: int = 1000  # steps between validations (and checkpoints)
    valid_bleu_sentences: int = 500  # validation sentences translated (greedy) for BLEU; 0 skips BLEU
    best_metric: str = "bleu"  # bleu | loss: which validation metric picks the best checkpoint
    keep_last: int = 5  # checkpoints kept on disk (the best is kept apart)
    patience: int | None = None  # stop after this many validations without improvement (null: never)
    max_bad_steps: int = 10  # consecutive non-finite losses before training stops

    def __post_init__(self) -> None:
        """Refuse settings that would only fail (or quietly misbehave) after training has started."""
        for name in ("batch_tokens", "accumulate", "log_every", "valid_every", "keep_last", "max_bad_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"train.{name} must be at least 1, got {getattr(self, name)}")
        if self.schedule not in ("noam", "inverse_sqrt"):
            raise ValueError(f"train.schedule must be 'noam' or 'inverse_sqrt', not {self.schedule!r}")
        if self.best_metric not in ("bleu", "loss"):
            raise ValueError(f"train.best_metric must be 'bleu' or 'loss', not {self.best_metric!r}")
        if self.best_metric == "bleu" and self.valid_bleu_sentences < 1:
            raise ValueError("train.best_metric=bleu needs train.valid_bleu_sentences >= 1 (or use best_metric=loss)")
        parse_duration(self.max_time)  # a bad duration fails now, not after the data is prepared


@dataclass
class DecodeConfig:
    """Defaults for translation (the CLI and server can override them)."""

    beam: int = 5  # beam size; 1 is greedy search
    length_penalty: float = 0.6  # GNMT alpha in ((5 + len) / 6)^alpha; 0 disables
    max_len_a: float = 1.5  # output length limit: a * source_len + b
    max_len_b: int = 10  # output length limit: a * source_len + b
    batch_tokens: int = 8000  # source tokens per translation batch


@dataclass
class ExperimentConfig:
    data: DataConfig = field(default_factory=DataConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))


class ConfigError(ValueError):
    """A bad configuration value, naming the key (and file) at fault."""


def _check_type(key: str, value: Any, hint: Any) -> Any:
    """Coerce ints to floats where a float is wanted; reject values of the wrong type."""
    if value is None:
        if type(None) in typing.get_args(hint):
            return None
        raise ConfigError(f"{key} may not be null")
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    for option in options:
        origin = typing.get_origin(option) or option
        if option is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if origin is type(None):
            continue
        if isinstance(value, origin) and not (origin is int and isinstance(value, bool)):
            return value
    names = " or ".join(getattr(o, "__name__", str(o)) for o in options)
    raise ConfigError(f"{key} must be {names}, got {value!r}")


def _build_section(name: str, cls: type, values: dict[str, Any]) -> Any:
    if not isinstance(values, dict):
        raise ConfigError(f"section {name!r} must be a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(f'{name}.{k}' for k in unknown)}; valid keys in "
                          f"{name!r}: {', '.join(known)}")
    checked = {k: _check_type(f"{name}.{k}", v, hints[k]) for k, v in values.items()}
    try:
        return cls(**checked)
    except ValueError as err:
        raise ConfigError(f"{name}: {err}") from None


SECTIONS = {f.name: f.type for f in dataclasses.fields(ExperimentConfig)}


def config_from_dict(values: dict[str, Any]) -> ExperimentConfig:
    """Validate a nested dict (as read from YAML) into an ExperimentConfig."""
    values = values or {}
    if not isinstance(values, dict):
        raise ConfigError("a config file must be a mapping of sections")
    unknown = sorted(set(values) - set(SECTIONS))
    if unknown:
        raise ConfigError(f"unknown section(s) {unknown}; valid sections: {', '.join(SECTIONS)}")
    hints = typing.get_type_hints(ExperimentConfig)
    return ExperimentConfig(**{name: _build_section(name, hints[name], values.get(name) or {}) for name in SECTIONS})


def apply_overrides(values: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings to a nested dict (the value parsed as YAML)."""
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) != 2 or not all(parts):
            raise ConfigError(f"override {item!r} must look like section.key=value, e.g. train.max_steps=200")
        section, name = parts
        values.setdefault(section, {})
        if not isinstance(values[section], dict):
            raise ConfigError(f"section {section!r} must be a mapping")
        values[section][name] = yaml.safe_load(raw) if raw.strip() else None
    return values


def load_config(path: str | Path | None, overrides: list[str] = ()) -> ExperimentConfig:
    """Read a YAML config (or start from the defaults when path is None) and apply overrides."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            values = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else str(path)
            raise ConfigError(f"{where}: not valid YAML: {getattr(err, 'problem', err)}") from None
        except OSError as err:
            raise ConfigError(f"cannot read config {path}: {err.strerror}") from None
    try:
        return config_from_dict(apply_overrides(values, list(overrides)))
    except ConfigError as err:
        raise ConfigError(f"{path}: {err}" if path else str(err)) from None


def parse_duration(text: str | None) -> float | None:
    """'20m' -> 1200.0 seconds; accepts combinations of h, m, s, or a plain number of seconds."""
    if text is None:
        return None
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    match = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    if not text or not match:
        raise ConfigError(f"train.max_time {text!r} is not a duration like '20m', '1h30m' or '90s'")
    h, m, s = (float(g) if g else 0.0 for g in match.groups())
    return h * 3600 + m * 60 + s
