"""Lint on every core: children forked from the linter take files from one queue, and what
they send back is the same report one process would have written, in the same order; a
child that fails costs time, never a finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.lint.helpers import MANIFESTS, POLICIES, ROOT
from webhook import cores


@pytest.mark.parametrize("count", [0, 1, 7, cores.Queue.RECORDS, cores.Queue.RECORDS + 1,
                                   50_000])
def test_each_number_is_taken_by_exactly_one_process(count: int) -> None:
    queue = cores.Queue(count)
    try:
        children = cores.fork(2, lambda: list(queue.take()))
        mine = list(queue.take())
        theirs = [child() for child in children]
    finally:
        queue.close()
    assert all(t is not None for t in theirs)
    taken = [*mine, *(i for t in theirs for i in t or ())]
    assert sorted(taken) == list(range(count))


def _fails() -> int:
    raise RuntimeError("a child that fails")


def _dies() -> int:
    os._exit(0)  # ends "well" but says nothing


@pytest.mark.parametrize(("work", "answer"), [
    (lambda: {"findings": [1, 2], "pid": "x"}, {"findings": [1, 2], "pid": "x"}),
    (_fails, None),
    (_dies, None),
])
def test_a_child_answers_or_is_known_to_have_failed(work: object, answer: object) -> None:
    (child,) = cores.fork(1, work)  # type: ignore[arg-type]
    assert child() == answer


def test_no_child_beside_another_thread_nor_for_little_work() -> None:
    """A fork copies one thread: with another running, everything is done here."""
    assert cores.helpers(10, 100) == 0
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert cores.helpers(10**9, 1) == 0
    finally:
        stop.set()
        other.join()
    if cores.available() > 1:
        assert cores.helpers(10**9, 1) == cores.available() - 1


# A lint run in its own process, with shares made tiny so that the fixtures are enough to
# fork; each file's result notes which process linted it.
SCRIPT = """
import json, os, sys
from webhook import cli
from webhook.commands import lint
lint.SHARE_BYTES = 1 if sys.argv[1] != "one" else 10**12
real = lint.lint_file
def lint_file(name, raw, context, args):
    result, said = real(name, raw, context, args)
    result.notes.append(f"pid {os.getpid()}")
    return result, said
lint.lint_file = lint_file
if sys.argv[1] == "failing":  # a child takes files and dies: the linter lints them itself
    def lint_taken(queue, loaded, args):
        taken = queue.take()
        next(taken), next(taken)
        os._exit(3)
    lint.lint_taken = lint_taken
import io
out, err = io.StringIO(), io.StringIO()
code = cli.run(["lint", "-v", "-o", "json", *sys.argv[2:]], out, err)
pids = {line for line in err.getvalue().splitlines() if line.startswith("pid ")}
print(json.dumps({"code": code, "report": json.loads(out.getvalue()), "pids": len(pids)}))
"""


def _lint(how: str, *paths: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, how, *paths], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, check=True)
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.skipif(cores.available() < 2 or not hasattr(os, "fork"),
                    reason="linting on more than one core needs more than one core and fork")
def test_the_report_is_the_same_on_every_core(tmp_path: Path) -> None:
    # enough files that the child, ready once it has built its context, finds some left
    for i in range(60):
        for source in sorted(MANIFESTS.glob("*.y*ml")):
            (tmp_path / f"{i:02}-{source.name}").write_bytes(source.read_bytes())
    paths = [str(tmp_path), "--policies", str(POLICIES)]
    alone, shared, failing = (_lint(how, *paths) for how in ("one", "shared", "failing"))
    assert alone["pids"] == 1 and shared["pids"] == 2 and failing["pids"] == 1
    assert alone["report"]["findings"]  # type: ignore[index]
    assert shared == {**alone, "pids": 2}
    assert failing == alone
