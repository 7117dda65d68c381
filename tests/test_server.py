"""The HTTP server and its batching queue: answers, limits, errors, batching, disconnects."""

import json
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from nmt.alignment import pharaoh
from nmt.config import DecodeConfig
from nmt.inference.contract import ENGINE_CAPABILITIES
from nmt.search_settings import SearchRequest
from nmt.server import ServerLimits, create_app, model_info, serve_in_thread
from nmt.server.batching_queue import BatchingConfig, BatchingQueue
from nmt.translator import EngineOptions, Translation, Translator

from conftest import read_head

LOCAL = "http://127.0.0.1"  # TestClient's own Host, "testserver", is not one the server answers by default
JSON = {"Content-Type": "application/json"}
INFO = {"model": "stub", "parameters": 0, "src_lang": "de", "tgt_lang": "en", "device": "cpu"}


class EchoTranslator:
    """Stands in for Translator: 'text' -> 'text|beam', every call recorded; can be slow, held or failing."""

    def __init__(self, *, delay: float = 0.0, fail_once: bool = False, poison: str | None = None):
        self.decode = DecodeConfig()
        # what the app asks of an engine
        self.engine = SimpleNamespace(name="echo", capabilities=ENGINE_CAPABILITIES["torch"])
        self.delay, self.fail_once, self.poison = delay, fail_once, poison
        self.calls: list[tuple[list[str], int, bool]] = []
        self.entered = threading.Event()  # set when a call starts
        self.gate = threading.Event()  # calls wait here: clear it to hold the worker inside a call
        self.gate.set()

    text_form = None  # reads running text

    def source_fits(self, text, **_):  # every sentence is short enough
        return True

    def check_request(self, request):  # every search is one it can run
        return request

    target_languages: list[str] = []  # one target language

    def check_languages(self, texts=(), target_lang=None, source_lang=None):  # takes every language
        pass

    def translate_detailed(self, texts, request):
        beam, return_attention = request.beam, request.return_attention
        self.entered.set()
        assert self.gate.wait(10), "the test never opened the gate"
        time.sleep(self.delay)
        self.calls.append((list(texts), beam, return_attention))
        if self.fail_once:
            self.fail_once = False
            raise RuntimeError("the model fell over")
        if self.poison in texts:
            raise ValueError(f"cannot translate {self.poison!r}")
        return [[Translation(f"{t}|{beam}", 0.0, 0.0, [], [])] for t in texts]


def holding_queue(config: BatchingConfig) -> tuple[EchoTranslator, BatchingQueue, Future]:
    """A started queue whose worker is held inside a call translating ["first"] (set stub.gate to let go)."""
    stub = EchoTranslator()
    stub.gate.clear()
    queue = BatchingQueue(stub, config)
    queue.start()
    first = queue.submit(["first"], SearchRequest(beam=1))
    assert stub.entered.wait(10)
    return stub, queue, first


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return Translator.load(tiny_model_dir, device="cpu")


@pytest.fixture(scope="module")
def client(translator, tiny_model_dir):
    limits = ServerLimits(max_sentences=3, max_chars=50, max_beam=4, max_body_bytes=2000)
    app = create_app(translator, limits, info=model_info(tiny_model_dir, translator))
    with TestClient(app, base_url=LOCAL) as client:  # `with` runs the lifespan: the batching worker starts
        yield client


# --- answers ------------------------------------------------------------------------------------------
def test_translations_are_the_translators(client, translator):
    texts = ["Ein Mann fährt Fahrrad.", "Zwei Hunde spielen im Schnee."]
    response = client.post("/translate", json={"text": texts, "beam": 2})
    assert response.status_code == 200
    body = response.json()
    assert body["beam"] == 2
    assert [t["text"] for t in body["translations"]] == translator.translate(texts, beam=2)
    assert "attention" not in body["translations"][0]


def test_attention_has_a_row_per_target_piece_and_a_column_per_source_piece(client, translator):
    response = client.post("/translate", json={"text": ["Ein Hund läuft.", ""], "beam": 1, "attention": True})
    first, empty = [t["attention"] for t in response.json()["translations"]]
    config = translator.model.config
    assert len(first["weights"]) == config.decoder_layers and len(first["weights"][0]) == config.num_heads
    assert first["src_pieces"][0] == "[START]" and first["src_pieces"][-1] == "[END]"
    for head in (h for layer in first["weights"] for h in layer):
        assert len(head) == len(first["tgt_pieces"])
        for row in head:
            assert len(row) == len(first["src_pieces"]) and sum(row) == pytest.approx(1, abs=1e-2)
    assert empty["weights"] == [] and empty["tgt_pieces"] == []  # nothing in, nothing to look at


