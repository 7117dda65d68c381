"""LibreTranslate's API on nmt's server: its own client library, its answers and its errors."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

import nmt.server.running
from nmt.cli import main
from nmt.config import DecodeConfig
from nmt.inference.contract import Capabilities
from nmt.server import ServerLimits, create_app, model_info, serve_in_thread
from nmt.translator import Translation, Translator

LOCAL = "http://127.0.0.1"
INFO = {"model": "stub", "parameters": 0, "src_lang": "de", "tgt_lang": "en", "device": "cpu"}
REPO = Path(__file__).resolve().parents[1]
libretranslatepy = pytest.importorskip("libretranslatepy")


class NBestEcho:
    """Stands in for Translator: the n-best of 'x' are 'x|0', 'x|1', ... and a duplicate of the best."""

    def __init__(self):
        self.decode = DecodeConfig(beam=2)
        self.engine = type("Engine", (), {"name": "echo", "capabilities": Capabilities()})()
        self.calls = []
        self.lock = threading.Lock()

    text_form = None  # reads running text

    def source_fits(self, text, **_):  # every sentence is short enough
        return True

    def check_request(self, request):  # every search is one it can run
        return request

    target_languages: list[str] = []  # one target language

    def check_languages(self, texts=(), target_lang=None, source_lang=None):  # takes every language
        pass

    def translate_detailed(self, texts, request):
        beam, n_best = request.beam, request.n_best
        with self.lock:
            self.calls.append((list(texts), beam, n_best))

        def n_best_of(t):  # the best, the best again (a duplicate), then others
            return [f"{t}|0", f"{t}|0", *[f"{t}|{i}" for i in range(1, n_best - 1)]][:n_best]

        return [[Translation(text, 0.0, 0.0, [], []) for text in n_best_of(t)] for t in texts]


@pytest.fixture
def echo():
    stub = NBestEcho()
    with TestClient(create_app(stub, ServerLimits(max_chars=40), info=INFO), base_url=LOCAL) as client:
        yield stub, client


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    """(base URL, translator) of a real server on the tiny de->en model."""
    translator = Translator.load(tiny_model_dir, device="cpu")
    app = create_app(translator, ServerLimits(), info=model_info(tiny_model_dir, translator))
    with serve_in_thread(app) as url:
        yield url, translator


# --- a client no one here wrote ----------------------------------------------------------------------
def test_libretranslatepy_translates_lists_languages_and_detects(served):
    url, translator = served
    api = libretranslatepy.LibreTranslateAPI(url)
    sentence = "Ein Mann fährt Fahrrad."
    assert api.translate(sentence, "de", "en") == translator.translate([sentence])[0]
    assert api.translate(sentence, "auto", "en") == translator.translate([sentence])[0]
    assert api.languages() == [
        {"code": "de", "name": "German", "targets": ["en"]},
        {"code": "en", "name": "English", "targets": []},
    ]
    found = api.detect("Zwei Hunde spielen im Schnee und ein Mann schaut zu.")
    assert found[0]["language"] == "de" and 50 < found[0]["confidence"] <= 100
    assert api.detect("A man is riding a bicycle down the street.")[0]["language"] == "en"


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("de", "fr", "fr is not supported"),
        ("en", "de", "German (de) is not available as a target language from English (en)"),
    ],
)
def test_libretranslatepy_sees_libretranslate_s_errors(served, source, target, message):
    url, _ = served
    api = libretranslatepy.LibreTranslateAPI(url)
    with pytest.raises(urllib.error.HTTPError) as error:
        api.translate("Ein Mann.", source, target)
    assert error.value.code == 400
    assert json.loads(error.value.read())["error"].startswith(message)


# --- the answers' shapes --------------------------------------------------------------------------------
def test_a_list_of_texts_gets_a_list_and_alternatives_are_the_unique_n_best(echo):
    stub, client = echo
    body = {"q": ["a", "b"], "source": "de", "target": "en", "alternatives": 2}
    answer = client.post("/translate", json=body).json()
    assert answer == {"translatedText": ["a|0", "b|0"], "alternatives": [["a|1"], ["b|1"]]}
    assert stub.calls == [(["a", "b"], 3, 3)]  # n_best 3 (the best and 2 more), beam at least that
    single = client.post("/translate", data={"q": "c", "source": "de", "target": "en"}).json()
    assert single == {"translatedText": "c|0"}  # a form body, one text: one string, no alternatives key


def test_auto_source_reports_the_detected_language(echo):
    _, client = echo
    answer = client.post("/translate", json={"q": "Ein Mann fährt Fahrrad.", "source": "auto", "target": "en"}).json()
    assert answer["detectedLanguage"]["language"] == "de" and answer["translatedText"] == "Ein Mann fährt Fahrrad.|0"
    listed = client.post("/translate", json={"q": ["Ein Hund.", "Zwei Katzen."], "source": "auto", "target": "en"})
    assert [d["language"] for d in listed.json()["detectedLanguage"]] == ["de", "de"]
    # digits, emoji: no language to tell; as LibreTranslate, the first source language, confidence 0
    numbers = client.post("/translate", json={"q": "12345", "source": "auto", "target": "en"})
    assert numbers.status_code == 200
    assert numbers.json()["detectedLanguage"] == {"confidence": 0.0, "language": "de"}


def test_the_fields_in_the_query_string_or_a_multipart_form_are_read_as_libretranslate_reads_them(echo):
    """deep-translator posts its fields in the query string, with no body; LibreTranslate's own page
    sends a multipart form."""
    _, client = echo
    in_query = client.post("/translate", params={"q": "a", "source": "de", "target": "en"})
    assert in_query.status_code == 200 and in_query.json() == {"translatedText": "a|0"}
    multipart = client.post("/translate", files={"q": (None, "b"), "source": (None, "de"), "target": (None, "en")})
    assert multipart.status_code == 200 and multipart.json() == {"translatedText": "b|0"}
    detected = client.post("/detect", params={"q": "Ein Mann fährt Fahrrad."})
    assert detected.status_code == 200 and detected.json()[0]["language"] == "de"
    # nmt's own API still needs its JSON: a body-less post without LibreTranslate's q is refused
    assert client.post("/translate", params={"text": "a"}).status_code == 415


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"source": "de", "target": "en"}, "Invalid request: missing q parameter"),
        ({"q": "a", "target": "en"}, "Invalid request: missing source parameter"),
        ({"q": "a", "source": "de"}, "Invalid request: missing target parameter"),
        ({"q": "a", "source": "de", "target": "en", "format": "xml"}, "xml format is not supported"),
        ({"q": "a", "source": "de", "target": "en", "alternatives": "two"}, "alternatives parameter is not a number"),
        ({"q": "a" * 41, "source": "de", "target": "en"}, r"request \(41\) exceeds text limit \(40\)"),
        ({"q": [1, 2], "source": "de", "target": "en"}, "q must be a string or a list of strings"),
    ],
)
def test_bad_requests_get_libretranslate_s_400(echo, body, message):
    _, client = echo
    for response in (client.post("/translate", json=body), client.post("/translate", data=body)):
        if response.request.headers["content-type"].startswith("application/x-www") and "q" in body:
            if not isinstance(body["q"], str):  # a form has no lists: q is sent twice, which one was meant?
                message = "Invalid request: q is sent more than once"
        assert response.status_code == 400 and re.search(message, response.json()["error"]), response.json()


def test_a_field_no_endpoint_reads_may_come_twice_but_not_one_it_reads(echo):
    """Found by schemathesis: the description lets a body carry fields of its own, so their repeats
    are passed over; a repeat of a field the server reads is a 400 naming it."""
    _, client = echo
    body = "q=Hallo&source=de&target=en&extra=1&extra=2"
    form = {"content-type": "application/x-www-form-urlencoded"}
    answer = client.post("/translate", content=body, headers=form)
    assert answer.status_code == 200 and answer.json() == {"translatedText": "Hallo|0"}, answer.json()
    detected = client.post("/detect", content="q=Hallo&extra=1&extra=", headers=form)
    assert detected.status_code == 200, detected.json()
    twice = client.post("/translate", content=body + "&target=de", headers=form)
    assert twice.status_code == 400 and twice.json()["error"] == "Invalid request: target is sent more than once"


@pytest.mark.parametrize(
    ("fields", "message"),
    [  # found by schemathesis (tests/test_api_schema.py): each was read as the field left out
        ({"alternatives": {}}, "alternatives parameter is not a number"),
        ({"alternatives": True}, "alternatives parameter is not a number"),
        ({"alternatives": 2.5}, "alternatives parameter is not a number"),
        ({"format": {}}, "{} format is not supported"),
        ({"format": False}, "False format is not supported"),
        ({"api_key": 1234}, "api_key must be a string, not int"),
    ],
)
def test_a_json_field_of_no_type_libretranslate_takes_is_a_400_not_the_field_left_out(echo, fields, message):
    _, client = echo
    response = client.post("/translate", json={"q": "a", "source": "de", "target": "en", **fields})
    assert response.status_code == 400 and message in response.json()["error"]
    if "api_key" in fields:
        detect = client.post("/detect", json={"q": "Ein Mann fährt Fahrrad.", **fields})
        assert detect.status_code == 400 and message in detect.json()["error"]


def test_json_null_or_a_whole_number_is_what_libretranslate_reads_it_as(echo):
    _, client = echo
    nulls = {"q": "a", "source": "de", "target": "en", "format": None, "alternatives": None, "api_key": None}
    assert client.post("/translate", json=nulls).json() == {"translatedText": "a|0"}
    whole = {"q": "a", "source": "de", "target": "en", "alternatives": 2.0}  # the best, its duplicate, a|1
    assert client.post("/translate", json=whole).json() == {"translatedText": "a|0", "alternatives": ["a|1"]}


def test_auto_picks_among_the_sources_that_translate_into_the_target(echo):
    """English text sent to a de-en server with source "auto" is translated as German (the only source
    into English), not refused as English -> English (found by schemathesis: "ø" was read as English)."""
    _, client = echo
    for q in ("ø", "A man is riding a bicycle."):
        answer = client.post("/translate", json={"q": q, "source": "auto", "target": "en"})
        assert answer.status_code == 200, answer.json()
        assert answer.json()["detectedLanguage"]["language"] == "de"
    # /detect itself still tells every language the server knows
    assert client.post("/detect", json={"q": "A man is riding a bicycle."}).json()[0]["language"] == "en"


def test_a_form_post_from_another_site_is_refused(echo):
    """Form bodies need no CORS preflight, so the Origin check is what keeps other sites' pages out."""
    _, client = echo
    ask = {"q": "a", "source": "de", "target": "en"}
    assert client.post("/translate", data=ask, headers={"Origin": "https://evil.example"}).status_code == 403
    assert client.post("/detect", data={"q": "a"}, headers={"Origin": "https://evil.example"}).status_code == 403
    assert client.post("/translate", data=ask, headers={"Origin": "http://127.0.0.1"}).status_code == 200


