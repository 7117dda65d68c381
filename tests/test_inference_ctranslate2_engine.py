"""Export to CTranslate2 and its engine: the same hypotheses as nmt's own engine, for every model shape."""

import dataclasses
import shutil
import subprocess
import sys

import pytest
import torch

from nmt.alignment import AlignmentMethod
from nmt.inference import ctranslate2_engine
from nmt.inference.ctranslate2_engine import CTranslate2Engine, export_step_bytes, rerank
from nmt.inference.export_ctranslate2 import ALIGNMENT, export_ctranslate2, is_ctranslate2_dir
from nmt.inference.plan import WorkerPolicy, available_cores
from nmt.model.config import PRESETS
from nmt.search_settings import SearchRequest
from nmt.tokenizer import EOS
from nmt.translation_io import gives_alignments
from nmt.translator import Sampling, Translator

from conftest import model_dir_with, read_head

pytest.importorskip("ctranslate2")


@pytest.fixture(scope="module")
def sources(multi30k_dir):
    return read_head(multi30k_dir / "data/task1/raw/val.de.gz", 40)


def assert_same_translations(model_dir, sources, beam):
    """Greedy: the same tokens. Beam: the same best hypothesis, and every hypothesis that both n-best
    lists hold scored alike (the lists may differ further down: the two searches stop differently)."""
    torch_run = Translator.load(model_dir).translate_detailed(sources, beam=beam, n_best=beam)
    lengths = {len(h.tokens) for hyps in torch_run for h in hyps}
    assert len(lengths) > 1, f"the outputs should end at various lengths, not only {lengths}"
    ct2_run = Translator.load(model_dir / "ct2", engine="ctranslate2").translate_detailed(
        sources, beam=beam, n_best=beam
    )
    for ours, theirs in zip(torch_run, ct2_run, strict=True):
        assert ours[0].tokens == theirs[0].tokens
        scores = {tuple(h.tokens): (h.score, h.log_prob) for h in theirs}
        shared = [(h.score, h.log_prob, scores[tuple(h.tokens)]) for h in ours if tuple(h.tokens) in scores]
        assert shared and all(
            a == pytest.approx(c, abs=1e-3) and b == pytest.approx(d, abs=1e-3) for a, b, (c, d) in shared
        )


