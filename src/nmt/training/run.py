"""One training run assembled from the experiment config: the only place that reads all of it.

    train(config, "runs/de_en")            # what `nmt train` calls

`build_trainer` does each job once, in the order the parts depend on each other: join the
process group, prepare the model directory, load the data (training the tokenizer if the
directory has none), build the model for its vocabularies, place it on the ranks (replicas
or shards), then the optimizer and the batch sampler. The Trainer gets only the parts and
its own two config sections.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from ..checkpoint import CHECKPOINTS
from ..config import ExperimentConfig, TrainConfig
from ..data.batching import TokenBatchSampler
from ..files import remove_stale_temp_files
from ..model import Transformer
from ..model_dir import RUN_CONFIG
from .datasets import TrainingData, load_training_data
from .distributed import Distributed
from .loss import LossModule
from .placement import place
from .trainer import Trainer

log = logging.getLogger(__name__)


def train(config: ExperimentConfig, model_dir: str | Path, *, resume: bool = False, progress_bar: bool = True) -> str:
    """Train a model into `model_dir` (see Trainer); returns why training stopped.

    Under torchrun (WORLD_SIZE > 1) this process joins the process group and trains its shard.
    """
    model_dir = Path(model_dir)
    dist = Distributed.from_environment(config.train.device)
    try:
        trainer = build_trainer(config, model_dir, dist=dist, progress_bar=progress_bar)
        if resume:
            trainer.resume()
        if dist.is_main:
            config.save(model_dir / RUN_CONFIG)
        return trainer.run()
    finally:
        dist.close()


def build_trainer(config: ExperimentConfig, model_dir: str | Path, *, dist: Distributed,
                  data: TrainingData | None = None, progress_bar: bool = True) -> Trainer:
    """Every part of a run, built from `config` (data loaded unless given), handed to a Trainer."""
    cfg, model_dir = config.train, Path(model_dir)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    with dist.main_first():  # rank 0 downloads, trains the tokenizer and fills the caches
        if dist.is_main:
            prepare_model_dir(model_dir)
        data = data or load_training_data(config.data, config.tokenizer, model_dir)
    torch.manual_seed(cfg.seed)
    model_config = config.model.build(data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size,
                                      joint_vocabulary=data.src_tokenizer is data.tgt_tokenizer)
    model = Transformer(model_config).to(dist.device)
    placement = place(model, LossModule(model, cfg.label_smoothing, cfg.r_drop_alpha), dist, fsdp=cfg.fsdp)
    if dist.active:  # same initial weights everywhere (seeded, and DDP broadcasts rank 0's); own dropout
        torch.manual_seed(cfg.seed + 1000 * dist.rank)
    if cfg.compile:  # the stacks, not the loss: dropping padding rows has a data-dependent shape
        model.encode = torch.compile(model.encode, dynamic=True)
        model.decode = torch.compile(model.decode, dynamic=True)
    optimizer = build_optimizer(model, cfg, fused=placement.fused_optimizer and dist.device.type in ("cpu", "cuda"))
    sampler = TokenBatchSampler(data.train.src_lengths(), data.train.tgt_lengths(), max_tokens=cfg.batch_tokens,
                                seed=cfg.seed, num_shards=dist.world_size, shard_index=dist.rank)
    return Trainer(cfg, config.decode, model_dir, data=data, placement=placement, optimizer=optimizer,
                   sampler=sampler, progress_bar=progress_bar)


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig, *, fused: bool) -> torch.optim.Optimizer:
    """Adam (AdamW with weight decay) at lr 0: the Trainer sets each step's rate from the schedule."""
    optimizer_cls = torch.optim.AdamW if cfg.weight_decay > 0 else torch.optim.Adam
    return optimizer_cls(model.parameters(), lr=0.0, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps,
                         weight_decay=cfg.weight_decay, fused=fused)


def prepare_model_dir(model_dir: Path) -> None:
    """Create the directory, and delete temporary files left by writers killed mid-write."""
    model_dir.mkdir(parents=True, exist_ok=True)
    for folder in (model_dir, model_dir / CHECKPOINTS):
        for path in remove_stale_temp_files(folder):
            log.info("removed %s, left by a process killed while writing it", path)
