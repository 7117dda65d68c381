"""The training loop: optimizer steps over token-budget batches, validation, checkpoints, resume.

    for each optimizer step:
        take `accumulate` batches; normaliser = their real target tokens (global batch)
        forward, label-smoothed loss / normaliser, backward      (per batch)
        clip the gradient norm; skip the step if loss or gradient is not finite
        set the learning rate from the schedule; Adam step
        every log_every steps: a metrics record; every valid_every: validate + checkpoint
    stop at max_steps, max_epochs, max_time, early stopping or SIGINT/SIGTERM (saving first)
"""

from __future__ import annotations

import logging
import math
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..checkpoint import latest_checkpoint, load_state, load_weights, save_checkpoint, save_model_dir
from ..config import ExperimentConfig, parse_duration
from ..data.batching import Batch, TokenBatchSampler, iterate_batches
from ..model import Transformer
from .datasets import TrainingData, load_training_data
from .loss import sequence_loss
from .metrics import MetricsLog
from .schedule import inverse_sqrt_lr, noam_lr
from .validation import validate

log = logging.getLogger(__name__)


class TrainingDiverged(RuntimeError):
    """Too many consecutive non-finite losses; the last good checkpoint is left intact."""


@dataclass
class Progress:
    """Where training stands: saved with every checkpoint, restored on resume."""

    step: int = 0  # optimizer steps taken
    epoch: int = 0  # current epoch (0-based)
    batch_in_epoch: int = 0  # next batch of the epoch to train on
    elapsed: float = 0.0  # training seconds, summed over resumed runs
    best: float | None = None  # best validation metric so far
    bad_validations: int = 0  # validations since the best one (early stopping)
    skipped_steps: int = 0  # steps skipped for a non-finite loss or gradient


def select_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"train.device={name} but CUDA is not available on this machine")
    return device


@contextmanager
def stop_on_signals():
    """SIGINT / SIGTERM set a flag (checked between steps) instead of killing the process mid-write."""
    requested = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield requested
        return

    def handler(signum, frame):
        log.warning("received %s: saving a checkpoint and stopping", signal.Signals(signum).name)
        requested.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield requested
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


