import pytest
import torch
import torch.nn.functional as F

from nmt.model import ModelConfig, Transformer, count_parameters


def tiny_config(**overrides) -> ModelConfig:
    values = dict(
        src_vocab_size=24,
        tgt_vocab_size=24,
        encoder_layers=2,
        decoder_layers=2,
        d_model=32,
        num_heads=4,
        d_ff=64,
        dropout=0.0,
    )
    return ModelConfig(**{**values, **overrides})


def tiny_model(seed=0, **overrides) -> Transformer:
    torch.manual_seed(seed)
    return Transformer(tiny_config(**overrides)).eval()


def test_future_target_tokens_do_not_change_earlier_logits():
    for norm in ("post", "pre"):
        model = tiny_model(norm_position=norm)
        src = torch.tensor([[2, 5, 6, 7, 3]])
        tgt = torch.tensor([[2, 8, 9, 10, 11, 12]])
        base = model(src, tgt)
        for j in range(1, tgt.size(1)):
            changed = tgt.clone()
            changed[0, j] = 13
            out = model(src, changed)
            assert torch.allclose(out[0, :j], base[0, :j], atol=1e-6), (norm, j)
            assert not torch.allclose(out[0, j], base[0, j])  # the test can fail


def test_source_padding_changes_nothing_and_gets_zero_attention():
    model = tiny_model()
    src = torch.tensor([[2, 5, 6, 7, 3]])
    padded = torch.tensor([[2, 5, 6, 7, 3, 0, 0, 0]])
    tgt = torch.tensor([[2, 8, 9, 10]])
    assert torch.allclose(model(src, tgt), model(padded, tgt), atol=1e-5)
    enc = model.encode(padded, need_weights=True)
    dec = model.decode(tgt, enc, need_weights=True)
    for w in enc.self_weights + dec.cross_weights:
        assert torch.all(w[..., 5:] == 0)


def test_batched_sentences_equal_sentences_alone():
    model = tiny_model()
    src = torch.tensor([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]])
    tgt = torch.tensor([[2, 8, 9, 10], [2, 11, 0, 0]])
    both = model(src, tgt)
    alone = model(src[1:, :3], tgt[1:, :2])
    assert torch.allclose(both[1, :2], alone[0], atol=1e-5)


def test_cached_incremental_decoding_equals_full_decoding():
    for norm in ("post", "pre"):
        model = tiny_model(norm_position=norm)
        src = torch.tensor([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]])
        tgt = torch.tensor([[2, 8, 9, 10, 11], [2, 12, 13, 14, 15]])
        enc = model.encode(src)
        full = model.decode(tgt, enc).states
        cache = model.new_cache(enc)
        steps = [model.decode(tgt[:, t : t + 1], enc, cache=cache).states for t in range(tgt.size(1))]
        assert cache.length == tgt.size(1)
        assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
        # several new steps at once after a cached prefix
        cache = model.new_cache(enc)
        first = model.decode(tgt[:, :2], enc, cache=cache).states
        rest = model.decode(tgt[:, 2:], enc, cache=cache).states
        assert torch.allclose(torch.cat([first, rest], dim=1), full, atol=1e-5)


def test_rows_sharing_a_sentence_equal_the_sentence_repeated():
    """Beam search decodes several rows per sentence against one copy of its encoder output."""
    model = tiny_model()
    src = torch.tensor([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]])
    tgt = torch.tensor([[2, 8, 9], [2, 10, 11], [2, 12, 13], [2, 14, 15]])  # rows 0-1: sentence 0; 2-3: sentence 1
    enc = model.encode(src)
    shared = model.decode(tgt, enc, need_weights=True)
    repeated = model.decode(tgt, enc.select(torch.tensor([0, 0, 1, 1])), need_weights=True)
    assert torch.allclose(shared.states, repeated.states, atol=1e-5)
    for a, b in zip(shared.cross_weights, repeated.cross_weights, strict=True):
        assert a.shape == (4, 4, 3, 5) and torch.allclose(a, b, atol=1e-6)


def test_cache_reorder_moves_rows_and_select_drops_sentences():
    model = tiny_model()
    src = torch.tensor([[2, 5, 6, 7, 3], [2, 9, 3, 0, 0]])
    tgt = torch.tensor([[2, 8, 9], [2, 10, 11], [2, 12, 13], [2, 14, 15]])  # two rows per sentence
    enc = model.encode(src)
    cache = model.new_cache(enc)
    model.decode(tgt[:, :2], enc, cache=cache)
    order = torch.tensor([1, 1, 3, 2])  # beams move within their sentence
    cache.reorder(order)
    step = model.decode(tgt[order, 2:], enc, cache=cache).states
    full = model.decode(tgt[order], enc).states
    assert torch.allclose(step[:, 0], full[:, 2], atol=1e-5)
    # sentence 0 finishes: keep sentence 1 and its two rows
    cache.reorder(torch.tensor([2, 3]))
    cache.select_sentences(torch.tensor([1]))
    rows = order[2:]
    kept = model.decode(torch.tensor([[16], [17]]), enc.select(torch.tensor([1])), cache=cache).states
    again = model.decode(
        torch.cat([tgt[rows], torch.tensor([[16], [17]])], dim=1), enc.select(torch.tensor([1]))
    ).states
    assert torch.allclose(kept[:, 0], again[:, 3], atol=1e-5)


