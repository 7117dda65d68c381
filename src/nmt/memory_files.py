"""Translation memory files: TMX (1.4b, what translation tools exchange) and two-column text.

    <tmx version="1.4"><header srclang="de" .../><body>
      <tu><tuv xml:lang="de"><seg>Guten Morgen</seg></tuv><tuv xml:lang="en"><seg>Good morning</seg></tuv></tu>
    </body></tmx>

A TMX unit holds the segment in several languages; the two asked for are read (a language matches
its regional variants: "de" reads "de-DE"), and a unit lacking either is skipped. Inline codes in a
segment (<bpt>, <ept>, <ph>, <it>, <hi>) hold the original format's code, not text: only the text
around them is read. The file is read as a stream (iterparse), so a large memory needs no tree of
itself in memory, and safely: no entity is expanded, no DTD loaded, nothing fetched, and a file that
declares entities of its own is refused.

A two-column file is UTF-8 text, one segment a line: source TAB target.

A TMX file (or a .tmx.gz) is training data too: `data.train_src: corpus.tmx` reads the pairs of
data.src_lang and data.tgt_lang from it (nmt.training.datasets).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

from lxml import etree

from .formats.xml_text import declares_own_dtd, syntax_error

XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"


def _language_matches(tag: str, asked: str) -> bool:
    tag, asked = tag.lower().replace("_", "-"), asked.lower().replace("_", "-")
    return tag == asked or tag.startswith(asked + "-")


def segment_text(seg: etree._Element) -> str:
    """A <seg>'s text without its inline codes' native content."""
    return (seg.text or "") + "".join(
        ("".join(child.itertext()) if child.tag in ("hi", "sub") else "") + (child.tail or "") for child in seg
    )


def tmx_pairs(path: Path, source: str | None, target: str | None) -> Iterator[tuple[str, str]]:
    """The (source, target) segments of a TMX file; ValueError naming the file for a bad one."""
    source_file = gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")  # noqa: SIM115
    with source_file:
        yield from _tmx_stream(source_file, path, source, target)


def _tmx_stream(stream, path: Path, source: str | None, target: str | None) -> Iterator[tuple[str, str]]:
    events = etree.iterparse(
        stream,
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
    )
    try:
        for event, element in events:
            if event == "start" and element.tag == "tmx":
                if declares_own_dtd(element.getroottree().docinfo):
                    raise ValueError(f"{path}: declares a DTD of its own (entities): refused")
            elif event == "start" and element.tag == "header":
                source = source or element.get("srclang")
            elif event == "end" and element.tag == "tu":
                pair = _unit_pair(element, path, source, target)
                if pair is not None:
                    yield pair
                element.clear(keep_tail=False)  # a streamed file keeps no unit it has read
    except etree.XMLSyntaxError as err:
        raise ValueError(f"{path}: not well-formed XML ({syntax_error(err)})") from None


def _unit_pair(unit: etree._Element, path: Path, source: str | None, target: str | None) -> tuple[str, str] | None:
    variants = {}
    for tuv in unit.iter("tuv"):
        lang = tuv.get(XML_LANG) or tuv.get("lang")  # TMX 1.4 writes xml:lang; 1.1 wrote lang
        seg = tuv.find("seg")
        if lang and seg is not None:
            variants[lang] = segment_text(seg)
    if source is None or target is None:
        languages = list(variants)
        if len(languages) != 2:
            raise ValueError(
                f"{path}:{unit.sourceline}: a unit in {len(languages)} languages ({', '.join(languages)}): "
                "name the memory's source and target languages"
            )
        source = source or next(lang for lang in languages if lang != target)
        target = target or next(lang for lang in languages if not _language_matches(lang, source))
    found = [
        next((text for lang, text in variants.items() if _language_matches(lang, want)), None)
        for want in (source, target)
    ]
    if None in found or not found[0].strip():
        return None
    return found[0], found[1]


def tsv_pairs(path: Path) -> Iterator[tuple[str, str]]:
    """The (source, target) lines of a two-column file; ValueError naming the file and line otherwise."""
    with open(path, "rb") as lines:
        for number, raw in enumerate(lines, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise ValueError(f"{path}:{number}: not valid UTF-8") from None
            if not line.strip():
                continue
            columns = line.split("\t")
            if len(columns) != 2:
                raise ValueError(
                    f"{path}:{number}: a memory line is source TAB target; this one has {len(columns)} columns"
                )
            yield columns[0], columns[1]


def read_pairs(path: Path, *, source: str | None = None, target: str | None = None) -> Iterator[tuple[str, str]]:
    """The (source, target) segments of a memory file, by its extension: .tmx, else two columns."""
    if not path.is_file():
        raise ValueError(f"{path}: no such memory file")
    if path.name.lower().endswith((".tmx", ".tmx.gz")):
        return tmx_pairs(path, source, target)
    return tsv_pairs(path)
