"""Resource files (JSON, ARB, YAML): values translated; keys, order, comments kept (nmt.formats.resource_files)."""

from __future__ import annotations

import json

import pytest
from ruamel.yaml import YAML
from scripted import reversed_words, upper

from nmt.formats import DocumentError, read_document, translate_document
from nmt.placeholders import codes_of

I18NEXT = """{
    "menu": {
        "open": "Open {{count}} files",
        "save": "Save $t(common.file) now",
        "size": 3,
        "flags": [true, null, "Close <b>all</b>"]
    },
    "greeting": "Hello, %s!"
}
"""
ARB = '{\n  "@@locale": "en",\n  "title": "Settings",\n  "@title": {"description": "The page title"}\n}'
RAILS = """# The shop's strings.
en:
  # shown on every page
  greeting: "Hello %{name}!"   # the user's first name
  cart:
    items:
      - First item
      - 'Second: item'
    count: 3
  notice: &notice Saved
  again: *notice
"""


def shape(tree):
    """The tree's keys and non-string values, every string replaced by its placeholders."""
    if isinstance(tree, dict):
        return {k: shape(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [shape(v) for v in tree]
    return ("str", codes_of(tree)) if isinstance(tree, str) else tree


@pytest.mark.parametrize("translate", [upper, reversed_words])
def test_json_keeps_keys_order_values_and_placeholders(translate):
    out = translate_document(I18NEXT.encode(), "de.json", translate, lang="en", target="de").decode()
    tree = json.loads(out)
    assert shape(tree) == shape(json.loads(I18NEXT))
    assert list(tree) == ["menu", "greeting"] and list(tree["menu"]) == ["open", "save", "size", "flags"]
    assert out.startswith('{\n    "menu"') and out.endswith("}\n")  # the file's own indentation
    if translate is upper:
        assert tree["menu"]["open"] == "OPEN {{count}} FILES" and tree["greeting"] == "HELLO, %s!"


def test_an_arb_file_translates_text_not_metadata_and_names_the_target():
    tree = json.loads(translate_document(ARB.encode(), "app_en.arb", upper, lang="en", target="de"))
    assert tree == {"@@locale": "de", "title": "SETTINGS", "@title": {"description": "The page title"}}


@pytest.mark.parametrize("translate", [upper, reversed_words])
def test_yaml_keeps_comments_order_quoting_and_renames_the_locale_root(translate):
    out = translate_document(RAILS.encode(), "en.yml", translate, lang="en", target="de").decode()
    tree = YAML(typ="safe").load(out)
    original = YAML(typ="safe").load(RAILS)
    assert list(tree) == ["de"] and shape(tree["de"]) == shape(original["en"])
    for comment in ("# The shop's strings.", "# shown on every page", "# the user's first name"):
        assert comment in out
    assert "\n      - " in out and "&notice" in out and "*notice" in out  # indentation and the alias kept
    if translate is upper:
        assert 'greeting: "HELLO %{name}!"' in out and "- 'SECOND: ITEM'" in out


def test_yaml_merge_keys_stay_merges():
    rails = "defaults: &defaults\n  save: Speichern\n  cancel: Abbrechen\nusers:\n  <<: *defaults\n  title: Benutzer\n"
    out = translate_document(rails.encode(), "de.yml", upper, lang="de").decode()
    assert out == rails.replace("Speichern", "SPEICHERN").replace("Abbrechen", "ABBRECHEN").replace(
        "Benutzer", "BENUTZER"
    )


def test_yaml_aliases_cannot_make_the_walk_exponential():
    laughs = ["a: &a [" + ", ".join(f"word{i}" for i in range(10)) + "]"]
    for k in range(1, 30):  # 10^30 strings if every alias were walked
        laughs.append(f"l{k}: &l{k} [*{'a' if k == 1 else f'l{k - 1}'}, *{'a' if k == 1 else f'l{k - 1}'}]")
    document = read_document("\n".join(laughs).encode(), "laughs.yaml", "en")
    assert len(document.sentences) == 10


def test_yaml_tags_make_no_objects_and_are_written_back(tmp_path):
    hostile = f"a: !!python/object/apply:os.system ['touch {tmp_path}/hacked']\nb: !custom Text\n"
    out = translate_document(hostile.encode(), "x.yaml", upper, lang="en").decode()
    assert not (tmp_path / "hacked").exists()
    assert out.startswith("a: !!python/object/apply:os.system") and "b: !custom Text" in out


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.json", b'{"a": "b",\n "c": }', r"bad\.json:2: not JSON"),
        ("bad.json", b'"just a string"', r"bad\.json: a resource file is a JSON object"),
        ("bad.json", b"[" * 100_000, r"bad\.json:"),
        ("bad.yaml", b"a: b\nc: [d\n", r"bad\.yaml:\d+: not YAML"),
        ("bad.yml", b"\xff", r"bad\.yml:1: not valid UTF-8"),
        # found by fuzzing (fuzz/fuzz_document.py yml): ruamel.yaml's round trip raised NotImplementedError
        ("bad.yml", b": #\n m\n\n", r"^bad\.yml: not YAML \(ruamel\.yaml: overlap in comment\)$"),
        # found by fuzzing (fuzz/fuzz_document.py yml): a mapping as a key raised TypeError (unhashable)
        ("bad.yml", b"? : :", r"^bad\.yml: a YAML key nmt cannot read \(unhashable type: 'Commented"),
    ],
)
def test_a_bad_resource_file_is_one_error_naming_the_file(name, content, message):
    with pytest.raises(DocumentError, match=message) as raised:
        read_document(content, name, "en")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize(
    "content",
    [
        "? key  # a note\n: Hello there\n",  # written back without its "?": "key  # a note\n: HELLO THERE"
        "{a-- \n\n  }",  # a flow mapping over a blank line: written back with a ":" it cannot read
        "#c\n  []",  # ruamel.yaml's emitter fails (IndexError)
    ],
)
def test_yaml_that_ruamel_cannot_write_back_is_refused_before_translating(content):
    asked = []
    with pytest.raises(
        DocumentError, match=r"^a\.yml: YAML that ruamel\.yaml cannot write back as it reads it \("
    ) as e:
        translate_document(content.encode(), "a.yml", lambda sentences: asked.extend(sentences), lang="en")
    assert "\n" not in str(e.value) and asked == []
    YAML(typ="rt").load(content)  # the input itself is YAML


def test_yaml_nmt_writes_reads_back_to_the_same_tree():
    content = "? plain key\n: Hello there\n? [a, b]\n: Good bye  # a note\nlist:\n  - One\n"
    out = translate_document(content.encode(), "a.yml", upper, lang="en").decode()
    assert YAML(typ="safe").load(out) == {"plain key": "HELLO THERE", ("a", "b"): "GOOD BYE", "list": ["ONE"]}


def test_the_output_must_be_a_file_of_the_inputs_kind(tmp_path, capsys):
    from nmt.cli import main

    source = tmp_path / "de.json"
    source.write_text('{"a": "Hallo"}')
    model = ["translate", "--model", str(tmp_path / "no-model"), "--input", str(source)]
    assert main([*model, "--output", str(tmp_path / "en.yml")]) == 2
    assert "names a .yml file, but the translation of a .json document is a .json document" in capsys.readouterr().err
    assert not (tmp_path / "en.yml").exists()
