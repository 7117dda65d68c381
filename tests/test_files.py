"""Atomic writes and the cleanup of dead writers' temporary files."""

import os
import subprocess
import sys

import pytest

from nmt.files import atomic_write, atomic_write_text, remove_stale_temp_files, staged_directory, temp_path_for


def test_atomic_write_replaces_whole_file(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write_text(target, "old\n")
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left


def test_failed_write_keeps_old_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "a.txt"
    atomic_write_text(target, "old\n")

    def broken(tmp):
        open(tmp, "w").write("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, broken)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_stale_temp_of_dead_writer_removed_live_one_kept(tmp_path):
    # A dead writer: a child process makes a temp file, then exits without renaming it.
    code = f"from nmt.files import temp_path_for; print(temp_path_for({str(tmp_path / 'w.safetensors')!r}))"
    dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    live = temp_path_for(tmp_path / "w.safetensors")  # this process: alive
    unrelated = tmp_path / ".hidden.tmp"
    unrelated.write_text("not ours")
    removed = remove_stale_temp_files(tmp_path)
    assert [str(p) for p in removed] == [dead]
    assert live.exists() and unrelated.exists() and not os.path.exists(dead)


def test_a_writer_failing_in_its_own_words_is_an_oserror_naming_the_file(tmp_path):
    def torch_on_a_full_disk(tmp):
        raise RuntimeError(
            "[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file "
            "data/0: file write failed\nException raised from ..."
        )

    with pytest.raises(OSError, match=r"cannot write .*state\.pt: \[enforce fail.*file write failed$"):
        atomic_write(tmp_path / "state.pt", torch_on_a_full_disk)
    assert list(tmp_path.iterdir()) == []


def test_a_staged_directory_appears_whole_or_not_at_all(tmp_path):
    out = tmp_path / "sub" / "out"
    with staged_directory(out) as staging:
        (staging / "a.txt").write_text("a")
        assert not out.exists()  # nothing there until the block ends
    assert (out / "a.txt").read_text() == "a"

    failed = tmp_path / "failed"
    with pytest.raises(RuntimeError), staged_directory(failed) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("the writer fell over")
    assert not failed.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["sub"]  # no staging left

    with staged_directory(out, replace=True) as staging:
        (staging / "b.txt").write_text("b")
    assert [p.name for p in out.iterdir()] == ["b.txt"]


@pytest.fixture
def umask_027():
    """Files made under umask 027: the owner writes, the group (a service account's) reads, others nothing."""
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def mode(path):
    return path.stat().st_mode & 0o777


def test_written_files_and_staged_directories_follow_the_umask(tmp_path, umask_027):
    atomic_write_text(tmp_path / "a.txt", "text\n")
    with staged_directory(tmp_path / "out") as staging:
        atomic_write_text(staging / "b.txt", "text\n")
    # mkstemp's 0600 and mkdtemp's 0700 would shut out the group: a service account could not read them
    assert (mode(tmp_path / "a.txt"), mode(tmp_path / "out"), mode(tmp_path / "out" / "b.txt")) == (0o640, 0o750, 0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "out"]


def test_a_saved_model_directory_is_readable_by_the_group(tmp_path, tiny_model_dir, umask_027):
    import torch

    from nmt.checkpoint import save_model_dir
    from nmt.config import ExperimentConfig
    from nmt.model import ModelConfig, Transformer
    from nmt.tokenizer import load_tokenizers, save_tokenizers

    src_tok, tgt_tok = load_tokenizers(tiny_model_dir)
    save_tokenizers(src_tok, tgt_tok, tmp_path)
    torch.manual_seed(0)
    config = ModelConfig(src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, d_model=8, num_heads=2)
    save_model_dir(Transformer(config), tmp_path)
    ExperimentConfig().save(tmp_path / "config.yaml")
    modes = {p.name: mode(p) for p in tmp_path.iterdir()}
    assert {"model.safetensors", "model.json", "config.yaml", "tokenizer.json"} <= set(modes)
    assert set(modes.values()) == {0o640}, modes
