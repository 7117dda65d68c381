"""HTML: the text of a page translated in context, its markup kept.

Each block (an element such as <p>, <li> or <td> holding text) is translated as one paragraph of
running text, inline tags and all: "Click <a href="/x">this <b>red</b> button</a> now." is read
as "Click this red button now.", so the model sees the whole sentence. The translated words are
then put back into the block's text nodes in order, every tag where it was: each output word goes
to the text node that the source word it is aligned to came from (word alignments from the model's
cross-attention, nmt.alignment), under the constraint that the nodes keep their order, which a
dynamic program over the output words solves exactly (fewest words placed away from their source).

So the page's tag tree, attributes included, is the input's; only text changes. The page is written
back as it was written where Beautiful Soup's own output would differ: attributes in their order,
boolean attributes bare, void elements closed as the page closes them, the doctype unchanged. Scripts, styles,
code, preformatted text and anything marked translate="no" or class="notranslate" are left as
they are. The parser is the standard library's, through Beautiful Soup, which reads broken markup
rather than failing (though not always as a browser would: an unclosed <p> holds the next one).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from html import escape as html_escape
from html.parser import HTMLParser

from bs4 import BeautifulSoup, NavigableString, PageElement, Tag
from bs4.element import Doctype, PreformattedString
from bs4.exceptions import ParserRejectedMarkup
from bs4.formatter import HTMLFormatter

from .documents import Paragraph

# Elements whose content is no text to translate.
UNTOUCHED = {"script", "style", "code", "pre", "kbd", "samp", "var", "textarea", "template", "svg", "math", "noscript"}
# Elements that sit inside a sentence: their text is translated with the words around them (an
# image or a control has none: the sentence goes on around it).
INLINE = {
    "a", "abbr", "b", "bdi", "bdo", "button", "cite", "data", "del", "dfn", "em", "font", "i", "img", "input", "ins",
    "label", "mark", "q", "s", "small", "span", "strong", "sub", "sup", "time", "u", "wbr",
}  # fmt: skip
# HTML's boolean attributes: present or absent, written bare ("disabled"); other empty values keep ="".
BOOLEAN_ATTRIBUTES = {
    "allowfullscreen", "async", "autofocus", "autoplay", "checked", "controls", "default", "defer", "disabled",
    "formnovalidate", "hidden", "inert", "ismap", "itemscope", "loop", "multiple", "muted", "nomodule",
    "novalidate", "open", "playsinline", "readonly", "required", "reversed", "selected",
}  # fmt: skip
_SELF_CLOSED = re.compile(r"<[A-Za-z][^<>]*/>")  # <br/>, <meta ... />: the XHTML way of closing
_WORD = re.compile(r"\S+")
# a word's body, up to its last letter, digit or underscore, and the punctuation after it: "snow." -> "snow", "."
_MARK = re.compile(r"(.*?\w)?([^\w\s]*)$", re.DOTALL)
inf = float("inf")
AWAY = 1e6  # the cost of a piece of a split word away from its own node: never, unless nothing else fits
_SPECIAL_STRINGS = PreformattedString  # comments, CDATA, doctypes, declarations: no text a reader sees
# Placing a block's words exactly costs (output words x text nodes) in time and memory: a crafted
# block of 30,000 one-word tags would take gigabytes. Past this many cells, words go in proportion.
MAX_PLACEMENT_CELLS = 1_000_000


def untouched(tag: Tag) -> bool:
    """Whether `tag` and everything in it is left as it is."""
    if tag.name in UNTOUCHED or str(tag.get("translate", "")).strip().lower() == "no":  # HTML: any case
        return True
    classes = tag.get("class") or []
    return "notranslate" in classes


@dataclass
class Block:
    """The text nodes of one block, in order; together they read as one paragraph."""

    nodes: list[NavigableString]
    # its text as the page has it where codes were cut out of it (mask_codes), and where they were
    written: str | None = None
    codes: list[tuple[int, int]] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.nodes)


def blocks_of(soup: BeautifulSoup) -> list[Block]:
    """Every block of text in the page: the text nodes reached from an element through inline
    elements only (a nested block is a block of its own).

    The tree is walked with a stack of its own, not by recursion: a page of 10,000 nested tags is
    valid HTML, and must not exhaust Python's stack."""
    blocks: list[Block] = []
    current: list[NavigableString] = []  # the text nodes of the block being read

    def close() -> None:
        if current and "".join(current).strip():
            blocks.append(Block(list(current)))
        current.clear()

    # one entry per open element: its children still to read, and whether its end ends a block
    stack: list[tuple[Iterator[PageElement], bool]] = [(iter(soup.children), True)]
    while stack:
        children, is_block = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if is_block:
                close()
        elif isinstance(child, NavigableString):
            if not isinstance(child, _SPECIAL_STRINGS):
                current.append(child)
        elif isinstance(child, Tag) and not untouched(child):
            inline = child.name in INLINE
            if not inline:
                close()  # the text before a nested block is a block of its own
            stack.append((iter(child.children), not inline))
    return blocks


