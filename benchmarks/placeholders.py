"""Placeholders on real gettext catalogs: kept exactly, none invented, msgfmt -c clean.

Debian machines carry hundreds of real catalogs (/usr/share/locale/de/LC_MESSAGES/*.mo). Each is
turned back into PO (msgunfmt) and reversed: its German msgstrs become msgids, so a de->en model
reads them (plural messages keep their two forms as msgid and msgid_plural; flags such as
c-format are kept, so msgfmt -c checks their conversions). Then the same strings go four ways:

1. nmt translate's route for a .po (nmt.formats.gettext: placeholders masked, placed by alignment);
   the output is checked with `msgfmt -c`;
2. LibreTranslate's /translate on nmt serve, the strings as they are (the server masks them);
3. as Weblate sends them: each placeholder replaced by [X<offset>X] before the request and put back
   after it by that token (Weblate's machinery does this itself for LibreTranslate);
4. unmasked: each string translated as a plain sentence, the model seeing the placeholders (what a
   service that does not know them does): the baseline.

A string's placeholders are kept when its translation has the same printf and brace placeholders
(%s, %1$d, %(name)s, {0}, {name}, {{x}}, ${x}) as many times each; invented: ones it did not have.

    python benchmarks/placeholders.py --model runs/de_en_base [--catalogs 30] [--beam 5]
"""

from __future__ import annotations

import argparse
import collections
import glob
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polib

from nmt.formats import read_document
from nmt.placeholders import PRINTF
from nmt.translation_io import aligned_translations
from nmt.translator import Translator

# Read left to right as printf reads it: "%%" is a literal percent sign, so "%%s" holds no "%s".
PLACEHOLDER = re.compile(
    rf"%%|%[-+0#' ]*\d*<PRI\w+>|{PRINTF}|\{{\{{[^{{}}]*\}}\}}|\$\{{[^{{}}]*\}}|\{{[\w.\[\]]*(?:[!:][^{{}}]*)?\}}"
)


def placeholders(text: str) -> list[str]:
    return [m for m in PLACEHOLDER.findall(text) if m != "%%"]


def reversed_catalog(mo: str) -> polib.POFile:
    """The catalog with its German translations as msgids (empty msgstrs), for a de->en model."""
    original = polib.pofile(subprocess.run(["msgunfmt", mo], capture_output=True, check=True, text=True).stdout)
    out = polib.POFile()
    out.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "en"}
    seen = set()
    for entry in original:
        if not entry.msgid or entry.obsolete:
            continue
        if entry.msgid_plural:
            forms = [entry.msgstr_plural.get(k, "") for k in sorted(entry.msgstr_plural)]
            if len(forms) < 2 or not all(forms[:2]):
                continue
            new = polib.POEntry(msgid=forms[0], msgid_plural=forms[1], msgstr_plural={0: "", 1: ""})
        elif entry.msgstr:
            new = polib.POEntry(msgid=entry.msgstr, msgstr="")
        else:
            continue
        new.msgctxt, new.flags = entry.msgctxt, [f for f in entry.flags if f != "fuzzy"]
        if (new.msgctxt, new.msgid) in seen:
            continue
        seen.add((new.msgctxt, new.msgid))
        out.append(new)
    return out


def kept(source: str, translation: str) -> tuple[int, bool, int]:
    """(placeholders in the source, all kept exactly, placeholders invented)."""
    want, got = collections.Counter(placeholders(source)), collections.Counter(placeholders(translation))
    return sum(want.values()), want == got, sum((got - want).values())


def weblate_masked(text: str) -> tuple[str, dict[str, str]]:
    """The text as Weblate sends it: each placeholder replaced by [X<offset>X]; and the tokens."""
    tokens = {}

    def mask(m: re.Match) -> str:
        token = f"[X{m.start()}X]"
        tokens[token] = m.group(0)
        return token

    return PLACEHOLDER.sub(lambda m: m.group(0) if m.group(0) == "%%" else mask(m), text), tokens


def weblate_restored(text: str, tokens: dict[str, str]) -> str:
    for token, original in tokens.items():
        text = text.replace(token, original)
    return text


