"""HTML translated with its markup kept (nmt.markup)."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from bs4 import BeautifulSoup, NavigableString, Tag

from nmt.markup import blocks_of, no_empty_nodes, place_words, translate_html

PAGE = """<!DOCTYPE html>
<html><head><title>Ein Test</title>
<style>p { color: red; }</style>
<script>var s = "Ein Mann < zwei";</script></head>
<body>
  <h1>Die  Überschrift &amp; mehr</h1>
  <p>Ein Mann <b>fährt</b> ein <a href="/rad?x=1&amp;y=2" title="Fahrrad">rotes <i>Fahrrad</i></a>. Er ist müde!</p>
  <ul><li>Eins</li><li>Zwei <span class="notranslate">Code</span> drei</li></ul>
  <pre>  nicht   übersetzen  </pre>
  <p>Kaputt <b>nicht geschlossen <i>auch nicht
  <div translate="no">Bleibt so.</div>
  <!-- ein Kommentar -->
</body></html>"""


def tag_tree(html: str):
    """The page's elements as (name, attributes, children) without any text."""

    def tree(node: Tag):
        return (node.name, dict(node.attrs), [tree(c) for c in node.children if isinstance(c, Tag)])

    return tree(BeautifulSoup(html, "html.parser"))


def texts_of(html: str, name: str) -> list[str]:
    return [t.get_text() for t in BeautifulSoup(html, "html.parser").find_all(name)]


def upper(sentences: list[str]):
    """A 'translation' that upper-cases each word and keeps the word order (aligned one to one)."""
    return [(s.upper(), [(i, i) for i in range(len(s.split()))]) for s in sentences]


def test_the_tag_tree_attributes_and_untouched_parts_are_kept():
    out = translate_html(PAGE, upper, lang="de")
    assert tag_tree(out) == tag_tree(PAGE)
    assert texts_of(out, "script") == texts_of(PAGE, "script")
    assert texts_of(out, "style") == texts_of(PAGE, "style")
    assert texts_of(out, "pre") == ["  nicht   übersetzen  "]
    assert 'href="/rad?x=1&amp;y=2"' in out and 'title="Fahrrad"' in out  # attributes as they were
    assert "<!-- ein Kommentar -->" in out and out.startswith("<!DOCTYPE html>")
    assert texts_of(out, "span") == ["Code"] and texts_of(out, "div") == ["Bleibt so."]
    assert texts_of(out, "title") == ["EIN TEST"] and "&amp; MEHR" in out  # text translated, entity kept
    assert "NICHT GESCHLOSSEN" in out  # broken markup read as a browser would, not a crash


def test_inline_tags_stay_around_the_words_they_enclosed():
    out = translate_html('<p>Ein Mann <b>fährt</b> ein <a href="/x">rotes <i>Fahrrad</i></a>.</p>', upper, lang="de")
    assert out == '<p>EIN MANN <b>FÄHRT</b> EIN <a href="/x">ROTES <i>FAHRRAD</i></a>.</p>'


def test_a_sentences_final_mark_stays_outside_the_tag_the_source_kept_it_out_of():
    def translate(sentences):  # "Ein Mann im Schnee." -> "A man in the snow.", one to one but "the"
        return [("A man in the snow.", [(0, 0), (1, 1), (2, 2), (3, 4)]) for _ in sentences]

    assert translate_html("<p>Ein Mann im <i>Schnee</i>.</p>", translate, lang="de") == (
        "<p>A man in <i>the snow</i>.</p>"
    )
    assert translate_html('<p>Ein Mann im <a href="x">Schnee</a> .</p>', translate, lang="de") == (
        '<p>A man in <a href="x">the snow</a> .</p>'  # the source's own space before it kept
    )
    # inside the tag in the source: inside it in the output too
    assert translate_html("<p>Ein Mann im <i>Schnee.</i></p>", translate, lang="de") == (
        "<p>A man in <i>the snow.</i></p>"
    )
    questions = [("Where is he?!", [(0, 0), (1, 1), (2, 2)])]
    assert translate_html("<p>Wo ist <b>er</b>?!</p>", lambda s: questions, lang="de") == "<p>Where is <b>he</b>?!</p>"