def place_words(costs: Sequence[Sequence[float]]) -> list[int]:
    """The node of each output word, nodes in order (never decreasing), at the least total cost.

    costs[j][i]: the cost of output word j in node i (inf: never there). Among equal costs a word
    goes to the latest node it can, so a word without a link of its own stays with the word after it.
    O(words x nodes)."""
    words, nodes = len(costs), len(costs[0]) if costs else 0
    if not words:
        return []
    best = [list(costs[0])]  # best[j][i]: least cost of words 0..j with word j in node i
    for j in range(1, words):
        row, running = [], float("inf")
        for i in range(nodes):
            running = min(running, best[j - 1][i])
            row.append(running + costs[j][i])
        best.append(row)
    placed = [min(range(nodes), key=lambda i: (best[-1][i], -i))]
    for j in range(words - 2, -1, -1):
        placed.append(min(range(placed[-1] + 1), key=lambda i: (best[j][i], -i)))
    return placed[::-1]


def filled_texts(
    originals: Sequence[str], words: list[str], placed: list[int], glued: list[bool] | None = None
) -> list[str]:
    """The new text of each node once the output words are written into them (word j into node
    placed[j]), keeping each node's outer whitespace (so the block's own leading and trailing
    whitespace too); a node left with no words keeps only its whitespace. glued[j]: word j is the
    next piece of word j - 1 (a word the source split over nodes, "H<sub>2</sub>O"): no space
    between them."""
    glued = glued or [False] * len(words)
    texts: list[str] = ["" for _ in originals]
    starts_glued = [False for _ in originals]  # the node's first word continues the word before it
    for word, node, joined in zip(words, placed, glued, strict=True):
        if not texts[node]:
            starts_glued[node] = joined
        texts[node] += ("" if joined or not texts[node] else " ") + word
    wrote_text = False  # the block's new text so far holds more than whitespace
    last_char = ""  # and ends with this character
    out = []
    for i, original in enumerate(originals):
        if not original.strip():
            new = original  # whitespace between tags: as it was
        else:
            lead = original[: len(original) - len(original.lstrip())]
            trail = original[len(original.rstrip()) :]
            body = texts[i]
            if body and wrote_text and not last_char.isspace() and not lead and not starts_glued[i]:
                lead = " "  # two nodes' words would run together: the source had them in one word
            new = lead + body + trail if body else lead or trail
        if new:
            wrote_text, last_char = wrote_text or bool(new.strip()), new[-1]
        out.append(new)
    return out


