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


def test_sequence_loss_equals_loss_on_full_logits():
    from nmt.model import ModelConfig, Transformer
    from nmt.training.loss import sequence_loss

    torch.manual_seed(0)
    model = Transformer(ModelConfig(src_vocab_size=11, tgt_vocab_size=11, encoder_layers=1, decoder_layers=1,
                                    d_model=16, num_heads=2, d_ff=32, dropout=0.0))
    src = torch.tensor([[2, 5, 6, 3], [2, 7, 3, 0]])
    tgt_in, tgt_out = torch.tensor([[2, 8, 9], [2, 4, 0]]), torch.tensor([[8, 9, 3], [4, 3, 0]])
    full = label_smoothed_loss(model(src, tgt_in), tgt_out, normaliser=5)
    fused = sequence_loss(model, src, tgt_in, tgt_out, normaliser=5)
    assert torch.allclose(full.loss, fused.loss, atol=1e-6)
    assert fused.tokens == 5 and fused.correct == full.correct
