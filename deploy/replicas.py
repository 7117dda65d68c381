"""Start the service as deploy/ describes it, on one machine: a Redis server, N `nmt serve` replicas
sharing it (--state), and nginx in front with deploy/nginx/nmt.conf; Ctrl-C or SIGTERM stops them
all (the replicas drain first).

    python deploy/replicas.py --replicas 2 --port 8000 -- --model runs/de_en [other nmt serve options]

The replicas listen on --replica-port and the ports after it, Redis on --redis-port, nginx on
--port; logs and nginx's files go to --folder (a new temporary folder by default). Where systemd
runs, deploy/nmt-replica@.service and Debian's own redis-server and nginx units do the same job.
tests/test_server_proxy.py and benchmarks/replica_load.py start their deployments with this module.
Standard library only, so that it runs beside any nmt install.
"""

from __future__ import annotations

import argparse
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

NGINX_CONF = Path(__file__).resolve().parent / "nginx" / "nmt.conf"
HOST = "127.0.0.1"  # every part on loopback: nginx is the one door, and it binds 127.0.0.1 here too
UPSTREAM_SERVER = re.compile(r"^( *)server 127\.0\.0\.1:\d+( [^;]*)?;\n", re.MULTILINE)
LISTEN = re.compile(r"^( *)listen \d+;$", re.MULTILINE)

# The whole configuration of an nginx run by an unprivileged user: its pid, logs and buffers in
# the folder given by -p, and deploy/nginx/nmt.conf (rendered) as its one http-level file.
NGINX_MAIN = """worker_processes 1;
pid nginx.pid;
error_log error.log warn;
daemon off;
events {{ worker_connections 1024; }}
http {{
    access_log access.log;
    client_body_temp_path tmp/body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    include {site};
}}
"""


def render_nginx(folder: Path, *, listen: int, replicas: Sequence[int], template: Path = NGINX_CONF) -> Path:
    """deploy/nginx/nmt.conf with these ports (its own `server` lines' parameters kept), written into
    `folder` beside a main configuration for an nginx of its own; returns that main file's path."""
    text = template.read_text(encoding="utf-8")
    servers = list(UPSTREAM_SERVER.finditer(text))
    if not servers or len(LISTEN.findall(text)) != 1:
        raise ValueError(f"{template}: expected `server 127.0.0.1:PORT ...;` lines and one `listen PORT;`")
    indent, parameters = servers[0].group(1), servers[0].group(2) or ""
    lines = "".join(f"{indent}server {HOST}:{port}{parameters};\n" for port in replicas)
    text = text[: servers[0].start()] + lines + text[servers[-1].end() :]
    text = LISTEN.sub(lambda m: f"{m.group(1)}listen {HOST}:{listen};", text)
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    site = folder / "nmt.conf"
    site.write_text(text, encoding="utf-8")
    main = folder / "nginx.conf"
    main.write_text(NGINX_MAIN.format(site=site), encoding="utf-8")
    return main


def free_port() -> int:
    """A port nothing listens on now (the system's choice)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_until(ready, what: str, process: subprocess.Popen, timeout_s: float = 60) -> None:
    """Poll `ready()` until it holds; a RuntimeError naming `what` if the process exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with status {process.returncode} before it was ready")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} was not ready within {timeout_s:.0f} s")
        time.sleep(0.05)