def test_attention_comes_by_words_too_for_a_reader(client):
    """What the web page draws: the words of the source and of the output, "(start)" and "(end)" said
    plainly; a word's row is its pieces' mean and its column their sum, so each row still sums to 1."""
    body = client.post("/translate", json={"text": ["Ein Hund läuft."], "beam": 1, "attention": True}).json()
    [translation] = body["translations"]
    attention = translation["attention"]
    words = attention["words"]
    assert words["src"] == ["(start)", "Ein", "Hund", "läuft.", "(end)"]
    assert set(translation["text"].split()) <= set(words["tgt"])
    assert (words["tgt"][-1] == "(end)") == (attention["tgt_pieces"][-1] == "[END]")  # the step that chose it
    for label in words["src"] + words["tgt"]:
        assert "▁" not in label and "[START]" not in label and "[END]" not in label
    assert len(words["weights"]) == len(attention["weights"])  # every layer and head, as the pieces'
    for head in (h for layer in words["weights"] for h in layer):
        assert len(head) == len(words["tgt"])
        for row in head:
            assert len(row) == len(words["src"]) and sum(row) == pytest.approx(1, abs=1e-2)


def test_default_beam_is_the_models_capped_at_max_beam(client, translator):
    body = client.post("/translate", json={"text": ["Hallo."]}).json()
    assert body["beam"] == min(translator.decode.beam, 4)
    assert client.post("/translate", json={"text": []}).json() == {"beam": body["beam"], "translations": []}


def test_a_beam_the_model_cannot_search_is_a_422_before_the_queue(translator, tiny_model_dir):
    """Checked as the Translator checks a call: beam search ranks 2 x beam distinct tokens a step."""
    too_wide = translator.tgt_tokenizer.vocab_size // 2 + 1
    app = create_app(translator, ServerLimits(max_beam=256), info=model_info(tiny_model_dir, translator))
    with TestClient(app, base_url=LOCAL) as client:
        response = client.post("/translate", json={"text": ["Hallo."], "beam": too_wide})
        assert response.status_code == 422 and response.json()["error"] == "invalid_request"
        assert f"beam ({too_wide}) must be at most {too_wide - 1}" in response.json()["message"]
        assert client.get("/health").json()["batching"]["calls"] == 0  # the worker never saw it


def test_health_reports_model_languages_and_readiness(client, translator, tiny_model_dir):
    response = client.get("/health")
    assert response.status_code == 200
    health = response.json()
    assert health["ready"] is True
    assert health["model"] == tiny_model_dir.name
    assert health["parameters"] == sum(p.numel() for p in translator.model.parameters())
    assert (health["src_lang"], health["tgt_lang"]) == ("de", "en")
    assert health["length_penalty"] == translator.decode.length_penalty == 0.6
    assert (health["min_len"], health["early_stopping"]) == (1, True)
    assert health["limits"]["max_beam"] == 4


def test_index_page_is_served(client):
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert 'id="heatmap"' in response.text and "://" not in response.text  # no CDN: it must work offline


def test_not_ready_until_the_worker_runs():
    app = create_app(EchoTranslator(), ServerLimits(), info=INFO)
    client = TestClient(app, base_url=LOCAL)  # no `with`: the lifespan, and so the worker, never starts
    assert client.get("/health").status_code == 503
    response = client.post("/translate", json={"text": ["a"]})
    assert response.status_code == 503 and response.json()["error"] == "not_ready"


def test_probes_say_alive_always_and_ready_only_between_start_and_drain():
    app = create_app(EchoTranslator(), ServerLimits(), info=INFO)
    client = TestClient(app, base_url=LOCAL)
    assert client.get("/livez").json() == {"alive": True}
    before = client.get("/readyz")  # the worker has not started
    assert before.status_code == 503 and before.json()["workers_running"] is False
    with TestClient(app, base_url=LOCAL) as client:
        ready = client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "ready": True,
            "models": 1,
            "workers_running": True,
            "draining": False,
            "shared_state": {"kind": "process", "reachable": True},
        }
        app.state.service.close()  # what SIGTERM does first: the drain begins
        draining = client.get("/readyz")
        assert draining.status_code == 503 and draining.json()["draining"] is True
        assert draining.headers["connection"] == "close"  # and the proxy's connection is let go
        assert client.get("/livez").status_code == 200  # alive still: no reason to kill it


