"""The deployment of deploy/, run as it ships: nginx with deploy/nginx/nmt.conf in front of two `nmt serve`
replicas sharing a real Redis server (deploy/replicas.py starts them). A client's limit is exact
through the proxy whichever replica answers, a file downloads through it from any replica, its body
limit answers as a replica would, and a replica killed under load costs no request."""

from __future__ import annotations

import re
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "deploy"))
import replicas  # noqa: E402 - deploy/ is not a package
from replicas import Deployment, free_port, render_nginx  # noqa: E402

redis = pytest.importorskip("redis")
pytestmark = pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("nginx") is None,
    reason="redis-server or nginx is not installed (apt-get install redis-server nginx)",
)


@pytest.fixture(scope="module")
def deployment(tiny_model_dir, tmp_path_factory):
    """Redis, two replicas (--req-limit 10 per client address) and nginx, as deploy/replicas.py starts them."""
    model_dir = shutil.copytree(tiny_model_dir, tmp_path_factory.mktemp("proxy") / "model")
    options = ["--model", str(model_dir), "--req-limit", "10"]
    with Deployment(tmp_path_factory.mktemp("deployment"), options, replicas=2) as running:
        yield running
    for replica in running.started:  # nothing a client saw went wrong inside either
        assert "Traceback" not in replica.log.read_text(encoding="utf-8")


@pytest.fixture
def proxy(deployment) -> str:
    with redis.Redis(port=deployment.redis_port, socket_timeout=1) as client:
        client.flushdb()  # each test starts with empty windows and no files
    return deployment.url


def client_at(address: str) -> httpx.Client:
    """A client whose connections come from this loopback address (127.0.0.0/8 is all this machine)."""
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def translate(client: httpx.Client, url: str, **headers: str) -> httpx.Response:
    return client.post(f"{url}/translate", json={"text": ["Hallo"]}, headers=headers)


