"""The server under overload and cross-site requests: the bounded queue, deadlines, disconnects, shutdown
(SIGTERM in a real process), Host/Origin and content-type checks, attention limits, /metrics."""

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from served import nmt_serve
from test_server import INFO, JSON, LOCAL, EchoTranslator, holding_queue, raw_request

import nmt.server.nmt_api
from nmt.search_settings import SearchRequest
from nmt.server import AccessPolicy, ServerLimits, create_app, model_info, serve_in_thread
from nmt.server.batching_queue import (
    Abandoned,
    BatchingConfig,
    BatchingQueue,
    DeadlineExceeded,
    Overloaded,
    ShuttingDown,
)
from nmt.translator import Translator


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.01)


def answers_health(url: str) -> bool:
    """Whether the server answers /health with 200 yet: it prints its port once bound, and starts
    listening a moment later, so a refused connection means "not yet", not a failure."""
    try:
        return httpx.get(f"{url}/health", timeout=1).status_code == 200
    except httpx.TransportError:
        return False


def held(stub: EchoTranslator, app) -> None:
    """Put one request in the model's hands (held at the stub's gate) and wait until it is there."""
    app.state.queue.submit(["in the model"], SearchRequest(beam=1))
    assert stub.entered.wait(10)


def texts_translated(stub: EchoTranslator) -> list[str]:
    return [text for texts, _, _ in stub.calls for text in texts]


# --- the queue itself -------------------------------------------------------------------------------
def test_the_queue_refuses_sentences_past_its_bound_and_frees_room_on_cancel():
    stub, queue, _ = holding_queue(BatchingConfig(window_ms=0, max_pending_sentences=3))
    first = queue.submit(["a", "b"], SearchRequest(beam=1))
    with pytest.raises(Overloaded) as refused:
        queue.submit(["c", "d"], SearchRequest(beam=1))
    assert refused.value.retry_after_s >= 1 and queue.stats.rejected == 1
    third = queue.submit(["c"], SearchRequest(beam=1))  # exactly at the bound: taken
    assert queue.pending_sentences == 3
    assert first.cancel() and queue.pending_sentences == 1  # an abandoned request frees its room at once
    stub.gate.set()
    assert third.result(timeout=10)[0][0].text == "c|1"
    queue.stop()
    assert "a" not in texts_translated(stub) and queue.stats.dropped == 1


class Stepped(EchoTranslator):
    """Each call waits for a permit: the test lets the worker make one call at a time."""

    def __init__(self):
        super().__init__()
        self.permits, self.started = threading.Semaphore(0), threading.Semaphore(0)

    def translate_detailed(self, texts, request, **options):
        self.started.release()
        assert self.permits.acquire(timeout=10), "the test never let the call go"
        return super().translate_detailed(texts, request, **options)


def stepped_queue(max_sentences: int) -> tuple[Stepped, BatchingQueue]:
    stub = Stepped()
    queue = BatchingQueue(stub, BatchingConfig(window_ms=0, max_sentences=max_sentences))
    queue.start()
    return stub, queue


def test_a_large_request_is_split_over_calls_in_order():
    stub, queue = stepped_queue(max_sentences=2)
    for _ in range(3):
        stub.permits.release()
    answer = queue.submit(list("abcde"), SearchRequest(beam=1)).result(timeout=10)
    queue.stop()
    assert [texts for texts, _, _ in stub.calls] == [["a", "b"], ["c", "d"], ["e"]]
    assert [t.text for [t] in answer] == ["a|1", "b|1", "c|1", "d|1", "e|1"]


def test_a_request_whose_client_left_is_dropped_before_its_next_call():
    stub, queue = stepped_queue(max_sentences=1)
    future = queue.submit(list("abcd"), SearchRequest(beam=1))
    assert stub.started.acquire(timeout=10)  # the first call is with the model: too late to cancel it
    assert not future.cancel()  # Future.cancel() fails once running, and the queue still hears of it
    stub.permits.release()
    with pytest.raises(Abandoned):
        future.result(timeout=10)
    queue.stop()
    assert [texts for texts, _, _ in stub.calls] == [["a"]] and queue.stats.cut == 1


