"""A job over more than one core: forked children take items from one queue with this
process, and send back what they computed (pickled, over a pipe).

A fork shares everything built so far (imports, policies) without rebuilding it, and needs
nothing to be picklable but the answer. It is taken only when it is safe: on a system that
forks, with no other thread running (a fork copies one thread; a lock another held would
stay held in the child forever) and with more than one core to run on. A child that fails
in any way is not an error: the items it took are computed here, as if it had never been.
"""

from __future__ import annotations

import gc
import os
import pickle
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

R = TypeVar("R")
_RECORD = struct.Struct("=I")


def available() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def helpers(weight: int, least: int) -> int:
    """How many children to fork for a job of `weight`: one per spare core, as long as each
    process gets `least` of it on average (a fork and its answer cost something)."""
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


def fork(count: int, work: Callable[[], R]) -> list[Callable[[], R | None]]:
    """work() started in `count` children; for each, a function that waits for the child and
    gives its answer, or None when it failed."""
    if count <= 0:
        return []
    sys.stdout.flush()  # what is buffered would otherwise be written by each child again
    sys.stderr.flush()
    # what exists now is left out of the children's collections: walking it would write to
    # (and so copy) every page of the shared heap
    frozen_before = gc.get_freeze_count()
    gc.freeze()
    joins: list[Callable[[], R | None]] = []
    reading: list[int] = []
    try:
        for _ in range(count):
            read, write = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: its answer, then gone without running any exit handler
                code = 1
                try:
                    for fd in (read, *reading):
                        os.close(fd)
                    answer = pickle.dumps(work(), protocol=pickle.HIGHEST_PROTOCOL)
                    with os.fdopen(write, "wb") as out:
                        out.write(answer)
                    code = 0
                finally:
                    os._exit(code)
            os.close(write)
            reading.append(read)
            joins.append(_joiner(pid, read))
    finally:
        if not frozen_before:
            gc.unfreeze()
    return joins


def _joiner(pid: int, read: int) -> Callable[[], R | None]:
    def join() -> R | None:
        with os.fdopen(read, "rb") as answer:  # read whole before waiting: a full pipe
            data = answer.read()  # would keep the child from ending
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            return None
        try:
            return pickle.loads(data)  # type: ignore[no-any-return]  # our own child's
        except Exception:  # a cut-short answer is a failed child
            return None
    return join
