"""A job over more than one core: forked children take items from one queue, shared with
this process, and stream back what they computed for each (pickled, over a pipe) as they go.

A fork shares everything built so far without rebuilding it, and needs nothing to be
picklable but the answers. It is taken only when it is safe: on a system that forks, with
no other thread running (a fork copies one thread; a lock another held would stay held in
the child forever) and with more than one core to run on. A child that fails in any way is
not an error: the items it took and did not answer are the caller's to compute, as if it
had never been.
"""

from __future__ import annotations

import contextlib
import gc
import os
import select
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

_RECORD = struct.Struct("=I")
_FRAME = struct.Struct("=II")  # item number, length of the pickled answer that follows


def available() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def helpers(weight: int, least: int) -> int:
    """How many children to fork for a job of `weight`: one per spare core, as long as each
    process gets `least` of it on average (a fork and its answers cost something)."""
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return 0
    return max(0, min(available(), weight // max(least, 1)) - 1)


class Queue:
    """The numbers 0..count-1 in a pipe, each taken by whichever process sharing it (this one
    and the children it forks) is free first: none waits while another has a backlog. Every
    reader reads one whole record at a time, so a read never splits one."""

    RECORDS = 8192  # all written before anyone reads: a pipe holds 64 KiB

    def __init__(self, count: int) -> None:
        self.count = count
        self.step = max(1, -(-count // self.RECORDS))
        self._read, write = os.pipe()
        try:
            os.write(write, b"".join(_RECORD.pack(i) for i in range(0, count, self.step)))
        finally:
            os.close(write)  # so a reader that finds it empty reads the end

    def take(self) -> Iterator[int]:
        while len(record := os.read(self._read, _RECORD.size)) == _RECORD.size:
            start = _RECORD.unpack(record)[0]
            yield from range(start, min(start + self.step, self.count))

    def close(self) -> None:
        os.close(self._read)


class Takers:
    """`count` forked children, each taking numbers from `queue` and sending back work(n) for
    each as soon as it is computed. A child never waits for this process to read: what the
    pipe cannot hold yet waits in the child, so the children run on while this process is
    busy with something else."""

    def __init__(self, queue: Queue, count: int, work: Callable[[int], Any]) -> None:
        import pickle  # noqa: F401 - loaded before the fork: a child imports nothing

        sys.stdout.flush()  # what is buffered would otherwise be written by each child again
        sys.stderr.flush()
        self._pipes: dict[int, tuple[int, bytearray]] = {}  # read end -> (pid, unread bytes)
        # what exists now is left out of the children's collections: walking it would write
        # to (and so copy) every page of the shared heap
        frozen_before = gc.get_freeze_count()
        gc.freeze()
        try:
            for _ in range(count):
                read, write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    for fd in (read, *self._pipes):
                        os.close(fd)
                    _take(queue, work, write)  # never returns
                os.close(write)
                os.set_blocking(read, False)
                self._pipes[read] = (pid, bytearray())
        finally:
            if not frozen_before:
                gc.unfreeze()

    @property
    def running(self) -> bool:
        return bool(self._pipes)

    def answers(self, *, wait: bool) -> Iterator[tuple[int, Any]]:
        """The (number, answer) pairs that have arrived; with `wait`, first waits until one
        arrives or a child ends."""
        if not self._pipes:
            return
        poller = select.poll()  # not select(): it cannot watch a descriptor past 1023
        for fd in self._pipes:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(None if wait else 0):
            pid, buffer = self._pipes[fd]
            chunk = os.read(fd, 1 << 16)
            if not chunk:  # the child is done (a frame cut short is its failure)
                del self._pipes[fd]
                os.close(fd)
                os.waitpid(pid, 0)
            buffer += chunk
            yield from _frames(buffer)  # taken out of the buffer before the first is given

    def close(self) -> None:
        """Stop waiting for the children: each is reaped (one still writing is ended by its
        closed pipe)."""
        for fd, (pid, _) in self._pipes.items():
            os.close(fd)
            os.waitpid(pid, 0)
        self._pipes.clear()


def _frames(buffer: bytearray) -> list[tuple[int, Any]]:
    """The whole frames at the start of `buffer`, taken out of it."""
    import pickle  # here: a one-file lint forks nothing and does not pay for it

    found: list[tuple[int, Any]] = []
    start = 0
    while len(buffer) - start >= _FRAME.size:
        number, length = _FRAME.unpack_from(buffer, start)
        end = start + _FRAME.size + length
        if len(buffer) < end:
            break
        # a child's answer that cannot be read: the number is not answered
        with contextlib.suppress(Exception):
            found.append((number, pickle.loads(buffer[start + _FRAME.size:end])))
        start = end
    del buffer[:start]
    return found


def _take(queue: Queue, work: Callable[[int], Any], write: int) -> None:
    """A child's life: take, compute, send; then gone without running any exit handler."""
    import pickle

    code = 1
    try:
        pending = bytearray()
        os.set_blocking(write, False)
        for number in queue.take():
            answer = pickle.dumps(work(number), protocol=pickle.HIGHEST_PROTOCOL)
            pending += _FRAME.pack(number, len(answer)) + answer
            with contextlib.suppress(BlockingIOError):  # the pipe is full: kept for later
                del pending[:os.write(write, pending)]
        os.set_blocking(write, True)
        view = memoryview(pending)
        while view:
            view = view[os.write(write, view):]
        code = 0
    finally:
        os._exit(code)
