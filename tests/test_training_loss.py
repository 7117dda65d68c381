import torch
import torch.nn.functional as F

from nmt.training.loss import label_smoothed_loss


def _batch(seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(2, 4, 11, generator=g)
    labels = torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]])
    return logits, labels


def test_without_smoothing_equals_mean_cross_entropy_over_real_tokens():
    logits, labels = _batch()
    out = label_smoothed_loss(logits, labels, normaliser=6, smoothing=0.0)
    expected = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=0)
    assert torch.allclose(out.loss, expected)
    assert out.tokens == 6


def test_smoothing_matches_torch_label_smoothing():
    logits, labels = _batch()
    out = label_smoothed_loss(logits, labels, normaliser=6, smoothing=0.1)
    expected = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=0, label_smoothing=0.1)
    assert torch.allclose(out.loss, expected, atol=1e-6)


def test_padding_changes_neither_loss_nor_gradient():
    logits, labels = _batch()
    # the same batch with three extra padded positions (arbitrary logits there)
    more = torch.cat([logits, torch.randn(2, 3, 11)], dim=1).requires_grad_()
    padded_labels = torch.cat([labels, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    base = logits.clone().requires_grad_()
    a = label_smoothed_loss(base, labels, normaliser=6)
    b = label_smoothed_loss(more, padded_labels, normaliser=6)
    a.loss.backward()
    b.loss.backward()
    assert torch.allclose(a.loss, b.loss)
    assert torch.allclose(base.grad, more.grad[:, :4])
    assert torch.all(more.grad[:, 4:] == 0)
    assert torch.all(more.grad[1, 2:] == 0)  # padding inside the original batch too


def test_accuracy_counts_real_tokens_only():
    labels = torch.tensor([[4, 5, 0]])
    logits = torch.full((1, 3, 8), -5.0)
    logits[0, 0, 4] = 5.0  # right
    logits[0, 1, 6] = 5.0  # wrong
    logits[0, 2, 0] = 5.0  # padding "right" but must not count
    out = label_smoothed_loss(logits, labels, normaliser=2)
    assert out.correct.item() == 1 and out.tokens == 2


def test_gradient_equals_autograd_of_the_textbook_formula():
    logits, labels = _batch(3)
    a = logits.clone().requires_grad_()
    b = logits.clone().requires_grad_()
    label_smoothed_loss(a, labels, normaliser=6, smoothing=0.2).loss.backward()
    expected = F.cross_entropy(b.flatten(0, 1), labels.flatten(), ignore_index=0, label_smoothing=0.2)
    expected.backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-6)


def _table(seed=4, tokens=37, vocab=50):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(tokens, vocab, generator=g) * 3, torch.randint(1, vocab, (tokens,), generator=g)


def test_any_block_of_rows_gives_the_loss_and_gradient_of_the_whole_table(monkeypatch):
    from nmt.training import loss as loss_module

    logits, labels = _table()
    results = []
    for elements in (1 << 18, 50 * 4, 1):  # the whole table in one block; blocks of 4 rows; one row each
        monkeypatch.setattr(loss_module, "CACHE_ELEMENTS", elements)
        x = logits.clone().requires_grad_()
        out = label_smoothed_loss(x, labels, normaliser=37, smoothing=0.1)
        out.loss.backward()
        results.append((out.loss, out.nll_sum, out.correct, x.grad))
    assert len(loss_module.row_blocks(logits)) == 37  # the last setting did work row by row
    for loss, nll, correct, grad in results[1:]:
        assert torch.allclose(loss, results[0][0], rtol=1e-6) and torch.allclose(nll, results[0][1], rtol=1e-6)
        assert correct == results[0][2]
        assert torch.allclose(grad, results[0][3], atol=1e-7)
    expected = F.cross_entropy(logits, labels, label_smoothing=0.1)  # and they are the right numbers
    assert torch.allclose(results[-1][0], expected, rtol=1e-5)


def test_bf16_logits_give_the_fp32_loss_and_the_fp32_gradient_rounded_to_bf16(monkeypatch):
    from nmt.training import loss as loss_module

    monkeypatch.setattr(loss_module, "CACHE_ELEMENTS", 50 * 4)  # several blocks
    logits, labels = _table(5)
    narrow = logits.bfloat16().requires_grad_()
    wide = logits.bfloat16().float().requires_grad_()  # the same values in fp32
    a = label_smoothed_loss(narrow, labels, normaliser=37)
    b = label_smoothed_loss(wide, labels, normaliser=37)
    assert a.loss.dtype == torch.float32 and torch.equal(a.loss, b.loss) and torch.equal(a.nll_sum, b.nll_sum)
    a.loss.backward()
    b.loss.backward()
    assert narrow.grad.dtype == torch.bfloat16
    assert torch.equal(narrow.grad, wide.grad.bfloat16())


def test_sequence_loss_equals_loss_on_full_logits():
    from nmt.training.loss import sequence_loss

    model, src, tgt_in, tgt_out = tiny_seq2seq(dropout=0.0)
    full = label_smoothed_loss(model(src, tgt_in), tgt_out, normaliser=5)
    fused = sequence_loss(model, src, tgt_in, tgt_out, normaliser=5)
    assert torch.allclose(full.loss, fused.loss, atol=1e-6)
    assert fused.tokens == 5 and fused.correct == full.correct


def tiny_seq2seq(dropout: float):
    from nmt.model import ModelConfig, Transformer

    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(
            src_vocab_size=11,
            tgt_vocab_size=11,
            encoder_layers=1,
            decoder_layers=1,
            d_model=16,
            num_heads=2,
            d_ff=32,
            dropout=dropout,
        )
    )
    src = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    tgt_in, tgt_out = torch.tensor([[2, 8, 9], [2, 4, 0]]), torch.tensor([[8, 9, 3], [4, 3, 0]])
    return model.train(), src, tgt_in, tgt_out