def tally(name: str, pairs: list[tuple[str, str]], seconds: float) -> None:
    with_codes = [(s, t) for s, t in pairs if placeholders(s)]
    results = [kept(s, t) for s, t in with_codes]
    total = sum(n for n, _, _ in results)
    exact = sum(ok for _, ok, _ in results)
    invented = sum(extra for _, _, extra in results)
    share = 100 * exact / len(results) if results else float("nan")
    print(
        f"{name:44s} {len(with_codes):6d} strings with {total:6d} placeholders: {exact:6d} kept exactly "
        f"({share:5.1f}%), {invented:4d} invented; {seconds:6.1f} s"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a de->en model directory")
    parser.add_argument("--catalogs", type=int, default=30, help="how many catalogs (alphabetical; default 30)")
    parser.add_argument("--beam", type=int, default=5)
    args = parser.parse_args()

    mos = sorted(glob.glob("/usr/share/locale/de/LC_MESSAGES/*.mo"))[: args.catalogs]
    catalogs = [reversed_catalog(mo) for mo in mos]
    translator = Translator.load(args.model)
    request = translator.request(beam=args.beam)
    print(f"{len(mos)} catalogs, {sum(len(c) for c in catalogs)} messages; {translator.engine.name}, beam {args.beam}")

    # 1. the .po route, checked by msgfmt -c
    pairs, msgfmt_errors, start = [], 0, time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for mo, catalog in zip(mos, catalogs, strict=True):
            document = read_document(str(catalog).encode(), "de.po", "de", target="en", retranslate=True)
            found = aligned_translations(translator, document.sentences, request) if document.sentences else []
            out = document.rebuilt(found)
            path = Path(tmp) / "out.po"
            path.write_bytes(out)
            check = subprocess.run(["msgfmt", "-c", "--use-fuzzy", "-o", "/dev/null", str(path)], capture_output=True)
            if check.returncode != 0:
                msgfmt_errors += 1
                print(f"  msgfmt -c refused the translation of {Path(mo).name}:", check.stderr.decode()[:300])
            for entry in polib.pofile(out.decode()):
                if entry.msgid_plural:
                    pairs += [(entry.msgid, entry.msgstr_plural[0]), (entry.msgid_plural, entry.msgstr_plural[1])]
                elif entry.msgid:
                    pairs.append((entry.msgid, entry.msgstr))
    tally("1. .po route (nmt translate)", pairs, time.perf_counter() - start)
    print(f"   msgfmt -c: {len(mos) - msgfmt_errors} of {len(mos)} translated catalogs accepted")

    strings = [s for s, _ in pairs]
    from fastapi.testclient import TestClient  # noqa: PLC0415

    from nmt.server import ServerLimits, create_app, model_info  # noqa: PLC0415

    limits = ServerLimits(max_chars=100_000, max_sentences=64, deadline_s=3600)
    app = create_app(translator, limits, info=model_info(args.model, translator))
    with TestClient(app, base_url="http://127.0.0.1") as client:

        def libretranslate(texts: list[str]) -> list[str]:
            out = []
            for k in range(0, len(texts), 32):
                answer = client.post("/translate", json={"q": texts[k : k + 32], "source": "de", "target": "en"})
                answer.raise_for_status()
                out += answer.json()["translatedText"]
            return out

        start = time.perf_counter()
        tally(
            "2. LibreTranslate API, as they are",
            list(zip(strings, libretranslate(strings), strict=True)),
            time.perf_counter() - start,
        )
        masked = [weblate_masked(s) for s in strings]
        start = time.perf_counter()
        answers = libretranslate([m for m, _ in masked])
        restored = [weblate_restored(a, tokens) for a, (_, tokens) in zip(answers, masked, strict=True)]
        tally(
            "3. LibreTranslate API, as Weblate masks them",
            list(zip(strings, restored, strict=True)),
            time.perf_counter() - start,
        )

    start = time.perf_counter()
    plain = translator.translate(strings, request)
    tally(
        "4. unmasked (the model sees the placeholders)",
        list(zip(strings, plain, strict=True)),
        time.perf_counter() - start,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