def test_a_request_whose_deadline_passed_is_dropped_before_its_next_call():
    stub, queue = stepped_queue(max_sentences=1)
    future = queue.submit(list("abcd"), SearchRequest(beam=1), deadline=time.monotonic() + 0.2)
    assert stub.started.acquire(timeout=10)
    time.sleep(0.3)
    stub.permits.release()
    with pytest.raises(DeadlineExceeded):
        future.result(timeout=10)
    queue.stop()
    assert [texts for texts, _, _ in stub.calls] == [["a"]] and queue.stats.cut == 1


def test_a_request_the_work_ahead_would_make_late_is_refused_at_once():
    stub = EchoTranslator(delay=0.1)
    queue = BatchingQueue(stub, BatchingConfig(window_ms=0))
    queue.start()
    queue.submit(["x"], SearchRequest(beam=1)).result(timeout=10)  # measured: about 0.1 s per unit of work
    stub.gate.clear()
    stub.entered.clear()
    queue.submit(["held"], SearchRequest(beam=1))
    assert stub.entered.wait(10)
    queue.submit(["p"] * 100, SearchRequest(beam=1))  # about 10 s of work ahead, taken: no deadline
    with pytest.raises(Overloaded) as refused:
        queue.submit(["y"], SearchRequest(beam=1), deadline=time.monotonic() + 1)
    assert refused.value.limit == "deadline_s" and refused.value.retry_after_s >= 5
    assert "work ahead" in str(refused.value) and queue.stats.refused_cost == 1
    on_time = queue.submit(["z"], SearchRequest(beam=1), deadline=time.monotonic() + 60)  # it fits: taken
    stub.gate.set()
    assert on_time.result(timeout=30)[0][0].text == "z|1"
    queue.stop()
    assert "y" not in texts_translated(stub)


def test_a_request_queued_past_its_deadline_is_dropped_untranslated():
    stub, queue, _ = holding_queue(BatchingConfig(window_ms=0))
    late = queue.submit(["late"], SearchRequest(beam=1), deadline=time.monotonic() + 0.05)
    time.sleep(0.1)
    stub.gate.set()
    with pytest.raises(DeadlineExceeded):
        late.result(timeout=10)
    queue.stop()
    assert texts_translated(stub) == ["first"] and queue.stats.timed_out == 1


def test_close_fails_the_queued_requests_and_lets_the_batch_in_hand_finish():
    stub, queue, in_hand = holding_queue(BatchingConfig(window_ms=0))
    queued = queue.submit(["queued"], SearchRequest(beam=1))
    queue.close()
    with pytest.raises(ShuttingDown):
        queued.result(timeout=1)  # at once, not after the batch in hand
    stub.gate.set()
    assert in_hand.result(timeout=10)[0][0].text == "first|1"
    queue.stop()
    assert texts_translated(stub) == ["first"] and queue.stats.shut_out == 1


# --- the same over HTTP ----------------------------------------------------------------------------
def test_a_full_queue_answers_503_with_retry_after():
    stub = EchoTranslator()
    stub.gate.clear()
    app = create_app(stub, ServerLimits(), info=INFO, batching=BatchingConfig(window_ms=0, max_pending_sentences=2))
    with serve_in_thread(app) as url, ThreadPoolExecutor(2) as pool:
        held(stub, app)
        waiting = [pool.submit(httpx.post, f"{url}/translate", json={"text": [f"w{i}"]}, timeout=10) for i in range(2)]
        wait_until(lambda: app.state.queue.pending_sentences == 2)
        refused = httpx.post(f"{url}/translate", json={"text": ["one too many"]}, timeout=10)
        assert refused.status_code == 503 and int(refused.headers["Retry-After"]) >= 1
        assert refused.json()["error"] == "overloaded" and refused.json()["limit"] == "max_pending_sentences"
        assert httpx.get(f"{url}/health").status_code == 200  # the server itself is fine
        stub.gate.set()
        assert [w.result().status_code for w in waiting] == [200, 200]