def test_probes_answer_whatever_the_host_and_nothing_else_does():
    with TestClient(create_app(EchoTranslator(), ServerLimits(), info=INFO), base_url="http://10.1.2.3:8000") as client:
        # an orchestrator probes the pod's address, which --allowed-hosts need not name
        assert client.get("/livez").status_code == 200 and client.get("/readyz").status_code == 200
        assert client.get("/health").json()["error"] == "forbidden_host"
        assert client.post("/readyz").status_code == 403  # the exemption is for the probes' GET alone


# --- the translation cache -------------------------------------------------------------------------
def cache_counts(client) -> tuple[float, float]:
    """(hits, misses) of nmt_translation_cache_lookups_total in /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    counts = {"hit": 0.0, "miss": 0.0}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "nmt_translation_cache_lookups_total":
                counts[sample.labels["result"]] = sample.value
    return counts["hit"], counts["miss"]


def test_a_repeated_sentence_is_answered_from_the_cache_and_another_request_is_not():
    stub = EchoTranslator()
    with TestClient(create_app(stub, ServerLimits(), info=INFO), base_url=LOCAL) as client:
        first = client.post("/translate", json={"text": ["a", "b"], "beam": 2}).json()
        again = client.post("/translate", json={"text": ["b", "c", "a"], "beam": 2}).json()
        assert [t["text"] for t in again["translations"]] == ["b|2", "c|2", "a|2"]  # in the request's order
        assert first["translations"] == [again["translations"][2], again["translations"][0]]
        assert [texts for texts, _, _ in stub.calls] == [["a", "b"], ["c"]]  # only "c" was searched
        assert cache_counts(client) == (2, 3)
        # another search is another answer: another beam, or any other search setting
        for body in ({"beam": 3}, {"beam": 2, "no_repeat_ngram_size": 2}):
            assert client.post("/translate", json={"text": ["a"], **body}).status_code == 200
        assert [texts for texts, _, _ in stub.calls][2:] == [["a"]] * 2
        # attention (megabytes an answer) is neither answered from the cache nor kept in it
        client.post("/translate", json={"text": ["a"], "beam": 2, "attention": True})
        client.post("/translate", json={"text": ["a"], "beam": 2, "attention": True})
        assert [texts for texts, _, _ in stub.calls][4:] == [["a"], ["a"]]


def test_replicas_of_another_model_never_share_an_answer():
    from nmt.server.shared_state import ProcessState

    state = ProcessState()  # one cache, as Redis is for replicas
    one, other = EchoTranslator(), EchoTranslator()
    apps = [
        create_app(stub, ServerLimits(), info={**INFO, "identity": identity}, state=state)
        for stub, identity in ((one, "model-a"), (other, "model-b"))
    ]
    with TestClient(apps[0], base_url=LOCAL) as first, TestClient(apps[1], base_url=LOCAL) as second:
        first.post("/translate", json={"text": ["a"]})
        second.post("/translate", json={"text": ["a"]})
        assert len(one.calls) == len(other.calls) == 1  # model b searched for itself
        second.post("/translate", json={"text": ["a"]})
        assert len(other.calls) == 1 and cache_counts(second) == (1, 1)


@pytest.mark.parametrize("per_key", [True, False], ids=["each key its own", "one for the service"])
def test_with_keys_each_key_has_a_cache_of_its_own_unless_the_service_shares_one(tmp_path, per_key):
    from nmt.server import Admission, ApiKeys

    (tmp_path / "keys.txt").write_text("alpha-key-0001\nbeta-key-00002\n", encoding="utf-8")
    admission = Admission(ApiKeys.load(tmp_path / "keys.txt"), cache_per_key=per_key)
    stub = EchoTranslator()
    with TestClient(create_app(stub, ServerLimits(), info=INFO, admission=admission), base_url=LOCAL) as client:
        for key in ("alpha-key-0001", "beta-key-00002", "alpha-key-0001", "beta-key-00002"):
            answer = client.post("/translate", json={"text": ["a"]}, headers={"X-API-Key": key})
            assert answer.json()["translations"][0]["text"] == "a|5"
        # each key searched once and then hit its own entry; or the first search served all three
        assert (len(stub.calls), cache_counts(client)) == ((2, (2, 2)) if per_key else (1, (3, 1)))


def test_a_bad_cache_entry_is_a_miss_not_an_error():
    from nmt.server.shared_state import ProcessState

    state, stub = ProcessState(), EchoTranslator()
    with TestClient(create_app(stub, ServerLimits(), info=INFO, state=state), base_url=LOCAL) as client:
        client.post("/translate", json={"text": ["a", "b"]})
        for key, bad in zip(list(state._cache), (b"not json", b'[{"text": "x", "unknown": 1}]'), strict=True):
            state._cache[key] = bad  # what another program (or version) could leave in a shared Redis
        again = client.post("/translate", json={"text": ["a", "b"]})
        assert again.status_code == 200 and [t["text"] for t in again.json()["translations"]] == ["a|5", "b|5"]
        assert [texts for texts, _, _ in stub.calls] == [["a", "b"], ["a", "b"]]  # searched again


def test_no_cache_when_it_is_off():
    from nmt.server.shared_state import ProcessState

    stub = EchoTranslator()
    with TestClient(create_app(stub, ServerLimits(), info=INFO, state=ProcessState(0)), base_url=LOCAL) as client:
        for _ in range(2):
            client.post("/translate", json={"text": ["a"]})
        assert len(stub.calls) == 2 and cache_counts(client) == (0, 0)
        assert client.get("/health").json()["translation_cache"] is False


def test_a_model_s_identity_is_its_weights_and_how_it_is_served(translator, tiny_model_dir, tmp_path):
    import shutil

    from nmt.glossary import Glossary
    from nmt.server.service import model_identity

    plain = model_identity(tiny_model_dir, translator)
    copy = Path(shutil.copytree(tiny_model_dir, tmp_path / "elsewhere"))
    assert model_identity(copy, translator) == plain  # the same weights elsewhere: the same model
    translator.glossary = Glossary([("Hund", "hound")])
    try:
        assert model_identity(tiny_model_dir, translator) != plain  # a glossary changes the answers
    finally:
        translator.glossary = None
    (copy / "model.safetensors").write_bytes((copy / "model.safetensors").read_bytes()[:-4] + b"\0\0\0\1")
    assert model_identity(copy, translator) != plain  # other weights


# --- limits and bad requests ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "body, limit",
    [
        ({"text": ["a", "b", "c", "d"]}, "max_sentences"),
        ({"text": ["short", "x" * 51]}, "max_chars"),
        ({"text": ["a"], "beam": 5}, "max_beam"),
    ],
)
def test_a_request_over_a_limit_gets_422_naming_it(client, body, limit):
    response = client.post("/translate", json=body)
    assert response.status_code == 422
    assert response.json()["error"] == "limit_exceeded" and response.json()["limit"] == limit


def test_a_body_over_the_limit_gets_413_with_or_without_content_length(client):
    big = json.dumps({"text": ["x" * 40] * 60}).encode()
    assert len(big) > 2000
    declared = client.post("/translate", content=big, headers=JSON)
    streamed = client.post(
        "/translate", content=iter([big[:1500], big[1500:]]), headers=JSON
    )  # chunked: no Content-Length
    for response in (declared, streamed):
        assert response.status_code == 413 and response.json()["limit"] == "max_body_bytes"


@pytest.mark.parametrize("body", [b"{", b"", b'{"text": ["a"]', b"\xff\xfe"])
def test_malformed_json_gets_400(client, body):
    response = client.post("/translate", content=body, headers=JSON)
    assert response.status_code == 400 and response.json()["error"] == "malformed_json"


@pytest.mark.parametrize(
    "body, field",
    [
        ({"text": "one string"}, "text"),
        ({"text": ["ok", 3]}, "text.1"),
        ({"text": ["a"], "beam": "2"}, "beam"),
        ({"text": ["a"], "beam": 0}, "beam"),
        ({"text": ["a"], "no_repeat_ngram_size": -1}, "no_repeat_ngram_size"),
        ({"text": ["a"], "no_repeat_ngram_size": "2"}, "no_repeat_ngram_size"),
        ({"text": ["a"], "no_repeat_ngram_size": 1025}, "no_repeat_ngram_size"),
        ({"text": ["a"], "no_repeat_ngram_size": 99999999999999999999}, "no_repeat_ngram_size"),  # past a size_t
        ({"text": ["a"], "attention": "yes"}, "attention"),
        ({"txet": ["a"]}, "txet"),
        ([["a"]], "body"),
    ],
)
def test_wrong_types_get_422_saying_what_is_wrong(client, body, field):
    response = client.post("/translate", json=body)
    assert response.status_code == 422
    assert response.json()["error"] == "invalid_request" and field in response.json()["message"]


def test_a_whole_number_written_as_a_float_is_that_integer(client, translator):
    """JSON has numbers: 2.0 is the integer 2 (JSON Schema's rule, and a Python client's json.dumps of a
    float); schemathesis found it refused while the published schema allows it."""
    response = client.post("/translate", json={"text": ["Ein Hund."], "beam": 2.0, "no_repeat_ngram_size": 0.0})
    assert response.status_code == 200 and response.json()["beam"] == 2
    assert client.post("/translate", json={"text": ["a"], "beam": 2.5}).status_code == 422


def test_a_422_states_every_field_the_body_may_have(client):
    from nmt.server.requests import TranslateRequest

    message = client.post("/translate", json={"txet": ["a"]}).json()["message"]
    assert all(f'"{name}": ' in message for name in TranslateRequest.model_fields)


def test_a_failing_batch_is_a_json_500_and_the_server_goes_on():
    app = create_app(EchoTranslator(fail_once=True), ServerLimits(), info=INFO)
    with TestClient(app, base_url=LOCAL) as client:
        failed = client.post("/translate", json={"text": ["a"]})
        assert failed.status_code == 500 and "fell over" in failed.json()["message"]
        assert client.post("/translate", json={"text": ["b"]}).json()["translations"][0]["text"] == "b|5"


# --- batching ---------------------------------------------------------------------------------------
def test_a_bad_request_fails_alone_not_the_requests_batched_with_it():
    stub, queue, first = holding_queue(BatchingConfig(window_ms=50))
    stub.poison = "bad"
    before, bad, after = (queue.submit(texts, SearchRequest(beam=2)) for texts in (["x", "y"], ["ok", "bad"], ["z"]))
    stub.gate.set()
    assert first.result(timeout=10)[0][0].text == "first|1"
    assert [t.text for [t] in before.result(timeout=10)] == ["x|2", "y|2"]
    assert after.result(timeout=10)[0][0].text == "z|2"
    with pytest.raises(ValueError, match="cannot translate 'bad'"):
        bad.result(timeout=10)
    queue.stop()
    # the held call, the shared call that failed, then each request's part alone
    assert [texts for texts, _, _ in stub.calls] == [
        ["first"],
        ["x", "y", "ok", "bad", "z"],
        ["x", "y"],
        ["ok", "bad"],
        ["z"],
    ]


def held_worker_then_queue(config: BatchingConfig):
    """Hold the worker inside a first call, queue 8 requests of two kinds behind it, then let go."""
    stub, queue, first = holding_queue(config)
    waiting = [
        queue.submit([f"s{i}a", f"s{i}b"], SearchRequest(beam=2 + i % 2, return_attention=i % 2 == 1)) for i in range(8)
    ]
    stub.gate.set()
    results = [f.result(timeout=10) for f in [first, *waiting]]
    queue.stop()
    return stub, queue, results


def test_queued_requests_share_one_call_per_beam_and_attention():
    stub, queue, results = held_worker_then_queue(BatchingConfig(window_ms=50))
    assert len(stub.calls) == 3  # the held call, then one per (beam, attention) kind
    assert sorted((beam, att) for _, beam, att in stub.calls[1:]) == [(2, False), (3, True)]
    assert [t.text for r in results[1:] for [t] in r] == [f"s{i}{x}|{2 + i % 2}" for i in range(8) for x in "ab"]
    assert (queue.stats.requests, queue.stats.sentences, queue.stats.calls) == (9, 17, 3)


def test_max_sentences_1_turns_batching_off():
    stub, _, results = held_worker_then_queue(BatchingConfig(window_ms=50, max_sentences=1))
    assert [len(texts) for texts, _, _ in stub.calls] == [1] * 17  # the held call, then 8 x 2 sentences
    assert results[-1][1][0].text == "s7b|3"


def test_a_request_cancelled_while_queued_is_not_translated():
    stub, queue, _ = holding_queue(BatchingConfig(window_ms=0))
    gone, kept = queue.submit(["gone"], SearchRequest(beam=1)), queue.submit(["kept"], SearchRequest(beam=1))
    assert gone.cancel()
    stub.gate.set()
    assert kept.result(timeout=10)[0][0].text == "kept|1"
    queue.stop()
    assert ["gone"] not in [texts for texts, _, _ in stub.calls] and queue.stats.dropped == 1


def test_a_request_after_stop_fails_at_once_instead_of_hanging():
    stub = EchoTranslator()
    queue = BatchingQueue(stub, BatchingConfig(window_ms=0))
    queue.start()
    assert queue.submit(["before"], SearchRequest(beam=1)).result(timeout=10)[0][0].text == "before|1"
    queue.stop()
    late = queue.submit(["late"], SearchRequest(beam=1))
    with pytest.raises(RuntimeError, match="not running"):
        late.result(timeout=1)
    assert not queue.running


def test_concurrent_http_requests_are_batched_together():
    stub = EchoTranslator(delay=0.3)  # a slow model: requests pile up while it works
    app = create_app(stub, ServerLimits(), info=INFO, batching=BatchingConfig(window_ms=10))
    with serve_in_thread(app) as url, ThreadPoolExecutor(8) as pool:
        start = threading.Barrier(8)

        def ask(i: int) -> httpx.Response:
            start.wait()
            return httpx.post(f"{url}/translate", json={"text": [f"request {i}"], "beam": 2}, timeout=30)

        responses = list(pool.map(ask, range(8)))
    assert [r.json()["translations"][0]["text"] for r in responses] == [f"request {i}|2" for i in range(8)]
    assert len(stub.calls) < 8


def raw_request(url: str, body: bytes) -> socket.socket:
    """Send a POST /translate by hand and return the socket without reading the answer."""
    address = urlsplit(url)
    sock = socket.create_connection((address.hostname, address.port), timeout=10)
    sock.sendall(
        b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )
    return sock


def test_clients_that_disconnect_do_not_break_the_server():
    stub = EchoTranslator()
    stub.gate.clear()
    app = create_app(stub, ServerLimits(), info=INFO)
    with serve_in_thread(app) as url:
        in_batch = raw_request(url, b'{"text": ["in the batch"]}')
        assert stub.entered.wait(10)
        queued = raw_request(url, b'{"text": ["queued"]}')
        time.sleep(0.1)  # let the server read it
        in_batch.close()
        queued.close()
        stub.gate.set()
        answer = httpx.post(f"{url}/translate", json={"text": ["still here"]}, timeout=10)
        assert answer.status_code == 200 and answer.json()["translations"][0]["text"] == "still here|5"
        assert httpx.get(f"{url}/health").json()["ready"] is True
    assert ["in the batch"] in [texts for texts, _, _ in stub.calls]  # its batch still completed


# --- nmt serve ------------------------------------------------------------------------------------------
def serve_arguments(monkeypatch, *options: str) -> dict:
    """What `nmt serve --model m OPTIONS` passes to nmt.server.serve (nothing is loaded or served)."""
    import nmt.server
    from nmt.cli import main

    seen = {}
    monkeypatch.setattr(nmt.server, "serve", lambda model, **kwargs: seen.update(kwargs, model=model))
    assert main(["serve", "--model", "m", *options]) == 0
    return seen


def test_nmt_serve_defaults_are_the_servers(monkeypatch):
    from nmt.server import AccessPolicy, ConnectionOptions

    seen = serve_arguments(monkeypatch)
    assert (seen["limits"], seen["batching"]) == (ServerLimits(), BatchingConfig())
    assert (seen["connections"], seen["access"]) == (ConnectionOptions(), AccessPolicy())


def test_nmt_serve_options_reach_the_server(monkeypatch):
    seen = serve_arguments(
        monkeypatch,
        "--host",
        "0.0.0.0",
        "--deadline",
        "3",
        "--max-pending-sentences",
        "100",
        "--header-timeout",
        "2",
        "--max-connections",
        "0",
        "--allowed-hosts",
        "mt.example.org, 10.0.0.5",
        "--allowed-origins",
        "https://mt.example.org",
    )
    assert seen["limits"].deadline_s == 3 and seen["batching"].max_pending_sentences == 100
    assert seen["connections"].header_timeout_s == 2 and seen["connections"].max_connections == 0
    assert seen["access"].allowed_hosts == ("mt.example.org", "10.0.0.5")
    assert seen["access"].allowed_origins == ("https://mt.example.org",)


@pytest.mark.parametrize(
    "options, message",
    [
        (["--workers", "0"], "--workers must be >= 1, got 0"),
        (["--threads", "-2", "--engine", "ctranslate2"], "--threads must be >= 1, got -2"),
        (["--deadline", "0"], "--deadline must be > 0, got 0.0"),
        (["--max-pending-sentences", "10"], "--max-pending-sentences (10) must be at least --max-sentences (64)"),
        (["--header-timeout", "-1"], "--header-timeout must be > 0, got -1.0"),
        (["--length-penalty", "-1"], "--length-penalty must be >= 0, got -1.0"),
    ],
)
def test_nmt_serve_refuses_bad_settings_in_one_line(monkeypatch, capsys, options, message):
    import nmt.server
    from nmt.cli import main

    monkeypatch.setattr(nmt.server, "serve", lambda *a, **k: pytest.fail("served despite a bad setting"))
    assert main(["serve", "--model", "m", *options]) == 2
    assert message in capsys.readouterr().err


def test_nmt_serve_engine_options_reach_the_loader(monkeypatch):
    seen = serve_arguments(monkeypatch)
    assert seen["engine"] == EngineOptions(engine="auto")  # serve() picks the engine and the workers
    seen = serve_arguments(monkeypatch, "--engine", "ctranslate2", "--precision", "int8", "--workers", "2")
    assert seen["engine"] == EngineOptions(engine="ctranslate2", precision="int8", workers=2)


@pytest.mark.parametrize(
    "options, workers",
    [({}, None), ({"workers": None}, None), ({"workers": 3}, 3), ({"engine": "ctranslate2"}, None)],
)
def test_serve_plans_torch_workers_per_call_and_starts_them_at_once(monkeypatch, options, workers):
    """nmt's engine plans its workers per model call (a small batch runs on one); CTranslate2 takes
    its own layout (single-threaded workers: one worker of several OpenMP threads slows ~10x once
    torch has run in the process, as the server's first load does when it exports)."""
    from nmt.server import running as app

    loaded, calls = {}, []

    class Loaded:
        def start_workers(self):
            calls.append("start_workers")

    monkeypatch.setattr(
        app.Translator, "load", staticmethod(lambda model_dir, engine, **kw: loaded.update(engine=engine) or Loaded())
    )
    monkeypatch.setattr(
        app,
        "model_info",
        lambda model_dir, translator: {
            "model": "m",
            "src_lang": "de",
            "tgt_lang": "en",
            "engine": "e",
            "parameters": 1,
        },
    )
    monkeypatch.setattr(app, "create_app", lambda *a, **k: "app")
    monkeypatch.setattr(app, "run_app", lambda *a, **k: calls.append("run_app"))
    app.serve("m", engine=EngineOptions(**options))
    assert loaded["engine"].workers == workers and loaded["engine"].device == "auto"  # None: the engine's plan
    assert calls == ["start_workers", "run_app"]


def test_nmt_serve_length_penalty_reaches_the_loader(monkeypatch):
    assert "length_penalty" not in serve_arguments(monkeypatch)["decode"]  # the model's decode.length_penalty
    assert serve_arguments(monkeypatch, "--length-penalty", "2.5")["decode"]["length_penalty"] == 2.5


def test_nmt_serve_minimum_length_and_stopping_rule_reach_the_loader(monkeypatch):
    seen = serve_arguments(monkeypatch)["decode"]
    assert (seen["min_len"], seen.get("early_stopping")) == (None, None)  # the model's decode settings
    seen = serve_arguments(monkeypatch, "--min-len", "0", "--no-early-stopping", "--no-repeat-ngram-size", "3")
    assert seen["decode"] == {"min_len": 0, "early_stopping": False, "no_repeat_ngram_size": 3}


def test_a_feature_the_server_s_engine_lacks_is_refused_in_the_contract_s_words(tiny_model_dir):
    """The JSON API's 422 for attention on CTranslate2 says what the CLI and the Python API say
    (nmt.inference.contract), and the way out a request has."""
    pytest.importorskip("ctranslate2")
    from nmt.inference.contract import Capabilities

    ct2 = Translator.load(tiny_model_dir, device="cpu", engine="ctranslate2")
    app = create_app(ct2, ServerLimits(), info=model_info(tiny_model_dir, ct2))
    with TestClient(app, base_url=LOCAL) as client:
        refused = client.post("/translate", json={"text": ["Ein Hund."], "attention": True}).json()
    assert refused["error"] == "attention_unavailable"
    assert refused["message"] == Capabilities.refusal(["attention"], "ctranslate2") + '; or leave out "attention"'
    assert refused["message"].startswith("attention weights: the ctranslate2 engine cannot; nmt's engine can")


def test_the_ctranslate2_engine_serves_the_same_translations(tiny_model_dir, translator):
    pytest.importorskip("ctranslate2")
    ct2 = Translator.load(tiny_model_dir, device="cpu", engine="ctranslate2")
    app = create_app(ct2, ServerLimits(), info=model_info(tiny_model_dir, ct2))
    with TestClient(app, base_url=LOCAL) as client:
        health = client.get("/health").json()
        # CTranslate2 cannot count parameters: the model directory's weights file says how many
        assert (health["engine"], health["parameters"]) == ("ctranslate2", translator.parameter_count)
        assert health["attention"] is False
        body = client.post("/translate", json={"text": ["Ein Hund rennt.", "Zwei Männer."], "beam": 2}).json()
        assert [t["text"] for t in body["translations"]] == translator.translate(
            ["Ein Hund rennt.", "Zwei Männer."], beam=2
        )
        refused = client.post("/translate", json={"text": ["Ein Hund."], "attention": True})
        assert refused.status_code == 422 and refused.json()["error"] == "attention_unavailable"
        # Alignments read one layer's attention, which the export returns: the same pairs as nmt's engine.
        aligned = client.post("/translate", json={"text": ["Ein Hund rennt."], "beam": 2, "alignments": True}).json()
        ours = translator.translate_detailed(["Ein Hund rennt."], beam=2, alignments=True)[0][0]
        assert aligned["translations"][0]["alignment"] == pharaoh(ours.alignment) != ""
        # Confidence needs no attention: CTranslate2 scores the tokens as nmt's engine does.
        scored = client.post("/translate", json={"text": ["Ein Hund rennt."], "beam": 2, "scores": True}).json()
        ours = translator.translate_detailed(["Ein Hund rennt."], beam=2, scores=True)[0][0]
        assert scored["translations"][0]["confidence"] == pytest.approx(ours.confidence, abs=1e-3)
        assert scored["translations"][0]["token_probs"] == pytest.approx(ours.token_probs, abs=1e-3)


def test_scores_and_alignments_are_given_when_asked(client, translator):
    body = client.post(
        "/translate", json={"text": ["Ein Hund rennt.", ""], "beam": 1, "scores": True, "alignments": True}
    ).json()
    ours = translator.translate_detailed(["Ein Hund rennt."], beam=1, scores=True, alignments=True)[0][0]
    first, empty = body["translations"]
    assert first["confidence"] == pytest.approx(ours.confidence, abs=1e-4)
    assert first["token_probs"] == pytest.approx(ours.token_probs, abs=1e-4)
    assert first["word_scores"] == pytest.approx(ours.word_scores, abs=1e-4) and len(first["word_scores"]) > 0
    assert first["alignment"] == " ".join(f"{i}-{j}" for i, j in ours.alignment)
    quality = first["quality"]  # the sentence's score is its words' mean, as --qe and LibreTranslate give it
    assert quality["words"] == first["word_scores"] and quality["doubtful"] == ours.doubtful
    assert quality["score"] == pytest.approx(sum(ours.word_scores) / len(ours.word_scores), abs=1e-4)
    assert (empty["confidence"], empty["token_probs"], empty["alignment"]) == (0.0, [], "")
    assert empty["quality"] == {"score": 0.0, "doubtful": empty.get("doubtful"), "words": []}
    plain = client.post("/translate", json={"text": ["Ein Hund rennt."]}).json()["translations"][0]
    assert not {"confidence", "token_probs", "word_scores", "quality", "alignment"} & set(plain)  # only when asked


def test_a_client_that_leaves_mid_body_is_counted_and_logs_no_error(capfd):
    stub = EchoTranslator()
    app = create_app(stub, ServerLimits(), info=INFO)
    with serve_in_thread(app) as url:
        for _ in range(3):
            address = urlsplit(url)
            with socket.create_connection((address.hostname, address.port), timeout=10) as sock:
                sock.sendall(
                    b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b'Content-Length: 100\r\n\r\n{"text": ["cut'
                )
                time.sleep(0.2)  # the server is reading the body when the client goes
        metrics = httpx.get(f"{url}/metrics").text
        assert 'nmt_client_disconnects_total{stage="body"} 3.0' in metrics
        assert httpx.post(f"{url}/translate", json={"text": ["still here"]}).status_code == 200
    log = capfd.readouterr().err
    assert "ERROR" not in log and "Traceback" not in log and "ClientDisconnect" not in log, log
    assert stub.calls == [(["still here"], 5, False)]  # nothing of the cut bodies reached the model


def test_nmt_serve_on_a_port_in_use_is_one_line_before_the_model_loads(monkeypatch, capsys):
    import nmt.server.running
    from nmt.cli import main

    monkeypatch.setattr(nmt.server.running.Translator, "load", lambda *a, **k: pytest.fail("loaded the model"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--model", "m", "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"nmt serve: error: port {port} on 127.0.0.1 is already in use: stop what holds it, or choose another port\n"
    )


def test_the_json_api_takes_no_repeat_ngram_size_as_the_python_api_does(client, translator, multi30k_dir):
    sources = [s for s in read_head(multi30k_dir / "data/task1/raw/val.de.gz", 60) if len(s) <= 50][:12]
    plain = translator.translate_detailed(sources, beam=2)
    ruled = translator.translate_detailed(sources, beam=2, no_repeat_ngram_size=1)
    assert [b[0].tokens for b in ruled] != [b[0].tokens for b in plain]  # the rule changed something here
    assert all(len(set(b[0].tokens)) == len(b[0].tokens) for b in ruled)  # n=1: no token twice
    served = []
    for i in range(0, len(sources), 3):  # the client's limit: 3 sentences a request
        body = {"text": sources[i : i + 3], "beam": 2, "no_repeat_ngram_size": 1}
        served += [t["text"] for t in client.post("/translate", json=body).json()["translations"]]
    assert served == [b[0].text for b in ruled]
