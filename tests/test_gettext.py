"""gettext catalogs translated as translators expect (nmt.formats.gettext), checked by gettext's msgfmt."""

from __future__ import annotations

import glob
import shutil
import subprocess
import sys

import polib
import pytest
from scripted import reversed_words, upper

from nmt.formats import DocumentError, read_document, translate_document
from nmt.placeholders import codes_of

CATALOG = r"""# Demo's catalog.
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Language: \n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=CHARSET\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=INTEGER; plural=EXPRESSION;\n"

#. The confirmation before deleting.
#: src/main.c:10
#, c-format
msgid "Delete %d files from %s?"
msgstr ""

#: src/main.c:12
msgctxt "menu"
msgid "Open"
msgstr ""

#, c-format
msgid "%d file"
msgid_plural "%d files"
msgstr[0] ""
msgstr[1] ""

msgid "Already done"
msgstr "Schon fertig"

#, python-brace-format
msgid "Hello {name}, welcome to <b>{site}</b>!\n"
msgstr ""

#~ msgid "Old"
#~ msgstr "Alt"
"""
needs_msgfmt = pytest.mark.skipif(shutil.which("msgfmt") is None, reason="gettext's msgfmt is not installed")


def translated(text: str, target: str | None = "cs", translate=upper, **options) -> polib.POFile:
    out = translate_document(text.encode(), "demo.pot", translate, lang="en", target=target, **options)
    return polib.pofile(out.decode())


def msgfmt_check(tmp_path, content: bytes) -> subprocess.CompletedProcess:
    """`msgfmt -c` over the catalog, fuzzy messages included (it checks only what it would compile)."""
    path = tmp_path / "check.po"
    path.write_bytes(content)
    return subprocess.run(
        ["msgfmt", "-c", "--use-fuzzy", "-o", "/dev/null", str(path)], capture_output=True, text=True, check=False
    )


def test_untranslated_messages_are_filled_marked_fuzzy_and_the_rest_kept():
    catalog = translated(CATALOG)
    entries = {(e.msgctxt, e.msgid): e for e in catalog}
    delete = entries[(None, "Delete %d files from %s?")]
    assert delete.msgstr == "DELETE %d FILES FROM %s?"
    assert delete.flags == ["fuzzy", "c-format"] and delete.occurrences == [("src/main.c", "10")]
    assert delete.comment == "The confirmation before deleting."
    assert entries[("menu", "Open")].msgstr == "OPEN"
    done = entries[(None, "Already done")]
    assert done.msgstr == "Schon fertig" and "fuzzy" not in done.flags
    hello = entries[(None, "Hello {name}, welcome to <b>{site}</b>!\n")]
    assert hello.msgstr == "HELLO {name}, WELCOME TO <b>{site}</b>!\n"
    assert [e.msgid for e in catalog.obsolete_entries()] == ["Old"]
    assert catalog.metadata["Language"] == "cs"
    assert catalog.metadata["Content-Type"] == "text/plain; charset=UTF-8"


@pytest.mark.parametrize(
    ("target", "forms", "header"),
    [
        ("cs", ["%d FILE", "%d FILES", "%d FILES"], "nplurals=3; plural=(n == 1 ? 0 : n >= 2 && n <= 4 ? 1 : 2);"),
        ("ja", ["%d FILES"], "nplurals=1; plural=0;"),  # one form for every number: the plural's text
        # Arabic's form 0 is n = 0, form 1 is n = 1: the singular goes where n = 1 is
        ("ar", ["%d FILES", "%d FILE", *["%d FILES"] * 4], None),
    ],
)
def test_a_plural_message_fills_every_form_the_target_language_has(target, forms, header):
    catalog = translated(CATALOG, target)
    entry = next(e for e in catalog if e.msgid_plural)
    assert [entry.msgstr_plural[k] for k in sorted(entry.msgstr_plural)] == forms
    if header:
        assert catalog.metadata["Plural-Forms"] == header


def test_the_catalogs_own_plural_rule_for_the_target_is_kept_and_a_broken_one_refused():
    own = CATALOG.replace("Language: ", "Language: cs").replace(
        "nplurals=INTEGER; plural=EXPRESSION;", "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"
    )
    assert translated(own).metadata["Plural-Forms"] == "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;"
    for broken in ("nplurals=3; plural=n ==== 1;", "nplurals=x; plural=0;", "nplurals=9; plural=n;"):
        with pytest.raises(DocumentError, match=r"demo\.pot: Plural-Forms"):
            translated(own.replace("nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;", broken))


def test_the_language_header_is_written_as_gettext_names_locales():
    assert translated(CATALOG, "pt-br").metadata["Language"] == "pt_BR"  # as the LibreTranslate API sends it


def test_retranslate_fills_translated_messages_too():
    entry = next(e for e in translated(CATALOG, retranslate=True) if e.msgid == "Already done")
    assert entry.msgstr == "ALREADY DONE" and "fuzzy" in entry.flags