def placed_texts(
    originals: Sequence[str], paragraph: Paragraph, results: Sequence[tuple[str, list[tuple[int, int]] | None]]
) -> list[str]:
    """The new text of each of a block's text nodes (`originals`, which read together as
    `paragraph`) once its sentences are replaced by their translations (`results`: (translation,
    word alignment or None) per sentence): each output word in the node of the source word it is
    aligned to, the nodes in order. Any markup that holds text nodes can use it (HTML here; the
    runs of Office and OpenDocument files, nmt.formats)."""
    text = "".join(originals)
    owner = [i for i, node in enumerate(originals) for _ in node]  # the node of each character
    text_nodes = [bool(node.strip()) for node in originals]
    words = sum(len(out.split()) for out, _ in results)
    placing = Placing() if words * sum(text_nodes) <= MAX_PLACEMENT_CELLS else None
    at, in_proportion = len(paragraph.gaps[0]), []
    for sentence, gap, (out, alignment) in zip(paragraph.sentences, paragraph.gaps[1:], results, strict=True):
        spans = [(m.start() + at, m.end() + at) for m in _WORD.finditer(sentence)]
        if placing is not None:
            placing.add_sentence(text, owner, spans, out.split(), alignment, text_nodes)
        else:
            last_text = max(i for i, has_text in enumerate(text_nodes) if has_text)
            sources = [owner[start] for start, _ in spans] or [last_text]
            in_proportion += proportional_nodes(sources, len(out.split()))
        at += len(sentence) + len(gap)
    if placing is None:  # too many words x tags to place exactly: in proportion, in linear time
        return filled_texts(originals, [w for out, _ in results for w in out.split()], in_proportion)
    # A node of punctuation alone ("?" after a closing tag) may stay empty: its mark travels with
    # the word before it, and no tag around words vanishes.
    worded = {i for i in placing.owned if any(c.isalnum() for c in originals[i])}
    placed = no_empty_nodes(place_words(placing.costs), placing.glued, worded)
    return filled_texts(originals, placing.words, placed, placing.glued)


def replace_strings(changed: list[tuple[NavigableString, str]]) -> None:
    """Put each new text in its node's place. Beautiful Soup's replace_with looks for the node among
    its siblings, one by one; a block of 30,000 tags would take minutes. So each parent's children
    are indexed once."""
    places: dict[int, dict[int, int]] = {}  # id(parent) -> id(child) -> its index
    for node, new in changed:
        parent = node.parent
        index = places.get(id(parent))
        if index is None:
            index = places[id(parent)] = {id(child): i for i, child in enumerate(parent.contents)}
        at = index[id(node)]
        node.extract(_self_index=at)  # one node in for one out: the others keep their index
        parent.insert(at, NavigableString(new))


# `<![` opens a marked section only before one of these keywords; Python's html.parser rejects the
# whole page at any other (`<![document[`), where browsers read a comment up to the next `>`. Scripts
# and styles are matched first only to be kept: their text is not markup.
_UNKNOWN_MARKED_SECTION = re.compile(
    r"(<(script|style)\b.*?</\2\s*>)|<!\[(?!(?:temp|cdata|ignore|include|rcdata|if|else|endif)(?![-_.a-z0-9]))([^>]*)(?:>|$)",
    re.IGNORECASE | re.DOTALL,
)


def parsed(html: str) -> BeautifulSoup:
    """The page as Python's html.parser reads it. A page it rejects (a marked section it does not
    know) is read with each such section made the comment a browser reads, so that any page is read.
    A string holding a lone surrogate ("\\udeff", which JSON can carry) is no page: a ValueError that
    names it, where Beautiful Soup would fail on it as it pleases (a UnicodeEncodeError, or none)."""
    try:
        html.encode("utf-8")
    except UnicodeEncodeError as err:
        character = f"U+{ord(html[err.start]):04X} at character {err.start}"
        raise ValueError(f"the page holds a lone surrogate ({character}), which is not text") from None
    try:
        soup = BeautifulSoup(html, "html.parser")
    except ParserRejectedMarkup:
        as_comments = _UNKNOWN_MARKED_SECTION.sub(lambda m: m[1] or f"<!--[{m[3]}-->", html)
        soup = BeautifulSoup(as_comments, "html.parser")
    for tag in soup.find_all(True):
        if not closes_itself(tag.name):
            _write_without_end_tag(tag)
    return soup