def redis_answers(port: int) -> bool:
    """Whether a Redis server on this port answers PING (spoken directly: no client needed here)."""
    try:
        with socket.create_connection((HOST, port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def http_ok(url: str) -> bool:
    """Whether a GET of `url` is answered 200."""
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class Replica:
    """One `nmt serve` process of the deployment."""

    port: int
    process: subprocess.Popen
    log: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"


@dataclass
class Deployment:
    """Redis, the replicas and nginx, started in that order (each waited for) and stopped in reverse.

    `serve_options` are `nmt serve`'s (--model among them); --state and --forwarded-allow-ips are
    added, as deploy/nginx/nmt.conf needs them. A context manager: leaving it stops everything.
    """

    folder: Path
    serve_options: Sequence[str]
    replicas: int = 2
    port: int = 0  # nginx's; 0: a free one
    replica_ports: Sequence[int] = ()  # default: free ones
    redis_port: int = 0
    environment: dict[str, str] | None = None
    started: list[Replica] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        """nginx's address: the service's one door."""
        return f"http://{HOST}:{self.port}"

    @property
    def state_url(self) -> str:
        return f"redis://{HOST}:{self.redis_port}/0"

    def __enter__(self) -> Deployment:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *_) -> None:
        self.stop()

    def start(self) -> None:
        """Redis, then every replica (each until its /livez answers), then nginx."""
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port, self.redis_port = self.port or free_port(), self.redis_port or free_port()
        ports = list(self.replica_ports) or [free_port() for _ in range(self.replicas)]
        redis = self.spawn(["redis-server", "--port", str(self.redis_port), "--bind", HOST, "--save", ""], "redis")
        wait_until(lambda: redis_answers(self.redis_port), "redis-server", redis)
        for port in ports:
            self.start_replica(port)
        for replica in self.started:
            self.wait_for_replica(replica)
        self.start_proxy(ports, self.port)

    def start_proxy(self, ports: Sequence[int], port: int = 0) -> str:
        """An nginx with deploy/nginx/nmt.conf in front of the replicas on `ports`; returns its URL once
        it answers (a test may put a second one in front of other replicas)."""
        port = port or free_port()
        main = render_nginx(self.folder / f"nginx-{port}", listen=port, replicas=ports)
        nginx = self.spawn(["nginx", "-p", str(main.parent), "-e", "error.log", "-c", str(main)], f"nginx-{port}")
        url = f"http://{HOST}:{port}"
        wait_until(lambda: http_ok(f"{url}/livez"), f"nginx on port {port}", nginx)
        return url

    def start_replica(self, port: int) -> Replica:
        """One more `nmt serve` on `port`, sharing the state (not waited for: see start)."""
        options = [*self.serve_options, "--state", self.state_url, "--forwarded-allow-ips", HOST]
        command = [sys.executable, "-m", "nmt", "serve", "--host", HOST, "--port", str(port), *options]
        replica = Replica(port, self.spawn(command, f"replica-{port}"), self.folder / f"replica-{port}.log")
        self.started.append(replica)
        return replica

    def wait_for_replica(self, replica: Replica) -> None:
        """Until the replica's /livez answers (its model loaded)."""
        try:
            wait_until(lambda: http_ok(f"{replica.url}/livez"), f"nmt serve on port {replica.port}", replica.process)
        except RuntimeError as error:  # say why: the replica's last words
            lines = replica.log.read_text(encoding="utf-8", errors="replace").splitlines()[-5:]
            raise RuntimeError(f"{error}; {replica.log.name} ends: " + " | ".join(lines)) from None

    def spawn(self, command: list[str], name: str) -> subprocess.Popen:
        with open(self.folder / f"{name}.log", "wb") as log:  # the child holds its own copy
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=self.environment)
        self.processes.append(process)
        return process

    def stop(self) -> None:
        """SIGTERM to each, the last started first (nginx, the replicas: they drain, then Redis)."""
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=2, help="nmt serve processes (default %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="nginx's port (default %(default)s)")
    parser.add_argument("--replica-port", type=int, default=8001, help="the first replica's port (default %(default)s)")
    parser.add_argument("--redis-port", type=int, default=6379, help="Redis's port (default %(default)s)")
    parser.add_argument("--folder", type=Path, help="logs and nginx's files (default: a new temporary folder)")
    parser.add_argument("serve", nargs=argparse.REMAINDER, help="-- then nmt serve's options (--model DIR ...)")
    args = parser.parse_args(argv)
    serve = args.serve[1:] if args.serve[:1] == ["--"] else args.serve
    if "--model" not in serve:
        parser.error("give nmt serve's options after --, at least --model DIR")
    folder = args.folder or Path(tempfile.mkdtemp(prefix="nmt-replicas-"))
    ports = range(args.replica_port, args.replica_port + args.replicas)
    deployment = Deployment(folder, serve, port=args.port, replica_ports=ports, redis_port=args.redis_port)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leaves through `with`: everything stopped
    try:
        with deployment:
            print(f"serving at {deployment.url} ({args.replicas} replicas; logs in {folder}); Ctrl-C stops")
            signal.pause()
    except RuntimeError as err:
        print(f"replicas.py: error: {err} (logs in {folder})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
