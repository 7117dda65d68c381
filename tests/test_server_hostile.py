"""The exact requests a hostile client sent that the server once answered with 500 or let through.

A live server on the tiny de->en model, with API keys and a per-address rate limit, over loopback.
Every answer here is a 4xx in the shape its API reads: never a 500, never a traceback.
"""

import json
import logging
import re
import time

import httpx
import pytest

from nmt.server import ServerLimits, create_app, model_info, serve_in_thread
from nmt.server.keys import Admission, ApiKeys
from nmt.translator import Translator

KEY = "hostile-test-key-0001"


@pytest.fixture(scope="module")
def url(tiny_model_dir, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"{KEY}\n", encoding="utf-8")
    translator = Translator.load(tiny_model_dir, device="cpu")
    app = create_app(
        translator,
        ServerLimits(max_chars=100_000),  # whole pages in one format=html text
        info=model_info(tiny_model_dir, translator),
        admission=Admission(ApiKeys.load(keys), per_address=10_000),
    )
    with serve_in_thread(app) as url:
        yield url


@pytest.fixture
def server_errors(caplog, monkeypatch):
    """The server's error log lines (a traceback is logged at ERROR by uvicorn or the app)."""
    caplog.set_level(logging.ERROR)
    for name in ("uvicorn", "uvicorn.error"):  # uvicorn's config stops them at its own handlers
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
    yield lambda: [r for r in caplog.records if r.levelno >= logging.ERROR]


def post_raw(url: str, path: str, body: str, **options) -> httpx.Response:
    """A JSON body as written, escapes and all (httpx's json= would refuse a lone surrogate)."""
    headers = {"Content-Type": "application/json", **options.pop("headers", {})}
    return httpx.post(url + path, content=body.encode("ascii"), headers=headers, timeout=60, **options)


@pytest.mark.parametrize("field", ["source", "target", "format"])
def test_a_lone_surrogate_in_a_libretranslate_field_is_a_400(url, server_errors, field):
    body = {"q": "Ein Mann.", "source": "de", "target": "en", "api_key": KEY}
    raw = json.dumps(body).replace(f'"{field}": "{body.get(field, "")}"', f'"{field}": "\\ud800"')
    if field == "format":
        raw = raw[:-1] + ', "format": "\\ud800"}'
    assert "\\ud800" in raw
    answer = post_raw(url, "/translate", raw)
    assert answer.status_code == 400, answer.text
    assert "surrogate" in answer.json()["error"]
    assert not server_errors()


def test_a_lone_surrogate_as_the_api_key_is_a_403_not_a_500(url, server_errors):
    answer = post_raw(url, "/translate", '{"q":"Ein Mann.","source":"de","target":"en","api_key":"\\ud800"}')
    assert answer.status_code in (400, 403), answer.text  # refused before or at the key check
    # nmt's own API reads the key from a header, which cannot carry a surrogate; its JSON fields can
    answer = post_raw(url, "/translate", '{"text":["Ein Mann."],"target_lang":"\\ud800"}', headers={"X-API-Key": KEY})
    assert answer.status_code == 422, answer.text
    assert not server_errors()


def test_keys_hash_a_lone_surrogate_like_any_wrong_key(tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY}\n", encoding="utf-8")
    refusal = Admission(ApiKeys.load(keys)).check("\ud800", "127.0.0.1")
    assert refusal is not None and refusal.status == 403


NESTED = {
    "600 nested div": "<div>" * 600 + "Ein Mann fährt Fahrrad." + "</div>" * 600,
    "1,000 nested b": "<p>" + "<b>" * 1000 + "Ein Mann." + "</b>" * 1000 + "</p>",
    "10,000 nested p": "<p>" * 10_000 + "Ein Mann.",
    "5,000 unclosed p": "<p>Ein Mann." * 5000,
}


@pytest.mark.parametrize("page", NESTED.values(), ids=NESTED.keys())
def test_deeply_nested_html_is_translated_not_a_500(url, server_errors, page):
    form = {"source": "de", "target": "en", "api_key": KEY}
    files = {"file": ("page.html", page.encode("utf-8"), "text/html")}
    answer = httpx.post(url + "/translate_file", data=form, files=files, timeout=120)
    assert answer.status_code == 200, answer.text[:300]
    body = {"q": page, "source": "de", "target": "en", "format": "html", "api_key": KEY}
    answer = httpx.post(url + "/translate", json=body, timeout=120)
    assert answer.status_code == 200, answer.text[:300]
    opened = re.compile(r"<[a-z]")  # every tag kept (the serializer closes the unclosed ones)
    assert len(opened.findall(answer.json()["translatedText"])) == len(opened.findall(page))
    assert not server_errors()