def test_libretranslate_s_requests_get_the_same_refusals_in_its_shape():
    """The queue's bound and the deadline hold on LibreTranslate's /translate too: a full queue is
    its 429 "Slowdown", which its clients take as the sign to wait and retry."""
    stub = EchoTranslator()
    stub.gate.clear()
    batching = BatchingConfig(window_ms=0, max_pending_sentences=2)
    app = create_app(stub, ServerLimits(deadline_s=1.0), info=INFO, batching=batching)
    ask = {"source": "de", "target": "en"}
    with serve_in_thread(app) as url, ThreadPoolExecutor(2) as pool:
        held(stub, app)
        waiting = [
            pool.submit(httpx.post, f"{url}/translate", data={"q": f"w{i}", **ask}, timeout=10) for i in range(2)
        ]
        wait_until(lambda: app.state.queue.pending_sentences == 2)
        refused = httpx.post(f"{url}/translate", data={"q": "one too many", **ask}, timeout=10)
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1  # LibreTranslate's "back off"
        assert refused.json()["error"].startswith("Slowdown: the server is busy")
        late = [w.result() for w in waiting]  # held past their deadline: 503, dropped
        assert [r.status_code for r in late] == [503, 503] and all("deadline" in r.json()["error"] for r in late)
        assert all("Retry-After" in r.headers for r in late)
        stub.gate.set()
        ok = httpx.post(f"{url}/translate", data={"q": "on time", **ask}, timeout=10)
        assert ok.json() == {"translatedText": "on time|5"}  # the model's default beam


def test_past_the_deadline_the_client_gets_503_and_the_work_is_dropped():
    stub = EchoTranslator()
    stub.gate.clear()
    app = create_app(stub, ServerLimits(deadline_s=0.3), info=INFO, batching=BatchingConfig(window_ms=0))
    with serve_in_thread(app) as url:
        held(stub, app)
        start = time.monotonic()
        response = httpx.post(f"{url}/translate", json={"text": ["too late"]}, timeout=10)
        assert response.status_code == 503 and response.json()["error"] == "deadline_exceeded"
        assert time.monotonic() - start < 5 and "Retry-After" in response.headers  # not held until the gate opens
        # cancelled: it leaves the queue (asyncio passes the cancel on at its next turn, which may
        # come just after the answer went out)
        wait_until(lambda: app.state.queue.pending_sentences == 0, timeout=2.0)
        stub.gate.set()
        assert httpx.post(f"{url}/translate", json={"text": ["on time"]}, timeout=10).status_code == 200
    assert "too late" not in texts_translated(stub) and app.state.queue.stats.timed_out == 1


def test_a_client_that_disconnects_leaves_the_queue_before_translation():
    stub = EchoTranslator()
    stub.gate.clear()
    app = create_app(stub, ServerLimits(), info=INFO, batching=BatchingConfig(window_ms=0))
    with serve_in_thread(app) as url:
        held(stub, app)
        sockets = [raw_request(url, json.dumps({"text": [f"gone {i}"]}).encode()) for i in range(5)]
        wait_until(lambda: app.state.queue.pending_sentences == 5)
        for sock in sockets:
            sock.close()
        wait_until(lambda: app.state.queue.pending_sentences == 0)  # noticed while the model is still busy
        stub.gate.set()
        assert httpx.post(f"{url}/translate", json={"text": ["stayed"]}, timeout=10).status_code == 200
    assert texts_translated(stub) == ["in the model", "stayed"] and app.state.queue.stats.dropped == 5


SLOW_SERVER = """
import socket, sys, time, types
from nmt.server.batching_queue import BatchingConfig
from nmt.config import DecodeConfig
from nmt.inference.contract import ENGINE_CAPABILITIES
from nmt.server import ConnectionOptions, ServerLimits, create_app, run_app
from nmt.translator import Translation

class Slow:
    decode = DecodeConfig()
    engine = types.SimpleNamespace(name="slow", capabilities=ENGINE_CAPABILITIES["torch"])
    text_form = None
    def source_fits(self, text, **_):
        return True
    def check_request(self, request):
        return request
    target_languages = []
    def check_languages(self, texts=(), target_lang=None, source_lang=None):
        pass
    def translate_detailed(self, texts, request, **options):
        time.sleep(float(sys.argv[1]))
        return [[Translation(t, 0.0, 0.0, [], [])] for t in texts]

sock = socket.socket()
sock.bind(("127.0.0.1", 0))
print(sock.getsockname()[1], flush=True)
info = {"model": "slow", "src_lang": "de", "tgt_lang": "en"}
app = create_app(Slow(), ServerLimits(), info=info, batching=BatchingConfig(window_ms=500, max_sentences=2))
run_app(app, ConnectionOptions(graceful_timeout_s=float(sys.argv[2])), sockets=[sock], log_level="warning")
"""