def translations_answered(url: str) -> float:
    """POST /translate answers a replica has given, by its own /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    families = text_string_to_metric_families(httpx.get(f"{url}/metrics", timeout=10).text)
    return sum(
        s.value
        for f in families
        for s in f.samples
        if s.name == "nmt_http_requests_total" and s.labels["path"] == "/translate"
    )


def test_a_client_s_limit_is_exact_through_nginx_across_both_replicas(deployment, proxy):
    before = [translations_answered(r.url) for r in deployment.started]
    with client_at("127.0.0.2") as client, ThreadPoolExecutor(8) as pool:
        # each request claims another address: nginx replaces X-Forwarded-For with the real one
        answers = list(pool.map(lambda i: translate(client, proxy, **{"X-Forwarded-For": f"10.0.0.{i}"}), range(20)))
    assert Counter(a.status_code for a in answers) == {200: 10, 429: 10}
    assert all(1 <= int(a.headers["Retry-After"]) <= 60 for a in answers if a.status_code == 429)
    answered = [translations_answered(r.url) - b for r, b in zip(deployment.started, before, strict=True)]
    assert sum(answered) == 20 and min(answered) >= 1, answered  # both replicas answered, one window
    with client_at("127.0.0.3") as other:
        assert translate(other, proxy).status_code == 200  # another client: its own window


def test_a_file_translated_on_either_replica_downloads_through_nginx_once(deployment, proxy):
    def send(url: str) -> str:
        sent = httpx.post(
            f"{url}/translate_file",
            data={"source": "de", "target": "en"},
            files={"file": ("brief.txt", b"Ein Hund.\n", "text/plain")},
            timeout=30,
        )
        assert sent.status_code == 200, sent.text
        return sent.json()["translatedFileUrl"]

    through_proxy = send(proxy)
    assert through_proxy.startswith(f"{proxy}/download_file/")  # the address a client can reach
    links = [through_proxy] + [proxy + send(r.url).removeprefix(r.url) for r in deployment.started * 2]
    for link in links:  # whichever replica nginx asks, it hands out a file another translated
        fetched = httpx.get(link, timeout=10)
        assert fetched.status_code == 200 and fetched.text.strip(), fetched.text
    assert {httpx.get(link, timeout=10).status_code for link in links} == {404}  # once


def test_a_body_too_large_is_refused_by_nginx_as_a_replica_refuses_it(deployment, proxy):
    body = {"text": ["x" * 300_000]}
    by_proxy = httpx.post(f"{proxy}/translate", json=body, timeout=10)
    by_replica = httpx.post(f"{deployment.started[0].url}/translate", json=body, timeout=10)
    assert by_proxy.status_code == by_replica.status_code == 413
    assert by_proxy.headers["content-type"] == "application/json"
    assert by_proxy.json() == by_replica.json()  # the limit in deploy/nginx/nmt.conf is the replicas'


@pytest.mark.parametrize("stop_signal", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_replica_killed_or_stopped_under_load_through_nginx_costs_no_request(deployment, proxy, stop_signal):
    spare = deployment.start_replica(free_port())  # this test's own: the others serve the other tests
    deployment.wait_for_replica(spare)
    front = deployment.start_proxy([spare.port, deployment.started[0].port])
    statuses: list[int] = []
    stop = threading.Event()

    def load(thread: int) -> None:  # steady, several in flight; a new client address every request
        for i in range(thread, 10**6, 4):  # (the address limit is 10 a minute)
            if stop.is_set():
                return
            try:
                with client_at(f"127.0.{i // 250}.{i % 250 + 2}") as client:
                    statuses.append(translate(client, front).status_code)
            except httpx.HTTPError:
                statuses.append(0)  # no answer at all: counted, as a failure the assertion names

    workers = [threading.Thread(target=load, args=(t,), daemon=True) for t in range(4)]
    for worker in workers:
        worker.start()
    try:
        assert wait_for(lambda: len(statuses) >= 12, timeout=30)
        spare.process.send_signal(stop_signal)
        stopped_at = len(statuses)
        assert wait_for(lambda: len(statuses) >= stopped_at + 16, timeout=30)
    finally:
        stop.set()
        for worker in workers:
            worker.join(timeout=30)
    log = (deployment.folder / f"nginx-{front.rsplit(':', 1)[1]}" / "error.log").read_text(encoding="utf-8")
    on_spare = [line for line in log.splitlines() if f'upstream: "http://127.0.0.1:{spare.port}/' in line]
    cut = sum("reset by peer" in line or "prematurely closed" in line for line in on_spare)
    refused = sum("Connection refused" in line for line in on_spare)
    print(f"{stop_signal.name} after {stopped_at} of {len(statuses)} requests: {dict(Counter(statuses))}; nginx")
    print(f"retried {cut} requests cut off in flight and {refused} refused connections on the stopped replica")
    if stop_signal == signal.SIGKILL:
        assert cut + refused >= 1  # the proxy did meet the dead replica
    assert Counter(statuses) == {200: len(statuses)}  # and another answered every request


def wait_for(condition, timeout: float) -> bool:
    """Whether `condition()` held within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_shipped_config_is_rendered_with_its_own_server_parameters(tmp_path):
    main = render_nginx(tmp_path, listen=9000, replicas=[9001, 9002, 9003])
    site = (tmp_path / "nmt.conf").read_text(encoding="utf-8")
    assert re.findall(r"server (127\.0\.0\.1:\d+) max_fails=2 fail_timeout=5s;", site) == [
        "127.0.0.1:9001",
        "127.0.0.1:9002",
        "127.0.0.1:9003",
    ]
    assert "listen 127.0.0.1:9000;" in site and f"include {tmp_path / 'nmt.conf'};" in main.read_text()
    checked = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-e", "error.log", "-c", str(main)], capture_output=True
    )
    assert checked.returncode == 0, checked.stderr.decode()  # nginx's own syntax check