# Every preset's layer and head layout (narrowed to 4 dimensions per head, to stay small), both
# norm positions, both activations, every sharing mode, a changed epsilon and position base.
SHAPES = [
    dict(
        encoder_layers=p["encoder_layers"],
        decoder_layers=p["decoder_layers"],
        num_heads=p["num_heads"],
        d_model=4 * p["num_heads"],
        d_ff=8 * p["num_heads"],
    )
    for p in PRESETS.values()
] + [
    dict(norm_position="pre", activation="gelu"),
    dict(sharing="none", encoder_layers=1, decoder_layers=3),
    dict(sharing="tgt_out", layer_norm_eps=1e-5, positional_base=500.0),
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_every_model_shape_exports_and_translates_like_nmt(tmp_path, tiny_model_dir, sources, shape):
    model_dir = model_dir_with(tmp_path, tiny_model_dir, **shape)
    export_ctranslate2(model_dir, model_dir / "ct2")
    assert is_ctranslate2_dir(model_dir / "ct2")
    assert_same_translations(model_dir, sources[:8], beam=1)
    assert_same_translations(model_dir, sources[:8], beam=3)


def test_greedy_text_is_identical_and_beam_scores_agree_on_the_tiny_model(tmp_path, tiny_model_dir, sources):
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    ct2 = Translator.load(tmp_path / "ct2", engine="ctranslate2")
    torch_engine = Translator.load(tiny_model_dir)
    assert ct2.translate(sources, beam=1) == torch_engine.translate(sources, beam=1)
    for ours, theirs in zip(
        torch_engine.translate_detailed(sources, beam=5), ct2.translate_detailed(sources, beam=5), strict=True
    ):
        assert ours[0].tokens == theirs[0].tokens and ours[0].score == pytest.approx(theirs[0].score, abs=1e-3)


def test_greedy_hypotheses_past_their_own_limit_are_cut_there_as_nmt_s_search_ends(
    tmp_path, tiny_model_dir, sources, monkeypatch
):
    """One batch runs under its longest sentence's limit, so a shorter sentence can run past its own;
    cut there, its tokens and log-probability must be what nmt's greedy search gives under that limit."""
    model_dir = model_dir_with(tmp_path, tiny_model_dir)
    export_ctranslate2(model_dir, model_dir / "ct2")
    cut = []
    cut_at_limit = CTranslate2Engine._cut_at_limit

    def spy(self, ids, rows, limit, found):
        cut.extend(rows)
        return cut_at_limit(self, ids, rows, limit, found)

    monkeypatch.setattr(CTranslate2Engine, "_cut_at_limit", spy)
    ct2 = Translator.load(model_dir / "ct2", engine="ctranslate2", workers=1)  # one batch for all
    theirs = ct2.translate_detailed(sources, beam=1)
    ours = Translator.load(model_dir).translate_detailed(sources, beam=1)
    assert len(cut) >= 3
    for i in cut:
        assert theirs[i][0].tokens == ours[i][0].tokens
        assert theirs[i][0].log_prob == pytest.approx(ours[i][0].log_prob, abs=1e-3)
    assert [h[0].tokens for h in theirs] == [h[0].tokens for h in ours]


def test_beams_that_reach_their_own_limit_in_a_longer_batch_are_searched_again_under_it(
    tmp_path, tiny_model_dir, sources, monkeypatch
):
    """A beam's finished set depends on where the limit stops it, so such sentences run again under
    their own limit (one call per limit), and their best hypothesis is nmt's."""
    model_dir = model_dir_with(tmp_path, tiny_model_dir)
    export_ctranslate2(model_dir, model_dir / "ct2")
    calls = []
    submit = CTranslate2Engine._submit

    def spy(self, ids, rows, max_len, options):
        calls.append((list(rows), max_len))
        return submit(self, ids, rows, max_len, options)

    monkeypatch.setattr(CTranslate2Engine, "_submit", spy)
    ct2 = Translator.load(model_dir / "ct2", engine="ctranslate2", workers=1, batch_tokens=100_000)  # one batch
    monkeypatch.setattr(ctranslate2_engine, "CPU_BATCH_TOKENS", 100_000)
    theirs = ct2.translate_detailed(sources, beam=3)
    ours = Translator.load(model_dir).translate_detailed(sources, beam=3)
    (first_rows, first_limit), *again = calls
    assert len(first_rows) == len(sources) and len(again) >= 2
    assert all(max_len < first_limit for _, max_len in again)
    for rows, _ in again:
        for i in rows:
            assert theirs[i][0].tokens == ours[i][0].tokens
            assert theirs[i][0].score == pytest.approx(ours[i][0].score, abs=1e-3)


def test_an_nmt_model_directory_is_converted_at_load(tiny_model_dir, sources):
    converted = Translator.load(tiny_model_dir, engine="ctranslate2")
    assert converted.engine.name == "ctranslate2"
    assert converted.translate(sources[:5], beam=1) == Translator.load(tiny_model_dir).translate(sources[:5], beam=1)


def test_word_scores_agree_on_both_engines(tiny_model_dir, sources):
    """A word's score (its pieces' mean log-probability) is the same number from either engine."""
    by_torch = Translator.load(tiny_model_dir).translate_detailed(sources[:10], beam=1, scores=True)
    by_ct2 = Translator.load(tiny_model_dir, engine="ctranslate2").translate_detailed(sources[:10], beam=1, scores=True)
    for ours, theirs in zip(by_torch, by_ct2, strict=True):
        assert ours[0].text == theirs[0].text and len(ours[0].word_scores) == len(ours[0].text.split())
        assert theirs[0].word_scores == pytest.approx(ours[0].word_scores, abs=1e-3)


def test_int8_weights_exported_or_quantised_at_load_translate_alike(tmp_path, tiny_model_dir, sources):
    export_ctranslate2(tiny_model_dir, tmp_path / "int8", quantization="int8")
    export_ctranslate2(tiny_model_dir, tmp_path / "fp32")
    stored = Translator.load(tmp_path / "int8", engine="ctranslate2")  # computed as stored: int8
    at_load = Translator.load(tmp_path / "fp32", engine="ctranslate2", precision="int8")
    assert (stored.engine.precision, Translator.load(tmp_path / "fp32", engine="ctranslate2").engine.precision) == (
        "int8",
        "fp32",
    )
    assert Translator.load(tmp_path / "int8", engine="ctranslate2", precision="fp32").engine.precision == "fp32"
    info = subprocess.run(
        [sys.executable, "-m", "nmt", "info", str(tmp_path / "int8")], capture_output=True, text=True, check=True
    )
    assert "int8 on CPU" in info.stdout
    assert (tmp_path / "int8" / "model.bin").stat().st_size < 0.7 * (tmp_path / "fp32" / "model.bin").stat().st_size
    assert stored.translate(sources[:10], beam=2) == at_load.translate(sources[:10], beam=2)


def test_rerank_uses_nmt_s_gnmt_penalty_with_the_end_token_counted():
    short, long = (["a", EOS], -2.0), (["a", "b", "c", "d", EOS], -2.6)
    (best,) = rerank([short, long], alpha=0.0, n_best=1, end_token=EOS)
    assert best == (["a"], -2.0, -2.0)
    (best,) = rerank([short, long], alpha=2.0, n_best=1, end_token=EOS)  # a strong penalty prefers the longer one
    assert best[0] == ["a", "b", "c", "d"] and best[1] == pytest.approx(-2.6 / ((5 + 5) / 6) ** 2)
    (cut,) = rerank([(["x", "y"], -1.0)], alpha=1.0, n_best=1, end_token=EOS)  # stopped by the limit: no end token
    assert cut == (["x", "y"], -1.0 / ((5 + 2) / 6), -1.0)


def test_what_the_engine_cannot_do_is_refused(tmp_path, tiny_model_dir):
    ct2 = Translator.load(tiny_model_dir, engine="ctranslate2")
    with pytest.raises(ValueError, match="attention"):
        ct2.translate_detailed(["Ein Hund."], return_attention=True)
    with pytest.raises(ValueError, match="sample"):
        ct2.translate(["Ein Hund."], sampling=Sampling(seed=1))
    with pytest.raises(ValueError, match="no PyTorch model"):
        _ = ct2.model
    mc_dropout = r"^MC dropout \(--qe-passes\): the ctranslate2 engine cannot; nmt's engine can"
    with pytest.raises(ValueError, match=mc_dropout):
        ct2.translate_detailed(["Ein Hund."], scores=True, qe_passes=3)
    with pytest.raises(ValueError, match=mc_dropout):
        ct2.engine.score_ids([ct2.encode_source("Ein Hund.")[0]], [[5, 6]], dropout_seed=0)
    with pytest.raises(ValueError, match="no bf16 on CPU"):
        Translator.load(tiny_model_dir, engine="ctranslate2", precision="bf16", device="cpu")
    with pytest.raises(ValueError, match="--quantization must be one of"):
        export_ctranslate2(tiny_model_dir, tmp_path / "x", quantization="int4")
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    with pytest.raises(FileExistsError, match="--force"):
        export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    with pytest.raises(ValueError, match="--engine ctranslate2"):
        Translator.load(tmp_path / "ct2", engine="torch")


def test_export_and_translate_from_the_command_line(tmp_path, tiny_model_dir):
    out = tmp_path / "ct2"
    nmt = [sys.executable, "-m", "nmt"]
    subprocess.run(
        nmt + ["export", "--model", str(tiny_model_dir), "--to", "ctranslate2", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    lines = "Ein Hund rennt.\n\nZwei Männer.\n"
    run = [
        nmt + ["translate", "--model", str(out), "--engine", "ctranslate2", "--beam", "2"],
        nmt + ["translate", "--model", str(tiny_model_dir), "--beam", "2"],
    ]
    ct2, torch_out = (
        subprocess.run(cmd, input=lines, capture_output=True, text=True, check=True).stdout for cmd in run
    )
    assert ct2 == torch_out and len(ct2.splitlines()) == 3


def test_a_missing_extra_is_one_line_naming_the_install_command(tiny_model_dir, monkeypatch, capsys):
    from nmt.cli import main

    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
    assert main(["translate", "--model", str(tiny_model_dir), "--engine", "ctranslate2"]) == 2
    err = capsys.readouterr().err
    assert "pip install" in err and "ctranslate2" in err and len(err.strip().splitlines()) == 1


def test_force_replaces_an_earlier_export_and_nothing_else(tmp_path, tiny_model_dir):
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2", force=True)  # an export: replaced
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a CTranslate2 export"):
        export_ctranslate2(tiny_model_dir, precious, force=True)
    with pytest.raises(ValueError, match="holds the model directory"):
        export_ctranslate2(tiny_model_dir, tiny_model_dir.parent, force=True)
    with pytest.raises(ValueError, match="already a CTranslate2 export"):
        export_ctranslate2(tmp_path / "ct2", tmp_path / "again")
    assert (precious / "keep.txt").read_text() == "mine" and (tiny_model_dir / "model.safetensors").is_file()


def test_a_gpu_that_ctranslate2_cannot_use_is_refused_at_load_naming_the_way_out(tiny_model_dir, monkeypatch):
    """Seen on an H100 with CUDA 13: CTranslate2's wheel needs libcublas.so.12, and failed only at translation."""
    import ctranslate2  # noqa: PLC0415 - skipped above when missing

    class WithoutCuda12:
        def __init__(self, *args, **kwargs):
            pass

        def translate_batch(self, *args, **kwargs):
            raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")

    monkeypatch.setattr(ctranslate2, "Translator", WithoutCuda12)
    with pytest.raises(RuntimeError, match=r"libcublas.so.12.*--device cpu"):
        Translator.load(tiny_model_dir, engine="ctranslate2", device="cuda")


def test_on_cpu_a_batch_holds_a_few_hundred_source_tokens(tmp_path, tiny_model_dir, sources, monkeypatch):
    """Small batches: CTranslate2 runs a batch until its slowest sentence ends (see CPU_BATCH_TOKENS)."""
    model_dir = model_dir_with(tmp_path, tiny_model_dir)
    export_ctranslate2(model_dir, model_dir / "ct2")
    monkeypatch.setattr(ctranslate2_engine, "CPU_BATCH_TOKENS", 64)
    sizes = []
    submit = CTranslate2Engine._submit

    def spy(self, ids, rows, max_len, options):
        sizes.append((sum(len(ids[i]) for i in rows), len(rows)))
        return submit(self, ids, rows, max_len, options)

    monkeypatch.setattr(CTranslate2Engine, "_submit", spy)
    ct2 = Translator.load(model_dir / "ct2", engine="ctranslate2", workers=1)
    for beam, budget in ((1, 64), (3, 32)):
        sizes.clear()
        assert len(ct2.translate(sources, beam=beam)) == len(sources)
        assert len(sizes) > 1 and all(tokens <= budget or rows == 1 for tokens, rows in sizes)


def test_a_model_whose_steps_stream_its_weights_runs_on_one_worker_in_whole_budget_batches(
    tmp_path, tiny_model_dir, sources, monkeypatch
):
    """Above WorkerPolicy.max_parallel_step_mib: one worker, every core its threads, no small-batch cap."""
    model_dir = model_dir_with(tmp_path, tiny_model_dir)
    export_ctranslate2(model_dir, model_dir / "ct2")
    assert export_step_bytes(model_dir / "ct2", "fp32") == 4 * export_step_bytes(model_dir / "ct2", "int8") > 0
    (tmp_path / "theirs").mkdir()
    for name in ("model.bin", "config.json"):  # CTranslate2's files without nmt's model.json: its own converter's
        (tmp_path / "theirs" / name).write_bytes((model_dir / "ct2" / name).read_bytes())
    assert export_step_bytes(tmp_path / "theirs", "fp32") is None
    (tmp_path / "theirs" / "model.json").write_text('{"d_model": 32, "from_a_later_version": 1}')
    assert export_step_bytes(tmp_path / "theirs", "fp32") is None  # unreadable: the usual layout, no error
    monkeypatch.setattr(ctranslate2_engine, "CPU_BATCH_TOKENS", 64)
    parallel = Translator.load(model_dir / "ct2", engine="ctranslate2")
    monkeypatch.setattr(WorkerPolicy, "streams_weights", lambda self, step_bytes: step_bytes is not None)
    streaming = Translator.load(model_dir / "ct2", engine="ctranslate2")
    assert (streaming.engine.workers, streaming.engine.threads) == (1, available_cores())
    batches = []
    submit = CTranslate2Engine._submit

    def spy(self, ids, rows, max_len, options):
        batches.append(len(rows))
        return submit(self, ids, rows, max_len, options)

    monkeypatch.setattr(CTranslate2Engine, "_submit", spy)
    for beam in (1, 3):
        assert streaming.translate(sources, beam=beam) == parallel.translate(sources, beam=beam)
    assert batches[0] == len(sources)  # greedy: one batch, not batches of 64 tokens
    explicit = Translator.load(model_dir / "ct2", engine="ctranslate2", workers=2, threads=1)
    assert (explicit.engine.workers, explicit.engine.threads) == (2, 1)  # named workers win
    assert not explicit.engine.whole_budget
    served = Translator.load(model_dir / "ct2", engine="ctranslate2", workers=1)  # as the server loads it
    assert served.engine.whole_budget


def test_the_minimum_output_length_gives_the_same_translations_and_scores_on_both_engines(
    tmp_path, tiny_model_dir, sources
):
    """decode.min_len reaches CTranslate2 as min_decoding_length, and its teacher-forced scores (the
    per-token probabilities, the cut at a sentence's own limit) are renormalised as nmt's search's."""
    import math

    from nmt.config import load_config

    model_dir = model_dir_with(tmp_path, tiny_model_dir, end_bias=4.0)  # some outputs end within 11-14 tokens
    config = load_config(model_dir / "config.yaml")
    config.decode = dataclasses.replace(config.decode, min_len=0)
    config.save(model_dir / "config.yaml")
    plain = Translator.load(model_dir).translate_detailed(sources, beam=1)
    assert sum(len(t[0].tokens) < 20 for t in plain) >= 5  # the rule has work to do
    config.decode = dataclasses.replace(config.decode, min_len=20)
    config.save(model_dir / "config.yaml")
    export_ctranslate2(model_dir, model_dir / "ct2")
    assert_same_translations(model_dir, sources, beam=1)
    assert_same_translations(model_dir, sources, beam=3)
    for engine in ("torch", "ctranslate2"):
        where = model_dir if engine == "torch" else model_dir / "ct2"
        found = Translator.load(where, engine=engine).translate_detailed(sources, beam=1, scores=True)
        for t in (best[0] for best in found):
            assert len(t.tokens) >= 20
            assert sum(math.log(p) for p in t.token_probs) == pytest.approx(t.log_prob, abs=1e-3)
        # the rule at work: sentences that ended before 20 tokens without it now end with </s> later
        ended = [i for i, best in enumerate(found) if len(best[0].token_probs) == len(best[0].tokens) + 1]
        assert sum(len(plain[i][0].tokens) < 20 for i in ended) >= 3


def test_loading_single_threaded_workers_leaves_the_callers_torch_threads_alone(tiny_model_dir):
    """CTranslate2 sets the loading thread's OpenMP count to its intra_threads, which torch shares."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        loaded = Translator.load(tiny_model_dir, engine="ctranslate2", workers=2, threads=1)
        assert (loaded.engine.workers, loaded.engine.threads) == (2, 1)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_the_export_returns_the_attention_alignments_read_so_both_engines_align_alike(tiny_model_dir, sources):
    torch_run, ct2 = Translator.load(tiny_model_dir), Translator.load(tiny_model_dir, engine="ctranslate2")
    ids = [torch_run.encode_source(s)[0] for s in sources[:6]]
    outputs = [h[0].tokens for h in torch_run.translate_ids(ids, beam=1)]
    outputs[0] = outputs[0][:3]  # a target that is not the model's own, cut short: aligned all the same
    ended = [k != 1 for k in range(len(ids))]  # one output cut at its limit: no end-token row
    ours = torch_run.engine.score_ids(ids, outputs, ended=ended, need_attention=True)
    theirs = ct2.engine.score_ids(ids, outputs, ended=ended, need_attention=True)
    for mine, other, output, end in zip(ours, theirs, outputs, ended, strict=True):
        top = mine.cross_attention[-1].float().mean(dim=0)  # (steps, src_len): nmt.alignment.DEFAULT_METHOD
        assert other.cross_attention.shape == (1, 1, len(output) + end, top.size(1)) == (1, 1, *top.shape)
        assert torch.allclose(other.cross_attention[0, 0], top, atol=1e-5)
    assert ct2.translate_detailed(sources[:6], alignments=True)[3][0].alignment == (
        torch_run.translate_detailed(sources[:6], alignments=True)[3][0].alignment
    )
    with pytest.raises(ValueError, match="attention weights: the ctranslate2 engine cannot"):
        ct2.align(sources[:1], ["a dog"], AlignmentMethod(layer=0))


@pytest.mark.parametrize("shift", [False, True])
def test_a_trained_alignment_head_is_what_both_engines_return_and_align_by(tmp_path, tiny_model_dir, sources, shift):
    head = dict(alignment_layer=0, alignment_heads=1, alignment_shift=shift)
    model_dir = model_dir_with(tmp_path / "guided", tiny_model_dir, **head)
    export_ctranslate2(model_dir, tmp_path / "ct2")
    torch_run, ct2 = Translator.load(model_dir), Translator.load(tmp_path / "ct2", engine="ctranslate2")
    assert ct2.engine.capabilities.alignment
    ids = [torch_run.encode_source(s)[0] for s in sources[:6]]
    outputs = [h[0].tokens for h in torch_run.translate_ids(ids, beam=1)]
    ours = torch_run.engine.score_ids(ids, outputs, need_attention=True)
    theirs = ct2.engine.score_ids(ids, outputs, need_attention=True)
    for mine, other in zip(ours, theirs, strict=True):
        head = mine.cross_attention[0, 0].float()  # (steps, src_len): head 0 of the bottom layer alone
        assert torch.allclose(other.cross_attention[0, 0], head, atol=1e-5)
        assert not torch.allclose(head, mine.cross_attention[0].float().mean(dim=0), atol=1e-3)  # not the mean
    targets = ["A dog runs.", "Two men are talking on a street."]
    assert ct2.align(sources[:2], targets) == torch_run.align(sources[:2], targets)
    assert torch_run.align(sources[:2], targets) != torch_run.align(sources[:2], targets, AlignmentMethod(layer=0))
    assert ct2.engine.alignment.shift == torch_run.engine.alignment.shift == shift


def test_transformers_stopping_rule_is_refused_by_ctranslate2_and_auto_takes_nmt_s_engine_for_it(
    tmp_path, tiny_model_dir
):
    """CTranslate2's beam search ends a sentence once `beam` hypotheses have finished: a beam search by
    transformers' rule (early_stopping false) is refused there in the contract's words, as any feature
    it lacks, before any search; greedy search has no stopping rule to differ by. A model set to that
    rule runs on nmt's engine under auto, rather than being refused at its first beam search."""
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    ct2 = Translator.load(tmp_path / "ct2", engine="ctranslate2")
    refused = r"^transformers' stopping rule \(--no-early-stopping\): the ctranslate2 engine cannot; nmt's engine can"
    with pytest.raises(ValueError, match=refused):
        ct2.translate(["Ein Hund."], beam=2, early_stopping=False)
    assert ct2.translate(["Ein Hund."], beam=1, early_stopping=False) == ct2.translate(["Ein Hund."], beam=1)
    assert ct2.translate(["Ein Hund."], beam=2, early_stopping=True)
    model_dir = tmp_path / "model"
    shutil.copytree(tiny_model_dir, model_dir, ignore=shutil.ignore_patterns("ctranslate2"))
    assert Translator.load(model_dir, engine="auto").engine.name == "ctranslate2"  # on CPU, by default
    by_transformers = Translator.load(model_dir, engine="auto", early_stopping=False)
    assert by_transformers.engine.name == "torch" and by_transformers.translate(["Ein Hund."], beam=2)


def test_an_export_that_does_not_say_which_attention_it_returns_gives_no_alignments(tmp_path, tiny_model_dir):
    export_ctranslate2(tiny_model_dir, tmp_path / "ct2")
    (tmp_path / "ct2" / ALIGNMENT).unlink()  # as an export from before alignment.json
    old = Translator.load(tmp_path / "ct2", engine="ctranslate2")
    assert old.translate(["Ein Hund."]) and not old.engine.capabilities.alignment
    with pytest.raises(ValueError, match="word alignments: the ctranslate2 engine cannot"):
        old.translate_detailed(["Ein Hund."], alignments=True)
    assert not gives_alignments(old)  # HTML falls back to placing words in proportion


def test_html_markup_lands_alike_through_the_cli_and_the_server_on_the_default_engine(tmp_path, tiny_model_dir):
    """The CLI and the server both choose CTranslate2 (auto, on CPU) and place words by alignment,
    as nmt's engine does; placing in proportion would put them elsewhere."""
    from fastapi.testclient import TestClient

    from nmt.cli import main
    from nmt.markup import translate_html
    from nmt.server import ServerLimits, create_app, model_info
    from nmt.translation_io import aligned_translations

    model_dir = shutil.copytree(tiny_model_dir, tmp_path / "model")
    page = (
        '<p>Ein <b>Hund</b> rennt über <a href="/wiese">die <i>grüne</i> Wiese</a>.</p>\n'
        "<p>Zwei <em>Männer <b>spielen</b> am</em> Strand.</p>"
    )
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    args = ["translate", "--model", str(model_dir), "--format", "html", "--beam", "1"]
    assert main([*args, "--input", str(tmp_path / "page.html"), "--output", str(tmp_path / "out.html")]) == 0
    by_cli = (tmp_path / "out.html").read_text(encoding="utf-8")
    served = Translator.load(model_dir, engine="auto")  # as nmt serve loads it
    assert served.engine.name == "ctranslate2" and served.engine.capabilities.alignment
    app = create_app(served, ServerLimits(), info=model_info(model_dir, served))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.post("/translate", json={"q": page, "source": "de", "target": "en", "format": "html"})
    by_server = answer.json()["translatedText"]
    torch_run = Translator.load(model_dir, engine="torch")
    by_torch = translate_html(page, lambda s: aligned_translations(torch_run, s, torch_run.request(beam=1)), lang="de")
    in_proportion = translate_html(
        page, lambda s: [(t, None) for t, _ in aligned_translations(torch_run, s, torch_run.request(beam=1))], lang="de"
    )
    assert by_cli.rstrip("\n") == by_server == by_torch != in_proportion


def repeats(tokens: list[int], n: int) -> bool:
    """Whether `tokens` holds some n-gram twice."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return len(grams) != len(set(grams))


@pytest.mark.parametrize("beam", [1, 3])
def test_no_repeat_ngram_size_gives_the_same_output_on_both_engines_and_no_repeated_ngram(
    tmp_path, tiny_model_dir, sources, beam
):
    model_dir = model_dir_with(tmp_path, tiny_model_dir, end_bias=2.0)
    export_ctranslate2(model_dir, model_dir / "ct2")
    plain = Translator.load(model_dir).translate_detailed(sources, beam=beam)
    assert sum(repeats(best[0].tokens, 2) for best in plain) >= 5  # the rule has work to do
    ours = Translator.load(model_dir).translate_detailed(sources, beam=beam, n_best=beam, no_repeat_ngram_size=2)
    theirs = Translator.load(model_dir / "ct2", engine="ctranslate2").translate_detailed(
        sources, beam=beam, n_best=beam, no_repeat_ngram_size=2
    )
    assert [best[0].tokens for best in ours] == [best[0].tokens for best in theirs]
    assert [best[0].score for best in ours] == pytest.approx([best[0].score for best in theirs], abs=1e-3)
    assert not any(repeats(t.tokens, 2) for run in (ours, theirs) for best in run for t in best)
    # The model's decode.no_repeat_ngram_size is the same rule for every call; 0 is the plain search.
    loaded = Translator.load(model_dir, no_repeat_ngram_size=2).translate_detailed(sources, beam=beam, n_best=beam)
    assert [[t.tokens for t in best] for best in loaded] == [[t.tokens for t in best] for best in ours]
    off = Translator.load(model_dir).translate_detailed(sources, beam=beam, no_repeat_ngram_size=0)
    assert [(b[0].tokens, b[0].score) for b in off] == [(b[0].tokens, b[0].score) for b in plain]


def test_groups_are_searched_as_their_own_calls(tiny_model_dir, sources):
    translator = Translator.load(tiny_model_dir, engine="ctranslate2")
    engine, ids = translator.engine, [translator.encode_source(s)[0] for s in sources[:7]]
    request = SearchRequest(beam=2, n_best=2)
    found = lambda hyps: [[(h.tokens, round(h.score, 5)) for h in n] for n in hyps]  # noqa: E731
    together = engine.translate_ids(ids, request, [range(5), range(5, 7)])
    assert found(together) == found(engine.translate_ids(ids[:5], request) + engine.translate_ids(ids[5:], request))