def test_symmetric_kl_is_zero_for_equal_distributions_and_matches_its_definition():
    from nmt.training.loss import symmetric_kl

    a, b = torch.randn(4, 7), torch.randn(4, 7)
    assert symmetric_kl(a, a + 3.0).abs() < 1e-6  # a shift of the logits is the same distribution
    p, q = a.softmax(-1), b.softmax(-1)
    expected = (p * (p / q).log()).sum() + (q * (q / p).log()).sum()
    assert torch.allclose(symmetric_kl(a, b), expected, atol=1e-5)


def test_symmetric_kl_gradient_equals_autograd_through_the_textbook_chain():
    """The hand-written backward against autograd on log_softmax / exp, with a non-unit upstream gradient."""
    from nmt.training.loss import symmetric_kl

    torch.manual_seed(0)
    a = (torch.randn(6, 11, dtype=torch.float64) * 3).requires_grad_()
    b = torch.randn(6, 11, dtype=torch.float64, requires_grad=True)
    (2.5 * symmetric_kl(a, b)).backward()
    a2, b2 = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    log_p, log_q = a2.log_softmax(-1), b2.log_softmax(-1)
    (2.5 * ((log_p.exp() - log_q.exp()) * (log_p - log_q)).sum()).backward()
    assert torch.allclose(a.grad, a2.grad, atol=1e-12) and torch.allclose(b.grad, b2.grad, atol=1e-12)
    assert a.grad.abs().max() > 1e-3  # a real gradient, not two zeros that agree
    # float32 logits (what training passes) get float32 gradients of the same values
    a3, b3 = a.detach().float().requires_grad_(), b.detach().float().requires_grad_()
    symmetric_kl(a3, b3).backward()
    assert a3.grad.dtype == torch.float32 and torch.allclose(a3.grad.double(), a2.grad / 2.5, atol=1e-5)


def test_r_drop_without_dropout_is_the_plain_loss():
    """Two passes without dropout are the same pass: the KL term is zero and the loss is unchanged."""
    from nmt.training.loss import r_drop_loss, sequence_loss

    model, src, tgt_in, tgt_out = tiny_seq2seq(dropout=0.0)
    plain = sequence_loss(model, src, tgt_in, tgt_out, normaliser=5)
    r_drop = r_drop_loss(model, src, tgt_in, tgt_out, normaliser=5, alpha=5.0)
    assert torch.allclose(plain.loss, r_drop.loss, atol=1e-6)
    assert torch.allclose(plain.nll_sum, r_drop.nll_sum, atol=1e-6) and r_drop.correct == plain.correct


def test_r_drop_with_dropout_adds_the_kl_of_two_different_passes(monkeypatch):
    from nmt.training import loss as loss_module

    model, src, tgt_in, tgt_out = tiny_seq2seq(dropout=0.3)
    kls, real_kl = [], loss_module.symmetric_kl
    monkeypatch.setattr(loss_module, "symmetric_kl", lambda a, b: kls.append(real_kl(a, b)) or kls[-1])
    torch.manual_seed(1)
    with_kl = loss_module.r_drop_loss(model, src, tgt_in, tgt_out, normaliser=5, alpha=4.0)
    torch.manual_seed(1)  # the same two dropout masks
    without = loss_module.r_drop_loss(model, src, tgt_in, tgt_out, normaliser=5, alpha=0.0)
    assert kls[0] > 0  # the two masks differ, so do the two distributions
    assert torch.allclose(with_kl.loss - without.loss, 4.0 / 4 * kls[0] / 5, atol=1e-6)
    with_kl.loss.backward()  # and the KL term has a gradient
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
