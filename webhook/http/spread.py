"""How admission connections are spread over the workers.

Every worker accepts from the one listening socket the master bound. The kernel wakes them
all when a connection comes, and the first to run takes it: a handful of kept-alive
connections opened at once (an apiserver's, a load generator's) mostly all land on the one
worker that was awake, and the other cores stay idle for as long as those connections live.

So each worker says, on a board of shared memory the master maps before forking, how many
admission connections it holds and whether it takes new ones. A worker that holds more than a
sibling that takes connections stops accepting until the sibling has caught up; the kernel
then hands the waiting connections to the sibling. A sibling that has not said anything for
STALE seconds (hung, killed) does not count, so connections are never left waiting on it for
longer than that.

A listening socket per worker (SO_REUSEPORT) was the other way: the kernel hashes each
connection onto one worker's queue by its addresses, so four connections still land all on one
of two workers one time in eight and three to one half the time, and a worker that stops
(SIGHUP's rolling restart, a crash) drops the connections waiting in its own queue
(net.ipv4.tcp_migrate_req is off by default). The board keeps the one shared queue.
"""

from __future__ import annotations

import mmap
import os
import struct
import time

STALE = 2.0  # seconds without a word after which a sibling is not waited for
_ENTRY = struct.Struct("=qqqd")  # pid, taking connections (0/1), connections held, when said


class Board:
    """One entry per worker slot; each worker writes only its own (the master assigns slots),
    and reads the others'. A torn or stale read only delays or hastens one accept."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.memory = mmap.mmap(-1, slots * _ENTRY.size)  # MAP_SHARED: the workers see it

    def say(self, slot: int, taking: bool, held: int) -> None:
        _ENTRY.pack_into(self.memory, slot * _ENTRY.size, os.getpid(), int(taking), held,
                         time.monotonic())

    def clear(self, slot: int) -> None:
        _ENTRY.pack_into(self.memory, slot * _ENTRY.size, 0, 0, 0, 0.0)

    def fewest(self, slot: int) -> int | None:
        """The fewest connections held by a sibling that takes connections and spoke lately;
        None when there is none."""
        now = time.monotonic()
        least: int | None = None
        for other in range(self.slots):
            if other == slot:
                continue
            pid, taking, held, said = _ENTRY.unpack_from(self.memory, other * _ENTRY.size)
            if pid and taking and now - said < STALE and (least is None or held < least):
                least = held
        return least

    def should_wait(self, slot: int, held: int) -> bool:
        """True while this worker holds more connections than a sibling that takes them."""
        least = self.fewest(slot)
        return least is not None and held > least


def slots_for(workers: int) -> int:
    """Enough for a rolling restart (old and new workers side by side) and a few crashes."""
    return 2 * workers + 4
