"""One training run assembled from the experiment config: the only place that reads all of it.

    train(config, "runs/de_en")            # what `nmt train` calls

`build_trainer` does each job once, in the order the parts depend on each other: join the
process group, prepare the model directory, load the data (training the tokenizer if the
directory has none), build the model for its vocabularies, place it on the ranks (replicas
or shards), then the optimizer and the batch sampler. The Trainer gets only the parts and
its own two config sections.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
from pathlib import Path

import torch

from ..checkpoint import CHECKPOINTS, apply_weights, list_checkpoints, read_weights
from ..config import ConfigError, ExperimentConfig, TrainConfig
from ..data.batching import TokenBatchSampler
from ..data.corpus_alignment import MAX_ALIGNED_CELLS
from ..data.registry import is_pretokenized
from ..files import atomic_write, atomic_write_text, remove_stale_temp_files
from ..model import ModelConfig, Transformer
from ..model_dir import (
    IMPORTED_FROM,
    INIT_FROM,
    MODEL_CONFIG,
    RUN_CONFIG,
    TOKENIZER_FILES,
    WEIGHTS,
    already_holds_run,
    holds_training_run,
    write_text_form,
)
from ..text_form import TextForm
from .datasets import TrainingData, check_input_files, load_training_data, split_files
from .distributed import Distributed, lost_contact, restarts_allowed
from .loss import LossModule
from .multilingual import load_multilingual_data
from .placement import place
from .trainer import Stopped, Trainer

log = logging.getLogger(__name__)


def train(
    config: ExperimentConfig,
    model_dir: str | Path,
    *,
    resume: bool = False,
    progress_bar: bool = True,
    init_from: str | Path | None = None,
) -> Stopped:
    """Train a model into `model_dir` (see Trainer); returns why training stopped.

    init_from: fine-tune: start from that model directory's weights and tokenizer (see `build_trainer`).
    Under torchrun (WORLD_SIZE > 1) this process joins the process group and trains its shard.
    """
    if resume and init_from is not None:
        raise ValueError("init_from starts a new run from a trained model; resume continues a run: not both")
    model_dir = Path(model_dir)
    # config.yaml names the corpus files as found from here, so a later --resume works from anywhere
    config = dataclasses.replace(config, data=config.data.with_absolute_paths())
    dist = Distributed.from_environment(config.train.device)
    try:
        if not resume and continues_after_restart(dist, model_dir):
            resume, init_from = True, None  # the run's own init_from file says where a fine-tuning run began
        if resume and not list_checkpoints(model_dir) and (model_dir / INIT_FROM).is_file():
            # A fine-tuning run stopped before its first checkpoint starts again from its parent, not from scratch.
            init_from = (model_dir / INIT_FROM).read_text(encoding="utf-8").strip()
            log.info("--resume: no checkpoint yet; starting again from the weights of %s", init_from)
        trainer = build_trainer(
            config, model_dir, dist=dist, progress_bar=progress_bar, init_from=init_from, resume=resume
        )
        if resume:
            trainer.resume()
        if dist.is_main:
            config.save(model_dir / RUN_CONFIG)
            write_text_form(model_dir, corpus_text_form(config))
        return trainer.run()
    except Exception as err:
        lost = lost_contact(err, dist.rank, dist.world_size) if dist.active else None
        if lost is not None:
            raise lost from err
        raise
    finally:
        dist.close()


def continues_after_restart(dist: Distributed, model_dir: Path) -> bool:
    """Whether torchrun (--max-restarts) restarted the workers of the run under way in `model_dir`:
    then every rank resumes from its last checkpoint, as `--resume` would (torchrun starts them
    again with the same arguments). A run there that torchrun did not restart is refused, as
    nmt train refuses it where torchrun may not restart (only here can the ranks agree which it is).
    """
    if not (dist.active and restarts_allowed()):
        return False
    restarted = dist.restarted()  # a collective: asked on every rank, whatever model_dir holds
    if not holds_training_run(model_dir):
        return False
    if not restarted:
        raise ValueError(already_holds_run(model_dir))
    log.warning("torchrun restarted the workers: resuming from the last checkpoint in %s", model_dir)
    return True


def corpus_text_form(config: ExperimentConfig) -> TextForm | None:
    """The form of a registry corpus published tokenised and lower-cased (ted_hrlr); None for running text."""
    if config.data.pairs is not None or config.data.corpus is None or not is_pretokenized(config.data.corpus):
        return None
    src_asides, tgt_asides = split_files(config.data, "train").asides
    return TextForm(
        src_lang=config.data.src_lang,
        tgt_lang=config.data.tgt_lang,
        src_annotations=tuple(sorted(src_asides)),
        tgt_annotations=tuple(sorted(tgt_asides)),
    )


def build_trainer(
    config: ExperimentConfig,
    model_dir: str | Path,
    *,
    dist: Distributed,
    data: TrainingData | None = None,
    progress_bar: bool = True,
    init_from: str | Path | None = None,
    resume: bool = False,
) -> Trainer:
    """Every part of a run, built from `config` (data loaded unless given), handed to a Trainer.

    init_from: a trained model directory to fine-tune. Its tokenizer is copied (the vocabulary is
    kept, whatever config.tokenizer says) and its weights are the starting point; the optimizer,
    the schedule (a new warm-up) and the progress start fresh. Its model config must match the
    one `config` builds, but for dropout rates: a difference is refused, naming the fields.
    """
    cfg, model_dir = config.train, Path(model_dir)
    init_from = Path(init_from) if init_from is not None else None
    if cfg.threads:
        torch.set_num_threads(cfg.threads)

    def check_inputs() -> None:  # before anything is written or encoded; on every host, whose files may differ
        check_input_files(config.data)
        if init_from is not None:  # refuse another model
            check_same_model(config, init_from)

    dist.check_everywhere(check_inputs)
    aligning = wants_guided_alignment(config, model_dir, init_from=init_from, resume=resume)
    with dist.main_first():  # rank 0 downloads, trains the tokenizer and fills the caches
        if dist.is_main:
            prepare_model_dir(model_dir)
            if init_from is not None:
                copy_tokenizers(init_from, model_dir)
                atomic_write_text(model_dir / INIT_FROM, f"{init_from.resolve()}\n")
        progress = progress_bar and dist.is_main
        if data is None and config.data.pairs is not None:
            data = load_multilingual_data(config.data, config.tokenizer, model_dir, progress=progress, aligned=aligning)
        elif data is None:
            data = load_training_data(config.data, config.tokenizer, model_dir, progress=progress, aligned=aligning)
    if cfg.guided_alignment is True and data.train_links is None:
        raise ConfigError(
            "train.guided_alignment=true: the training pairs have no word alignments "
            f"(more than {MAX_ALIGNED_CELLS:,} word pairs to align in memory); set it to auto or false"
        )
    torch.manual_seed(cfg.seed)
    if init_from is not None and (init_from / IMPORTED_FROM).is_file():
        model_config = imported_model_config(config, init_from)
    else:
        model_config = config.model.build(
            data.src_tokenizer.vocab_size,
            data.tgt_tokenizer.vocab_size,
            joint_vocabulary=data.src_tokenizer is data.tgt_tokenizer,
        )
    if data.train_links is not None:
        model_config = with_alignment_head(model_config, cfg.alignment_layer, cfg.alignment_shift)
        log.info(
            "guided alignment: head 0 of decoder layer %d learns the word alignments (weight %g)",
            model_config.alignment_layer % model_config.decoder_layers,
            cfg.alignment_weight,
        )
    model = Transformer(model_config).to(dist.device)
    if init_from is not None:  # before the placement: shards are cut from these weights
        load_starting_weights(model, init_from)
    alignment_weight = cfg.alignment_weight if data.train_links is not None else 0.0
    loss_module = LossModule(
        model, cfg.label_smoothing, cfg.r_drop_alpha, compile=cfg.compile, alignment_weight=alignment_weight
    )
    placement = place(model, loss_module, dist, fsdp=cfg.fsdp)
    if dist.active:  # same initial weights everywhere (seeded, and DDP broadcasts rank 0's); own dropout
        torch.manual_seed(cfg.seed + 1000 * dist.rank)
    optimizer = build_optimizer(model, cfg, fused=placement.fused_optimizer and dist.device.type in ("cpu", "cuda"))
    sampler = TokenBatchSampler(
        data.train.src_lengths(),
        data.train.tgt_lengths(),
        max_tokens=batch_tokens_per_rank(cfg, dist),
        seed=cfg.seed,
        num_shards=dist.world_size,
        shard_index=dist.rank,
        groups=data.train_groups,
        temperature=config.data.temperature,
    )
    return Trainer(
        cfg,
        config.decode,
        model_dir,
        data=data,
        placement=placement,
        optimizer=optimizer,
        sampler=sampler,
        progress_bar=progress_bar,
    )


def wants_guided_alignment(config: ExperimentConfig, model_dir: Path, *, init_from: Path | None, resume: bool) -> bool:
    """Whether this run trains an alignment head (train.guided_alignment): auto is on unless one of the
    reasons below holds, and then says which in the log; on with such a reason is a ConfigError."""
    setting = config.train.guided_alignment
    if setting is False:
        return False
    reason = None
    if config.data.bpe_dropout > 0:
        reason = "BPE-dropout segments the training pairs anew each epoch, so their piece links would not hold"
    elif init_from is not None and (init_from / IMPORTED_FROM).is_file():
        reason = f"{init_from} is an imported model: which of its heads aligns was decided where it was trained"
    elif resume and (model_dir / MODEL_CONFIG).is_file():
        if ModelConfig.load(model_dir / MODEL_CONFIG).alignment_heads == 0:
            reason = f"the run in {model_dir} started without it, and a resumed run continues as it began"
    if reason is None:
        return True
    if setting is True:
        raise ConfigError(f"train.guided_alignment=true: {reason}; set it to auto or false")
    log.info("guided alignment off: %s", reason)
    return False


def with_alignment_head(config: ModelConfig, layer: int, shift: bool = False) -> ModelConfig:
    """`config` with head 0 of decoder layer `layer` as its alignment head (a one-layer decoder: its
    only layer, whatever `layer` says), read at the step after each word with `shift`; a layer the
    decoder lacks is a ConfigError."""
    if config.decoder_layers == 1:
        layer = 0
    if not -config.decoder_layers <= layer < config.decoder_layers:
        raise ConfigError(f"train.alignment_layer={layer}: the decoder has {config.decoder_layers} layers")
    return dataclasses.replace(config, alignment_layer=layer, alignment_heads=1, alignment_shift=shift)


def batch_tokens_per_rank(cfg: TrainConfig, dist: Distributed) -> int:
    """nmt train's own workers share the config's batch (launch.py); torchrun's ranks each take a whole one."""
    return max(1, cfg.batch_tokens // dist.world_size) if dist.shares_batch else cfg.batch_tokens


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig, *, fused: bool) -> torch.optim.Optimizer:
    """Adam (AdamW with weight decay) at lr 0: the Trainer sets each step's rate from the schedule."""
    optimizer_cls = torch.optim.AdamW if cfg.weight_decay > 0 else torch.optim.Adam
    return optimizer_cls(
        model.parameters(),
        lr=0.0,
        betas=tuple(cfg.adam_betas),
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
        fused=fused,
    )


