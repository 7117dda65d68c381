"""API keys and rate limits: who may translate, how often, and what a wrong key gives away (nothing)."""

from __future__ import annotations

import hmac

import pytest
from fastapi.testclient import TestClient

import nmt.server.keys as keys_module
from nmt.cli import main
from nmt.config import DecodeConfig
from nmt.inference.contract import Capabilities
from nmt.server import ServerLimits, create_app
from nmt.server.keys import Admission, ApiKeys, RateLimiter
from nmt.translator import Translation

LOCAL = "http://127.0.0.1"
INFO = {"model": "stub", "parameters": 0, "src_lang": "de", "tgt_lang": "en", "device": "cpu"}
libretranslatepy = pytest.importorskip("libretranslatepy")


class Echo:
    def __init__(self):
        self.decode = DecodeConfig(beam=1)
        self.engine = type("Engine", (), {"name": "echo", "capabilities": Capabilities()})()
        self.text_form = None

    def source_fits(self, text, **_):
        return True

    def check_request(self, request):  # every search is one it can run
        return request

    target_languages: list[str] = []  # one target language

    def check_languages(self, texts=(), target_lang=None, source_lang=None):  # takes every language
        pass

    def translate_detailed(self, texts, request, **options):
        return [[Translation(f"«{t}»", 0.0, 0.0, [], [])] for t in texts]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "keys.txt"
    path.write_text("# team keys\nalpha-key-0001  2\n\nbeta-key-00002   # no limit of its own\n", encoding="utf-8")
    return path


def client_with(admission):
    return TestClient(create_app(Echo(), ServerLimits(), info=INFO, admission=admission), base_url=LOCAL)


# --- the key file ---------------------------------------------------------------------------------------
def test_a_key_file_gives_keys_and_their_limits(key_file):
    keys = ApiKeys.load(key_file)
    assert [(k.name, k.per_minute) for k in keys.keys] == [("key 2", 2), ("key 4", None)]
    assert keys.find("beta-key-00002").name == "key 4"
    assert keys.find("beta-key-0000") is None and keys.find("") is None and keys.find(None) is None
    assert all(b"alpha" not in k.digest for k in keys.keys)  # digests, not the keys


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("good-key-0001 ten\n", r":1: expected KEY \[REQUESTS_PER_MINUTE > 0\]"),
        ("good-key-0001 0\n", r":1: expected KEY"),
        ("good-key-0001 5 6\n", r":1: expected KEY"),
        ("# only a comment\nshort\n", r":2: a key must be at least 8 characters"),
        ("same-key-0001\nsame-key-0001 3\n", r":2: the same key is listed twice"),
        ("\n# nothing\n", r": no keys"),
    ],
)
def test_a_bad_key_file_is_one_line_naming_the_line_never_the_key(tmp_path, text, message):
    path = tmp_path / "keys.txt"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=message) as error:
        ApiKeys.load(path)
    assert "good-key" not in str(error.value) and "same-key" not in str(error.value)


def test_every_key_is_compared_whatever_is_offered(key_file, monkeypatch):
    """The same work for a right key, a wrong one, or none: the time cannot tell which keys exist."""
    keys = ApiKeys.load(key_file)
    calls, compare = [], hmac.compare_digest
    monkeypatch.setattr(keys_module.hmac, "compare_digest", lambda a, b: calls.append(1) or compare(a, b))
    for offered in ("alpha-key-0001", "beta-key-00002", "wrong", "", None):
        calls.clear()
        keys.find(offered)
        assert len(calls) == 2


def test_the_rate_limiter_slides_and_says_when_to_come_back():
    clock = Clock()
    limiter = RateLimiter(clock)
    assert [limiter.take("a", 3) for _ in range(3)] == [None, None, None]
    clock.now += 20
    assert limiter.take("a", 3) == 40  # the first request leaves the window 60 s after it came
    assert limiter.take("b", 3) is None  # another identity has its own window
    clock.now += 40
    assert limiter.take("a", 3) is None
    assert limiter.take("a", 3, cost=5) == 60  # more than the limit in one request