@lru_cache(maxsize=4096)
def closes_itself(name: str) -> bool:
    """Whether the parser reads the end tag `</name>` as the end of `name`. A start tag's name runs
    to the first space, "/" or ">", but an end tag's name stops at other characters too: html.parser
    reads "</b\x1e>" as "</b>", so an element <b\x1e> can only be closed by its parent's end tag."""
    ends: list[str] = []
    parser = HTMLParser(convert_charrefs=False)
    parser.handle_endtag = ends.append  # type: ignore[method-assign]
    parser.feed(f"</{name}>")
    parser.close()
    return ends == [name]


def _write_without_end_tag(tag: Tag) -> None:
    """Write an element whose end tag would be read as another one as the parser can read it back:
    empty, as "<name/>"; holding something, without an end tag, which the parser did not need either
    (such an element is closed by its parent's end tag or the page's end, after its last child)."""
    format_tag = tag._format_tag  # Beautiful Soup writes each start and end tag through this method

    def written(eventual_encoding, formatter, opening=True):
        if not opening:
            return ""
        start = format_tag(eventual_encoding, formatter, opening=True)
        return start if tag.contents or start.endswith("/>") else start[:-1] + "/>"

    tag._format_tag = written


def page_text(html: str) -> str:
    """The text a reader of the page sees (for language identification)."""
    return " ".join(block.text.strip() for block in blocks_of(parsed(html)))


@dataclass
class Placing:
    """A block's output words on their way into its text nodes: each word (or piece of a word the
    source split over nodes), whether it continues the word before it, its cost in each node."""

    words: list[str] = field(default_factory=list)
    glued: list[bool] = field(default_factory=list)
    costs: list[list[float]] = field(default_factory=list)
    owned: set[int] = field(default_factory=set)  # the nodes that held source words

    def add(self, word: str, glued: bool, costs: list[float]) -> None:
        self.words.append(word)
        self.glued.append(glued)
        self.costs.append(costs)

    def add_sentence(
        self,
        text: str,
        owner: list[int],
        spans: list[tuple[int, int]],
        out_words: list[str],
        alignment: list[tuple[int, int]] | None,
        text_nodes: list[bool],
    ) -> None:
        """One sentence's output words; spans: its source words' (start, end) in the block's text,
        whose characters owner[] maps to nodes. An output word that is a source word split over
        nodes ("H<sub>2</sub>O", copied through) is placed piece by piece, its markup kept inside."""
        source_nodes = [owner[start] for start, _ in spans]
        split: dict[str, list[list[tuple[int, str]]]] = {}  # such a source word -> its pieces, each time it occurs
        for start, end in spans:
            self.owned.update(owner[start:end])  # a piece's node too: "doc<a>s</a>" owns the link
            pieces = _pieces(text[start:end], owner[start:end])
            if len(pieces) > 1:
                split.setdefault(text[start:end], []).append(pieces)
        rows = _costs(source_nodes, len(out_words), text_nodes, alignment)
        mark_node = final_mark_node(text, owner, spans)
        for j, (word, row) in enumerate(zip(out_words, rows, strict=True)):
            occurrences = split.get(word)
            body, mark = _MARK.match(word).groups()
            if not occurrences and mark_node is not None and j == len(out_words) - 1 and body and mark:
                # the sentence's final mark goes where the source had it, outside the last word's tag
                self.add(body, False, row)
                self.add(mark, True, [0.0 if i == mark_node else AWAY if t else inf for i, t in enumerate(text_nodes)])
                continue
            if not occurrences:
                self.add(word, False, row)
                continue
            # the output's k-th copy takes the source's k-th occurrence (the last one for any more)
            pieces = occurrences.pop(0) if len(occurrences) > 1 else occurrences[0]
            for k, (node, piece) in enumerate(pieces):
                self.add(piece, k > 0, [0.0 if i == node else AWAY if t else inf for i, t in enumerate(text_nodes)])