def prepare_model_dir(model_dir: Path) -> None:
    """Create the directory, and delete temporary files left by writers killed mid-write."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for folder in (model_dir, model_dir / CHECKPOINTS):
        for path in remove_stale_temp_files(folder):
            log.info("removed %s, left by a process killed while writing it", path)


# A fine-tuning run may change how much it regularises; anything else changes the function it computes.
DROPOUT_RATES = frozenset({"dropout", "attention_dropout", "activation_dropout"})
# Which head aligns is read by alignments, not by translation: a fine-tuned model may gain one.
MAY_DIFFER_WHEN_FINE_TUNING = DROPOUT_RATES | {"alignment_layer", "alignment_heads", "alignment_shift"}


def copy_tokenizers(init_from: Path, model_dir: Path) -> None:
    """The starting model's tokenizer files into `model_dir`; a different tokenizer already there is refused."""
    found = [name for name in TOKENIZER_FILES if (init_from / name).is_file()]
    if not found:
        raise FileNotFoundError(f"--init-from {init_from}: no tokenizer there ({' or '.join(TOKENIZER_FILES[:2])})")
    for name in TOKENIZER_FILES:
        source, dest = init_from / name, model_dir / name
        if dest.exists() and (not source.exists() or dest.read_bytes() != source.read_bytes()):
            raise ValueError(f"{dest} differs from the tokenizer of {init_from}: fine-tune into a new directory")
    for name in [*found, IMPORTED_FROM]:  # an imported model's origin (its languages) goes with it
        if (init_from / name).is_file():
            atomic_write(model_dir / name, lambda tmp, name=name: shutil.copyfile(init_from / name, tmp))