def test_each_sentence_of_a_block_is_translated_alone_and_the_words_follow_their_alignment():
    calls = []

    def swap_first_two(sentences):  # "A B C" -> "B A C", with the alignment saying so
        calls.append(list(sentences))
        out = []
        for s in sentences:
            words = s.split()
            words[0], words[1] = words[1], words[0]
            out.append((" ".join(words), [(1, 0), (0, 1)] + [(i, i) for i in range(2, len(words))]))
        return out

    out = translate_html("<p><b>Ein</b> Mann läuft. <i>Zwei</i> Hunde bellen.</p>", swap_first_two, lang="de")
    assert calls == [["Ein Mann läuft.", "Zwei Hunde bellen."]]
    # The nodes keep their order; of the two orders possible, one word is misplaced, never more.
    soup = BeautifulSoup(out, "html.parser")
    assert soup.get_text().split() == ["Mann", "Ein", "läuft.", "Hunde", "Zwei", "bellen."]
    assert tag_tree(out) == tag_tree("<p><b>x</b> x <i>x</i> x</p>")


def test_no_word_is_lost_in_whitespace_between_tags():
    def swap(sentences):  # "Read more" -> "Mehr lesen": "Mehr" aligned to "more", "lesen" to "Read"
        return [("Mehr lesen", [(1, 0), (0, 1)]) for _ in sentences]

    out = translate_html('<p>\n  <a href="/x">Read</a> more\n</p>', swap, lang="en")
    assert BeautifulSoup(out, "html.parser").get_text().split() == ["Mehr", "lesen"]
    assert tag_tree(out) == tag_tree('<p><a href="/x">x</a></p>')


def test_an_unaligned_word_stays_with_the_word_after_it():
    def translate(sentences):  # "Sieh Hund" -> "Look the dog": "the" has no link of its own
        return [("Look the dog", [(0, 0), (1, 2)]) for _ in sentences]

    assert translate_html("<p>Sieh <b>Hund</b></p>", translate, lang="de") == "<p>Look <b>the dog</b></p>"


def test_without_alignments_words_are_spread_in_proportion():
    out = translate_html("<p>eins <b>zwei drei</b> vier</p>", lambda s: [(t.upper(), None) for t in s], lang="de")
    assert out == "<p>EINS <b>ZWEI DREI</b> VIER</p>"


def test_words_are_placed_in_order_at_the_least_cost():
    # word 0 wants node 1, word 1 wants node 0: in order, one of them must give way
    assert place_words([[1, 0], [0, 1]]) in ([0, 0], [1, 1])
    costs = [[0, 1, 1], [1, 1, 0], [1, 0, 1]]  # wants 0, 2, 1: the best in order costs 1
    placed = place_words(costs)
    assert placed == sorted(placed) and sum(costs[j][i] for j, i in enumerate(placed)) == 1
    assert place_words([[1, 0, 1], [1, 1, 0], [1, 1, 0]]) == [1, 2, 2]
    assert place_words([]) == []


def test_blocks_are_the_text_reached_through_inline_elements():
    soup = BeautifulSoup("<div>Eins <b>zwei</b><p>drei</p> vier</div>", "html.parser")
    assert [b.text for b in blocks_of(soup)] == ["Eins zwei", "drei", " vier"]
    assert all(isinstance(n, NavigableString) for b in blocks_of(soup) for n in b.nodes)