def test_suggestions_are_refused_as_libretranslate_refuses_them_when_off(echo):
    _, client = echo
    assert client.get("/frontend/settings").json()["suggestions"] is False
    answer = client.post("/suggest", data={"q": "a", "s": "b", "source": "de", "target": "en"})
    assert answer.status_code == 403 and answer.json() == {"error": "Suggestions are disabled on this server."}


def test_nmt_s_own_api_shares_the_path(echo):
    _, client = echo
    answer = client.post("/translate", json={"text": ["a"]}).json()
    assert answer["translations"][0]["text"] == "a|0"


def test_frontend_settings_and_detect_answer_as_libretranslate(echo):
    _, client = echo
    settings = client.get("/frontend/settings").json()
    assert settings["charLimit"] == 40 and settings["language"]["target"] == {"code": "en", "name": "English"}
    assert settings["language"]["source"]["code"] == "auto" and settings["keyRequired"] is False
    assert client.post("/detect", data={"q": ""}).json() == {"error": "Invalid request: missing q parameter"}
    assert client.post("/detect", data={"q": "!!!"}).json() == [{"confidence": 0.0, "language": "de"}]
    listed = client.post("/detect", json={"q": ["Hund", "chien"]})
    assert listed.status_code == 400 and listed.json() == {"error": "Invalid request: q must be a string, not list"}
    bare = client.post("/detect")  # no body, no Content-Type: the two kinds of body it takes are named
    assert bare.status_code == 415 and "as JSON (Content-Type: application/json) or as a form" in bare.json()["error"]