def imported_model_config(config: ExperimentConfig, init_from: Path) -> ModelConfig:
    """An imported model (Marian) is fine-tuned as it is: its own model.json, with the config's dropout
    rates where the config sets them (its preset and sizes describe nmt's own models, not this one)."""
    saved = ModelConfig.load(init_from / MODEL_CONFIG)
    rates = {name: getattr(config.model, name) for name in DROPOUT_RATES}
    return dataclasses.replace(saved, **{name: value for name, value in rates.items() if value is not None})


def check_same_model(config: ExperimentConfig, init_from: Path) -> None:
    """Refuse a config whose model section builds another model than `init_from`'s, naming the fields."""
    if (init_from / IMPORTED_FROM).is_file():  # the model is the imported one (imported_model_config)
        return
    saved = ModelConfig.load(init_from / MODEL_CONFIG)
    joint = (init_from / TOKENIZER_FILES[0]).is_file()  # the parent's vocabulary sizes and sharing
    built = config.model.build(saved.src_vocab_size, saved.tgt_vocab_size, joint_vocabulary=joint)
    _refuse_differences(saved, built, init_from)


def load_starting_weights(model: Transformer, init_from: Path) -> None:
    """`init_from`'s weights (model.safetensors) into `model`, once its config is known to match."""
    _refuse_differences(ModelConfig.load(init_from / MODEL_CONFIG), model.config, init_from)
    weights = init_from / WEIGHTS
    apply_weights(model, read_weights(weights), weights)
    log.info("starting from the weights of %s", weights)


def _refuse_differences(saved: ModelConfig, built: ModelConfig, init_from: Path) -> None:
    differ = [
        f"{f.name} ({getattr(saved, f.name)} there, {getattr(built, f.name)} here)"
        for f in dataclasses.fields(ModelConfig)
        if f.name not in MAY_DIFFER_WHEN_FINE_TUNING and getattr(saved, f.name) != getattr(built, f.name)
    ]
    if differ:
        raise ValueError(
            f"--init-from {init_from}: the config builds a different model: {'; '.join(differ)} (set model.* to match)"
        )
