"""Lint on more than one core: children forked before the engine is imported read files
from one queue, shared with the linter, and stream back each file's documents; the report is
the one a single process writes, in the same order, and a child that fails costs time, never
a finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lint.helpers import MANIFESTS, POLICIES, ROOT
from webhook import cores


def _everything(takers: cores.Takers) -> list[tuple[int, object]]:
    got: list[tuple[int, object]] = []
    while takers.running:
        got += takers.answers(wait=True)
    return got


@pytest.mark.parametrize("count", [0, 1, 7, cores.Queue.RECORDS, cores.Queue.RECORDS + 1,
                                   30_000])
def test_each_number_is_answered_once_by_whoever_took_it(count: int) -> None:
    queue = cores.Queue(count)
    try:
        takers = cores.Takers(queue, 2, lambda n: ("x" * (n % 300), n * n))
        mine = [(n, ("x" * (n % 300), n * n)) for n in queue.take()]
        theirs = _everything(takers)
    finally:
        queue.close()
    assert sorted(mine + theirs) == [(n, ("x" * (n % 300), n * n)) for n in range(count)]


def _fails_at_five(n: int) -> int:
    if n == 5:
        raise RuntimeError("a child that fails")
    return n


def _dies_at_five(n: int) -> int:
    if n == 5:
        os._exit(0)  # ends "well", in the middle of its work
    return n


@pytest.mark.parametrize("work", [_fails_at_five, _dies_at_five])
def test_what_a_failed_child_took_is_not_answered(work: object) -> None:
    """Everything it sent before is kept; the rest is for the caller to compute."""
    queue = cores.Queue(20)
    try:
        takers = cores.Takers(queue, 1, work)  # type: ignore[arg-type]
        got = _everything(takers)
        left = list(queue.take())
    finally:
        queue.close()
    assert got == [(n, n) for n in range(5)]  # sent before it failed
    assert left == list(range(6, 20))  # 5 was taken, never answered: the caller's to do


HELPERS = """
import sys, threading
from webhook import cores
print(cores.helpers(int(sys.argv[1]), 100), end=" ")
if sys.argv[2] == "thread":
    stop = threading.Event()
    threading.Thread(target=stop.wait).start()
    print(cores.helpers(int(sys.argv[1]), 100), end=" ")
    stop.set()
"""


@pytest.mark.parametrize(("weight", "thread", "expected"), [
    (10, "", "0 "),
    (10**9, "", f"{cores.available() - 1} "),  # one child a spare core
    (10**9, "thread", f"{cores.available() - 1} 0 "),  # none beside another thread
])
def test_a_child_a_spare_core_for_enough_work_and_never_beside_a_thread(
        weight: int, thread: str, expected: str) -> None:
    """A fork copies one thread: with another running, everything is done in one process.
    (In a fresh process: the test runner's own may have threads.)"""
    done = subprocess.run([sys.executable, "-c", HELPERS, str(weight), thread],
                          capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout == expected


# A lint run in its own process, with shares made tiny so that the fixtures are enough to
# fork; it counts the files linted from what a child read ahead.
SCRIPT = """
import io, json, os, sys
from webhook import cli
from webhook.commands import lint
lint.SHARE_BYTES = 1 if sys.argv[1] != "one" else 10**12
real, ahead = lint.lint_file, []
def lint_file(name, raw, context, args, items=None):
    ahead.append(items is not None)
    return real(name, raw, context, args, items)
lint.lint_file = lint_file
if sys.argv[1] == "failing":  # a child that dies mid-way: the linter reads its files itself
    read = lint.yamlpos.read_ahead
    def read_ahead(data, count=[0]):
        count[0] += 1
        if count[0] == 3:
            os._exit(3)
        return read(data)
    lint.yamlpos.read_ahead = read_ahead
out, err = io.StringIO(), io.StringIO()
code = cli.run(["lint", "-v", "-o", "json", *sys.argv[2:]], out, err)
print(json.dumps({"code": code, "report": json.loads(out.getvalue()), "err": err.getvalue(),
                  "ahead": sum(ahead)}))
"""


def _lint(how: str, *paths: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, how, *paths], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(cores.available() < 2 or not hasattr(os, "fork"),
                    reason="reading ahead needs more than one core and fork")
def test_the_report_is_the_same_read_ahead_or_not(tmp_path: Path) -> None:
    # enough files that the child finds some left while the linter imports the engine
    for i in range(60):
        for source in sorted(MANIFESTS.glob("*.y*ml")):
            (tmp_path / f"{i:02}-{source.name}").write_bytes(source.read_bytes())
    (tmp_path / "zz-broken.yaml").write_text("a: [\nb: 1\n")  # a problem read ahead too
    paths = [str(tmp_path), "--policies", str(POLICIES)]
    alone, shared, failing = (_lint(how, *paths) for how in ("one", "shared", "failing"))
    assert alone["ahead"] == 0 and shared["ahead"] > 0 and failing["ahead"] >= 0
    assert alone["report"]["findings"]  # type: ignore[index]
    assert {**shared, "ahead": 0} == alone
    assert {**failing, "ahead": 0} == alone