# --- docs/serving.md's curl examples, run -------------------------------------------------------------------
def curl_examples() -> list[str]:
    text = (REPO / "docs" / "serving.md").read_text(encoding="utf-8")
    section = text.split("## LibreTranslate's API", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(curl .+?)(?<!\\)$", re.sub(r"\\\n\s*", " ", section), flags=re.MULTILINE)
    assert len(commands) >= 4, commands
    return commands


def test_every_curl_example_in_the_docs_runs(served):
    url, _ = served
    for command in curl_examples():
        argv = [word.replace("http://localhost:8000", url) for word in shlex.split(command)]
        result = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, (command, result.stderr)
        answer = json.loads(result.stdout)
        assert "error" not in answer, (command, answer)


# --- several models -----------------------------------------------------------------------------------------
class Tagged(NBestEcho):
    """An n-best echo that says which model answered (after the text: a translation begins as its
    source does, nmt.short_segments)."""

    def __init__(self, tag: str):
        super().__init__()
        self.tag = tag

    def translate_detailed(self, texts, request, **options):
        self.calls.append(options)
        return [[Translation(f"{t}|{self.tag}", 0.0, 0.0, [], [])] for t in texts]


def test_each_direction_reaches_its_own_model():
    de_en, en_de = Tagged("de-en"), Tagged("en-de")
    info_en_de = {**INFO, "model": "stub2", "src_lang": "en", "tgt_lang": "de"}
    app = create_app(de_en, ServerLimits(), info=INFO, more_models=[(en_de, info_en_de)])
    with TestClient(app, base_url=LOCAL) as client:
        ask = {"q": "Hallo", "source": "de", "target": "en"}
        assert client.post("/translate", json=ask).json() == {"translatedText": "Hallo|de-en"}
        ask = {"q": "Hello", "source": "en", "target": "de"}
        assert client.post("/translate", json=ask).json() == {"translatedText": "Hello|en-de"}
        # LibreTranslate's codes with a region or script name the language where only it is served
        ask = {"q": "Hello", "source": "en-US", "target": "de-AT"}
        assert client.post("/translate", json=ask).json() == {"translatedText": "Hello|en-de"}
        # no letters to tell a language by: the source that translates into the target
        numbers = client.post("/translate", json={"q": "42", "source": "auto", "target": "de"})
        assert numbers.json()["detectedLanguage"] == {"confidence": 0.0, "language": "en"}
        auto = client.post("/translate", json={"q": "A man is riding a bicycle.", "source": "auto", "target": "de"})
        assert auto.json()["translatedText"].endswith("|en-de")
        assert client.get("/languages").json() == [
            {"code": "de", "name": "German", "targets": ["en"]},
            {"code": "en", "name": "English", "targets": ["de"]},
        ]
        refused = client.post("/translate", json={"q": "a", "source": "de", "target": "de"})
        assert refused.status_code == 400
        assert refused.json() == {
            "error": "German (de) is not available as a target language from German (de) "
            "(this server translates de-en, en-de)"
        }
        assert client.post("/translate", json={"text": ["x"]}).json()["translations"][0]["text"] == "x|de-en"
        health = client.get("/health").json()
        assert health["ready"] and [m["model"] for m in health["models"]] == ["stub", "stub2"]


def test_a_many_to_one_model_serves_each_source_it_was_trained_on_and_auto_finds_which():
    into_english = Tagged("xx-en")  # data.pairs [de-en, fr-en]: no target token, one model for both
    info = {**INFO, "src_lang": None, "tgt_lang": "en", "directions": [["de", "en"], ["fr", "en"]]}
    with TestClient(create_app(into_english, ServerLimits(), info=info), base_url=LOCAL) as client:
        assert client.get("/languages").json() == [
            {"code": "de", "name": "German", "targets": ["en"]},
            {"code": "en", "name": "English", "targets": []},
            {"code": "fr", "name": "French", "targets": ["en"]},
        ]
        for source, text in (("de", "Ein Mann."), ("fr", "Un homme.")):
            ask = {"q": text, "source": source, "target": "en"}
            assert client.post("/translate", json=ask).json() == {"translatedText": f"{text}|xx-en"}
        assert [call.get("target_lang") for call in into_english.calls] == [None, None]  # no token to ask for
        french = "Un homme fait du vélo dans la rue avec son chien."
        auto = client.post("/translate", json={"q": french, "source": "auto", "target": "en"}).json()
        assert auto == {"translatedText": f"{french}|xx-en", "detectedLanguage": auto["detectedLanguage"]}
        assert auto["detectedLanguage"]["language"] == "fr"
        refused = client.post("/translate", json={"q": "a", "source": "cs", "target": "en"})
        assert refused.status_code == 400
        # LibreTranslate's words, then what is served
        assert refused.json() == {"error": "cs is not supported (this server translates de-en, fr-en)"}


def test_auto_detects_each_text_of_a_list_and_each_goes_to_its_own_language_s_model():
    """LibreTranslate's rule: a text of more than 40 characters is detected on its own; a shorter one,
    too short to tell, takes the language detected over all the texts."""
    de_en, fr_en = Tagged("de-en"), Tagged("fr-en")
    info_fr_en = {**INFO, "model": "stub2", "src_lang": "fr", "tgt_lang": "en"}
    app = create_app(de_en, ServerLimits(), info=INFO, more_models=[(fr_en, info_fr_en)])
    german = "Ein Hund rennt im Park und ein Mann fährt Fahrrad."
    french = ["Un homme fait du vélo dans la rue avec son chien.", "Une femme lit un livre sous un grand arbre."]
    texts = [french[0], german, "Ein Hund.", french[1]]
    with TestClient(app, base_url=LOCAL) as client:
        answer = client.post("/translate", json={"q": texts, "source": "auto", "target": "en"}).json()
        assert [d["language"] for d in answer["detectedLanguage"]] == ["fr", "de", "fr", "fr"]
        routes = ["fr-en", "de-en", "fr-en", "fr-en"]
        assert answer["translatedText"] == [f"{text}|{route}" for route, text in zip(routes, texts, strict=True)]
        with_alternatives = {"q": texts, "source": "auto", "target": "en", "alternatives": 1}
        assert client.post("/translate", json=with_alternatives).json()["translatedText"] == answer["translatedText"]
    assert len(de_en.calls) == len(fr_en.calls) == 2  # one call per model and request, not one per text


def test_two_models_for_one_direction_are_refused():
    with pytest.raises(ValueError, match="stub and stub both translate de -> en: serve one model per direction"):
        create_app(Tagged("a"), ServerLimits(), info=INFO, more_models=[(Tagged("b"), INFO)])


def test_nmt_serve_takes_several_models_and_refuses_a_direction_twice(tiny_model_dir, tmp_path, monkeypatch, capsys):
    reverse = tmp_path / "en_de"
    shutil.copytree(tiny_model_dir, reverse)
    config = (reverse / "config.yaml").read_text()
    # the same weights, labelled English -> German: a second direction for the router
    (reverse / "config.yaml").write_text(
        config.replace("src_lang: de", "src_lang: en").replace("tgt_lang: en", "tgt_lang: de")
    )
    served = {}
    monkeypatch.setattr(nmt.server.running, "run_app", lambda app, *a, **k: served.setdefault("app", app))
    assert main(["serve", "--model", str(tiny_model_dir), "--model", str(reverse), "--port", "0"]) == 0
    with TestClient(served["app"], base_url=LOCAL) as client:
        assert [lang["targets"] for lang in client.get("/languages").json()] == [["en"], ["de"]]
        assert client.post("/translate", data={"q": "A man.", "source": "en", "target": "de"}).status_code == 200

    twin = tmp_path / "twin"
    shutil.copytree(tiny_model_dir, twin)
    monkeypatch.setattr(nmt.server.running.Translator, "load", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["serve", "--model", str(tiny_model_dir), "--model", str(twin), "--port", "0"]) == 2
    assert "both translate de -> en: serve one model per direction" in capsys.readouterr().err


# --- files ---------------------------------------------------------------------------------------------------
def test_a_text_file_comes_back_translated_line_by_line_with_its_blank_lines(echo):
    _, client = echo
    document = "Erste Zeile.\n\nZweite Zeile.\n  \nDritte.\n"
    sent = client.post(
        "/translate_file",
        data={"source": "de", "target": "en"},
        files={"file": ("brief.txt", document.encode(), "text/plain")},
    )
    assert sent.status_code == 200, sent.json()
    url = sent.json()["translatedFileUrl"]
    assert re.fullmatch(r"http://127\.0\.0\.1/download_file/[0-9a-f]{32}_en\.txt", url)
    fetched = client.get(url.removeprefix("http://127.0.0.1"))
    assert fetched.status_code == 200 and 'filename="translated_en.txt"' in fetched.headers["content-disposition"]
    assert fetched.text == "Erste Zeile.|0\n\nZweite Zeile.|0\n  \nDritte.|0\n"
    assert client.get(url.removeprefix("http://127.0.0.1")).status_code == 404  # fetched once

    # a target with a region is named by the served code: the file can be fetched
    regional = client.post(
        "/translate_file",
        data={"source": "de", "target": "en_GB"},
        files={"file": ("a.txt", b"Hallo.\n", "text/plain")},
    )
    path = regional.json()["translatedFileUrl"].removeprefix("http://127.0.0.1")
    assert path.endswith("_en.txt") and client.get(path).status_code == 200


@pytest.mark.parametrize(
    ("files", "data", "message"),
    [
        (
            {"file": ("a.pdf", b"%PDF", "application/pdf")},
            {"source": "de", "target": "en"},
            "file format not supported",
        ),
        (
            {"file": ("a.txt", b"\xff\xfe\x00", "text/plain")},
            {"source": "de", "target": "en"},
            r"a\.txt:1: not valid UTF-8 \(byte 1 of the file\)",
        ),
        ({"file": ("a.txt", b"Hallo", "text/plain")}, {"target": "en"}, "missing source parameter"),
        ({"other": ("a.txt", b"Hallo", "text/plain")}, {"source": "de", "target": "en"}, "missing file parameter"),
        ({"file": ("a.txt", b"x" * 41, "text/plain")}, {"source": "de", "target": "en"}, r"request \(41\) exceeds"),
        ({"file": ("a.txt", b"Hallo", "text/plain")}, {"source": "de", "target": "fr"}, "fr is not supported"),
        # found by schemathesis: a repeated field was read as its first value, whatever the others held
        (
            {"file": ("a.txt", b"Hallo", "text/plain")},
            {"source": "de", "target": "en", "api_key": ["[]", "{}"]},
            "api_key is sent more than once",
        ),
        (
            {"file": ("a.txt", b"Hallo", "text/plain")},
            {"source": "de", "target": "en", "other": ["", "x"], "api_key": ["", ""]},
            "api_key is sent more than once",  # not other, which no endpoint reads
        ),
        (
            [("file", ("a.txt", b"Hallo", "text/plain")), ("file", ("b.txt", b"Welt", "text/plain"))],
            {"source": "de", "target": "en"},
            "file is sent more than once",
        ),
    ],
)
def test_bad_files_get_libretranslate_s_400(echo, files, data, message):
    _, client = echo
    answer = client.post("/translate_file", data=data, files=files)
    assert answer.status_code == 400 and re.search(message, answer.json()["error"]), answer.json()


def test_the_process_keeps_the_newest_files_for_half_an_hour_and_hands_each_out_once():
    from nmt.server.shared_state import DOWNLOAD_EXPIRY_S, MAX_DOWNLOADS, FileStore

    now = [time.time()]
    store = FileStore(clock=lambda: now[0])
    try:
        names = [f"{i:032x}_en.txt" for i in range(MAX_DOWNLOADS + 1)]
        for i, name in enumerate(names):
            store.keep(name, name.encode())
            os.utime(store.folder / name, (now[0] + i, now[0] + i))  # kept one after another
        assert store.take(names[0]) is None  # the oldest made room
        assert store.take(names[1]) == names[1].encode() and store.take(names[1]) is None  # once
        now[0] += DOWNLOAD_EXPIRY_S + MAX_DOWNLOADS + 1
        assert store.take(names[2]) is None  # too old to hand out
    finally:
        store.drop()


def test_download_names_are_checked(echo):
    _, client = echo
    assert client.get("/download_file/..%2f..%2fetc%2fpasswd").status_code in (400, 404)
    assert client.get("/download_file/notes.txt").json() == {"error": "Invalid filename"}


def test_a_text_of_several_sentences_is_translated_sentence_by_sentence(echo):
    stub, client = echo
    answer = client.post("/translate", json={"q": "Ein Hund. Zwei Katzen!\nDrei.", "source": "de", "target": "en"})
    assert answer.json() == {"translatedText": "Ein Hund.|0 Zwei Katzen!|0\nDrei.|0"}
    assert stub.calls[-1][0] == ["Ein Hund.", "Zwei Katzen!", "Drei."]  # one call, the sentences batched


def test_format_html_keeps_the_markup_and_translates_the_text():
    stub = NBestEcho()
    page = '<p>Ein <b>Hund</b> läuft. <a href="/x?a=1&amp;b=2">Zwei</a> Katzen!</p><script>var x = "Ein";</script>'
    with TestClient(create_app(stub, ServerLimits(), info=INFO), base_url=LOCAL) as client:
        answer = client.post("/translate", json={"q": page, "source": "de", "target": "en", "format": "html"})
    out = answer.json()["translatedText"]
    assert stub.calls[-1][0] == ["Ein Hund läuft.", "Zwei Katzen!"]  # whole sentences, tags aside
    assert BeautifulSoup(out, "html.parser").p.get_text() == "Ein Hund läuft.|0 Zwei Katzen!|0"
    assert out.endswith('<script>var x = "Ein";</script>')
    assert [t.name for t in BeautifulSoup(out, "html.parser").find_all(True)] == ["p", "b", "a", "script"]
    assert 'href="/x?a=1&amp;b=2"' in out


def test_an_html_file_comes_back_as_html(echo):
    _, client = echo
    page = "<html><body>\n<h1>Titel</h1>\n<p>Ein <i>kurzer</i> Satz.</p>\n</body></html>"  # lines within 40
    sent = client.post(
        "/translate_file",
        data={"source": "de", "target": "en"},
        files={"file": ("seite.html", page.encode(), "text/html")},
    )
    assert sent.status_code == 200, sent.json()
    url = sent.json()["translatedFileUrl"]
    assert url.endswith("_en.html")
    fetched = client.get(url.removeprefix("http://127.0.0.1"))
    assert fetched.headers["content-type"].startswith("text/html")
    soup = BeautifulSoup(fetched.text, "html.parser")
    assert [t.name for t in soup.find_all(True)] == ["html", "body", "h1", "p", "i"]
    assert soup.h1.get_text() == "Titel|0" and soup.p.get_text().endswith("Satz.|0")


def test_the_server_s_own_refusals_reach_a_libretranslate_client_in_its_shape():
    """A body over --max-body-bytes is refused before it is read as anything: LibreTranslate's
    client still gets {"error": message}; nmt's own JSON API keeps its {"error": code, "message"}."""
    app = create_app(NBestEcho(), ServerLimits(max_body_bytes=64), info=INFO)
    with TestClient(app, base_url=LOCAL) as client:
        big = "x" * 200
        form = client.post("/translate", data={"q": big, "source": "de", "target": "en"})
        assert form.status_code == 413 and set(form.json()) == {"error"} and "bytes" in form.json()["error"]
        detect = client.post("/detect", data={"q": big})
        assert detect.status_code == 413 and set(detect.json()) == {"error"}
        own = client.post("/translate", json={"text": [big]})
        assert own.status_code == 413 and own.json()["error"] == "limit_exceeded" and "message" in own.json()


def test_a_word_document_comes_back_as_a_word_document_with_its_bold_run(echo):
    import io

    docx = pytest.importorskip("docx")
    document = docx.Document()
    paragraph = document.add_paragraph("Ein ")
    paragraph.add_run("Hund").bold = True
    paragraph.add_run(" läuft.")
    upload = io.BytesIO()
    document.save(upload)
    _, client = echo
    sent = client.post(
        "/translate_file",
        data={"source": "de", "target": "en"},
        files={"file": ("brief.docx", upload.getvalue(), "application/octet-stream")},
    )
    assert sent.status_code == 200, sent.json()
    url = sent.json()["translatedFileUrl"]
    assert url.endswith("_en.docx")
    fetched = client.get(url.removeprefix("http://127.0.0.1"))
    assert fetched.headers["content-type"] == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert 'filename="translated_en.docx"' in fetched.headers["content-disposition"]
    translated = docx.Document(io.BytesIO(fetched.content)).paragraphs[0]
    assert translated.text == "Ein Hund läuft.|0" and any(r.bold and "Hund" in r.text for r in translated.runs)


def test_placeholders_in_a_text_come_back_once_each_as_weblate_sends_them(echo):
    stub, client = echo
    texts = ["Lösche [X7X] Dateien?", "Hallo %s, {name}!", "Kein Code"]
    answer = client.post("/translate", json={"q": texts, "source": "de", "target": "en"})
    assert answer.status_code == 200, answer.json()
    out = answer.json()["translatedText"]
    # the model never read a placeholder, and each is back in its text once
    assert stub.calls[-1][0] == ["Lösche  Dateien?", "Hallo , !", "Kein Code"]
    assert out[0].count("[X7X]") == 1 and out[1].count("%s") == 1 and out[1].count("{name}") == 1
    assert out[2] == "Kein Code|0"


def test_placeholders_in_an_html_text_come_back_once_each(echo):
    stub, client = echo
    q = "<p>Klicken Sie <b>hier</b>, {name}.</p>"
    answer = client.post("/translate", json={"q": q, "source": "de", "target": "en", "format": "html"})
    assert answer.status_code == 200, answer.json()
    assert answer.json()["translatedText"].count("{name}") == 1 and "{name}" not in str(stub.calls[-1][0])


def test_nmt_s_own_api_keeps_placeholders_where_only_the_text_is_asked_for(echo):
    stub, client = echo
    text = "Lösche %d Dateien aus {ordner}?"
    answer = client.post("/translate", json={"text": [text, "Kein Code"]})
    assert answer.status_code == 200, answer.json()
    out = [t["text"] for t in answer.json()["translations"]]
    assert stub.calls[-1][0] == ["Lösche  Dateien aus ?", "Kein Code"]  # the model never read them
    assert out[0].count("%d") == 1 and out[0].count("{ordner}") == 1 and out[1] == "Kein Code|0"
    assert "alignment" not in answer.json()["translations"][1]  # used to place them, not asked for


def test_every_file_format_taken_has_a_media_type_for_its_download():
    from nmt.server.libretranslate import FILE_FORMATS, MEDIA_TYPES

    assert set(FILE_FORMATS) == set(MEDIA_TYPES)


def test_a_gettext_catalog_comes_back_for_the_target_with_its_placeholders(echo):
    polib = pytest.importorskip("polib")
    header = 'msgid ""\nmsgstr ""\n"Language: de\\n"\n\n'
    catalog = header + '#, c-format\nmsgid "Lösche %d Dateien aus {ordner}?"\nmsgstr ""\n'
    _, client = echo
    sent = client.post(
        "/translate_file",
        data={"source": "de", "target": "en"},
        files={"file": ("de.po", catalog.encode(), "application/octet-stream")},
    )
    assert sent.status_code == 200, sent.json()
    fetched = client.get(sent.json()["translatedFileUrl"].removeprefix("http://127.0.0.1"))
    assert fetched.headers["content-type"] == "text/x-gettext-translation; charset=utf-8"
    out = polib.pofile(fetched.content.decode())
    assert out.metadata["Language"] == "en"
    entry = out[0]
    assert entry.flags == ["fuzzy", "c-format"]
    # the echo model gives back what it read ("Lösche  Dateien aus ?|0"); the codes go back around it
    assert entry.msgstr.count("%d") == 1 and entry.msgstr.count("{ordner}") == 1 and "|0" in entry.msgstr


def test_a_bad_or_oversized_document_gets_400_or_413_naming_the_file(echo):
    import io
    import zipfile

    _, client = echo
    form = {"source": "de", "target": "en"}
    corrupt = client.post("/translate_file", data=form, files={"file": ("a.docx", b"not a zip", "x/y")})
    assert corrupt.status_code == 400 and "a.docx: not a zip package" in corrupt.json()["error"]
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", bytes(8 << 20))
    refused = client.post("/translate_file", data=form, files={"file": ("b.docx", bomb.getvalue(), "x/y")})
    assert refused.status_code == 413 and "possible zip bomb" in refused.json()["error"]
    macros = client.post("/translate_file", data=form, files={"file": ("c.docm", b"PK", "x/y")})
    assert macros.status_code == 400


def test_a_memory_answers_what_it_holds_without_a_search_in_both_apis():
    from nmt.memory import TranslationMemory

    stub = NBestEcho()
    memory = TranslationMemory(
        [("Hallo Welt", "Hello world"), ("Ein Mann fährt ein rotes Rad.", "A man rides a red bike.")]
    )
    app = create_app(stub, ServerLimits(max_chars=40), info=INFO, memory=memory)
    with TestClient(app, base_url=LOCAL) as client:
        texts = ["Hallo  Welt", "Ein Mann fährt ein blaues Rad.", "Etwas anderes"]
        own = client.post("/translate", json={"text": texts})
        assert own.status_code == 200, own.json()
        exact, fuzzy, none = own.json()["translations"]
        assert (exact["text"], exact["origin"], exact["memory"]["score"]) == ("Hello world", "memory", 100.0)
        assert fuzzy["origin"] == "model" and fuzzy["text"] == "Ein Mann fährt ein blaues Rad.|0"
        assert fuzzy["memory"]["target"] == "A man rides a red bike." and 75 <= fuzzy["memory"]["score"] < 100
        assert none["origin"] == "model" and "memory" not in none
        assert [texts for texts, _, _ in stub.calls] == [["Ein Mann fährt ein blaues Rad.", "Etwas anderes"]]
        libre = client.post("/translate", json={"q": ["Hallo Welt", "Neu"], "source": "de", "target": "en"})
        assert libre.json()["translatedText"] == ["Hello world", "Neu|0"]
        assert stub.calls[-1][0] == ["Neu"]
        metrics = client.get("/metrics").text
        assert 'nmt_memory_lookups_total{result="exact"} 2.0' in metrics
        assert 'nmt_memory_lookups_total{result="fuzzy"} 1.0' in metrics


# --- nmt's quality field ---------------------------------------------------------------------------------
class Scored(NBestEcho):
    """An echo that scores what it translates: each word -0.1, a word naming cats -2.0; a sentence
    below -1 is doubtful (as a model with a calibration flags it)."""

    def translate_detailed(self, texts, request, scores=False, **_):
        found = []
        for t in texts:
            words = [-2.0 if w.lower().startswith("katze") else -0.1 for w in t.split()]
            mean = sum(words) / len(words)
            translation = Translation(f"{t}|0", 0.0, 0.0, [], [])
            if scores:
                translation.word_scores, translation.doubtful = words, mean < -1
            found.append([translation])
        return found


def test_quality_true_adds_each_text_s_score_and_flag_that_libretranslate_s_clients_pass_over():
    from nmt.memory import TranslationMemory

    stub = Scored()
    memory = TranslationMemory([("Hallo Welt", "Hello world")])
    app = create_app(stub, ServerLimits(max_chars=40), info=INFO, memory=memory)
    with TestClient(app, base_url=LOCAL) as client:
        body = {"q": ["Ein Hund.", "Ein Hund. Katzen!", "Hallo Welt"], "source": "de", "target": "en"}
        plain = client.post("/translate", json=body).json()
        assert "quality" not in plain  # not asked: LibreTranslate's answer as it is
        scored = client.post("/translate", json={**body, "quality": True}).json()
        assert scored["translatedText"] == plain["translatedText"]
        assert scored["quality"] == [
            {"score": -0.1, "doubtful": False},
            {"score": -2.0, "doubtful": True},  # its least sure sentence's score; one doubtful sentence
            {"score": None, "doubtful": None},  # the memory's: no model score
        ]
        form = client.post("/translate", data={"q": "Ein Hund.", "source": "de", "target": "en", "quality": "true"})
        assert form.json() == {"translatedText": "Ein Hund.|0", "quality": {"score": -0.1, "doubtful": False}}
        alternatives = client.post("/translate", json={**body, "q": "Katzen", "quality": True, "alternatives": 1})
        assert alternatives.json()["quality"] == {"score": -2.0, "doubtful": True}
        assert "quality" not in client.post("/translate", data={**body, "q": "Ein Hund.", "quality": "0"}).json()
        refused = client.post("/translate", json={**body, "quality": "maybe"})
        assert refused.status_code == 400
        assert refused.json() == {"error": "Invalid request: quality must be true or false"}


def test_quality_from_a_real_model_is_the_mean_word_score_of_its_translation(served):
    from nmt.quality import sentence_score

    url, translator = served
    sentence = "Ein Mann fährt Fahrrad."
    request = urllib.request.Request(
        f"{url}/translate",
        data=json.dumps({"q": sentence, "source": "de", "target": "en", "quality": True}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer = json.loads(response.read())
    (best,) = translator.translate_detailed([sentence], scores=True)[0][:1]
    assert answer["translatedText"] == best.text
    assert answer["quality"] == {"score": pytest.approx(sentence_score(best.word_scores), abs=1e-4), "doubtful": None}
