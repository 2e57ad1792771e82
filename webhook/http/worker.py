"""The gunicorn worker of `gpupolicy serve`: gthread, where no thread ever waits on a client.

gunicorn's ThreadWorker gives every new connection to a pool thread at once. The thread waits
up to 5 s for a first byte, then does the TLS handshake and reads the request head with
blocking reads that have no deadline: a client that connects and then sends nothing, or a
byte now and then, holds that thread, and `threads` such clients per worker stop every route,
health probes included (the validating webhook then refuses every GPU workload).

Here the worker's own loop (its selector, one thread) does the TLS handshake and gathers the
request head, and a body of announced length, without blocking, each under a deadline. A pool
thread takes a connection only once the request is in (a chunked body it reads under the same
deadline). Kept-alive connections wait in the selector, never in a thread. Health probes and
the plain-HTTP metrics port (webhook/http/metrics_port.py) get threads of their own, so they never
queue behind admission requests. At the connection limit, or out of file descriptors, the
least useful waiting connection is closed to make room.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import selectors
import socket
import ssl
import time
from collections.abc import Callable
from concurrent import futures
from functools import partial
from typing import Any

from gunicorn import http, util
from gunicorn import sock as gsock
from gunicorn.http import wsgi
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook import logs
from webhook.http import admission, metrics_port, spread

HANDSHAKE_TIMEOUT = 5.0  # accept → TLS handshake done
HEAD_TIMEOUT = 5.0  # handshake done (or a kept-alive request's first byte) → whole head in
REQUEST_TIMEOUT = 10.0  # whole head in → whole body in (the apiserver's default webhook timeout)
IO_TIMEOUT = 10.0  # any one blocking send in a thread: a client that never reads its answer
# Closing a connection with unread bytes makes the kernel send RST, which can destroy the
# answer before the client reads it (a client still sending an oversized body, say): the
# loop reads and drops what still comes for a while first.
CLOSE_LINGER = 2.0
DRAIN_LIMIT = 16 * 1024 * 1024
STOP_LINGER = 2.0  # on SIGTERM, how long idle kept-alive connections may still bring a request
HEAD_LIMIT = 64 * 1024  # gunicorn's line/field limits refuse far smaller heads first
PROBE_THREADS = 2
FD_RESERVE = 64  # file descriptors kept from connections, for the app's own files
PROBE_PATHS = (b"/healthz", b"/readyz")

# Body bytes one worker holds for requests not yet answered (gathered, queued for a thread or
# being judged): past it a body stays in the kernel until a thread reads it. Two of the
# largest bodies and then some; docs/hardening.md counts it into the pod's memory.
BODY_BUDGET = 16 * 1024 * 1024
_HANDSHAKE, _HEAD, _BODY, _IDLE, _CLOSING = "handshake", "head", "body", "idle", "closing"

_readiness: Callable[[], dict[str, Any]] | None = None


def publish_readiness(detail: Callable[[], dict[str, Any]]) -> None:
    """Called by the app loader in each worker: where its readiness (policies loaded) is read."""
    global _readiness
    _readiness = detail


class _DeadlineReader:
    """What the request parser reads from: the socket, every read bounded by the request's
    deadline, so a body trickled a byte at a time cannot hold a thread for long."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.deadline = float("inf")
        self.timeout: float | None = None  # the parser's own bound on reads, when `own`
        self.own = False

    def recv(self, size: int) -> bytes:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request was not received in time")
        prior = self.sock.gettimeout()
        wanted = self.timeout if self.own else prior
        self.sock.settimeout(remaining if wanted is None else min(wanted, remaining))
        try:
            return bytes(self.sock.recv(size))
        finally:
            self.sock.settimeout(prior)

    # finish_body (the drain before keep-alive) bounds its reads through these. The bound is
    # kept here and applied by recv, which sets the socket's timeout anyway: the drain almost
    # always finds the body read already, and setting it on the socket (then back) cost two
    # system calls per request, for no read.
    def gettimeout(self) -> float | None:
        return self.timeout if self.own else self.sock.gettimeout()

    def settimeout(self, value: float | None) -> None:
        self.timeout, self.own = value, value != self.sock.gettimeout()