@pytest.mark.parametrize(
    "model_seconds, grace_s, in_hand_status, api",
    [
        (1.0, 5, 200, "nmt"),  # the batch in hand finishes within the grace period: answered
        (3.0, 0.5, 503, "nmt"),  # it does not: its clients are told at the end of the grace period
        (1.0, 5, 200, "libretranslate"),  # the same on LibreTranslate's API
    ],
)
def test_sigterm_answers_everyone_and_exits_promptly(model_seconds, grace_s, in_hand_status, api):
    server = subprocess.Popen(
        [sys.executable, "-c", SLOW_SERVER, str(model_seconds), str(grace_s)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}"
        wait_until(lambda: answers_health(url), timeout=60)
        with ThreadPoolExecutor(6) as pool:
            if api == "nmt":
                bodies = [{"json": {"text": [f"s{i}"]}} for i in range(6)]
            else:
                bodies = [{"data": {"q": f"s{i}", "source": "de", "target": "en"}} for i in range(6)]
            answers = [pool.submit(httpx.post, f"{url}/translate", timeout=30, **body) for body in bodies]
            wait_until(lambda: httpx.get(f"{url}/health").json()["batching"]["pending_sentences"] == 4)
            start = time.monotonic()
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=15)
            took = time.monotonic() - start
            responses = [a.result() for a in answers]
        statuses = sorted(r.status_code for r in responses)
        assert statuses == sorted([in_hand_status] * 2 + [503] * 4)
        errors = {r.json().get("error") for r in responses if r.status_code == 503}
        assert errors == ({"shutting_down"} if api == "nmt" else {"the server is shutting down"}), errors
        assert took < min(grace_s, model_seconds) + model_seconds + 4  # slack for a busy machine
        assert server.returncode in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{url}/health", timeout=2)  # no longer listening
    finally:
        server.kill()
        server.communicate()


# --- cross-site -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client():
    app = create_app(
        EchoTranslator(),
        ServerLimits(max_attention_sentences=2),
        info=INFO,
        access=AccessPolicy(allowed_origins=("https://app.example",)),
    )
    with TestClient(app, base_url=LOCAL) as client:
        yield client


@pytest.mark.parametrize(
    "headers, status, error",
    [
        ({"Origin": "http://127.0.0.1"}, 200, None),  # the server's own page
        ({"Origin": "https://app.example"}, 200, None),  # an allowed origin
        ({"Origin": "https://evil.example"}, 403, "forbidden_origin"),
        ({"Origin": "http://127.0.0.1:9999"}, 403, "forbidden_origin"),  # another port is another origin
        ({"Origin": "null"}, 403, "forbidden_origin"),  # sandboxed frames, file:// pages
        ({"Host": "evil.example"}, 403, "forbidden_host"),  # DNS rebinding
    ],
)
def test_host_and_origin_are_checked(client, headers, status, error):
    response = client.post("/translate", json={"text": ["a"]}, headers=headers)
    assert response.status_code == status
    assert response.json().get("error") == error


def test_two_origin_headers_are_refused_even_where_every_origin_is_allowed():
    app = create_app(EchoTranslator(), ServerLimits(), info=INFO, access=AccessPolicy(allowed_origins=("*",)))
    with TestClient(app, base_url=LOCAL) as any_origin:
        headers = [
            ("Origin", "https://a.example"),
            ("Origin", "https://b.example"),
            ("Content-Type", "application/json"),
        ]
        response = any_origin.post("/translate", content=b'{"text": ["a"]}', headers=headers)
        assert response.status_code == 400 and response.json()["error"] == "bad_origin"
        assert "access-control-allow-origin" not in response.headers


