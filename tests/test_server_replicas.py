"""Two `nmt serve` replicas sharing one real Redis server (--state): limits exact across them, a file
translated on one fetched through the other once, one translation cache, and Redis lost and found
again while they serve."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from served import nmt_serve

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None, reason="redis-server is not installed (apt-get install redis-server)"
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """A redis-server of the test's own on a free loopback port: nothing saved, nothing shared."""

    def __init__(self, folder: Path):
        self.folder, self.port = folder, free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        command += ["--save", "", "--appendonly", "no", "--dir", str(self.folder)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client, deadline = redis.Redis(port=self.port, socket_timeout=1), time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                assert self.process.poll() is None and time.monotonic() < deadline, "redis-server did not start"
                time.sleep(0.02)
        client.close()

    def stop(self) -> None:
        """As a crash: SIGKILL, so the replicas' open connections die under them."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    def flush(self) -> None:
        with contextlib.closing(redis.Redis(port=self.port, socket_timeout=1)) as client:
            client.flushdb()


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def key_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text("alpha-key-0001  4\nbeta-key-00002\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def replicas(redis_server, tiny_model_dir, key_file, tmp_path_factory):
    """Two replicas of one service: --req-limit 10 per address, API keys (alpha: 4 a minute), shared state."""
    # A copy: serving may write beside the model (a CTranslate2 export), and the session's model is shared
    model_dir = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("replicas") / "model")
    options = ["--state", redis_server.url, "--req-limit", "10", "--api-keys", str(key_file)]
    with nmt_serve(model_dir, *options) as first, nmt_serve(model_dir, *options) as second:
        yield first, second


@pytest.fixture
def urls(replicas, redis_server):
    redis_server.flush()  # each test starts with empty windows and no files
    return [url for url, _ in replicas]


def translate(url: str, key: str = "beta-key-00002") -> httpx.Response:
    return httpx.post(f"{url}/translate", json={"text": ["Hallo"]}, headers={"X-API-Key": key}, timeout=10)


def test_the_address_limit_is_exact_across_replicas_under_concurrent_requests(urls):
    with ThreadPoolExecutor(8) as pool:  # concurrent: a read-then-write limiter would let more through
        answers = list(pool.map(lambda i: translate(urls[i % 2]), range(20)))
    assert Counter(a.status_code for a in answers) == {200: 10, 429: 10}
    refused = [a for a in answers if a.status_code == 429]
    assert all(1 <= int(a.headers["Retry-After"]) <= 60 for a in refused)
    assert refused[0].json()["error"] == "rate_limited"
    assert {a.json()["translations"][0]["text"] for a in answers if a.status_code == 200}  # real translations


def test_a_key_s_limit_is_exact_across_replicas(urls):
    answers = [translate(urls[i % 2], key="alpha-key-0001") for i in range(6)]
    assert [a.status_code for a in answers] == [200] * 4 + [429] * 2
    assert answers[-1].json()["message"] == "Slowdown: 4 per 1 minute"
    assert translate(urls[1]).status_code == 200  # another key, and the address has room: its own window


def test_a_file_translated_on_one_replica_is_fetched_once_through_the_other(urls):
    sent = httpx.post(
        f"{urls[0]}/translate_file",
        data={"source": "de", "target": "en", "api_key": "beta-key-00002"},
        files={"file": ("brief.txt", b"Ein Hund.\nZwei Katzen.\n", "text/plain")},
        timeout=30,
    )
    assert sent.status_code == 200, sent.text
    path = "/download_file/" + sent.json()["translatedFileUrl"].rsplit("/", 1)[1]
    fetched = httpx.get(f"{urls[1]}{path}", timeout=10)
    assert fetched.status_code == 200 and fetched.text.count("\n") == 2
    assert 'filename="translated_en.txt"' in fetched.headers["content-disposition"]
    assert [httpx.get(f"{url}{path}", timeout=10).status_code for url in urls] == [404, 404]  # once, anywhere


def cache_lookups(url: str) -> dict[str, float]:
    """nmt_translation_cache_lookups_total of a replica, by result."""
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text)
    name = "nmt_translation_cache_lookups_total"
    return {s.labels["result"]: s.value for f in families for s in f.samples if s.name == name}


def test_a_sentence_translated_on_one_replica_is_a_cache_hit_on_the_other(urls):
    ask = {"text": ["Ein kleiner Hund läuft."], "beam": 2}
    key = {"X-API-Key": "beta-key-00002"}
    before = cache_lookups(urls[1])
    first = httpx.post(f"{urls[0]}/translate", json=ask, headers=key, timeout=30).json()
    again = httpx.post(f"{urls[1]}/translate", json=ask, headers=key, timeout=30).json()
    assert again == first
    other_beam = httpx.post(f"{urls[1]}/translate", json={**ask, "beam": 3}, headers=key, timeout=30)
    assert other_beam.status_code == 200
    after = cache_lookups(urls[1])
    assert (after["hit"] - before.get("hit", 0), after["miss"] - before.get("miss", 0)) == (1, 1)


def test_a_key_never_sees_another_key_s_cache_entries_on_any_replica(urls):
    ask = {"text": ["Zwei Katzen schlafen."], "beam": 2}
    before = [cache_lookups(url) for url in urls]
    for url, key in ((urls[0], "alpha-key-0001"), (urls[1], "beta-key-00002"), (urls[1], "alpha-key-0001")):
        assert httpx.post(f"{url}/translate", json=ask, headers={"X-API-Key": key}, timeout=30).status_code == 200
    after = [cache_lookups(url) for url in urls]
    gained = {r: sum(a.get(r, 0) - b.get(r, 0) for a, b in zip(after, before, strict=True)) for r in ("hit", "miss")}
    assert gained == {"hit": 1, "miss": 2}  # beta searched for itself; alpha's own entry served alpha elsewhere


def probe(url: str) -> tuple[int, bool, bool]:
    """(/readyz's status, whether /health says degraded, whether /health reaches its state)."""
    health = httpx.get(f"{url}/health", timeout=5).json()
    return httpx.get(f"{url}/readyz", timeout=5).status_code, health["degraded"], health["shared_state"]["reachable"]


def wait_for(condition, timeout: float) -> float:
    """Seconds until `condition()` held; fails past `timeout`."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, "timed out"
        time.sleep(0.05)
    return time.monotonic() - start


def test_redis_lost_and_back_while_serving_gives_no_5xx_and_recovers_by_itself(urls, replicas, redis_server):
    statuses: list[int] = []
    stop = threading.Event()

    def load() -> None:  # steady requests to both replicas while Redis goes and comes back
        i = 0
        while not stop.is_set():
            try:
                statuses.append(translate(urls[i % 2]).status_code)
            except httpx.HTTPError:  # no answer at all: counted, as a failure the assertion below names
                statuses.append(0)
            i += 1
            time.sleep(0.01)  # steady, not flat out: the two cores also run both replicas

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        wait_for(lambda: len(statuses) >= 4, timeout=10)
        redis_server.stop()
        lost_in = wait_for(lambda: all(probe(url) == (503, True, False) for url in urls), timeout=5)
        assert "nmt_shared_state_reachable 0.0" in httpx.get(f"{urls[0]}/metrics", timeout=10).text
        during = len(statuses)
        # alone, a replica keeps the files it translates and hands them out itself; one it may not
        # hold is "come back in a moment", for Redis may hold it
        kept = httpx.post(
            f"{urls[0]}/translate_file",
            data={"source": "de", "target": "en", "api_key": "beta-key-00002"},
            files={"file": ("a.txt", b"Ein Hund.\n", "text/plain")},
            timeout=30,
        )
        assert httpx.get(kept.json()["translatedFileUrl"], timeout=10).status_code == 200
        elsewhere = httpx.get(f"{urls[1]}/download_file/{'0' * 32}_en.txt", timeout=10)
        assert elsewhere.status_code == 503 and elsewhere.headers["Retry-After"] == "1"
        wait_for(lambda: len(statuses) >= during + 6, timeout=10)  # served alone meanwhile
        redis_server.start()
        recovered_in = wait_for(lambda: all(probe(url) == (200, False, True) for url in urls), timeout=5)
        after = len(statuses)
        wait_for(lambda: len(statuses) >= after + 4, timeout=10)
    finally:
        stop.set()
        worker.join(timeout=15)
    assert not worker.is_alive()
    counts = Counter(statuses)
    assert set(counts) <= {200, 429}, counts  # never a 5xx: the replica went on with its own window
    print(f"lost seen in {lost_in:.2f} s, recovered in {recovered_in:.2f} s, answers {dict(counts)}")
    assert recovered_in < 3
    for _, log in replicas:  # said once each way, whatever the number of requests meanwhile
        text = "".join(log)
        assert text.count(" lost (") == 1 and text.count("answers again after") == 1, text[-2000:]
        assert "Traceback" not in text


@pytest.mark.parametrize("given", ["option", "environment"])
def test_an_unreachable_state_at_start_is_one_line_and_exit_2(tiny_model_dir, given):
    url = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    command = [sys.executable, "-m", "nmt", "serve", "--model", str(tiny_model_dir), "--port", "0"]
    environment = {**os.environ, "NMT_STATE": url} if given == "environment" else None
    if given == "option":
        command += ["--state", url]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=environment)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"the shared state {url} does not answer" in done.stderr, done.stderr


def test_a_state_url_of_another_kind_is_refused_before_anything_loads(capsys):
    from nmt.cli import main

    assert main(["serve", "--model", "not-loaded", "--state", "http://user:secret@cache:6379/0"]) == 2
    err = capsys.readouterr().err
    assert "expected redis://HOST:PORT/DB" in err and "secret" not in err  # a password is never shown


@pytest.fixture
def own_redis(tmp_path):
    """A Redis server of this test's alone (the replicas' watchers must not see what it does to it)."""
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        if server.process is not None and server.process.poll() is None:
            server.process.send_signal(signal.SIGCONT)
        server.stop()


def test_redis_s_window_says_what_the_process_s_says(own_redis):
    from nmt.server.keys import RateLimiter
    from nmt.server.shared_state import RedisState

    state, local = RedisState.connect(own_redis.url), RateLimiter()
    try:
        shared = [state.limiter.take("a", 3, cost) for cost in (2, 1, 1)]
        alone = [local.take("a", 3, cost) for cost in (2, 1, 1)]
        assert shared[:2] == alone[:2] == [None, None] and 59 <= shared[2] <= 60 and 59 <= alone[2] <= 60
        assert state.limiter.take("a", 3, cost=4) == local.take("a", 3, cost=4) == 60  # never: the whole window
        assert state.limiter.take("b", 3) is None  # another identity, its own window
        assert state.status() == {"kind": "redis", "url": own_redis.url, "reachable": True}
    finally:
        state.close()


def test_a_redis_that_hangs_costs_one_short_timeout_then_nothing_and_is_found_again(own_redis):
    from nmt.server.shared_state import RETRY_S, TIMEOUT_S, FilesUnavailable, RedisState

    state = RedisState.connect(own_redis.url)
    state.start()
    try:
        assert state.limiter.take("a", 5) is None
        own_redis.process.send_signal(signal.SIGSTOP)  # alive, connected, silent: the worst kind of dead
        start = time.monotonic()
        assert state.limiter.take("a", 5) is None  # after one timeout, this replica's own window
        first = time.monotonic() - start
        start = time.monotonic()
        answers = [state.limiter.take("a", 5) for _ in range(5)]
        with pytest.raises(FilesUnavailable):  # a file Redis may hold: "later", not "gone"
            state.take_file(f"{'0' * 32}_en.txt")
        assert state.cached(["k"]) == [None]  # the cache is skipped
        then = time.monotonic() - start
        assert answers[:4] == [None] * 4 and 59 <= answers[4] <= 60  # its own window counts from the loss
        assert TIMEOUT_S * 0.9 <= first < TIMEOUT_S + 0.5 and then < 0.1, (first, then)  # no call waits again
        assert state.status()["reachable"] is False
        own_redis.process.send_signal(signal.SIGCONT)
        back = wait_for(lambda: state.status()["reachable"], timeout=5)
        assert back < RETRY_S + TIMEOUT_S + 1
        assert state.limiter.take("a", 5) is None  # the shared window again: it held one
    finally:
        state.close()


def test_redis_keeps_the_newest_files_each_for_a_while_and_hands_each_out_once(own_redis):
    from nmt.server.shared_state import DOWNLOAD_EXPIRY_S, MAX_DOWNLOADS, PREFIX, RedisState

    state = RedisState.connect(own_redis.url)
    try:
        names = [f"{i:032x}_en.txt" for i in range(MAX_DOWNLOADS + 1)]
        for name in names:
            state.keep_file(name, name.encode())
        assert state.client.zcard(f"{PREFIX}files") == MAX_DOWNLOADS
        assert 0 < state.client.ttl(f"{PREFIX}file:{names[-1]}") <= DOWNLOAD_EXPIRY_S  # it expires by itself
        assert state.take_file(names[0]) is None  # the oldest made room
        assert state.take_file(names[1]) == names[1].encode()
        assert state.take_file(names[1]) is None  # once
    finally:
        state.close()
