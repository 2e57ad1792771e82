"""The connections of a burst are spread over the workers (webhook/http/spread.py): an
apiserver opens a handful of kept-alive connections at once, and if one worker took them all
the other cores would stay idle for as long as they live. Real gunicorn, real TLS; which worker
holds a connection is read from /proc (the worker's socket inodes against /proc/net/tcp)."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.server.harness import SNI, Server, client_context, envelope, make_request, wait_for


def _workers(master: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == master:
            found.append(int(stat.parent.name))
    return found


def _inodes(pid: int) -> set[str]:
    out = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            out.add(target[8:-1])
    return out


def _holder(master: int, client_ports: set[int], server_port: int) -> Counter[int]:
    """How many of the connections from `client_ports` each worker holds."""
    by_inode: dict[str, int] = {}
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote, inode = fields[1], fields[2], fields[9]
        if int(local.split(":")[1], 16) == server_port:
            by_inode[inode] = int(remote.split(":")[1], 16)
    held: Counter[int] = Counter()
    for pid in _workers(master):
        for inode in _inodes(pid):
            if by_inode.get(inode) in client_ports:
                held[pid] += 1
    return held


def _burst(server: Server, count: int) -> tuple[list[ssl.SSLSocket], set[int]]:
    """`count` connections opened at once (all in the listen backlog before any TLS
    handshake), then one admission review on each, kept alive."""
    raw = [socket.create_connection(("127.0.0.1", server.port), 10) for _ in range(count)]
    context = client_context(server.ca)
    conns: list[ssl.SSLSocket | None] = [None] * count
    body = envelope(make_request({"apiVersion": "v1", "kind": "Pod",
                                  "metadata": {"name": "p", "namespace": "default"},
                                  "spec": {"containers": [{"name": "c", "image": "i"}]}}))
    data = json.dumps(body).encode()
    head = (f"POST /validate HTTP/1.1\r\nHost: {SNI}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()

    def one(i: int) -> None:
        tls = context.wrap_socket(raw[i], server_hostname=SNI)
        tls.sendall(head + data)
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += tls.recv(65536)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        conns[i] = tls

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    opened = [c for c in conns if c is not None]
    assert len(opened) == count
    return opened, {c.getsockname()[1] for c in opened}


@pytest.mark.parametrize("count", [4, 16])
def test_a_burst_of_connections_lands_on_every_worker(server: Server, count: int) -> None:
    # a worker still loading takes no admission connection while a sibling is ready
    wait_for(lambda: server.plain("GET", "/readyz").status == 200, 30, "both workers ready")
    for trial in range(3):  # each trial a fresh burst: never all on one worker
        conns, ports = _burst(server, count)
        try:
            held = _holder(server.proc.pid, ports, server.port)
            assert sum(held.values()) == count, held
            assert len(held) == 2, f"trial {trial}: {count} connections on one worker: {held}"
            # spread, not three to one: other tests' kept-alive connections count too (the
            # workers balance all they hold), so not exactly half
            assert min(held.values()) >= count // 4, held
        finally:
            for conn in conns:
                conn.close()
            # the workers count a connection until they close it: the next burst starts even
            wait_for(lambda held=ports: not _holder(server.proc.pid, held, server.port), 10,
                     "the workers closed the burst's connections")