def test_a_catalog_in_latin_1_is_read_in_its_charset_and_written_in_utf_8():
    latin = CATALOG.replace("charset=CHARSET", "charset=ISO-8859-1").replace("Schon fertig", "Schön fertig")
    out = translate_document(latin.encode("latin-1"), "de.po", upper, lang="en", target="de")
    catalog = polib.pofile(out.decode("utf-8"))
    assert next(e for e in catalog if e.msgid == "Already done").msgstr == "Schön fertig"
    assert "charset=UTF-8" in catalog.metadata["Content-Type"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"garbage here\n", r"bad\.po: Syntax error in po file \(line 1\)"),
        (b'msgid "a"\nmsgstr "b\n', r'bad\.po:2: a string that is not closed with a quote: msgstr "b'),
        (b'msgid "a"\nmsgstr "b"\n\nmsgid "a"\nmsgstr "c"\n', r'bad\.po: Entry "a" already exists'),
        (b'msgid "' + b"a " * 60_000 + b'"\nmsgstr ""\n', r"bad\.po:1: a message of 120,000 characters"),
        (b'msgid ""\nmsgstr ""\n\nmsgid "' + b"ab" * 2_000_000 + b'"\n', r"bad\.po:4: a line of 4,000,008 characters"),
        (CATALOG.replace("CHARSET", "klingon-8").encode(), r"bad\.po: the header names the charset 'klingon-8'"),
        (b'msgid "\xff"\nmsgstr ""\n', r"bad\.po:1: not valid utf-8"),
    ],
)
def test_a_bad_catalog_is_one_error_naming_the_file(content, message):
    with pytest.raises(DocumentError, match=message) as raised:
        read_document(content, "bad.po", "en", target="de")
    assert "\n" not in str(raised.value)


def test_a_catalog_that_names_a_file_is_read_as_itself_never_as_that_file(tmp_path):
    real = tmp_path / "real.po"
    real.write_text(CATALOG)
    with pytest.raises(DocumentError, match="Syntax error"):
        read_document(str(real).encode(), "upload.po", "en")


@needs_msgfmt
@pytest.mark.parametrize("translate", [upper, reversed_words])
def test_msgfmt_accepts_the_translated_catalog(tmp_path, translate):
    out = translate_document(CATALOG.encode(), "demo.pot", translate, lang="en", target="cs")
    check = msgfmt_check(tmp_path, out)
    assert check.returncode == 0, check.stderr


@needs_msgfmt
def test_real_debian_catalogs_keep_every_placeholder_and_pass_msgfmt(tmp_path):
    """English msgids of real catalogs on this machine, each translated with its words reversed (the
    hardest order for placeholders): msgfmt -c accepts every one, and each message keeps its codes."""
    catalogs = sorted(glob.glob("/usr/share/locale/de/LC_MESSAGES/*.mo"))[:6]
    if not catalogs or shutil.which("msgunfmt") is None:
        pytest.skip("no gettext catalogs (or msgunfmt) on this machine")
    strings = 0
    for mo in catalogs:
        po = subprocess.run(["msgunfmt", mo], capture_output=True, check=True).stdout
        out = translate_document(po, "de.po", reversed_words, lang="en", target="en", retranslate=True)
        check = msgfmt_check(tmp_path, out)
        assert check.returncode == 0, (mo, check.stderr)
        for entry in polib.pofile(out.decode()):
            if entry.msgid:
                assert codes_of(entry.msgstr or entry.msgstr_plural[0]) == codes_of(entry.msgid), (mo, entry.msgid)
                strings += 1
    assert strings > 100


def test_translate_a_catalog_from_the_command_line(tiny_model_dir, tmp_path):
    source, target = tmp_path / "demo.pot", tmp_path / "de.po"
    source.write_text(CATALOG)
    command = [sys.executable, "-m", "nmt", "translate", "--model", str(tiny_model_dir), "--beam", "1"]
    run = subprocess.run([*command, "--input", str(source), "--output", str(target)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    catalog = polib.pofile(target.read_text())
    for entry in catalog.untranslated_entries() + catalog.fuzzy_entries():
        assert codes_of(entry.msgstr or entry.msgstr_plural[0]) == codes_of(entry.msgid)
    assert sum("fuzzy" in e.flags for e in catalog) == 4
    run = subprocess.run([*command, "--input", str(source), "--retranslate"], capture_output=True, text=True)
    assert run.returncode == 0 and "Already done" in run.stdout  # a .pot is text: written to stdout
    run = subprocess.run([*command, "--retranslate"], input="Hallo\n", capture_output=True, text=True)
    assert run.returncode == 2 and "--retranslate is for .po, .pot, .xlf, .xliff files" in run.stderr


@pytest.mark.parametrize("comment", ["# :", "# :src/main.c", "# ,x", "# :1\n# , fuzzy words"])
def test_a_header_comment_starting_with_a_colon_or_comma_reads_back_as_itself(tmp_path, comment):
    """polib writes the header comment ":src/main.c" as "#:src/main.c", a reference line it cannot
    read back; nmt writes it as gettext does, "# :src/main.c"."""
    catalog = comment + "\n" + CATALOG.split("\n", 1)[1]
    out = translate_document(catalog.encode(), "demo.pot", upper, lang="en", target="cs")
    assert out.decode().startswith(comment + "\n")
    assert polib.pofile(out.decode()).header == polib.pofile(catalog).header
    if shutil.which("msgfmt"):
        check = msgfmt_check(tmp_path, out)
        assert check.returncode == 0, check.stderr
