"""Two hosts on one machine: network namespaces joined by a veth pair, for multi-node torchrun tests.

Each namespace has its own network stack (interfaces, addresses, ports, loopback), so a c10d
rendezvous and gloo's connections cross a real link between two addresses, as between two
machines; the file system stays shared, as a cluster's shared file system would be. Needs
root (CAP_NET_ADMIN and CAP_SYS_ADMIN for `ip netns`): `namespaces_allowed` says why not.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

SUBNET = "10.83.0"
IP_TIMEOUT = 10  # seconds: `ip` itself never blocks, this only keeps a wedged kernel call from hanging pytest


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one `ip` command (iproute2)."""
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT)
    if check and result.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {result.stderr.strip()}")
    return result


def namespaces_allowed() -> str | None:
    """None where this process may make network namespaces, else why not (for pytest.skip)."""
    if sys.platform != "linux":
        return "network namespaces are Linux's"
    probe = f"nmt83probe{os.getpid()}"
    try:
        made = ip("netns", "add", probe, check=False)
    except FileNotFoundError:
        return "iproute2's `ip` is not installed"
    if made.returncode != 0:
        return f"`ip netns add` is not allowed here (root / CAP_NET_ADMIN needed): {made.stderr.strip()}"
    ip("netns", "del", probe, check=False)
    return None


def parent(pid: int) -> int | None:
    """A process's parent's id (None once it has gone)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])  # after the name, which may hold spaces: state, ppid


@dataclass(frozen=True)
class Host:
    """One namespace: its name, its end of the veth link and its address on it."""

    namespace: str
    interface: str
    address: str

    def command(self, args: list[str]) -> list[str]:
        """`args` run inside this host's network namespace."""
        return ["ip", "netns", "exec", self.namespace, *args]

    def pids(self) -> list[int]:
        """Every process whose network is this host's (a torchrun, its workers, anything they started)."""
        listed = ip("netns", "pids", self.namespace, check=False).stdout.split()
        return [int(pid) for pid in listed]

    def workers(self) -> list[int]:
        """The processes a torchrun on this host started (its workers), not the torchrun itself."""
        pids = set(self.pids())
        return [pid for pid in pids if parent(pid) in pids]

    def kill(self) -> None:
        """SIGKILL every process on this host, as if the machine lost power."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def link(self, up: bool) -> None:
        """Plug or unplug this host's cable (a network partition while it is down)."""
        ip("-n", self.namespace, "link", "set", self.interface, "up" if up else "down")


@contextmanager
def two_hosts(tag: str | None = None) -> Iterator[tuple[Host, Host]]:
    """Two namespaces on one veth link ({SUBNET}.1 and .2), removed afterwards with all their processes.

    tag makes the names unique (default: this process's id), so parallel runs and leftovers of a
    killed run do not collide; interface names must fit Linux's 15 characters.
    """
    tag = tag or str(os.getpid())
    hosts = tuple(Host(f"nmt83{side}{tag}", f"v83{side}{tag}", f"{SUBNET}.{n}") for n, side in ((1, "a"), (2, "b")))
    made: list[Host] = []
    try:
        for host in hosts:
            if host.namespace in ip("netns", "list").stdout.split():
                stale = host
                stale.kill()  # left by a killed run whose process id this one reuses
                ip("netns", "del", stale.namespace)
            ip("netns", "add", host.namespace)
            made.append(host)
        a, b = hosts
        ip("link", "add", a.interface, "type", "veth", "peer", "name", b.interface)
        for host in hosts:
            ip("link", "set", host.interface, "netns", host.namespace)
            ip("-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", host.interface)
            ip("-n", host.namespace, "link", "set", host.interface, "up")
            ip("-n", host.namespace, "link", "set", "lo", "up")
        yield a, b
    finally:
        for host in made:
            host.kill()
        deadline = time.monotonic() + IP_TIMEOUT
        while any(host.pids() for host in made) and time.monotonic() < deadline:
            time.sleep(0.05)  # a killed process leaves the namespace only once the kernel reaps it
        for host in made:
            ip("netns", "del", host.namespace, check=False)  # takes its end of the veth, and so the pair, along
        # a veth made before its namespaces failed would outlive them in this namespace
        ip("link", "del", hosts[0].interface, check=False)


def torchrun_command(host: Host, first: Host, args: list[str], *, port: int, run_id: str) -> list[str]:
    """`torchrun --nnodes=2` on `host`, meeting at `first`'s address, as docs/distributed.md says.

    Two flags a cluster may not need, which these hosts do: their shared hostname resolves to
    127.0.0.1 (the namespaces share /etc/hosts), so torchrun would tell the workers to meet at
    "localhost" (--local_addr gives each host's own address instead), and it would not see that
    the endpoint is its own address (is_host says so, or nobody serves the rendezvous).
    """
    return host.command(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes=2",
            "--nproc_per_node=1",
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={first.address}:{port}",
            f"--rdzv_id={run_id}",
            f"--rdzv_conf=is_host={int(host == first)}",
            f"--local_addr={host.address}",
            *args,
        ]
    )


def host_environment(host: Host, extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment for a torchrun on `host`: gloo told which interface is the link.

    Without GLOO_SOCKET_IFNAME gloo takes the address the hostname resolves to (127.0.0.1 here),
    tells the other host to connect there, and the mesh never forms ("Connection refused").
    """
    return {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": host.interface, **(extra or {})}


def wait_all(procs: list[subprocess.Popen], timeout: float) -> list[int | None]:
    """Wait for every process until `timeout` seconds in all; their exit statuses (None: still running)."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    return [proc.poll() for proc in procs]
