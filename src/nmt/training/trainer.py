"""The training loop: optimizer steps over token-budget batches, validation, checkpoints, resume.

    for each optimizer step:
        take `accumulate` micro-batches; normaliser = their real target tokens (global batch)
        forward, label-smoothed loss / normaliser, backward      (per micro-batch)
        clip the gradient norm; skip the step if loss or gradient is not finite
        set the learning rate from the schedule; Adam step
        every log_every steps: a metrics record; every valid_every: validate + checkpoint
    stop at max_steps, max_epochs, max_time, early stopping or SIGINT/SIGTERM (saving first)

Under torchrun every rank runs this loop on its own shard of the batches (see
distributed.py); stop decisions are agreed by all ranks, and only rank 0 validates and
writes checkpoints, metrics and the progress bar.
"""

from __future__ import annotations

import logging
import math
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from ..checkpoint import CHECKPOINTS, load_newest_checkpoint, prune_checkpoints, save_checkpoint, save_model_dir
from ..config import DecodeConfig, TrainConfig, parse_duration
from ..data.batching import Batch, TokenBatchSampler, iterate_batches
from ..model import Transformer
from .datasets import TrainingData
from .guided_alignment import batch_links
from .metrics import MetricsLog
from .placement import Replicas, Shards
from .precision import training_precision
from .schedule import inverse_sqrt_lr, noam_lr
from .signals import stop_on_signals
from .slowdown import SlowdownWatch
from .validation import validate

log = logging.getLogger(__name__)


class Stopped(str):
    """Why training stopped, as text. `signum` is set when SIGINT / SIGTERM asked it to: the run is
    saved but not finished (resume it), which callers must not take for a completed run."""

    signum: int | None

    def __new__(cls, reason: str, signum: int | None = None) -> Stopped:
        stopped = super().__new__(cls, reason)
        stopped.signum = signum
        return stopped


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