def final_mark_node(text: str, owner: list[int], spans: list[tuple[int, int]]) -> int | None:
    """The node holding a sentence's final punctuation where it is not the node of the last letter
    before it ("<i>Schnee</i>." or "<a>Schnee</a> ."): the output's final mark belongs there, not
    inside the tag. None where the mark shares that node, or the sentence ends in no mark."""
    if not spans:
        return None
    start, end = spans[-1]
    body, mark = _MARK.match(text[start:end]).groups()
    if not mark:
        return None
    mark_at = end - len(mark)
    if body:  # "Schnee.": the mark ends the last word
        letter_node = owner[mark_at - 1]
    elif len(spans) > 1:  # "Schnee .": the mark is a word of its own
        letter_node = owner[spans[-2][1] - 1]
    else:
        return None
    return owner[mark_at] if owner[mark_at] != letter_node else None


CODE_ATTRIBUTE = "data-nmt-code"  # an element that stands for a code the model must not see
_CODE_ELEMENT = re.compile(rf'<span {CODE_ATTRIBUTE}="(\d+)"></span>')


def mask_codes(soup: BeautifulSoup, blocks: list[Block], codes: re.Pattern, after_code: set[int]) -> list[str]:
    """Each match of `codes` in the blocks' text replaced by an empty <span data-nmt-code="k">, the
    blocks' nodes by the text around them; the matches, in order (k). after_code: gets the id of
    each text node that directly follows a code."""
    found: list[str] = []
    replacements: list[tuple[NavigableString, list[PageElement]]] = []
    for block in blocks:
        nodes: list[NavigableString] = []
        written, end = block.text, 0  # where the node read so far ends in the block's text
        for node in block.nodes:
            text = str(node)
            start, end = end, end + len(text)
            if not codes.search(text):
                nodes.append(node)
                continue
            block.codes += [(start + m.start(), start + m.end()) for m in codes.finditer(text)]
            parts: list[PageElement] = []
            at = 0
            for m in codes.finditer(text):
                if m.start() > at:
                    parts.append(NavigableString(text[at : m.start()]))
                parts.append(soup.new_tag("span", attrs={CODE_ATTRIBUTE: str(len(found))}))
                found.append(m.group(0))
                at = m.end()
            if at < len(text):
                parts.append(NavigableString(text[at:]))
            for before, after in zip(parts, parts[1:], strict=False):
                if isinstance(before, Tag) and isinstance(after, NavigableString):
                    after_code.add(id(after))
            replacements.append((node, parts))
            nodes += [p for p in parts if isinstance(p, NavigableString)]
        block.nodes, block.written = nodes, written if block.codes else None
    _replace_nodes(replacements)
    return found


def _replace_nodes(replacements: list[tuple[NavigableString, list[PageElement]]]) -> None:
    """Each node replaced by its parts. Each parent's children are indexed once and changed from the
    last, so the earlier indices hold (as replace_strings does: a paragraph of 30,000 codes must not
    take minutes in Beautiful Soup's sibling search)."""
    by_parent: dict[int, list[tuple[NavigableString, list[PageElement]]]] = {}
    for node, parts in replacements:
        by_parent.setdefault(id(node.parent), []).append((node, parts))
    for changes in by_parent.values():
        parent = changes[0][0].parent
        index = {id(child): k for k, child in enumerate(parent.contents)}
        for node, parts in sorted(changes, key=lambda change: -index[id(change[0])]):
            at = index[id(node)]
            node.extract(_self_index=at)
            for part in reversed(parts):
                parent.insert(at, part)