class Conn(TConn):  # type: ignore[misc]
    """A connection and where it is: in the handshake, gathering a head, idle between requests,
    closing; or (stage None) with a pool thread."""

    def __init__(self, cfg: Any, sock: Any, client: Any, server: Any, plain: bool) -> None:
        super().__init__(cfg, sock, client, server)
        self.plain = plain  # the metrics port: no TLS, no gunicorn parser
        self.stage: str | None = None
        self.deadline = 0.0
        self.events = selectors.EVENT_READ
        self.head = bytearray()
        self.want: int | None = None  # head and body length, once the head is whole
        self.reserved = 0  # body bytes counted against the worker's gathering budget
        self.drained = 0
        self.reader: _DeadlineReader | None = None
        # TConn.init() and the data wait in ThreadWorker.handle() are done here already.
        self.initialized = True
        self.data_ready = True


DEFER_LOOK = 0.005  # seconds between looks at the board while deferring to a sibling


class GPUWorker(ThreadWorker):  # type: ignore[misc]
    # Set by serve before the workers fork.
    plain_ports: frozenset[int] = frozenset()
    expected_workers = 1
    body_limit = admission.MAX_BODY  # the app's --max-body-bytes: larger ones are refused unread
    # serve's certificate check (TLSFiles.refresh): run by the loop twice a second too, not
    # only at handshakes, so an idle worker's expiry metric and refusals are current.
    refresh_tls: Callable[[], None] | None = None
    # Set by serve's master: where the workers say how many admission connections each holds
    # (webhook/http/spread.py), and this worker's entry, assigned before it is forked.
    board: spread.Board | None = None
    slot = 0
    _accepting: bool  # ThreadWorker's: the listeners are in the poller

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting: set[Conn] = set()
        self.probe_pool: futures.ThreadPoolExecutor | None = None
        self.next_sweep = 0.0
        self.stop_at: float | None = None
        self.next_publish = 0.0
        self.gathering = 0  # body bytes being gathered by the loop, all connections together
        self.evicted = 0
        self.next_evict_log = 0.0
        self.held = False  # admission listeners out of the poller: see _hold_admissions
        self.admitted = 0  # admission (TLS) connections open, idle ones included
        self.deferring = False  # out of the poller too: holds more than a sibling (_spread)

    # -- life cycle ---------------------------------------------------------------------------

    def init_process(self) -> None:
        self.probe_pool = futures.ThreadPoolExecutor(PROBE_THREADS, "probe")
        # gunicorn answers what it refuses itself (a bad request line, 414, 431, a malformed
        # chunk…) with an HTML page through this one function; every other error of the
        # webhook is one line of JSON, so this one is too.
        util.write_error = _write_json_error
        if hasattr(wsgi.Response, "_emit_body"):  # gunicorn >= 27 sends the body through it;
            # before, the body went out on its own and the held head would follow it
            wsgi.Response = _OneWriteResponse  # what wsgi.create() builds, per request
        super().init_process()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        # Connections must leave file descriptors to the app (metrics files, policy reloads):
        # past the cap, accept() closes a waiting connection rather than run out.
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY:
            spare = soft - _open_files() - FD_RESERVE
            cap: int = min(self.cfg.worker_connections, spare)
            self.worker_connections = max(cap, self.cfg.threads + PROBE_THREADS)
        self.wsgi = _honour_connection_close(self.wsgi)  # type: ignore[has-type]

    def handle_exit(self, sig: Any, frame: Any) -> None:
        if self.stop_at is None:
            self.stop_at = time.monotonic()
        super().handle_exit(sig, frame)

    def handle_quit(self, sig: Any, frame: Any) -> None:
        if self.probe_pool is not None:
            self.probe_pool.shutdown(wait=False)
        super().handle_quit(sig, frame)

    def run(self) -> None:
        try:
            super().run()
        finally:
            for conn in list(self.waiting):
                self._close(conn)
            if self.probe_pool is not None:
                self.probe_pool.shutdown(wait=False)
            metrics_port.unpublish(self.pid)
            if self.board is not None:
                self.board.clear(self.slot)
            logs.flush()  # the admission lines still held, before gunicorn's last line

    def notify(self) -> None:
        # ThreadWorker calls this once per turn of its loop, several times per request under
        # load; the heartbeat (a utime() of the worker's file, which the master reads against
        # its 30 s timeout) is kept to twice a second, with the readiness published alongside.
        now = time.monotonic()
        if now >= self.next_publish:
            super().notify()
            self.next_publish = now + 0.5
            self._publish()
            self._spread()
            if self.refresh_tls is not None:
                try:
                    self.refresh_tls()
                except Exception:  # never stop the loop; handshakes keep the last good pair
                    self.log.exception("tls certificate check failed")

    # -- the loop's side: accept, handshake, head, idle, close ---------------------------------

    def set_accept_enabled(self, enabled: bool) -> None:
        # ThreadWorker stops accepting at worker_connections; then accept() makes room by
        # closing the least useful waiting connection instead, so a crowd of idle clients
        # cannot lock the apiserver out.
        enabled = enabled or self.alive
        if enabled != self._accepting:
            for listener in self.sockets:
                if (self.held or self.deferring) and not self._plain(listener):
                    continue  # held or deferring: not in the poller
                if enabled:
                    listener.setblocking(False)
                    self.poller.register(listener, selectors.EVENT_READ, self.accept)
                else:
                    self.poller.unregister(listener)
            self._accepting = enabled
        if not enabled and not self.alive:
            # Stopping: close the listeners now, so a new connection is refused at once
            # instead of waiting in the backlog to be reset when the worker exits.
            for listener in self.sockets:
                listener.close()

    def _plain(self, listener: Any) -> bool:
        return bool(listener.getsockname()[1] in self.plain_ports)

    def _hold_admissions(self, ready: bool) -> None:
        """A worker not ready to judge takes no admission connection while a sibling is ready
        (a worker replaced after a crash, or by SIGHUP while the old ones still serve): the
        kernel hands them to the sibling, which judges with the whole state, instead of this
        worker answering 503. With no sibling ready it takes them, and answers 503 at once
        (webhook/http/server.py): failing fast beats a connection left in the backlog. The
        plain metrics port is always served."""
        hold = not ready and self.alive and any(
            metrics_port.serving(detail) for pid, detail in metrics_port.states().items()
            if pid != str(self.pid))
        if hold == self.held:
            return
        self._admissions(hold, self.deferring)
        self._spread()
        self.log.info("admissions %s: %s", "held" if hold else "taken",
                      "a sibling worker is ready and this one is not yet" if hold
                      else "ready, or no sibling is")

    def _admissions(self, held: bool, deferring: bool) -> None:
        """Puts the admission listeners in the poller, or takes them out: out while held
        (not ready) or deferring (holding more than a sibling)."""
        before = not (self.held or self.deferring)
        after = not (held or deferring)
        self.held, self.deferring = held, deferring
        if before == after or not self._accepting:
            return
        for listener in self.sockets:
            if self._plain(listener):
                continue
            if after:
                listener.setblocking(False)
                self.poller.register(listener, selectors.EVENT_READ, self.accept)
            else:
                self.poller.unregister(listener)

    def _spread(self) -> None:
        """Says on the board how many admission connections this worker holds, and stops
        accepting while it holds more than a sibling that takes them (webhook/http/spread.py):
        the kernel then gives the waiting connections to that sibling."""
        board = self.board
        if board is None:
            return
        taking = self.alive and not self.held
        board.say(self.slot, taking, self.admitted)
        defer = taking and board.should_wait(self.slot, self.admitted)
        if defer != self.deferring:
            self._admissions(self.held, defer)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        # Deferring, look at the board again soon: a sibling that caught up says so only there.
        # Two workers can each read the other as holding fewer (the board changes between the
        # reads) and both stop accepting: connections then wait in the backlog until one looks
        # again, so a deferring worker looks often (a few microseconds a look).
        super().wait_for_and_dispatch_events(min(timeout, DEFER_LOOK) if self.deferring
                                             else timeout)
        if self.deferring:
            self._spread()

    def accept(self, listener: Any) -> None:
        try:
            sock, client = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                return
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                # Out of file descriptors: free one; the next turn of the loop accepts.
                if not self._evict():
                    time.sleep(0.01)  # every connection is with a thread: soon one is back
                return
            raise
        self.nr_conns += 1
        if self.nr_conns > self.worker_connections:
            self._evict()
        sock.setblocking(False)
        local = listener.getsockname()
        plain = local[1] in self.plain_ports
        conn = Conn(self.cfg, sock, client, local, plain)
        now = time.monotonic()
        if plain:
            self._wait(conn, _HEAD, now + HEAD_TIMEOUT)
            return
        self.admitted += 1
        try:
            conn.sock = gsock.ssl_context(self.cfg).wrap_socket(
                sock, server_side=True, do_handshake_on_connect=False,
                suppress_ragged_eofs=True)
        except (OSError, ValueError):
            self._close(conn)
            return
        self._wait(conn, _HANDSHAKE, now + HANDSHAKE_TIMEOUT)
        self._spread()

    def _wait(self, conn: Conn, stage: str, deadline: float,
              events: int = selectors.EVENT_READ) -> None:
        conn.stage, conn.deadline = stage, deadline
        if conn in self.waiting:
            if events != conn.events:
                conn.events = events
                self.poller.modify(conn.sock, events, partial(self._ready, conn))
            return
        conn.events = events
        self.waiting.add(conn)
        self.poller.register(conn.sock, events, partial(self._ready, conn))

    def _unwait(self, conn: Conn) -> None:
        if conn in self.waiting:
            self.waiting.discard(conn)
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)

    def _ready(self, conn: Conn, _fileobj: Any) -> None:
        if conn.stage == _CLOSING:
            self._drain(conn)
            return
        if conn.stage == _HANDSHAKE:
            try:
                conn.sock.do_handshake()
            except ssl.SSLWantReadError:
                self._wait(conn, _HANDSHAKE, conn.deadline, selectors.EVENT_READ)
                return
            except ssl.SSLWantWriteError:
                self._wait(conn, _HANDSHAKE, conn.deadline, selectors.EVENT_WRITE)
                return
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                self.log.debug("tls handshake with %s failed: %s", conn.client, exc)
                self._close(conn)
                return
            self._wait(conn, _HEAD, time.monotonic() + HEAD_TIMEOUT)
            # The request may have come in the same segments as the handshake's end.
        self._read_head(conn)

    def _read_head(self, conn: Conn) -> None:
        got = False
        while len(conn.head) < (conn.want or HEAD_LIMIT + 1):
            try:
                data = conn.sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                break
            except (OSError, ValueError):
                self._close(conn)
                return
            if not data:  # the client closed
                self._close(conn)
                return
            got = True
            before = len(conn.head)
            conn.head += data
            if conn.want is None and _head_end(conn.head, before) >= 0:
                # The head is in: what the body still needs is known from here, and the
                # request usually came whole in this read. Reading on until the socket runs
                # dry would cost one more recv, and an exception, per request.
                break
        if not got:
            return
        if conn.stage == _IDLE:  # a kept-alive connection's next request begins
            self._wait(conn, _HEAD, time.monotonic() + HEAD_TIMEOUT)
        self._dispatch_if_complete(conn)

    def _dispatch_if_complete(self, conn: Conn) -> None:
        head = conn.head
        if conn.want is None:
            end = _head_end(head)
            if end < 0:
                if len(head) > HEAD_LIMIT:
                    self._refuse(conn, 431, "Request Header Fields Too Large",
                                 f"request head larger than {HEAD_LIMIT} bytes")
                return
            body = 0 if conn.plain else _body_to_gather(bytes(head[:end]), self.body_limit)
            if body and self.gathering + body > BODY_BUDGET:
                body = 0  # too much gathered at once already: a thread reads it, under deadline
            conn.want, conn.reserved = end + body, body
            self.gathering += body
            if len(head) < conn.want:
                # The body too comes in here, so a client trickling it holds no thread.
                self._wait(conn, _BODY, time.monotonic() + REQUEST_TIMEOUT)
                # More may be buffered already (in TLS, where the selector cannot see it).
                self._read_head(conn)
                return
        if len(head) < conn.want:
            return
        conn.want = None  # the body stays counted (conn.reserved) until the answer is sent
        self._unwait(conn)
        conn.stage = None
        assert self.probe_pool is not None
        if conn.plain:
            conn.sock.settimeout(IO_TIMEOUT)  # blocking, each send bounded
            self._submit(self.probe_pool, self._serve_plain, conn)
            return
        # A TLS connection's mode is set in its thread: ThreadWorker.handle makes the socket
        # blocking first thing, and handle_request bounds every send (IO_TIMEOUT).
        if conn.parser is None:
            conn.reader = _DeadlineReader(conn.sock)
            conn.parser = http.get_parser(self.cfg, conn.reader, conn.client)
        assert conn.reader is not None
        conn.reader.deadline = time.monotonic() + REQUEST_TIMEOUT
        conn.parser.unreader.unread(bytes(head))
        conn.head = bytearray()
        pool = self.probe_pool if _is_probe(head) else self.tpool
        self._submit(pool, self.handle, conn)

    def _submit(self, pool: futures.ThreadPoolExecutor, job: Callable[[Conn], bool],
                conn: Conn) -> None:
        future = pool.submit(job, conn)
        future.add_done_callback(
            lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def finish_request(self, conn: Conn, future: futures.Future[Any]) -> None:
        """Back from a thread (run by the loop): keep the connection alive, or close it."""
        self._release(conn)
        try:
            keep = bool(future.result()) if not future.cancelled() else False
        except Exception:
            keep = False
        if not keep or conn.parser is None:
            self._close_gracefully(conn)
            return
        try:
            conn.sock.setblocking(False)
        except OSError:
            self._close(conn)
            return
        # A pipelining client's next request may already be read ahead.
        conn.head = bytearray(conn.parser.unreader.take_buffered())
        now = time.monotonic()
        if conn.head:
            self._wait(conn, _HEAD, now + HEAD_TIMEOUT)
            self._dispatch_if_complete(conn)
            return
        deadline = now + self.cfg.keepalive
        if self.stop_at is not None:
            deadline = min(deadline, now + STOP_LINGER)
        self._wait(conn, _IDLE, deadline)
        # TLS may hold decrypted bytes the selector cannot see.
        if isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending():
            self._read_head(conn)

    def _refuse(self, conn: Conn, status: int, reason: str, message: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            conn.sock.send(metrics_port.error(status, reason, message))
        self._close_gracefully(conn)

    def _close_gracefully(self, conn: Conn) -> None:
        """FIN (and TLS close_notify), then read what the client still sends for a moment
        before closing: closing with unread bytes makes the kernel send RST, which can
        destroy the answer the client has not read yet. The loop does the lingering."""
        try:
            conn.sock.setblocking(False)
            if isinstance(conn.sock, ssl.SSLSocket):
                with contextlib.suppress(OSError, ValueError):
                    conn.sock.unwrap()  # sends close_notify; the peer's may never come
            conn.sock.shutdown(socket.SHUT_WR)
        except (OSError, ValueError):
            self._close(conn)
            return
        conn.drained = 0
        self._wait(conn, _CLOSING, time.monotonic() + CLOSE_LINGER)

    def _drain(self, conn: Conn) -> None:
        while conn.drained < DRAIN_LIMIT:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except (OSError, ValueError):
                break
            if not data:
                break
            conn.drained += len(data)
        self._close(conn)

    def _release(self, conn: Conn) -> None:
        self.gathering -= conn.reserved
        conn.want, conn.reserved = None, 0

    def _close(self, conn: Conn) -> None:
        self._release(conn)
        self._unwait(conn)
        conn.stage = None
        self.nr_conns -= 1
        util.close(conn.sock)
        if not conn.plain:
            self.admitted -= 1
            self._spread()

    def _evict(self) -> bool:
        """Close one waiting connection to make room: one still in its handshake first, then
        one with a head half sent, then an idle one; the nearest deadline first in each."""
        rank = {_CLOSING: 0, _HANDSHAKE: 1, _HEAD: 2, _IDLE: 3}
        candidates = [c for c in self.waiting if c.stage in rank]
        if not candidates:
            return False
        victim = min(candidates, key=lambda c: (rank[c.stage or ""], c.deadline))
        stage = victim.stage
        self._close(victim)
        self.evicted += 1
        now = time.monotonic()
        if now >= self.next_evict_log:  # once in a while, not once per connection
            self.next_evict_log = now + 10
            self.log.warning("connection limit reached: %d waiting connections closed to make "
                             "room so far (the last one: %s)", self.evicted, stage)
        return True

    def _sweep(self) -> None:
        now = time.monotonic()
        if now < self.next_sweep:
            return
        self.next_sweep = now + 0.2
        if not self.alive and self.stop_at is None:  # stopping without a signal (max_requests)
            self.stop_at = now
        stop_by = None if self.stop_at is None else self.stop_at + STOP_LINGER
        for conn in list(self.waiting):
            if conn.stage == _IDLE and stop_by is not None:
                conn.deadline = min(conn.deadline, stop_by)
            if conn.deadline <= now:
                # Never spoke, stalled mid-head or mid-body, idle past keep-alive, or done
                # lingering.
                if conn.stage in (_HANDSHAKE, _HEAD, _BODY):
                    self.log.debug("closing %s: no whole %s in time", conn.client, conn.stage)
                self._close(conn)

    # ThreadWorker's loop calls these two after every turn; its own lists stay empty here.
    def murder_keepalived(self, force: bool = False) -> None:
        return None

    def murder_pending(self) -> None:
        self._sweep()

    # -- the threads' side ----------------------------------------------------------------------

    def handle_request(self, req: Any, conn: Any) -> bool:
        conn.sock.settimeout(IO_TIMEOUT)  # writes too: a client that never reads its answer
        return bool(super().handle_request(req, conn))

    def _serve_plain(self, conn: Conn) -> bool:
        """The metrics port: one GET per connection, answered and closed."""
        try:
            answer = metrics_port.answer(bytes(conn.head), self.expected_workers)
        except Exception:  # never a traceback page; the log says what happened
            self.log.exception("metrics port failed")
            answer = metrics_port.error(500, "Internal Server Error",
                                        "internal error; see the webhook logs")
        with contextlib.suppress(OSError):
            conn.sock.sendall(answer)
        return False

    # -- readiness, read by any worker's metrics port -------------------------------------------

    def _publish(self) -> None:
        # No app loaded yet, no readiness reader: never "ready" by default.
        detail = _readiness() if _readiness is not None else {"ready": False}
        if not self.alive:
            detail = {**detail, "stopping": True}
        metrics_port.publish(self.pid, detail)
        if detail.get("ready") is not True or self.held:  # once ready, nothing more to read
            self._hold_admissions(detail.get("ready") is True)


def _open_files() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:  # no /proc: assume a modest start-up set
        return 64


def _head_end(data: bytearray, new: int = 0) -> int:
    """Where the request head ends (after its blank line), or -1 while it is incomplete;
    `new`: where the bytes not yet searched begin (a blank line may straddle it)."""
    start = max(0, new - 3)
    crlf, lf = data.find(b"\r\n\r\n", start), data.find(b"\n\n", start)
    ends = [at + size for at, size in ((crlf, 4), (lf, 2)) if at >= 0]
    return min(ends) if ends else -1


def _body_to_gather(head: bytes, limit: int) -> int:
    """How many body bytes the loop gathers before a thread takes the request: the
    Content-Length, when there is exactly one, valid and within the limit. Anything else
    (chunked, Expect: 100-continue, too large, malformed) is left to gunicorn's parser and
    the app, which refuse or read it under the request deadline."""
    lengths = []
    for line in head.split(b"\n")[1:]:
        name, colon, value = line.partition(b":")
        name = name.strip().lower()
        if colon and name in (b"transfer-encoding", b"expect"):
            return 0
        if colon and name == b"content-length":
            lengths.append(value.strip())
    if len(lengths) != 1 or not lengths[0].isdigit() or len(lengths[0]) > 12:
        return 0
    length = int(lengths[0])
    return length if length <= limit else 0


def _is_probe(head: bytearray) -> bool:
    line = bytes(head[:256]).lstrip(b"\r\n").split(b"\n", 1)[0]
    parts = line.split(b" ")
    return (len(parts) == 3 and parts[0] in (b"GET", b"HEAD")
            and parts[1].split(b"?", 1)[0] in PROBE_PATHS)


class _Collect:
    """Stands in for the socket while gunicorn writes the response head."""

    def __init__(self) -> None:
        self.data = b""

    def sendall(self, data: bytes) -> None:
        self.data += data


class _OneWriteResponse(wsgi.Response):  # type: ignore[misc]
    """The head and the first piece of the body in one write: gunicorn writes the head on its
    own first, which for an admission answer (one piece) made two TLS records, two send system
    calls and two waits for the socket to take them (a send with a deadline polls first)."""

    sock: Any
    _deferring = False
    _head = b""

    def write(self, arg: bytes) -> None:
        if self.headers_sent or self.chunked:
            super().write(arg)
            return
        self._deferring = True
        try:
            super().write(arg)  # send_headers() keeps the head, _emit_body() sends both
        finally:
            self._deferring = False
            self._send_head()  # no body went out (HEAD, 204, nothing left): the head alone

    def send_headers(self) -> None:
        if not self._deferring or self.headers_sent:
            super().send_headers()
            return
        sock, self.sock = self.sock, _Collect()
        try:
            super().send_headers()
        finally:
            collected, self.sock = self.sock, sock
        self._head = collected.data

    def _emit_body(self, data: bytes) -> None:
        if self._head:
            data, self._head = self._head + data, b""
        super()._emit_body(data)

    def _send_head(self) -> None:
        if self._head:
            head, self._head = self._head, b""
            util.write(self.sock, head)


def _write_json_error(sock: Any, status_int: int, reason: str, mesg: str) -> None:
    text = f"{status_int} {reason}: {mesg}" if mesg else f"{status_int} {reason}"
    sock.sendall(metrics_port.error(status_int, reason, text))


def _honour_connection_close(app: Any) -> Any:
    """gunicorn drops a `Connection` header set by the app; here it closes the connection,
    so the app can refuse an oversized body without the worker reading it to keep alive."""

    def wrapped(environ: Any, start_response: Any) -> Any:
        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if any(k.lower() == "connection" and v.strip().lower() == "close"
                   for k, v in headers):
                force_close = getattr(getattr(start_response, "__self__", None),
                                      "force_close", None)
                if force_close is not None:
                    force_close()
            return start_response(status, headers, exc_info)

        return app(environ, start)

    return wrapped
