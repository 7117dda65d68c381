"""Harness: one document format through nmt.formats.translate_document with a scripted translation.

    python fuzz/fuzz_document.py FORMAT [libFuzzer flags] [corpus folders or files]

FORMAT: docx pptx xlsx odt odp ods epub srt vtt md html po xlf json arb yml xml.

Contract: the input, named doc.FORMAT, is translated from German into English and the output reopens
with the format's own reader (a package: zipfile opens it, same members, every member nmt changed
parses as XML; .po: polib; .json/.arb: json; .yml: ruamel.yaml; .xlf/.xml: lxml; the rest: UTF-8),
or the input is refused with a DocumentError of one line naming the file. Nothing else is raised;
the bounds are contract.py's.
"""

from __future__ import annotations

import importlib
import json
import sys

import atheris

from contract import (
    LANG,
    TARGET,
    Broken,
    fuzz,
    instrumented,
    refused,
    translation_for,
    utf8,
    xml_parses,
    zip_mutator,
    zip_reopens,
)

PACKAGES = {"docx", "pptx", "xlsx", "odt", "odp", "ods", "epub"}
# Each format's reader, and the library it reads with where that is Python (lxml and zipfile are C):
# only these are instrumented, as instrumenting every library would take seconds at each start.
READERS = {
    **{kind: ("nmt.formats.office", "nmt.markup") for kind in ("docx", "pptx", "xlsx", "odt", "odp", "ods")},
    "epub": ("nmt.formats.epub", "nmt.markup"),
    "srt": ("nmt.formats.subtitles",),
    "vtt": ("nmt.formats.subtitles",),
    "md": ("nmt.formats.markdown", "markdown_it"),
    "html": ("nmt.formats.web_page", "bs4"),
    "po": ("nmt.formats.gettext", "polib"),
    "xlf": ("nmt.formats.xliff",),
    "json": ("nmt.formats.resource_files",),
    "arb": ("nmt.formats.resource_files",),
    "yml": ("nmt.formats.resource_files", "ruamel.yaml"),
    "xml": ("nmt.formats.android",),
}
FORMATS = tuple(READERS)


def reopens(kind: str, before: bytes, after: bytes) -> None:
    """The translated file read back by a reader that is not nmt's (Broken if it cannot be). polib and
    ruamel.yaml are imported here, after main has imported (and instrumented) them for nmt's readers."""
    import polib  # noqa: PLC0415
    from ruamel.yaml import YAML  # noqa: PLC0415

    if kind in PACKAGES:
        zip_reopens(before, after)
    elif kind == "po":
        try:
            polib.pofile(utf8(after))
        except (OSError, ValueError) as err:  # polib's parse errors are OSError (IOError)
            raise Broken(f"polib cannot read the output: {err}") from err
    elif kind in ("json", "arb"):
        try:
            json.loads(utf8(after))
        except json.JSONDecodeError as err:
            raise Broken(f"the output is not JSON: {err}") from err
    elif kind == "yml":
        try:
            YAML(typ="rt").load(utf8(after))
        except Exception as err:  # noqa: BLE001 - any failure of ruamel.yaml to read it back
            raise Broken(f"ruamel.yaml cannot read the output: {type(err).__name__}: {err}") from err
    elif kind in ("xlf", "xml"):
        xml_parses(after, "the output")
    else:
        utf8(after)


def checker(kind: str):
    """The check of one input as a document of `kind` (see the module's contract); made after the
    reader's instrumented import (main)."""
    from nmt.formats import DocumentError, translate_document  # noqa: PLC0415

    name = f"doc.{kind}"

    def check(data: bytes) -> bool:
        try:
            out = translate_document(data, name, translation_for(data), lang=LANG, target=TARGET)
        except DocumentError as err:
            refused(err, name)
            return True
        reopens(kind, data, out)
        return False

    return check


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in FORMATS:
        sys.exit(f"usage: {sys.argv[0]} FORMAT [libFuzzer flags] [corpus...]; FORMAT one of {' '.join(FORMATS)}")
    kind = sys.argv.pop(1)
    # nmt loads a format's reader when a document of it is read: it is imported here, while imports
    # are instrumented, or libFuzzer would see no coverage in it. nmt's own modules are all instrumented
    # (the text paths: documents, markup, placeholders).
    with atheris.instrument_imports(include=instrumented("nmt", *READERS[kind][1:])):
        for module in READERS[kind]:
            importlib.import_module(module)
    fuzz(checker(kind), mutator=zip_mutator if kind in PACKAGES else None)


if __name__ == "__main__":
    main()