class HtmlPage:
    """A page read for translation: `sentences` to translate, then `rebuilt(results)` once.

    results: for each sentence, (translation, word alignment or None), the alignment as (source
    word, output word) pairs over whitespace-separated words; without one, words are placed in
    proportion to the nodes' own words."""

    def __init__(self, html: str, lang: str, *, codes: re.Pattern | None = None):
        """codes: text the model must not see (a page's placeholders: nmt.placeholders.CODE): each
        match in the text becomes an empty element of its own, so it is placed by alignment as a
        tag is, and is written back as it was."""
        self.soup = parsed(html)
        self.formatter = AsWritten(self_closing=bool(_SELF_CLOSED.search(html)))
        self.blocks = blocks_of(self.soup)
        self.after_code: set[int] = set()  # text nodes right after a code: words moved there get a space
        self.codes: list[str] = [] if codes is None else mask_codes(self.soup, self.blocks, codes, self.after_code)
        self.paragraphs = [Paragraph.parse(block.text, lang) for block in self.blocks]
        self.sentences = [s for p in self.paragraphs for s in p.sentences]

    @property
    def sentences_as_written(self) -> list[str]:
        """Each sentence as the page's text has it, its codes in it (one per sentence; its markup
        left out): what a reviewer is shown (nmt.quality_report)."""
        return [
            w
            for block, paragraph in zip(self.blocks, self.paragraphs, strict=True)
            for w in (paragraph.as_written(block.written, block.codes) if block.written else paragraph.sentences)
        ]

    def name_language(self, tag: str) -> bool:
        """The root <html>'s lang (and xml:lang, an XHTML page's) set to `tag` where the page names
        its language there; an element's own lang inside is kept (a quoted phrase keeps its
        language). Whether anything changed."""
        root = next((node for node in self.soup.contents if isinstance(node, Tag) and node.name == "html"), None)
        changed = False
        for attribute in ("lang", "xml:lang"):
            if root is not None and root.get(attribute) not in (None, tag):
                root[attribute] = tag
                changed = True
        return changed

    def rebuilt(self, results: Sequence[tuple[str, list[tuple[int, int]] | None]]) -> str:
        """The page with each sentence replaced by its translation and the markup as it was."""
        if len(results) != len(self.sentences):
            raise ValueError(f"{len(results)} translations for {len(self.sentences)} sentences")
        answers = iter(results)
        changed: list[tuple[NavigableString, str]] = []
        for block, paragraph in zip(self.blocks, self.paragraphs, strict=True):
            mine = [next(answers) for _ in paragraph.sentences]
            originals = [str(node) for node in block.nodes]
            new = placed_texts(originals, paragraph, mine)
            for k, (node, old) in enumerate(zip(block.nodes, originals, strict=True)):
                # "{x}." that got words: "{x} the end.", not "{x}the end." (the source glued no word to it)
                if id(node) in self.after_code and new[k][:1].isalnum() and not old[:1].isalnum():
                    new[k] = " " + new[k]
            changed += [(node, t) for node, t, old in zip(block.nodes, new, originals, strict=True) if t != old]
        replace_strings(changed)
        page = "".join(
            f"<!DOCTYPE {node}>"
            if isinstance(node, Doctype)
            else node.decode(formatter=self.formatter)
            if isinstance(node, Tag)
            else node.output_ready(self.formatter)
            for node in self.soup.contents
        )  # Beautiful Soup writes a line break after a doctype, which the page has (or not) itself
        if not self.codes:
            return page
        return _CODE_ELEMENT.sub(lambda m: html_escape(self.codes[int(m.group(1))], quote=False), page)


class AsWritten(HTMLFormatter):
    """Beautiful Soup's minimal formatter, but attributes in the page's order (it sorts them),
    boolean ones bare, and void elements closed with "/>" only where the page does so."""

    def __init__(self, self_closing: bool):
        super().__init__(
            entity_substitution=HTMLFormatter.REGISTRY["minimal"].entity_substitution,
            void_element_close_prefix="/" if self_closing else None,
        )

    def attributes(self, tag: Tag):
        return [(k, None if v == "" and k in BOOLEAN_ATTRIBUTES else v) for k, v in (tag.attrs or {}).items()]