@pytest.mark.parametrize("trusted, statuses", [("", [200, 200, 200, 429, 429]), ("127.0.0.1", [200] * 5)])
def test_x_forwarded_for_counts_only_from_a_named_proxy(tiny_model_dir, trusted, statuses):
    """105 requests under --req-limit 100 once all passed, each with another X-Forwarded-For: by
    default the header is not believed, so the limit counts the real address."""
    from nmt.server import ConnectionOptions

    translator = Translator.load(tiny_model_dir, device="cpu")
    app = create_app(
        translator, ServerLimits(), info=model_info(tiny_model_dir, translator), admission=Admission(per_address=3)
    )
    with serve_in_thread(app, connections=ConnectionOptions(forwarded_allow_ips=trusted)) as url:
        got = [
            httpx.post(url + "/translate", json={"text": []}, headers={"X-Forwarded-For": f"10.0.0.{i}"}).status_code
            for i in range(5)
        ]
    assert got == statuses


@pytest.fixture
def limited(tiny_model_dir, tmp_path):
    """A server whose key may translate 100 texts a minute."""
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY} 100\n", encoding="utf-8")
    translator = Translator.load(tiny_model_dir, device="cpu")
    info = model_info(tiny_model_dir, translator)
    app = create_app(translator, ServerLimits(), info=info, admission=Admission(ApiKeys.load(keys)))
    with serve_in_thread(app) as url:
        yield url


def test_a_list_over_the_batch_limit_is_a_400_every_time_not_a_429(limited):
    body = {"q": ["Ein Mann."] * 10_000, "source": "de", "target": "en", "api_key": KEY}
    for _ in range(3):  # its cost was once charged first, larger than the whole limit: 429 forever
        answer = httpx.post(limited + "/translate", json=body, timeout=60)
        assert answer.status_code == 400 and "exceeds text limit" in answer.json()["error"]
    fits = httpx.post(limited + "/translate", json={**body, "q": ["Ein Mann."]}, timeout=60)
    assert fits.status_code == 200  # and the refusals spent none of the key's limit


def test_libretranslate_s_small_rules(limited):
    ask = {"source": "de", "target": "en", "api_key": KEY}
    empty = httpx.post(limited + "/translate", json={"q": [], **ask}, timeout=60)
    assert empty.status_code == 400 and empty.json()["error"] == "Invalid request: missing q parameter"
    negative = httpx.post(limited + "/translate", json={"q": "Ein Mann.", "alternatives": -1, **ask}, timeout=60)
    assert negative.status_code == 200 and "alternatives" not in negative.json()  # read as 0
    files = {"file": ("a.txt", b"Ein Mann.\n", "text/plain")}
    in_query = httpx.post(
        limited + "/translate_file", params={"api_key": KEY}, data={"source": "de", "target": "en"}, files=files
    )
    assert in_query.status_code == 200, in_query.text


def test_a_file_has_one_deadline_and_costs_its_sentences(tiny_model_dir, tmp_path):
    """A 250 KB text file once took 86 s under a 30 s deadline (each 64-sentence part had its own)
    and cost one unit of the rate limit."""
    from test_server import EchoTranslator

    keys = tmp_path / "keys.txt"
    keys.write_text(f"{KEY} 1000\n", encoding="utf-8")
    slow = EchoTranslator(delay=0.2)  # 0.2 s per model call
    info = {"model": "slow", "src_lang": "de", "tgt_lang": "en", "engine": "echo", "parameters": 0}
    app = create_app(slow, ServerLimits(deadline_s=1.0), info=info, admission=Admission(ApiKeys.load(keys)))
    ask = {"source": "de", "target": "en", "api_key": KEY}
    with serve_in_thread(app) as url:
        document = "".join(f"Satz {i} ist hier.\n" for i in range(900))  # 900 sentences: 15 calls, 3 s
        start = time.monotonic()
        files = {"file": ("long.txt", document.encode(), "text/plain")}
        answer = httpx.post(url + "/translate_file", data=ask, files=files, timeout=30)
        took = time.monotonic() - start
        assert answer.status_code == 503 and "Retry-After" in answer.headers, answer.text
        assert took < 2.5  # the deadline (1 s) and the call in hand, not 15 calls
        # charged 900 of the key's 1,000 a minute: a second such file is refused by the rate limit
        again = httpx.post(url + "/translate_file", data=ask, files=files, timeout=30)
        assert again.status_code == 429 and again.json()["error"].startswith("Slowdown")
        bigger = {"file": ("big.txt", (document * 2).encode(), "text/plain")}
        too_big = httpx.post(url + "/translate_file", data=ask, files=bigger, timeout=30)
        assert too_big.status_code == 413 and "send it in parts" in too_big.json()["error"]