class Trainer:
    """Owns the model, optimizer and progress of one training run (see module docstring)."""

    def __init__(self, config: ExperimentConfig, model_dir: str | Path, data: TrainingData | None = None,
                 *, progress_bar: bool = True):
        self.config, self.model_dir = config, Path(model_dir)
        self.model_dir.mkdir(parents=True, exist_ok=True)
        cfg = config.train
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.device = select_device(cfg.device)
        self.data = data or load_training_data(config.data, config.tokenizer, self.model_dir)
        torch.manual_seed(cfg.seed)
        model_config = config.model.build(self.data.src_tokenizer.vocab_size, self.data.tgt_tokenizer.vocab_size)
        self.model = Transformer(model_config).to(self.device)
        if cfg.compile:  # the stacks, not the loss: dropping padding rows has a data-dependent shape
            self.model.encode = torch.compile(self.model.encode, dynamic=True)
            self.model.decode = torch.compile(self.model.decode, dynamic=True)
        fused = self.device.type in ("cpu", "cuda")  # one kernel for the whole Adam update (2x faster on CPU too)
        optimizer_cls = torch.optim.AdamW if cfg.weight_decay > 0 else torch.optim.Adam
        self.optimizer = optimizer_cls(self.model.parameters(), lr=0.0, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps,
                                       weight_decay=cfg.weight_decay, fused=fused)
        self.sampler = TokenBatchSampler(self.data.train.src_lengths(), self.data.train.tgt_lengths(),
                                         max_tokens=cfg.batch_tokens, seed=cfg.seed)
        self.progress = Progress()
        self.metrics = MetricsLog(self.model_dir)
        self.progress_bar = progress_bar
        self.max_time = parse_duration(cfg.max_time)

    # --- the schedule -----------------------------------------------------------------
    def learning_rate(self, step: int) -> float:
        cfg = self.config.train
        if cfg.schedule == "noam":
            return noam_lr(step, d_model=self.model.config.d_model, warmup=cfg.warmup, scale=cfg.lr_scale)
        if cfg.schedule == "inverse_sqrt":
            return inverse_sqrt_lr(step, peak_lr=cfg.peak_lr, warmup=cfg.warmup)
        raise ValueError(f"train.schedule must be 'noam' or 'inverse_sqrt', not {cfg.schedule!r}")

    # --- one optimizer step -------------------------------------------------------------
    def train_step(self, batches: list[Batch]) -> dict[str, float] | None:
        """Forward/backward over the batches of one step; None when the step was skipped."""
        cfg = self.config.train
        normaliser = sum(b.num_tgt_tokens for b in batches)  # real tokens of the whole (global) batch
        loss_sum = nll_sum = correct = 0.0
        autocast = torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda")
        for batch in batches:
            batch = batch.to(self.device, non_blocking=True)
            with autocast:
                out = sequence_loss(self.model, batch.src, batch.tgt_in, batch.tgt_out, normaliser=normaliser,
                                    smoothing=cfg.label_smoothing)
            out.loss.backward()
            loss_sum += out.loss.item()
            nll_sum += out.nll_sum.item()
            correct += out.correct.item()
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm or math.inf)
        if not (math.isfinite(loss_sum) and math.isfinite(grad_norm.item())):
            self.optimizer.zero_grad(set_to_none=True)
            self.progress.skipped_steps += 1
            return None
        lr = self.learning_rate(self.progress.step + 1)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.progress.step += 1
        return {"loss": loss_sum, "nll": nll_sum / normaliser, "acc": correct / normaliser, "lr": lr,
                "tokens": normaliser, "grad_norm": grad_norm.item()}

    # --- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"progress": asdict(self.progress), "optimizer": self.optimizer.state_dict(),
                "rng_cpu": torch.get_rng_state(),
                "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}

    def save(self) -> None:
        save_checkpoint(self.model_dir, self.progress.step, self.model, self.state_dict(), self.config.train.keep_last)

    def resume(self) -> bool:
        """Load the latest checkpoint, if any; True when training continues from it."""
        found = latest_checkpoint(self.model_dir)
        if found is None:
            return False
        weights, state_path = found
        load_weights(self.model, weights)
        state = load_state(state_path)
        self.optimizer.load_state_dict(state["optimizer"])
        self.progress = Progress(**state["progress"])
        torch.set_rng_state(state["rng_cpu"])
        if state["rng_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng_cuda"])
        self.metrics.truncate_after(self.progress.step)
        log.info("resumed from %s at step %d", weights.name, self.progress.step)
        return True

    # --- validation -----------------------------------------------------------------------
    def validate_and_keep_best(self) -> bool:
        """Validate, write the record, save the best weights as model.safetensors. True if improved."""
        cfg = self.config.train
        result = validate(self.model, self.data, batch_tokens=cfg.batch_tokens, device=self.device,
                          bleu_sentences=cfg.valid_bleu_sentences, decode=self.config.decode)
        self.metrics.write("valid", self.progress.step, **result)
        metric = cfg.best_metric
        if metric not in result:
            raise ValueError(f"train.best_metric={metric!r} is not measured; use 'loss' or set valid_bleu_sentences")
        value = result[metric] if metric == "bleu" else -result[metric]  # higher is better
        improved = self.progress.best is None or value > self.progress.best
        if improved:
            self.progress.best, self.progress.bad_validations = value, 0
            save_model_dir(self.model, self.model_dir)
        else:
            self.progress.bad_validations += 1
        log.info("step %d validation: %s%s", self.progress.step,
                 ", ".join(f"{k} {v:.4g}" for k, v in result.items()), " (best)" if improved else "")
        return improved

    # --- the loop ---------------------------------------------------------------------------
    def should_stop(self) -> str | None:
        cfg, p = self.config.train, self.progress
        if cfg.max_steps is not None and p.step >= cfg.max_steps:
            return f"reached train.max_steps={cfg.max_steps}"
        if cfg.max_epochs is not None and p.epoch >= cfg.max_epochs:
            return f"reached train.max_epochs={cfg.max_epochs}"
        if self.max_time is not None and p.elapsed >= self.max_time:
            return f"reached train.max_time={cfg.max_time}"
        if cfg.patience is not None and p.bad_validations >= cfg.patience:
            return f"no improvement in {cfg.patience} validations (train.patience)"
        return None

    def batches(self):
        """(index_in_epoch, Batch) forever from the saved data position, advancing epochs."""
        while True:
            p = self.progress
            yield from iterate_batches(self.data.train.src, self.data.train.tgt, self.sampler, epoch=p.epoch,
                                       start=p.batch_in_epoch, pin_memory=self.device.type == "cuda")
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            if self.config.train.max_epochs is not None and p.epoch >= self.config.train.max_epochs:
                return

    def run(self) -> str:
        """Train until a stop condition; returns why training stopped."""
        cfg, p = self.config.train, self.progress
        self.model.train()
        bar = tqdm(total=cfg.max_steps, initial=p.step, unit="step", dynamic_ncols=True,
                   disable=not self.progress_bar or None, desc="train")
        window = {"loss": 0.0, "nll": 0.0, "acc": 0.0, "tokens": 0, "steps": 0, "wait": 0.0, "time": 0.0}
        consecutive_bad, reason, stream = 0, None, self.batches()
        # The budget is wall-clock time, validation and checkpoints included.
        clock_start, elapsed_before = time.perf_counter(), p.elapsed
        with stop_on_signals() as stop_requested:
            while (reason := self.should_stop()) is None:
                p.elapsed = elapsed_before + time.perf_counter() - clock_start
                if (reason := self.should_stop()) is not None:
                    break
                started = time.perf_counter()
                pieces = []
                for _ in range(cfg.accumulate):
                    item = next(stream, None)
                    if item is None:
                        break
                    p.batch_in_epoch = item[0] + 1
                    pieces.append(item[1])
                waited = time.perf_counter() - started
                if not pieces:
                    reason = f"reached train.max_epochs={cfg.max_epochs}"
                    break
                stats = self.train_step(pieces)
                elapsed = time.perf_counter() - started
                if stats is None:
                    consecutive_bad += 1
                    log.warning("step %d: non-finite loss or gradient, step skipped", p.step + 1)
                    self.metrics.write("skipped", p.step, consecutive=consecutive_bad)
                    if consecutive_bad >= cfg.max_bad_steps:
                        raise TrainingDiverged(
                            f"{consecutive_bad} consecutive steps had a non-finite loss or gradient; stopped. "
                            f"The last good checkpoint in {self.model_dir / 'checkpoints'} is intact: "
                            "lower the learning rate (train.lr_scale / train.peak_lr) and resume.")
                    continue
                consecutive_bad = 0
                for key in ("loss", "nll", "acc"):
                    window[key] += stats[key] * stats["tokens"]
                window["tokens"] += stats["tokens"]
                window["steps"] += 1
                window["wait"] += waited
                window["time"] += elapsed
                bar.update(1)
                if p.step % cfg.log_every == 0 or p.step == 1:
                    self.log_window(window, stats["lr"], bar)
                    window = dict.fromkeys(window, 0.0)
                if p.step % cfg.valid_every == 0:
                    self.validate_and_keep_best()
                    self.save()
                    self.model.train()
                if stop_requested.is_set():
                    reason = "stopped by signal"
                    break
            stream.close()
            bar.close()
            p.elapsed = elapsed_before + time.perf_counter() - clock_start
            self.finish(validate=not stop_requested.is_set())
        self.metrics.close()
        log.info("training stopped: %s", reason)
        return reason

    def log_window(self, window: dict, lr: float, bar) -> None:
        tokens = max(window["tokens"], 1)
        record = {"loss": window["loss"] / tokens, "nll": window["nll"] / tokens, "acc": window["acc"] / tokens,
                  "ppl": math.exp(min(window["nll"] / tokens, 50)), "lr": lr,
                  "tokens_per_s": window["tokens"] / max(window["time"], 1e-9),
                  "data_wait_frac": window["wait"] / max(window["time"], 1e-9),
                  "epoch": self.progress.epoch, "elapsed": self.progress.elapsed}
        self.metrics.write("train", self.progress.step, **record)
        postfix = {"loss": f"{record['loss']:.3f}", "lr": f"{lr:.2e}", "tok/s": f"{record['tokens_per_s']:.0f}"}
        if self.max_time is not None:
            postfix["left"] = f"{max(self.max_time - self.progress.elapsed, 0) / 60:.1f}m"
        bar.set_postfix(postfix, refresh=False)

    def finish(self, validate: bool) -> None:
        """Final validation (unless just done, or a signal asks to be quick) and checkpoint."""
        if self.progress.step == 0 or self.progress.step % self.config.train.valid_every == 0:
            return  # nothing trained, or validated and saved at this very step
        if validate:
            self.validate_and_keep_best()
        self.save()


def train(config: ExperimentConfig, model_dir: str | Path, *, resume: bool = False, progress_bar: bool = True) -> str:
    """Train a model into `model_dir` (see Trainer); returns why training stopped."""
    model_dir = Path(model_dir)
    trainer = Trainer(config, model_dir, progress_bar=progress_bar)
    if resume:
        trainer.resume()
    config.save(model_dir / "config.yaml")
    return trainer.run()