class Trainer:
    """Runs the training loop over parts built elsewhere (see run.py's `build_trainer`).

    train, decode: the experiment's sections this loop reads; model_dir: where checkpoints,
    metrics and the best weights go; data: encoded splits and tokenizers; placement: the model
    as the processes hold it (replicas or shards, with the module whose loss the step minimises);
    optimizer: over the model's parameters, built after the placement; sampler: the training
    batches of this rank. A Trainer builds nothing, so a test can hand it a tiny model and data.
    """

    def __init__(
        self,
        train: TrainConfig,
        decode: DecodeConfig,
        model_dir: str | Path,
        *,
        data: TrainingData,
        placement: Replicas | Shards,
        optimizer: torch.optim.Optimizer,
        sampler: TokenBatchSampler,
        progress_bar: bool = True,
    ):
        self.train_config, self.decode_config, self.model_dir = train, decode, Path(model_dir)
        self.data, self.placement, self.optimizer, self.sampler = data, placement, optimizer, sampler
        self.model, self.dist = placement.model, placement.dist
        self.device = self.dist.device
        self.progress = Progress()
        self.saved_step = 0  # the step of the newest checkpoint on disk (0: none)
        self.metrics = MetricsLog(self.model_dir, enabled=self.dist.is_main)
        self.slowdown = SlowdownWatch()  # one log line when another process takes the cores
        self.progress_bar = progress_bar and self.dist.is_main
        self.max_time = parse_duration(train.max_time)
        self.precision = training_precision(train.precision, self.device)
        if self.dist.is_main:
            log.info("precision: %s", self.precision.reason)

    # --- the schedule -----------------------------------------------------------------
    def learning_rate(self, step: int) -> float:
        cfg = self.train_config
        if cfg.schedule == "noam":  # TrainConfig allows only these two
            return noam_lr(step, d_model=self.model.config.d_model, warmup=cfg.warmup, scale=cfg.lr_scale)
        return inverse_sqrt_lr(step, peak_lr=cfg.peak_lr, warmup=cfg.warmup)

    # --- one optimizer step -------------------------------------------------------------
    def train_step(self, micro_batches: list[Batch]) -> dict[str, float] | None:
        """Forward/backward over the micro-batches of one step; None when the step was skipped."""
        cfg = self.train_config
        # Real target tokens of the global batch: every rank's accumulation steps together.
        (normaliser,) = self.dist.sum([float(sum(b.num_tgt_tokens for b in micro_batches))])
        # DDP averages gradients over ranks; scaling by world_size turns that mean into the global sum.
        local_normaliser = normaliser / self.dist.world_size
        totals = torch.zeros(4, dtype=torch.float64)  # loss, nll, correct, alignment loss (summed, then per token)
        autocast = self.precision.autocast(self.device)
        for i, batch in enumerate(micro_batches):
            links = self.links_of(batch)
            batch = batch.to(self.device, non_blocking=True)
            last = i == len(micro_batches) - 1  # DDP synchronises gradients on the last micro-batch only
            with self.placement.gradient_sync(enabled=last):
                with autocast:
                    loss, nll, correct, aligned = self.placement.step_module(
                        batch.src, batch.tgt_in, batch.tgt_out, local_normaliser, links
                    )
                loss.backward()
            totals += torch.stack([loss.detach() / self.dist.world_size, nll, correct, aligned]).double().cpu()
        loss_sum, nll_sum, correct, aligned_sum = self.dist.sum(totals.tolist())
        grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.clip_norm or math.inf)
        if hasattr(grad_norm, "full_tensor"):  # FSDP: a distributed tensor holding the global norm
            grad_norm = grad_norm.full_tensor()
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
        return {
            "loss": loss_sum,
            "nll": nll_sum / normaliser,
            "acc": correct / normaliser,
            "lr": lr,
            "tokens": normaliser,
            "grad_norm": grad_norm.item(),
            "align": aligned_sum / self.dist.world_size,
        }

    def links_of(self, batch: Batch) -> torch.Tensor | None:
        """The batch's word-alignment links for guided alignment (None when the run has none)."""
        if self.data.train_links is None:
            return None
        shift = self.model.config.alignment_shift
        links = batch_links(self.data.train_links, batch.indices.numpy(), shift=shift)
        return links.to(self.device, non_blocking=True)

    # --- checkpoints --------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Optimizer, progress and every rank's RNG state (so dropout noise resumes exactly too).

        A collective: every rank calls it. Under FSDP the optimizer state is gathered whole
        and keyed by parameter name, so the files do not depend on the number of processes.
        """
        rng = self.dist.gather(
            (torch.get_rng_state(), torch.cuda.get_rng_state(self.device) if self.device.type == "cuda" else None)
        )
        return {
            "progress": asdict(self.progress),
            "optimizer": self.placement.optimizer_state(self.optimizer),
            "fsdp": self.placement.sharded,
            "rng_cpu": [cpu for cpu, _ in rng],
            "rng_cuda": [cuda for _, cuda in rng if cuda is not None],
        }

    def save(self) -> None:
        state = self.state_dict()  # collectives: every rank takes part
        model = self.placement.whole_model()
        if self.dist.is_main:
            cfg = self.train_config
            step = self.progress.step
            save_checkpoint(
                self.model_dir, step, model, state, cfg.keep_last, keep_best=cfg.keep_best, metric=cfg.best_metric
            )
        self.saved_step = self.progress.step
        self.dist.barrier()

    def resume(self) -> bool:
        """Load the newest readable checkpoint, if any; True when training continues from it."""
        found = load_newest_checkpoint(self.model_dir)
        if found is None:
            log.warning("--resume: no checkpoint in %s; starting from scratch", self.model_dir / CHECKPOINTS)
            self.metrics.truncate_after(0)  # records of the run that saved nothing
            return False
        name, weights, state = found
        source = self.model_dir / CHECKPOINTS / name
        try:  # check the whole state before any of it is applied
            progress = Progress(**state["progress"])
            rng_cpu, rng_cuda, optimizer = state["rng_cpu"], state["rng_cuda"], state["optimizer"]
        except (KeyError, TypeError) as err:
            raise ValueError(f"{source}.state.pt: not a training state of this version ({err})") from None
        if state.get("fsdp", False) != self.placement.sharded:
            raise ValueError(
                f"{source}.state.pt was written {'with' if state.get('fsdp') else 'without'} "
                "train.fsdp; resume it the same way"
            )
        self.placement.load(weights, self.optimizer, optimizer, f"{source}.safetensors")
        self.progress, self.saved_step = progress, progress.step
        if len(rng_cpu) != self.dist.world_size:
            log.warning(
                "checkpoint was written by %d processes, now %d: dropout noise will differ from an uninterrupted run",
                len(rng_cpu),
                self.dist.world_size,
            )
        rank = min(self.dist.rank, len(rng_cpu) - 1)
        torch.set_rng_state(rng_cpu[rank])
        if self.device.type == "cuda" and rng_cuda:
            torch.cuda.set_rng_state(rng_cuda[min(rank, len(rng_cuda) - 1)], self.device)
        self.metrics.truncate_after(self.progress.step)
        if self.dist.is_main:
            # A kill between a checkpoint's writes and the pruning of the ones before it leaves one
            # too many; a run resumed at its last step saves nothing more, so prune here too.
            cfg = self.train_config
            prune_checkpoints(
                self.model_dir, cfg.keep_last, current=progress.step, keep_best=cfg.keep_best, metric=cfg.best_metric
            )
        log.info("resumed from %s at step %d", name, self.progress.step)
        return True

    # --- validation -----------------------------------------------------------------------
    def validate_and_keep_best(self) -> bool:
        """Validate (rank 0; the others wait), write the record, save the best weights as model.safetensors."""
        model = self.placement.whole_model()  # a collective under FSDP
        if not self.dist.is_main:
            self.dist.barrier()
            return False
        threads = torch.get_num_threads()
        if self.dist.validation_threads:  # the other workers wait in the barrier: their cores are free
            torch.set_num_threads(self.dist.validation_threads)
        try:
            improved = self._validate(model)
        finally:
            torch.set_num_threads(threads)
        self.dist.barrier()
        return improved

    def _validate(self, model: Transformer) -> bool:
        cfg = self.train_config
        result = validate(
            model,
            self.data,
            batch_tokens=cfg.batch_tokens,
            device=self.device,
            bleu_sentences=cfg.valid_bleu_sentences,
            decode=self.decode_config,
        )
        self.metrics.write("valid", self.progress.step, **result)
        metric = self._best_metric()
        value = result[metric] if metric.startswith("bleu") else -result[metric]  # higher is better
        improved = self.progress.best is None or value > self.progress.best
        if improved:
            self.progress.best, self.progress.bad_validations = value, 0
            save_model_dir(model, self.model_dir)
        else:
            self.progress.bad_validations += 1
        log.info(
            "step %d validation: %s%s",
            self.progress.step,
            ", ".join(f"{k} {v:.4g}" for k, v in result.items()),
            f" (best by {self._best_metric_name()})" if improved else "",
        )
        return improved

    def _best_metric(self) -> str:
        """The validation record's key that picks the best checkpoint."""
        cfg = self.train_config
        if cfg.best_metric == "bleu" and cfg.best_direction is not None and len(self.data.validation_sets()) > 1:
            return f"bleu_{cfg.best_direction}"
        return cfg.best_metric  # "bleu" (several directions: their mean) or "loss" (over all their tokens)

    def _best_metric_name(self) -> str:
        """What picked the best checkpoint, as the log says it."""
        metric, directions = self._best_metric(), len(self.data.validation_sets())
        if directions > 1 and metric == "bleu":
            return f"bleu, the mean of {directions} directions"
        if directions > 1 and metric == "loss":
            return f"loss, over all {directions} directions' tokens"
        return metric

    # --- the loop ---------------------------------------------------------------------------
    def should_stop(self) -> str | None:
        cfg, p = self.train_config, self.progress
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
            train, sampler = self.data.train_for_epoch(), self.sampler
            # With BPE-dropout a single process plans the epoch's batches on its new lengths (planned on
            # the deterministic ones, padding grew from 3% to 26% of a batch at p=0.1). Under torchrun
            # every rank samples its own segmentation, yet all must take the same number of steps: they
            # keep the deterministic plan.
            if train is not self.data.train and not self.dist.active:
                sampler = self.sampler.for_lengths(train.src_lengths(), train.tgt_lengths())
            yield from iterate_batches(
                train.src,
                train.tgt,
                sampler,
                epoch=p.epoch,
                start=p.batch_in_epoch,
                pad_id=self.model.config.pad_id,  # an imported model's own (Marian's is its last id)
                pin_memory=self.device.type == "cuda",
            )
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            if self.train_config.max_epochs is not None and p.epoch >= self.train_config.max_epochs:
                return

    def next_micro_batches(self, stream) -> list[Batch]:
        """The `accumulate` micro-batches of the next step (fewer, or none, when the last epoch ends)."""
        micro_batches = []
        for _ in range(self.train_config.accumulate):
            item = next(stream, None)
            if item is None:
                break
            self.progress.batch_in_epoch = item[0] + 1
            micro_batches.append(item[1])
        return micro_batches

    def run(self) -> Stopped:
        """Train until a stop condition; returns why training stopped."""
        cfg, p = self.train_config, self.progress
        self.model.train()
        bar = tqdm(
            total=cfg.max_steps,
            initial=p.step,
            unit="step",
            dynamic_ncols=True,
            disable=not self.progress_bar or None,
            desc="train",
        )
        window = dict.fromkeys(("loss", "nll", "acc", "align", "tokens", "wait", "time"), 0.0)
        consecutive_bad, stream = 0, self.batches()
        interrupted_by: int | None = None  # the signal that stopped this run before its end, if one did
        # The budget is wall-clock time, validation and checkpoints included.
        clock_start, elapsed_before = time.perf_counter(), p.elapsed
        with stop_on_signals() as stop_requested:
            while True:
                p.elapsed = elapsed_before + time.perf_counter() - clock_start
                reason = self.should_stop()
                if reason is None and stop_requested.is_set():
                    interrupted_by = stop_requested.signum
                    reason = f"stopped by {signal.Signals(interrupted_by).name}"
                if self.dist.any(reason is not None):  # every rank stops at the same step
                    break
                started = time.perf_counter()
                micro_batches = self.next_micro_batches(stream)
                waited = time.perf_counter() - started
                if not micro_batches:
                    reason = f"reached train.max_epochs={cfg.max_epochs}"
                    break
                stats = self.train_step(micro_batches)
                if stats is None:
                    consecutive_bad += 1
                    self.report_bad_step(consecutive_bad)
                    continue
                consecutive_bad = 0
                for key in ("loss", "nll", "acc", "align"):
                    window[key] += stats[key] * stats["tokens"]
                window["tokens"] += stats["tokens"]
                window["wait"] += waited
                window["time"] += time.perf_counter() - started
                bar.update(1)
                if p.step % cfg.log_every == 0 or p.step == 1:
                    self.log_window(window, stats["lr"], bar)
                    window = dict.fromkeys(window, 0.0)
                if p.step % cfg.valid_every == 0:
                    self.validate_and_keep_best()
                    self.save()
                    self.model.train()
            stream.close()
            bar.close()
            p.elapsed = elapsed_before + time.perf_counter() - clock_start
            # A run that reached its end on any rank is finished, whatever signal came with it; else
            # the signal that one rank received stops them all (the launcher passes it to each).
            ended = self.dist.gather((reason is not None and interrupted_by is None, interrupted_by, reason))
            interrupted_by = None if any(e for e, _, _ in ended) else next((s for _, s, _ in ended if s), None)
            # a rank that stopped on its own says why for those that stopped with it (one rank may reach
            # train.max_time a moment before the others)
            reason = reason or next((r for _, _, r in ended if r), None)
            self.finish(validate=interrupted_by is None)
        self.placement.check_agree()
        self.metrics.close()
        reason = reason or "stopped with the other processes"
        log.info("training stopped: %s", reason)
        return Stopped(reason, interrupted_by)

    def report_bad_step(self, consecutive: int) -> None:
        log.warning("step %d: non-finite loss or gradient, step skipped", self.progress.step + 1)
        self.metrics.write("skipped", self.progress.step, consecutive=consecutive)
        if consecutive >= self.train_config.max_bad_steps:
            raise TrainingDiverged(
                f"{consecutive} consecutive steps had a non-finite loss or gradient; stopped. "
                f"The last good checkpoint in {self.model_dir / 'checkpoints'} is intact: "
                "lower the learning rate (train.lr_scale / train.peak_lr) and resume."
            )

    def log_window(self, window: dict, lr: float, bar) -> None:
        tokens = max(window["tokens"], 1)
        record = {
            "loss": window["loss"] / tokens,
            "nll": window["nll"] / tokens,
            "acc": window["acc"] / tokens,
            "ppl": math.exp(min(window["nll"] / tokens, 50)),
            **({"align": window["align"] / tokens} if self.data.train_links is not None else {}),
            "lr": lr,
            "tokens_per_s": window["tokens"] / max(window["time"], 1e-9),
            "data_wait_frac": window["wait"] / max(window["time"], 1e-9),
            "epoch": self.progress.epoch,
            "elapsed": self.progress.elapsed,
        }
        self.metrics.write("train", self.progress.step, **record)
        if (warning := self.slowdown.observe(record["tokens_per_s"], torch.get_num_threads())) is not None:
            log.warning("step %d: %s", self.progress.step, warning)
        postfix = {"loss": f"{record['loss']:.3f}", "lr": f"{lr:.2e}", "tok/s": f"{record['tokens_per_s']:.0f}"}
        if "align" in record:
            postfix["align"] = f"{record['align']:.3f}"
        if self.max_time is not None:
            postfix["left"] = f"{max(self.max_time - self.progress.elapsed, 0) / 60:.1f}m"
        bar.set_postfix(postfix, refresh=False)
        if bar.disable and self.dist.is_main:  # no bar (stderr is no terminal: a log file): a line instead
            total = f"/{self.train_config.max_steps}" if self.train_config.max_steps else ""
            log.info("step %d%s: %s", self.progress.step, total, ", ".join(f"{k} {v}" for k, v in postfix.items()))

    def finish(self, validate: bool) -> None:
        """Final validation (unless just done, or a signal asks to be quick) and checkpoint."""
        if self.progress.step in (0, self.saved_step):
            return  # nothing trained, or validated and saved at this very step (or resumed from it)
        if validate:
            self.validate_and_keep_best()
        self.save()
