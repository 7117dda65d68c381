"""Label-smoothed cross-entropy, masked on padding and normalised by real tokens.

The reference design divides a loss averaged over *all* positions by a correction
factor; here padding never enters the sum, so the loss (and its gradient) is the same
whatever padding a batch carries. The sum is divided by the number of real target
tokens, which the caller passes in: under gradient accumulation or several processes
it is the token count of the whole global batch, not of one piece of it.

With target distribution q = (1 - eps) one_hot(y) + eps / V and p = softmax(z):

    loss(z, y) = -sum_v q_v log p_v = logsumexp(z) - (1 - eps) z_y - eps mean_v(z_v)
    d loss / d z = p - q

`SmoothedCrossEntropy` computes exactly this with one vocabulary-sized buffer (p, kept
from the forward pass and turned into the gradient in place), where the textbook
log_softmax + gather + mean chain materialises several. `sequence_loss` also drops
padding positions *before* the output projection, so they cost no vocabulary-sized
work at all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.autograd.function import once_differentiable

from ..model import Transformer
from .guided_alignment import guided_alignment_loss

StatesFn = Callable[[Transformer, torch.Tensor, torch.Tensor], torch.Tensor]  # (model, src, tgt_in) -> states


# fp32 values of a block of rows of the (tokens, vocab) table per thread working on it: half a MB,
# which stays in any current core's L2 cache (1-2 MB)
CACHE_ELEMENTS = 1 << 17


def row_blocks(table: torch.Tensor) -> list[slice]:
    """The row ranges that `SmoothedCrossEntropy` works through a (tokens, vocab) table in. On CPU, blocks
    of about CACHE_ELEMENTS values per thread (each operation splits a block between torch's threads),
    so that a block's several passes (the widening copy, max, exp, sum; in backward the scaling and
    the narrowing copy) read it from cache, not from memory; elsewhere one block, since a GPU's
    kernels stream the whole table anyway."""
    tokens, vocab = table.shape
    if table.device.type != "cpu":
        return [slice(0, tokens)]
    rows = max(1, CACHE_ELEMENTS * torch.get_num_threads() // max(vocab, 1))
    return [slice(start, start + rows) for start in range(0, tokens, rows)]


class SmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of (tokens, vocab) logits; see the module docstring.

    bf16 logits (under autocast) are widened to fp32 a block of rows at a time, straight into the
    one fp32 buffer (exp(z - max z), kept for backward), and the gradient is narrowed back into
    the logits' type block by block: no whole fp32 copy of the table is made."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, labels: torch.Tensor, smoothing: float):
        tokens, vocab = logits.shape
        fp32 = {"dtype": torch.float32, "device": logits.device}
        p = torch.empty(tokens, vocab, **fp32)  # exp(z - max z): the only vocabulary-sized buffer
        z_max, total = torch.empty(tokens, 1, **fp32), torch.empty(tokens, 1, **fp32)  # per row: max z, sum p
        z_mean = torch.empty(tokens, **fp32)
        for rows in row_blocks(logits):
            z = p[rows]
            z.copy_(logits[rows])  # (rows, vocab) in fp32, whatever the logits' type
            torch.mean(z, dim=-1, out=z_mean[rows])
            torch.amax(z, dim=-1, keepdim=True, out=z_max[rows])
            z.sub_(z_max[rows]).exp_()
            torch.sum(z, dim=-1, keepdim=True, out=total[rows])
        lse = (z_max + total.log()).squeeze(1)  # (tokens,) logsumexp
        z_y = logits.gather(1, labels[:, None]).squeeze(1).float()  # (tokens,)
        nll = lse - z_y
        loss = (1.0 - smoothing) * nll + smoothing * (lse - z_mean)
        ctx.save_for_backward(p, total, labels)
        ctx.smoothing, ctx.dtype = smoothing, logits.dtype
        correct = (z_y >= z_max.squeeze(1)).sum()  # the label is (one of) the argmax
        ctx.mark_non_differentiable(nll, correct)
        return loss.sum(), nll.sum(), correct

    @staticmethod
    @once_differentiable  # the saved buffer becomes the gradient in place: backward runs once
    def backward(ctx, grad_loss: torch.Tensor, _grad_nll, _grad_correct):
        p, total, labels = ctx.saved_tensors
        eps, vocab = ctx.smoothing, p.size(1)
        # (softmax - q) * grad_loss, with softmax = p / total: p is scaled in place, it is not needed again
        scale = grad_loss / total  # (tokens, 1)
        off_label = grad_loss * (eps / vocab)
        on_label = (-(1.0 - eps) * grad_loss).expand(labels.size(0), 1)
        grad = p if ctx.dtype == p.dtype else torch.empty(p.shape, dtype=ctx.dtype, device=p.device)
        for rows in row_blocks(p):
            block = p[rows].mul_(scale[rows]).sub_(off_label)
            block.scatter_add_(1, labels[rows, None], on_label[rows])
            if grad is not p:
                grad[rows].copy_(block)  # narrowed to the logits' type (bf16 under autocast)
        return grad, None, None


@dataclass
class LossOutput:
    loss: torch.Tensor  # scalar: summed smoothed loss / normaliser (what backward sees)
    nll_sum: torch.Tensor  # scalar: summed negative log-likelihood of real tokens (no smoothing), detached
    correct: torch.Tensor  # scalar: real tokens whose argmax is the label, detached
    tokens: int  # real tokens in this piece


def label_smoothed_loss(
    logits: torch.Tensor, labels: torch.Tensor, *, normaliser: int | float, smoothing: float = 0.1, pad_id: int = 0
) -> LossOutput:
    """Loss over (..., vocab) logits and (...) labels, padding excluded, summed / normaliser."""
    flat_logits = logits.reshape(-1, logits.size(-1))  # (positions, vocab)
    flat_labels = labels.reshape(-1)
    real = flat_labels != pad_id
    return _smoothed(flat_logits[real], flat_labels[real], normaliser, smoothing)


def _smoothed(logits: torch.Tensor, labels: torch.Tensor, normaliser: int | float, smoothing: float) -> LossOutput:
    loss_sum, nll_sum, correct = SmoothedCrossEntropy.apply(logits, labels, smoothing)
    return LossOutput(loss=loss_sum / normaliser, nll_sum=nll_sum, correct=correct, tokens=int(labels.numel()))


def teacher_forced_states(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
    """(batch, tgt_len, d_model) decoder states of a whole batch in one pass: what a training step runs
    (and what `train.compile` compiles; decoding's incremental steps stay eager)."""
    return model.decode(tgt_in, model.encode(src)).states


def sequence_loss(
    model: Transformer,
    src: torch.Tensor,
    tgt_in: torch.Tensor,
    tgt_out: torch.Tensor,
    *,
    normaliser: int | float,
    smoothing: float = 0.1,
    states_fn: StatesFn = teacher_forced_states,
) -> LossOutput:
    """Teacher-forced loss of a batch; only real (non-padding) positions reach the output projection."""
    states = states_fn(model, src, tgt_in)  # (batch, tgt_len, d_model)
    real = tgt_out != model.config.pad_id  # (batch, tgt_len)
    logits = model.logits(states[real])  # (real_tokens, vocab)
    return _smoothed(logits, tgt_out[real], normaliser, smoothing)


class SymmetricKL(torch.autograd.Function):
    """S = sum over rows of KL(p1 || p2) + KL(p2 || p1) = sum (p1 - p2) * d, with d = log p1 - log p2,
    and its gradient written out, as `SmoothedCrossEntropy` does for the cross-entropy:

        dS/dz1 = p1 * (d - <p1, d>) + p1 - p2        dS/dz2 = -p2 * (d - <p2, d>) + p2 - p1

    (<., .> per row). Autograd through the textbook chain keeps about twice as many (tokens x
    vocab) buffers and runs about twice as many passes over them; on R-Drop's 2 x 2,048-token
    batches with an 8k vocabulary those passes cost more than the second forward pass itself.
    """

    @staticmethod
    def forward(ctx, logits_1: torch.Tensor, logits_2: torch.Tensor) -> torch.Tensor:
        log_p1, log_p2 = logits_1.float().log_softmax(dim=-1), logits_2.float().log_softmax(dim=-1)
        d = log_p1 - log_p2  # (tokens, vocab)
        p1, p2 = log_p1.exp_(), log_p2.exp_()  # the log-probabilities are not needed past d
        # <p, d> per row as a batched product (no temporary table); in float32 even under bf16 autocast
        with torch.autocast(d.device.type, enabled=False):
            dot_1, dot_2 = torch.einsum("tv,tv->t", p1, d), torch.einsum("tv,tv->t", p2, d)
        ctx.input_dtypes = logits_1.dtype, logits_2.dtype
        ctx.save_for_backward(p1, p2, d, dot_1, dot_2)
        return (dot_1 - dot_2).sum()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        p1, p2, d, dot_1, dot_2 = ctx.saved_tensors
        grad_1 = (d - dot_1[:, None]).mul_(p1).add_(p1).sub_(p2).mul_(grad)
        grad_2 = d.neg_().add_(dot_2[:, None]).mul_(p2).add_(p2).sub_(p1).mul_(grad)  # d's buffer reused
        return grad_1.to(ctx.input_dtypes[0]), grad_2.to(ctx.input_dtypes[1])


def symmetric_kl(logits_1: torch.Tensor, logits_2: torch.Tensor) -> torch.Tensor:
    """Summed KL(p1 || p2) + KL(p2 || p1) over (tokens, vocab) logits: sum (p1 - p2)(log p1 - log p2)."""
    return SymmetricKL.apply(logits_1, logits_2)


def r_drop_loss(
    model: Transformer,
    src: torch.Tensor,
    tgt_in: torch.Tensor,
    tgt_out: torch.Tensor,
    *,
    normaliser: int | float,
    smoothing: float = 0.1,
    alpha: float = 1.0,
    states_fn: StatesFn = teacher_forced_states,
) -> LossOutput:
    """R-Drop (Liang et al. 2021): the batch twice through the model, so two dropout masks, and

        loss = (CE_1 + CE_2) / 2 + alpha / 4 * (KL(P_1 || P_2) + KL(P_2 || P_1))

    which is the paper's CE_1 + CE_2 + alpha / 2 * (KL + KL), halved so that alpha = 0 is the usual loss
    (same scale, same learning rate) and the paper's alpha values mean the same here. The two passes
    run as one forward over the batch stacked on itself. nll and correct are the two passes' mean.
    Memory: the KL term keeps several (real tokens x vocab) float32 buffers for the backward pass
    (the plain loss keeps one), so a large vocabulary may need a smaller train.batch_tokens.
    """
    src2, tgt_in2, tgt_out2 = (torch.cat([t, t]) for t in (src, tgt_in, tgt_out))
    states = states_fn(model, src2, tgt_in2)  # (2 * batch, tgt_len, d_model)
    real = tgt_out2 != model.config.pad_id  # (2 * batch, tgt_len): row-major, so all of pass 1, then pass 2
    logits = model.logits(states[real])  # (2 * real, vocab)
    loss_sum, nll_sum, correct = SmoothedCrossEntropy.apply(logits, tgt_out2[real], smoothing)
    first, second = logits.chunk(2)  # the same tokens, through the two dropout masks
    loss = loss_sum / 2 + alpha / 4 * symmetric_kl(first, second)
    return LossOutput(loss=loss / normaliser, nll_sum=nll_sum / 2, correct=correct / 2, tokens=first.size(0))


class LossModule(torch.nn.Module):
    """The model plus its loss, so that DistributedDataParallel sees the whole step as one forward.

    r_drop_alpha > 0 trains with R-Drop (see `r_drop_loss`); 0 is the plain label-smoothed loss.
    alignment_weight > 0 adds guided alignment (nmt.training.guided_alignment) for batches that
    come with links: the model's alignment head is read off the same pass.
    compile: torch.compile the encoder-decoder pass (fuses element-wise work). Only this pass: the
    loss drops padding rows (a data-dependent shape), and validation's incremental decoding, whose
    cache grows every step, would recompile at every length.
    """

    def __init__(
        self,
        model: Transformer,
        smoothing: float,
        r_drop_alpha: float = 0.0,
        compile: bool = False,
        alignment_weight: float = 0.0,
    ):
        super().__init__()
        self.model, self.smoothing, self.r_drop_alpha = model, smoothing, r_drop_alpha
        self.alignment_weight = alignment_weight
        self.states_fn = torch.compile(teacher_forced_states, dynamic=True) if compile else teacher_forced_states

    def forward(self, src, tgt_in, tgt_out, normaliser: float, links: torch.Tensor | None = None):
        """(loss, nll, correct, alignment loss per token or 0) of one micro-batch."""
        head: list[torch.Tensor] = []
        states_fn = self.states_fn
        if links is not None and self.alignment_weight > 0:

            def states_fn(model: Transformer, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
                decoded = model.decode(tgt_in, model.encode(src), need_alignment=True)
                head.append(decoded.alignment)  # (batch, tgt_len, src_len); R-Drop's second pass unused
                return decoded.states

        options = dict(normaliser=normaliser, smoothing=self.smoothing, states_fn=states_fn)
        if self.r_drop_alpha > 0:
            out = r_drop_loss(self.model, src, tgt_in, tgt_out, alpha=self.r_drop_alpha, **options)
        else:
            out = sequence_loss(self.model, src, tgt_in, tgt_out, **options)
        if not head:
            return out.loss, out.nll_sum, out.correct, torch.zeros((), device=out.loss.device)
        aligned = guided_alignment_loss(head[0], links) / normaliser
        return out.loss + self.alignment_weight * aligned, out.nll_sum, out.correct, aligned.detach()