def test_translate_format_html_from_the_command_line(tiny_model_dir, tmp_path):
    page = tmp_path / "page.html"
    page.write_text(PAGE, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", "--model", str(tiny_model_dir), "--input", str(page)]
        + ["--format", "html", "--beam", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    assert tag_tree(run.stdout) == tag_tree(PAGE)
    assert texts_of(run.stdout, "script") == texts_of(PAGE, "script")
    # without --format, a page's extension says it is one (line by line, its tags would be words)
    from nmt.cli import main

    shutil.copy(page, tmp_path / "page.htm")
    out = tmp_path / "out.htm"
    command = ["translate", "--model", str(tiny_model_dir), "--input", str(tmp_path / "page.htm"), "--beam", "1"]
    assert main([*command, "--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == run.stdout


def test_cdata_and_translate_no_in_any_case_are_left_as_they_are():
    page = '<p>Daten <![CDATA[x < y]]> hier.</p><p translate="NO">Bleibt</p><p translate=" No ">Auch</p>'
    out = translate_html(page, upper, lang="de")
    assert "<![CDATA[x < y]]>" in out and "DATEN" in out and "HIER." in out  # hidden text stays hidden
    assert texts_of(out, "p")[1:] == ["Bleibt", "Auch"]


def test_a_byte_order_mark_is_no_text_to_translate():
    from nmt.formats.text_files import decoded

    assert decoded("\ufeff<!DOCTYPE html><p>Ein Mann.</p>".encode(), "page.html").startswith("<!DOCTYPE")


def same(sentences: list[str]):
    """A 'translation' that copies each sentence (aligned one to one)."""
    return [(s, [(i, i) for i in range(len(s.split()))]) for s in sentences]


def test_a_word_the_source_split_over_inline_tags_keeps_them_when_it_is_copied():
    page = "<p>H<sub>2</sub>O ist Wasser, CO<sub>2</sub> nicht. Fußnote<sup>1</sup> hier.</p>"
    assert translate_html(page, same, lang="de") == page
    assert translate_html(page, lambda s: [(x, None) for x in s], lang="de") == page  # without alignments too


def test_an_inline_element_is_never_left_empty_while_its_neighbours_have_words():
    # A shorter translation and no alignment: placed in proportion, every word would land before the link.
    page = '<p>Click the big button <a href="/x">here</a></p>'
    out = translate_html(page, lambda s: [("Klicken Sie", None) for _ in s], lang="en")
    assert out == '<p>Klicken <a href="/x">Sie</a></p>'
    # with one word only, nothing can be moved: the link keeps its tags, empty
    assert (
        translate_html(page, lambda s: [("Klicken", None) for _ in s], lang="en") == '<p>Klicken <a href="/x"></a></p>'
    )


def test_an_empty_inline_element_takes_a_word_through_a_neighbour_that_has_only_one():
    # Nodes: "Ein " <b>Mann</b> " mit " <i>Rad</i>. The bold node got three words, " mit " one and
    # <i> none: " mit "'s word moves on into <i> and the bold text's last word takes its place, so
    # the words keep their order and both tags hold text.
    assert no_empty_nodes([0, 1, 1, 1, 2], [False] * 5, owned={0, 1, 2, 3}) == [0, 1, 1, 2, 3]
    assert no_empty_nodes([0, 0, 0, 3], [False] * 4, owned={0, 1, 2, 3}) == [0, 1, 2, 3]  # from the right too
    # a word split over nodes (glued) is never taken apart, and too few words leave a node empty
    assert no_empty_nodes([0, 1, 1, 2], [False, False, True, False], owned={0, 1, 2, 3}) == [0, 1, 1, 2]
    assert no_empty_nodes([0, 1, 2], [False] * 3, owned={0, 1, 2, 3}) == [0, 1, 2]


def test_an_image_or_a_button_inside_a_sentence_does_not_cut_it_in_two():
    seen = []

    def translate(sentences):
        seen.extend(sentences)
        return upper(sentences)

    page = '<p>Drücken Sie <img src="s.png" alt="Speichern"> und dann <button>OK</button>.</p>'
    out = translate_html(page, translate, lang="de")
    assert seen == ["Drücken Sie  und dann OK."]  # one sentence, read around the image
    assert tag_tree(out) == tag_tree(page) and texts_of(out, "button") == ["OK"]
    assert out.index("DRÜCKEN SIE") < out.index("<img") < out.index("UND DANN")


def test_a_split_word_keeps_its_markup_each_time_it_occurs_and_a_piece_s_node_is_not_emptied():
    assert translate_html("<p>H<sub>2</sub>O is H<sub>2</sub>O</p>", same, lang="en") == (
        "<p>H<sub>2</sub>O is H<sub>2</sub>O</p>"
    )
    out = translate_html(
        '<p>Read the doc<a href="x">s</a> today please</p>',
        lambda s: [("Lies heute bitte die Dokumente", None) for _ in s],
        lang="en",
    )
    assert texts_of(out, "a")[0].strip()  # the link held only the end of a word: it still shows


def test_a_deeply_nested_page_is_read_without_recursion():
    page = "<div>" * 5000 + "Ein Mann. <b>Zwei</b> Hunde." + "</div>" * 5000
    blocks = blocks_of(BeautifulSoup(page, "html.parser"))
    assert [b.text for b in blocks] == ["Ein Mann. Zwei Hunde."]
    out = translate_html(page, lambda sentences: [(s.upper(), None) for s in sentences], lang="de")
    assert out == page.replace("Ein Mann.", "EIN MANN.").replace("Zwei", "ZWEI").replace("Hunde.", "HUNDE.")


def test_a_block_too_large_to_place_exactly_is_placed_in_proportion(monkeypatch):
    """Past MAX_PLACEMENT_CELLS (words x text nodes) no quadratic table is built: each output word
    still lands once, in order, in the nodes of its sentence, every tag kept."""
    import nmt.markup

    page = "<p>" + " ".join(f"<b>w{i}</b>" for i in range(40)) + " Ende.</p>"
    exact = translate_html(page, lambda sentences: [(s, None) for s in sentences], lang="de")
    monkeypatch.setattr(nmt.markup, "MAX_PLACEMENT_CELLS", 10)
    rough = translate_html(page, lambda sentences: [(s, None) for s in sentences], lang="de")
    assert tag_tree(rough) == tag_tree(page)
    assert rough == exact == page  # as many words as the source: each goes back where it was


def test_a_block_of_many_tags_is_rebuilt_in_linear_time():
    """Beautiful Soup's replace_with looks for a node among its siblings: 20,000 of them once took minutes."""
    import time

    page = "<p>" + "<b>Wort</b> und " * 20_000 + "</p>"
    start = time.perf_counter()
    out = translate_html(page, lambda sentences: [(s, None) for s in sentences], lang="de")
    assert out == page
    assert time.perf_counter() - start < 30  # about 3 s here; the quadratic version took over 100 s


def test_only_text_changes_the_rest_of_the_page_is_written_as_it_was():
    page = (
        '<!DOCTYPE html>\n<html lang="de">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width">\n<title>Titel &amp; mehr</title>\n</head>\n'
        '<body>\n<p class="a b" id="x" data-z="1">Ein <b>Hund</b> rennt.</p>\n'
        '<img src="a.png" alt=""><br>\n<input type="text" disabled>\n<!-- c -->\n</body>\n</html>\n'
    )
    unchanged = translate_html(page, lambda sentences: [(s, None) for s in sentences], lang="de")
    assert unchanged == page  # attribute order, bare booleans, alt="", <meta> unclosed, one line break
    xhtml = '<p>Ein<br/>Hund <img src="a.png" alt="x"/> rennt.</p>'
    assert translate_html(xhtml, lambda sentences: [(s, None) for s in sentences], lang="de") == xhtml


def test_placeholders_in_a_pages_text_are_placed_as_tags_and_never_read():
    import time

    from scripted import reversed_words

    from nmt.markup import HtmlPage
    from nmt.placeholders import CODE, codes_of

    html = "<p>Hallo {name}, <b>Sie haben %d neue</b> Nachrichten &amp; mehr: https://x.org/a?b=1.</p>"
    page = HtmlPage(html, "de", codes=CODE)
    assert all("{name}" not in s and "%d" not in s and "https" not in s for s in page.sentences)
    out = page.rebuilt(reversed_words(page.sentences))
    text = BeautifulSoup(out, "html.parser").get_text()
    assert codes_of(text) == ["{name}", "%d", "https://x.org/a?b=1"]
    assert tag_tree(out) == tag_tree(html)
    many = "<p>" + " ".join(f"Wort {{v{i}}}" for i in range(30_000)) + "</p>"  # a crafted page
    start = time.perf_counter()
    page = HtmlPage(many, "de", codes=CODE)
    assert len(page.codes) == 30_000 and time.perf_counter() - start < 20


def test_a_page_with_a_marked_section_the_parser_rejects_is_read():
    """Found by fuzzing (fuzz/fuzz_html_page.py): Python's html.parser rejects a whole page at an
    unknown `<![keyword[`, and that escaped as Beautiful Soup's ParserRejectedMarkup."""
    from nmt.markup import page_text, translate_html

    html = "<p>Ein Mann <![document[]> <b>fährt</b> Rad.</p><script>var s = '<![x[';</script>"
    out = translate_html(html, lambda sentences: [(s.upper(), None) for s in sentences], lang="de")
    assert (
        "MANN" in out and "FÄHRT" in out and "<!--[document[]-->" in out
    )  # a comment up to the `>`, as browsers read it
    assert "var s = '<![x[';" in out  # a script's text is not the page's: kept as it was
    assert tag_tree(out)[2] == [("p", {}, [("b", {}, [])]), ("script", {}, [])]
    assert "Ein Mann" in page_text(html)


def test_an_element_whose_end_tag_reads_as_another_is_written_so_that_it_reads_back_the_same():
    """Found by fuzzing (fuzz/fuzz_html_page.py; the three inputs reduced to these): html.parser reads
    a start tag's name up to a space, "/" or ">", but an end tag's name stops at a control character,
    so `</b\\x1e>` reads as `</b>`. Written back as `<b\\x1e></b\\x1e>`, an empty `<b\\x1e/>` held all
    that followed it; one holding text closed the wrong element."""
    from nmt.markup import closes_itself

    assert not closes_itself("b\x1e") and not closes_itself("h\x00ad") and closes_itself("b") and closes_itself("x-y")
    pages = [
        "<b\x1e/><b>Ein Mann</b>",  # the fuzzer's three inputs, reduced
        "<p>Ein<b\x1e/>Mann <i>fährt</i> Rad.</p>",
        "<div><b><p>Ein <b\x1e>Mann</p> fährt</b> Rad.</div>",  # closed by its parent's end tag
        '<p>Ei<p>Ein<b\x1e/>n<b<p>Ein<br/>.png" alt="x"/>.</p\x00\x00\x00\x00p>Eyn<br/>Hund <img src="a\x00\x00'
        '\x00rad">rotes <i>Fahrrad</i></a>. Er@ ist müde!r</p>\n  <ul><li>Eins</li><li>Zwei <sp\x00\x00\x00\x00',
    ]
    for html in pages:
        for translate in (lambda ss: [(s, None) for s in ss], upper):
            out = translate_html(html, translate, lang="de")
            assert tag_tree(out) == tag_tree(html), (html, out)
            # and each text where it was: the words of each element, the element's own
            assert [t.upper() for t in texts_of(out, "b\x1e")] == [t.upper() for t in texts_of(html, "b\x1e")]
    out = translate_html(pages[1], upper, lang="de")
    assert out == "<p>EIN<b\x1e/>MANN <i>FÄHRT</i> RAD.</p>"


def test_a_page_holding_a_lone_surrogate_is_refused_with_a_value_error_that_names_it():
    """Found by fuzzing (fuzz/fuzz_html_page.py, the inputs ED BB BF "!TPl>" and ED BB BF "<!Dl<"):
    a string with a lone surrogate (which JSON can carry) reached Beautiful Soup, which failed with
    a UnicodeEncodeError of its own; it is no page, and the refusal says which character."""
    from nmt.markup import page_text

    for html in ("\udeff!TPl>", "\udeff<!Dl<", "<p>Ein Hund \ud800 läuft.</p>" * 50):
        for read in (lambda h: translate_html(h, upper, lang="de"), page_text):
            with pytest.raises(ValueError, match=r"lone surrogate \(U\+D[8-F][0-9A-F]{2} at character \d+\)"):
                read(html)