def test_an_allowed_origin_gets_cors_and_its_preflight_is_answered(client):
    """Pages at an allowed origin can read the answers (Access-Control-Allow-Origin) and send JSON
    (the preflight); the server's own page needs no CORS, and another origin gets neither."""
    allowed = {"Origin": "https://app.example"}
    answer = client.post("/translate", json={"text": ["a"]}, headers=allowed)
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "https://app.example"
    assert "Origin" in answer.headers["vary"]
    own = client.post("/translate", json={"text": ["a"]}, headers={"Origin": "http://127.0.0.1"})
    assert own.status_code == 200 and "access-control-allow-origin" not in own.headers
    asking = {**allowed, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type"}
    preflight = client.options("/translate", headers=asking)
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == "https://app.example"
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert preflight.headers["access-control-allow-headers"] == "content-type"
    foreign = client.options("/translate", headers={**asking, "Origin": "https://evil.example"})
    assert foreign.status_code == 403 and "access-control-allow-origin" not in foreign.headers


@pytest.mark.parametrize(
    "host, allowed",
    [
        ("127.0.0.1:8000", True),
        ("[::1]:8000", True),
        ("LOCALHOST", True),
        ("localhost.evil.example", False),
        ("127.0.0.1:port", False),
        ("evil.example:8000@127.0.0.1", False),
        ("", False),
    ],
)
def test_host_names_are_compared_without_their_port(host, allowed):
    assert AccessPolicy().host_allowed(host) is allowed


def test_any_host_when_allowed_explicitly():
    app = create_app(EchoTranslator(), ServerLimits(), info=INFO, access=AccessPolicy(allowed_hosts=("*",)))
    with TestClient(app, base_url="http://mt.example.org") as client:
        assert client.post("/translate", json={"text": ["a"]}).status_code == 200


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/json; charset=utf-16", None],
)
def test_the_body_must_be_declared_json(client, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.post("/translate", content=b'{"text": ["a"]}', headers=headers)
    assert response.status_code == 415 and response.json()["error"] == "unsupported_media_type"


@pytest.mark.parametrize("content_type", ["application/x-www-form-urlencoded", "multipart/form-data"])
def test_a_form_body_is_read_as_libretranslate_s_request(client, content_type):
    """LibreTranslate's clients post forms (server/libretranslate.py); nmt's JSON body in a form is no request."""
    response = client.post("/translate", content=b'{"text": ["a"]}', headers={"Content-Type": content_type})
    assert response.status_code == 400 and response.json()["error"].startswith("Invalid request")


def test_unknown_paths_and_methods_are_json_errors(client):
    assert client.get("/nothing").json()["error"] == "not_found"
    response = client.get("/translate")
    assert response.status_code == 405 and response.json()["error"] == "method_not_allowed"


# --- attention ---------------------------------------------------------------------------------------
def test_attention_is_refused_past_its_sentence_limit(client):
    response = client.post("/translate", json={"text": ["a", "b", "c"], "attention": True}, headers=JSON)
    assert response.status_code == 422 and response.json()["limit"] == "max_attention_sentences"
    assert client.post("/translate", json={"text": ["a", "b", "c"]}).status_code == 200  # without: fine


@pytest.fixture(scope="module")
def translator(tiny_model_dir):
    return Translator.load(tiny_model_dir, device="cpu")


def test_attention_is_refused_past_its_cell_limit(translator, tiny_model_dir):
    app = create_app(translator, ServerLimits(max_attention_cells=100), info=model_info(tiny_model_dir, translator))
    with TestClient(app, base_url=LOCAL) as client:
        response = client.post("/translate", json={"text": ["Ein Mann fährt Fahrrad."], "attention": True})
    assert response.status_code == 422 and response.json()["limit"] == "max_attention_cells"


def test_health_answers_while_a_large_answer_is_built(translator, tiny_model_dir, monkeypatch):
    building = threading.Event()
    real = nmt.server.nmt_api.answer_body

    def slow_answer_body(*args, **kwargs):
        building.set()
        time.sleep(2.0)  # as a large attention answer would take
        return real(*args, **kwargs)

    monkeypatch.setattr(nmt.server.nmt_api, "answer_body", slow_answer_body)
    app = create_app(translator, ServerLimits(), info=model_info(tiny_model_dir, translator))
    with serve_in_thread(app) as url, ThreadPoolExecutor(1) as pool:
        big = pool.submit(httpx.post, f"{url}/translate", json={"text": ["Ein Hund."], "attention": True}, timeout=30)
        assert building.wait(10)
        assert httpx.get(f"{url}/health", timeout=5).status_code == 200
        assert not big.done()  # /health answered while the answer was still being built
        assert big.result().status_code == 200


# --- metrics -----------------------------------------------------------------------------------------
def metric_samples(client) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def test_metrics_count_requests_batches_and_refusals():
    app = create_app(EchoTranslator(), ServerLimits(), info=INFO)
    with TestClient(app, base_url=LOCAL) as client:
        for i in range(3):  # other sentences each time: repeated ones would be answered from the cache
            client.post("/translate", json={"text": [f"a{i}", f"b{i}"]})
        client.post("/translate", json={"text": ["a"], "beam": 99})
        client.post("/translate", json={"text": ["a"]}, headers={"Origin": "https://evil.example"})
        samples = metric_samples(client)
    assert samples["nmt_http_requests_total", (("path", "/translate"), ("status", "200"))] == 3
    assert samples["nmt_http_requests_total", (("path", "/translate"), ("status", "422"))] == 1
    assert samples["nmt_http_requests_total", (("path", "/translate"), ("status", "403"))] == 1
    assert samples["nmt_sentences_translated_total", ()] == 6
    assert samples["nmt_batch_sentences_count", ()] == 3 and samples["nmt_batch_sentences_sum", ()] == 6
    assert samples["nmt_request_seconds_count", (("outcome", "ok"),)] == 3
    assert samples["nmt_queue_pending_sentences", ()] == 0
    for reason in ("disconnected", "deadline", "overloaded", "shutdown"):
        assert samples["nmt_requests_dropped_total", (("reason", reason),)] == 0


# --- abandoned and oversized work on the server nmt serve starts, on both engines ---------------------
LONG = ("Ein Mann fährt mit dem Fahrrad auf der Straße, und die Kinder spielen im Park. " * 13)[:1000]


@pytest.fixture(scope="module")
def slow_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model with the default output limit (1.5 x source + 10): random weights rarely end a
    sentence, so every sentence decodes to its limit, the slow work a hostile client asks for."""
    from nmt.config import ExperimentConfig

    model_dir = Path(shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("slow") / "model"))
    ExperimentConfig().save(model_dir / "config.yaml")
    return model_dir


@pytest.mark.parametrize("engine", ["auto", "torch"])
def test_abandoned_and_oversized_work_does_not_hold_the_worker(slow_model_dir, multi30k_dir, engine, tmp_path):
    """50 clients send 8 sentences at beam 8 and hang up at once; the next one-sentence request is
    answered within twice the time of the largest call the worker makes (64 sentences at beam 8 here)
    plus 1 s, and at least 2 s, 10 times in a row; then 64 sentences of 1,000 characters at beam 8 are
    answered within the deadline or refused at once. On `nmt serve` as started by a user: auto
    serves on CTranslate2 where installed, exporting the model in its own process first."""
    from conftest import read_head

    model_dir = shutil.copytree(slow_model_dir, tmp_path / "model")  # a fresh export each run, as a new user's
    sources = read_head(multi30k_dir / "data/task1/raw/val.de.gz", 400)
    # No translation cache: every request here must reach the worker (the default deadline, 30 s)
    with nmt_serve(model_dir, "--engine", engine, "--translation-cache", "0") as (url, log):
        # The worker never cuts a model call, so a hang-up can cost the next client one call of the
        # largest size (64 sentences, --batch-sentences) on this machine, plus its own: time one.
        for _ in range(2):  # the second, warm
            start = time.monotonic()
            httpx.post(f"{url}/translate", json={"text": sources[:64], "beam": 8}, timeout=30).raise_for_status()
            largest_call = time.monotonic() - start
        # Twice that call plus 1 s: the suite's other worker shares these cores, and one call has taken
        # 1.7x its timed length beside it; the abandoned work, if it held the worker, would take about
        # six such calls (50 x 8 sentences against 64 a call), so the bound still tells them apart.
        bound = max(2.0, 2 * largest_call + 1)
        for attempt in range(10):
            sockets = [
                raw_request(url, json.dumps({"text": sources[8 * i : 8 * i + 8], "beam": 8}).encode())
                for i in range(50)
            ]
            for sock in sockets:
                sock.close()
            start = time.monotonic()
            small = httpx.post(f"{url}/translate", json={"text": ["Ein Mann fährt Fahrrad."]}, timeout=30)
            took = time.monotonic() - start
            failure = (attempt, f"{took:.2f} s > {bound:.2f} s", "".join(log)[-300:])
            assert small.status_code == 200 and took < bound, failure
        start = time.monotonic()
        large = httpx.post(f"{url}/translate", json={"text": [LONG] * 64, "beam": 8}, timeout=60)
        took = time.monotonic() - start
        if large.status_code == 200:
            assert took < 30
        else:
            assert large.status_code == 503 and took < 1 and "Retry-After" in large.headers, (large.text, took)
        health = httpx.get(f"{url}/health", timeout=10).json()["batching"]
        assert health["dropped"] + health["cut"] > 0  # the abandoned work was noticed