def test_a_config_without_the_expected_lines_is_refused_naming_the_file(tmp_path):
    template = tmp_path / "site.conf"
    template.write_text("upstream u { server 10.0.0.1:80; }\nserver { listen 80; }\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"{template}: expected `server 127.0.0.1:PORT"):
        render_nginx(tmp_path / "out", listen=9000, replicas=[9001], template=template)


def test_with_no_replica_answering_nginx_says_so_as_json(tmp_path):
    port = free_port()
    main = render_nginx(tmp_path, listen=port, replicas=[free_port(), free_port()])  # nothing listens there
    nginx = subprocess.Popen(["nginx", "-p", str(tmp_path), "-e", "error.log", "-c", str(main)])
    try:
        answer = None
        for _ in range(100):  # until nginx listens
            try:
                answer = httpx.post(f"http://127.0.0.1:{port}/translate", json={"text": ["Hallo"]}, timeout=10)
                break
            except httpx.ConnectError:
                time.sleep(0.05)
        assert answer is not None and answer.status_code == 503, answer
        assert answer.headers["Retry-After"] == "1" and answer.json()["error"] == "unavailable"
    finally:
        nginx.terminate()
        nginx.wait(timeout=10)


@pytest.fixture
def held_port():
    """A port another server listens on (as a Redis or `nmt serve` started before would)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture
def fake_replica(tmp_path):
    """A server answering GET /livez with 200, as a replica with its model loaded does (no model needed)."""
    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "livez").write_text("{}", encoding="utf-8")
    port = free_port()
    command = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", "www"]
    server = subprocess.Popen(command, cwd=tmp_path, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: replicas.http_ok(f"http://127.0.0.1:{port}/livez"), 10)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=10)


def free_pair() -> int:
    """A free port whose next port is free too."""
    for _ in range(100):
        first = free_port()
        if replicas.port_free(first + 1, "127.0.0.1"):
            return first
    raise RuntimeError("no two free ports in a row")


@pytest.mark.parametrize("flag", ["--redis-port", "--replica-port", "--port"])
def test_a_port_already_in_use_is_named_and_nothing_starts(tmp_path, held_port, flag, capsys):
    folder = tmp_path / "deployment"
    # the replicas take --replica-port and the port after it: both must be free, or the error names
    # another port than the one held (as it once did, the next port being another test's server's)
    ports = {"--redis-port": free_port(), "--replica-port": free_pair(), "--port": free_port()}
    ports[flag] = held_port - 1 if flag == "--replica-port" else held_port  # the second replica's port
    options = [item for pair in ports.items() for item in (pair[0], str(pair[1]))]
    status = replicas.main([*options, "--folder", str(folder), "--", "--model", "runs/none"])
    error = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(error) == 1 and f"port {held_port} " in error[0] and "in use" in error[0], error
    assert not folder.exists()  # no Redis, replica or nginx was started: none wrote a log


def test_a_server_answering_on_the_port_is_not_taken_for_the_one_started(held_port):
    failing = subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(0.3); sys.exit(3)"])
    with pytest.raises(RuntimeError, match="exited with status 3 before it was ready"):
        replicas.wait_until(lambda: True, "redis-server", failing, held_port)  # another server answers
    listening = subprocess.Popen([sys.executable, "-m", "http.server", str(free_port()), "--bind", "127.0.0.1"])
    try:
        port = int(listening.args[3])
        assert wait_for(lambda: replicas.listens(listening, port), 10)
        assert not replicas.listens(listening, held_port)  # a port it does not hold
    finally:
        listening.terminate()
        listening.wait(timeout=10)


def test_a_relative_folder_serves(tmp_path, fake_replica, monkeypatch):
    monkeypatch.chdir(tmp_path)
    deployment = Deployment(Path("dep1"), [])
    try:
        url = deployment.start_proxy([fake_replica])
        assert replicas.http_ok(f"{url}/livez")
    finally:
        deployment.stop()
    assert (tmp_path / "dep1" / f"nginx-{url.rsplit(':', 1)[1]}" / "nginx.conf").is_file()


def test_an_nginx_that_cannot_start_says_why(tmp_path, held_port):
    deployment = Deployment(tmp_path, [])
    try:
        with pytest.raises(RuntimeError, match=f"nginx on port {held_port} exited .* Address already in use"):
            deployment.start_proxy([free_port()], held_port)
    finally:
        deployment.stop()


@pytest.mark.parametrize("count", ["0", "-1"])
def test_fewer_than_one_replica_is_refused(count, capsys):
    with pytest.raises(SystemExit) as exit:
        replicas.main(["--replicas", count, "--", "--model", "runs/none"])
    assert exit.value.code == 2 and f"--replicas: must be at least 1, not {count}" in capsys.readouterr().err


def test_nginx_listens_at_the_host_given(tmp_path):
    main = render_nginx(tmp_path, listen=9000, replicas=[9001], host="0.0.0.0")
    assert "listen 0.0.0.0:9000;" in (tmp_path / "nmt.conf").read_text(encoding="utf-8")
    checked = subprocess.run(
        ["nginx", "-t", "-p", str(tmp_path), "-e", "error.log", "-c", str(main)], capture_output=True
    )
    assert checked.returncode == 0, checked.stderr.decode()
    assert Deployment(tmp_path, [], host="0.0.0.0", port=9000).url == "http://127.0.0.1:9000"  # reached locally
    render_nginx(tmp_path, listen=9000, replicas=[9001], host="::")
    assert "listen [::]:9000;" in (tmp_path / "nmt.conf").read_text(encoding="utf-8")


def test_a_host_that_is_not_an_address_is_refused(capsys):
    with pytest.raises(SystemExit):
        replicas.main(["--host", "example.com", "--", "--model", "runs/none"])
    assert "--host: invalid ip_address value: 'example.com'" in capsys.readouterr().err