def base_parameter_count(d, d_ff, n_enc, n_dec, v_src, v_tgt, sharing):
    """Closed form. Attention: 4 d^2 weights + 4 d biases (W_Q, W_K, W_V, W_O);
    feed-forward: 2 d d_ff + d_ff + d; LayerNorm: 2 d.
    Encoder layer: 1 attention, 1 FFN, 2 norms; decoder layer: 2 attentions, 1 FFN, 3 norms.
    Embeddings: none -> (V_src + 2 V_tgt) d; tgt_out -> (V_src + V_tgt) d; all -> V d. No output bias."""
    attn = 4 * d * d + 4 * d
    ffn = 2 * d * d_ff + d_ff + d
    norm = 2 * d
    enc = n_enc * (attn + ffn + 2 * norm)
    dec = n_dec * (2 * attn + ffn + 3 * norm)
    emb = {"none": (v_src + 2 * v_tgt) * d, "tgt_out": (v_src + v_tgt) * d, "all": v_tgt * d}[sharing]
    return enc + dec + emb


def test_base_parameter_count_matches_closed_form():
    for sharing, v_src in (("none", 9000), ("tgt_out", 9000), ("all", 8192)):
        config = ModelConfig.preset("base", src_vocab_size=v_src, tgt_vocab_size=8192, sharing=sharing)
        expected = base_parameter_count(512, 2048, 6, 6, v_src, 8192, sharing)
        assert count_parameters(Transformer(config)) == expected
    # the paper's base model with a 37k joint vocabulary: about 63M parameters (paper: 65M)
    paper = count_parameters(Transformer(ModelConfig.preset("base", src_vocab_size=37000, tgt_vocab_size=37000)))
    assert 60e6 < paper < 66e6


def test_sharing_modes_share_storage_or_not():
    none = tiny_model(sharing="none")
    ptrs = {none.src_embed.weight.data_ptr(), none.tgt_embed.weight.data_ptr(), none.output.weight.data_ptr()}
    assert len(ptrs) == 3
    tied = tiny_model(sharing="tgt_out")
    assert tied.tgt_embed.weight is tied.output.weight
    assert tied.src_embed.weight.data_ptr() != tied.tgt_embed.weight.data_ptr()
    shared = tiny_model(sharing="all")
    assert shared.src_embed.weight is shared.tgt_embed.weight is shared.output.weight
    # a gradient step through the output projection moves the embedding too
    before = shared.src_embed.weight.detach().clone()
    shared.train()
    F.cross_entropy(
        shared(torch.tensor([[2, 5, 3]]), torch.tensor([[2, 6]])).flatten(0, 1), torch.tensor([6, 3])
    ).backward()
    torch.optim.SGD(shared.parameters(), lr=1.0).step()
    assert not torch.equal(before, shared.src_embed.weight)


def test_config_round_trip_rebuilds_identical_model(tmp_path):
    model = tiny_model(sharing="tgt_out", activation="gelu", norm_position="pre")
    path = tmp_path / "model.json"
    model.config.save(path)
    rebuilt = Transformer(ModelConfig.load(path)).eval()
    rebuilt.load_state_dict(model.state_dict())
    assert ModelConfig.load(path) == model.config
    src, tgt = torch.tensor([[2, 5, 6, 3]]), torch.tensor([[2, 7, 8]])
    assert torch.equal(model(src, tgt), rebuilt(src, tgt))


def test_tiny_model_learns_to_reverse_a_fixed_batch():
    torch.manual_seed(0)
    model = Transformer(tiny_config(d_model=64, d_ff=128))
    body = torch.randint(4, 24, (8, 6))
    src = torch.cat([torch.full((8, 1), 2), body, torch.full((8, 1), 3)], dim=1)
    tgt = torch.cat([torch.full((8, 1), 2), body.flip(1), torch.full((8, 1), 3)], dim=1)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(300):
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(logits.flatten(0, 1), tgt[:, 1:].flatten())
        opt.zero_grad()
        loss.backward()
        opt.step()
        if loss.item() < 0.01:
            break
    assert loss.item() < 0.05, loss.item()


@pytest.mark.parametrize(
    "preset, overrides",
    [
        ("reference", {}),
        ("small", {}),
        ("base", {}),
        ("big", {}),
        ("small", {"d_ff": 768}),  # d_ff = 3 * d_model: the shape of a fused [W_Q; W_K; W_V]
    ],
)
def test_every_projection_starts_at_the_xavier_scale(preset, overrides):
    torch.manual_seed(0)
    config = ModelConfig.preset(
        preset, src_vocab_size=64, tgt_vocab_size=64, encoder_layers=1, decoder_layers=1, **overrides
    )
    model = Transformer(config)
    d, d_ff = config.d_model, config.d_ff

    def assert_xavier(weight, fan_in, fan_out, name):
        expected = (2.0 / (fan_in + fan_out)) ** 0.5  # the std of Xavier-uniform
        assert abs(weight.std().item() / expected - 1) < 0.05, (name, weight.std().item(), expected)

    for name, module in model.named_modules():
        if hasattr(module, "in_proj"):  # attention: W_Q, W_K, W_V each as a d x d matrix, and W_O
            for block in module.in_proj.weight.chunk(3, dim=0):
                assert_xavier(block, d, d, name + ".in_proj")
            assert_xavier(module.out_proj.weight, d, d, name + ".out_proj")
        if hasattr(module, "w_1"):
            assert_xavier(module.w_1.weight, d, d_ff, name + ".w_1")
            assert_xavier(module.w_2.weight, d_ff, d, name + ".w_2")