def translate_html(
    html: str,
    translate: Callable[[list[str]], Sequence[tuple[str, list[tuple[int, int]] | None]]],
    *,
    lang: str,
) -> str:
    """The page with its text translated and its markup kept.

    translate: sentences -> (translation, word alignment or None) for each, in order (see HtmlPage);
    lang: the source language (for splitting sentences).
    """
    page = HtmlPage(html, lang)
    return page.rebuilt(translate(page.sentences) if page.sentences else [])


def _pieces(word: str, nodes: Sequence[int]) -> list[tuple[int, str]]:
    """A source word cut where it crosses from one text node to the next: (node, text) pieces."""
    pieces: list[tuple[int, str]] = []
    for char, node in zip(word, nodes, strict=True):
        if pieces and pieces[-1][0] == node:
            pieces[-1] = (node, pieces[-1][1] + char)
        else:
            pieces.append((node, char))
    return pieces


def no_empty_nodes(placed: list[int], glued: list[bool], owned: set[int]) -> list[int]:
    """`placed`, where a node that held source words got none, given the first word of the nodes
    after it (else the last of those before): a link or a bold word left empty would vanish from
    the page. Where that neighbour has only the one word, it takes one from its own neighbour in
    turn (once: further on, words would leave the nodes they were aligned to), so the words keep
    their order. Pieces of a split word stay."""
    placed = list(placed)
    counts = [placed.count(node) for node in range(max([*placed, *owned], default=-1) + 1)]

    def whole(j: int) -> bool:  # a word not glued to its neighbours
        return not glued[j] and (j + 1 >= len(glued) or not glued[j + 1])

    def beyond(node: int, step: int) -> int | None:  # the first word past `node`, going `step`
        words = range(len(placed)) if step > 0 else range(len(placed) - 1, -1, -1)
        return next((j for j in words if (placed[j] - node) * step > 0), None)

    def moves(node: int, step: int) -> list[tuple[int, int]] | None:
        found, target = [], node
        while len(found) < 2 and (j := beyond(target, step)) is not None and whole(j):
            found.append((j, target))
            if counts[placed[j]] >= 2 or placed[j] not in owned:
                return found
            target = placed[j]  # left empty by this move: the next word over fills it
        return None

    for node in sorted(owned):
        if counts[node]:
            continue
        for j, target in moves(node, +1) or moves(node, -1) or []:
            counts[placed[j]] -= 1
            placed[j] = target
            counts[target] += 1
    return placed


def proportional_nodes(source_nodes: list[int], out_words: int) -> list[int]:
    """The node of each of `out_words` output words where the same fraction of the sentence's source
    words is (never decreasing, since source_nodes is not): the placement without an alignment, in
    linear time."""
    return [source_nodes[j * len(source_nodes) // out_words] for j in range(out_words)]


def _costs(
    source_nodes: list[int], out_words: int, text_nodes: list[bool], alignment: list[tuple[int, int]] | None
) -> list[list[float]]:
    """costs[j][i] for one sentence: 0 where output word j is aligned to a source word of node i, 1
    elsewhere, and never a node that holds only whitespace (text_nodes[i] False: it is written back
    as it was); an unaligned word costs the same in any text node. Without an alignment, each output
    word is expected where the same fraction of the source words is."""
    costs = []
    for j in range(out_words):
        if alignment is None:
            guess = source_nodes[min(len(source_nodes) - 1, j * len(source_nodes) // max(out_words, 1))]
            linked = {guess} if source_nodes else set()
        else:
            linked = {source_nodes[i] for i, k in alignment if k == j and i < len(source_nodes)}
        costs.append(
            [
                float("inf") if not text else 0.0 if (i in linked or not linked) else 1.0
                for i, text in enumerate(text_nodes)
            ]
        )
    return costs