# --- the server ---------------------------------------------------------------------------------------------
def test_keys_are_required_and_a_wrong_one_is_refused_like_a_missing_one(key_file):
    with client_with(Admission(ApiKeys.load(key_file))) as client:
        ask = {"q": "Hallo", "source": "de", "target": "en"}
        missing = client.post("/translate", data=ask)
        wrong = client.post("/translate", data={**ask, "api_key": "alpha-key-0002"})
        assert (missing.status_code, wrong.status_code) == (403, 403)
        assert wrong.json() == {"error": "Invalid API key"}
        assert missing.json() == {"error": "Please contact the server operator to get an API key"}
        assert client.post("/translate", data={**ask, "api_key": "beta-key-00002"}).json() == {
            "translatedText": "«Hallo»"
        }
        assert client.post("/detect", data={"q": "Hallo Welt"}).status_code == 403
        own = client.post("/translate", json={"text": ["x"]})
        assert own.status_code == 403 and own.json()["error"] == "forbidden_key"
        keyed = client.post("/translate", json={"text": ["x"]}, headers={"X-API-Key": "beta-key-00002"})
        assert keyed.json()["translations"][0]["text"] == "«x»"
        assert client.get("/frontend/settings").json()["keyRequired"] is True


def test_a_key_over_its_limit_gets_429_with_retry_after(key_file):
    with client_with(Admission(ApiKeys.load(key_file))) as client:
        ask = {"q": ["a", "b"], "source": "de", "target": "en", "api_key": "alpha-key-0001"}  # 2 texts: 2 units
        assert client.post("/translate", json=ask).status_code == 200
        over = client.post("/translate", json=ask)
        assert over.status_code == 429 and over.json() == {"error": "Slowdown: 2 per 1 minute"}
        assert 1 <= int(over.headers["Retry-After"]) <= 60
        other = client.post("/translate", json={**ask, "api_key": "beta-key-00002"})
        assert other.status_code == 200  # the other key has no limit of its own


def test_the_per_address_limit_holds_without_keys():
    with client_with(Admission(per_address=3)) as client:
        answers = [client.post("/translate", json={"text": ["x"]}).status_code for _ in range(4)]
        assert answers == [200, 200, 200, 429]
        refused = client.post("/translate", data={"q": "a", "source": "de", "target": "en"})
        assert refused.status_code == 429 and "Retry-After" in refused.headers


def test_libretranslatepy_with_and_without_its_key(key_file, tiny_model_dir):
    import urllib.error

    from nmt.server import serve_in_thread

    app = create_app(Echo(), ServerLimits(), info=INFO, admission=Admission(ApiKeys.load(key_file)))
    with serve_in_thread(app) as url:
        assert libretranslatepy.LibreTranslateAPI(url, "beta-key-00002").translate("Hallo", "de", "en") == "«Hallo»"
        with pytest.raises(urllib.error.HTTPError) as error:
            libretranslatepy.LibreTranslateAPI(url, "nope-nope-nope").translate("Hallo", "de", "en")
        assert error.value.code == 403


def test_nmt_serve_refuses_a_bad_key_file_before_loading(tiny_model_dir, tmp_path, monkeypatch, capsys):
    import nmt.server.running

    path = tmp_path / "keys.txt"
    path.write_text("ok-key-0001\nbad line here\n", encoding="utf-8")
    monkeypatch.setattr(nmt.server.running.Translator, "load", lambda *a, **k: pytest.fail("loaded a model"))
    assert main(["serve", "--model", str(tiny_model_dir), "--api-keys", str(path), "--port", "0"]) == 2
    assert f"{path}:2: expected KEY [REQUESTS_PER_MINUTE > 0]" in capsys.readouterr().err


def test_a_key_or_text_in_the_query_string_never_reaches_the_access_log():
    """LibreTranslate's clients may put api_key and q in the URL (deep-translator does): uvicorn's
    access line keeps the path only."""
    import logging

    from nmt.server.connections import NoQueryInAccessLog, uvicorn_config
    from nmt.server.settings import ConnectionOptions

    uvicorn_config(object(), ConnectionOptions())
    assert any(isinstance(f, NoQueryInAccessLog) for f in logging.getLogger("uvicorn.access").filters)
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5000", "POST", "/translate?q=Geheim&api_key=secret-key", "1.1", 200), None,
    )  # fmt: skip
    assert NoQueryInAccessLog().filter(record)
    line = record.getMessage()
    assert "secret-key" not in line and "Geheim" not in line and '"POST /translate?… HTTP/1.1" 200' in line
