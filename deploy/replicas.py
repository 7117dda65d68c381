"""Start the service as deploy/ describes it, on one machine: a Redis server, N `nmt serve` replicas
sharing it (--state), and nginx in front with deploy/nginx/nmt.conf; Ctrl-C or SIGTERM stops them
all (the replicas drain first).

    python deploy/replicas.py --replicas 2 --port 8000 -- --model runs/de_en [other nmt serve options]

The replicas listen on --replica-port and the ports after it, Redis on --redis-port (a free port
by default: this Redis is the deployment's own), nginx on --port at --host (127.0.0.1 by default:
this machine only; 0.0.0.0 opens it to other machines); every port must be free, or nothing starts.
Logs and nginx's files go to --folder (a new temporary folder by default). Where systemd
runs, deploy/nmt-replica@.service and Debian's own redis-server and nginx units do the same job.
tests/test_server_proxy.py and benchmarks/replica_load.py start their deployments with this module.
Standard library only, so that it runs beside any nmt install.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
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
HOST = "127.0.0.1"  # every part on loopback: nginx is the one door (on --host, this address by default)
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


def render_nginx(
    folder: Path, *, listen: int, replicas: Sequence[int], template: Path = NGINX_CONF, host: str = HOST
) -> Path:
    """deploy/nginx/nmt.conf with these ports (its own `server` lines' parameters kept) and nginx
    listening at `host`, written into `folder` beside a main configuration for an nginx of its own;
    returns that main file's path."""
    text = template.read_text(encoding="utf-8")
    servers = list(UPSTREAM_SERVER.finditer(text))
    if not servers or len(LISTEN.findall(text)) != 1:
        raise ValueError(f"{template}: expected `server 127.0.0.1:PORT ...;` lines and one `listen PORT;`")
    indent, parameters = servers[0].group(1), servers[0].group(2) or ""
    lines = "".join(f"{indent}server {HOST}:{port}{parameters};\n" for port in replicas)
    text = text[: servers[0].start()] + lines + text[servers[-1].end() :]
    text = LISTEN.sub(lambda m: f"{m.group(1)}listen {address(host, listen)};", text)
    (folder / "tmp").mkdir(parents=True, exist_ok=True)
    site = folder / "nmt.conf"
    site.write_text(text, encoding="utf-8")
    main = folder / "nginx.conf"
    main.write_text(NGINX_MAIN.format(site=site), encoding="utf-8")
    return main


def address(host: str, port: int) -> str:
    """host:port as nginx and URLs write it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def port_free(port: int, host: str = HOST) -> bool:
    """Whether a server could listen on this port now: bound as servers bind (SO_REUSEADDR, so a
    connection of the past still in TIME_WAIT does not count), which fails while anything listens."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def listens(process: subprocess.Popen, port: int) -> bool:
    """Whether `process` itself holds a socket listening on `port` (read from Linux's /proc): the
    answer on a port may come from another server that held it first, while ours failed to bind.
    True where /proc cannot say (not Linux), leaving the other checks to tell."""
    inodes, rows = set(), []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows += Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
    try:
        descriptors = os.listdir(f"/proc/{process.pid}/fd")
    except OSError:
        descriptors = None
    if not rows or descriptors is None:  # /proc cannot say: alive is all that is known
        return process.poll() is None
    for row in rows:  # sl local_address rem_address st ... inode
        fields = row.split()
        if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
            inodes.add(f"socket:[{fields[9]}]")
    held = set()
    for fd in descriptors:
        try:
            held.add(os.readlink(f"/proc/{process.pid}/fd/{fd}"))
        except OSError:  # closed meanwhile
            continue
    return bool(inodes & held)


def log_tail(path: Path, lines: int = 5) -> str:
    """The last lines of a log, joined on one line (why a part failed, in the error that says so)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"{path.name}: none"
    return f"{path.name} ends: " + " | ".join(text.splitlines()[-lines:])


def free_port() -> int:
    """A port nothing listens on now (the system's choice)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_until(ready, what: str, process: subprocess.Popen, port: int, timeout_s: float = 60) -> None:
    """Poll until the process listens on `port` itself and `ready()` holds; a RuntimeError naming
    `what` if the process exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not (listens(process, port) and ready()):
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
    host: str = HOST  # nginx's address; the replicas and Redis stay on loopback behind it
    replica_ports: Sequence[int] = ()  # default: free ones
    redis_port: int = 0
    environment: dict[str, str] | None = None
    started: list[Replica] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)

    def __post_init__(self) -> None:
        # nginx is given both -p and -c under this folder, and reads a relative -c under -p once more
        self.folder = Path(self.folder).resolve()

    @property
    def url(self) -> str:
        """nginx's address: the service's one door."""
        return f"http://{address(self.local(self.host), self.port)}"

    @staticmethod
    def local(host: str) -> str:
        """The address to reach a server listening at `host` from this machine (any: loopback)."""
        return {"0.0.0.0": HOST, "::": "::1"}.get(host, host)

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

    def check_ports(self, ports: Sequence[int]) -> None:
        """A RuntimeError naming the first port given that is taken (by another server, or twice here),
        before anything starts: a part would fail to bind it while another server answered for it."""
        named = [(self.redis_port, "Redis's"), *((port, "a replica's") for port in ports), (self.port, "nginx's")]
        seen: set[int] = set()
        for port, whose in named:
            if port == 0:  # a free one, chosen as it starts
                continue
            host = self.host if whose == "nginx's" else HOST
            if port in seen or not port_free(port, host):
                raise RuntimeError(f"port {port} ({whose}) is already in use at {host}")
            seen.add(port)

    def start(self) -> None:
        """Redis, then every replica (each until its /livez answers), then nginx."""
        if self.replicas < 1:
            raise ValueError(f"replicas must be at least 1, not {self.replicas}")
        self.port, self.redis_port = self.port or free_port(), self.redis_port or free_port()
        ports = list(self.replica_ports) or [free_port() for _ in range(self.replicas)]
        self.check_ports(ports)
        self.folder.mkdir(parents=True, exist_ok=True)
        redis = self.spawn(["redis-server", "--port", str(self.redis_port), "--bind", HOST, "--save", ""], "redis")
        try:
            wait_until(lambda: redis_answers(self.redis_port), "redis-server", redis, self.redis_port)
        except RuntimeError as error:
            raise RuntimeError(f"{error}; {log_tail(self.folder / 'redis.log')}") from None
        for port in ports:
            self.start_replica(port)
        for replica in self.started:
            self.wait_for_replica(replica)
        self.start_proxy(ports, self.port)

    def start_proxy(self, ports: Sequence[int], port: int = 0) -> str:
        """An nginx with deploy/nginx/nmt.conf in front of the replicas on `ports`; returns its URL once
        it answers (a test may put a second one in front of other replicas)."""
        port = port or free_port()
        main = render_nginx(self.folder / f"nginx-{port}", listen=port, replicas=ports, host=self.host)
        nginx = self.spawn(["nginx", "-p", str(main.parent), "-e", "error.log", "-c", str(main)], f"nginx-{port}")
        url = f"http://{address(self.local(self.host), port)}"
        try:
            wait_until(lambda: http_ok(f"{url}/livez"), f"nginx on port {port}", nginx, port)
        except RuntimeError as error:  # say why: nginx writes to its error log, or before it opens one to stderr
            logs = [log_tail(self.folder / f"nginx-{port}.log"), log_tail(main.parent / "error.log")]
            raise RuntimeError(f"{error}; " + "; ".join(logs)) from None
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
        what = f"nmt serve on port {replica.port}"
        try:
            wait_until(lambda: http_ok(f"{replica.url}/livez"), what, replica.process, replica.port)
        except RuntimeError as error:  # say why: the replica's last words
            raise RuntimeError(f"{error}; {log_tail(replica.log)}") from None

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


def at_least_one(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {count}")
    return count


def ip_address(text: str) -> str:
    return str(ipaddress.ip_address(text))  # a ValueError: argparse's "invalid ip_address value"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=at_least_one, default=2, help="nmt serve processes (default %(default)s)")
    parser.add_argument("--port", type=int, default=8000, help="nginx's port (default %(default)s)")
    parser.add_argument(
        "--host",
        type=ip_address,
        default=HOST,
        help="the address nginx listens at (default %(default)s: this machine only; 0.0.0.0: every interface, "
        "reachable from other machines); the replicas and Redis stay on 127.0.0.1",
    )
    parser.add_argument("--replica-port", type=int, default=8001, help="the first replica's port (default %(default)s)")
    parser.add_argument(
        "--redis-port",
        type=int,
        default=0,
        help="the deployment's own Redis's port (default: a free one, never a Redis already running)",
    )
    parser.add_argument("--folder", type=Path, help="logs and nginx's files (default: a new temporary folder)")
    parser.add_argument("serve", nargs=argparse.REMAINDER, help="-- then nmt serve's options (--model DIR ...)")
    args = parser.parse_args(argv)
    serve = args.serve[1:] if args.serve[:1] == ["--"] else args.serve
    if "--model" not in serve:
        parser.error("give nmt serve's options after --, at least --model DIR")
    ports = range(args.replica_port, args.replica_port + args.replicas)
    deployment = Deployment(
        args.folder or Path(),  # the temporary folder made only once the ports are known to be free
        serve,
        replicas=args.replicas,
        port=args.port,
        host=args.host,
        replica_ports=ports,
        redis_port=args.redis_port,
    )
    try:
        deployment.check_ports(ports)
    except RuntimeError as err:
        print(f"replicas.py: error: {err}; nothing started", file=sys.stderr)
        return 1
    folder = deployment.folder = (args.folder or Path(tempfile.mkdtemp(prefix="nmt-replicas-"))).resolve()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leaves through `with`: everything stopped
    try:
        with deployment:
            listening = f"nginx listening at {address(args.host, deployment.port)}"
            state = deployment.state_url
            print(
                f"serving at {deployment.url} ({listening}; {args.replicas} replicas; state {state}; "
                f"logs in {folder}); Ctrl-C stops"
            )
            signal.pause()
    except RuntimeError as err:
        print(f"replicas.py: error: {err} (logs in {folder})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
