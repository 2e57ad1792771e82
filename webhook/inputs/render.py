"""Running `helm template` and `kubectl kustomize` (or `kustomize build`) on a directory: the
real tools, with a time limit and a bound on what they may print, so a chart that loops or
an overlay that generates gigabytes stops with one clear error rather than hanging the CI job.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

TIMEOUT = 120.0  # seconds for one chart or overlay
LIMIT = 256 * 1024 * 1024  # bytes of rendered YAML, far above any real chart's output
_ERROR_TAIL = 600  # characters of a failing tool's stderr that are shown (its last words)


class RenderError(Exception):
    """A chart or overlay that could not be rendered; the message is one line for the user."""


class ToolMissing(RenderError):
    pass


def start_helm(chart: Path, *, values: Sequence[str] = (), sets: Sequence[str] = (),
               namespace: str | None = None) -> Running:
    """`helm template CHART` with the chart's own values.yaml, then each `-f` and `--set`."""
    tool = shutil.which("helm")
    if tool is None:
        raise ToolMissing("not rendered: helm not found (install helm, or pass --no-render to "
                          "lint the files as they are)")
    argv = [tool, "template", str(chart)]
    for v in values:
        argv += ["--values", v]
    for s in sets:
        argv += ["--set", s]
    if namespace:
        argv += ["--namespace", namespace]
    return Running(argv, "helm template")


def start_kustomize(overlay: Path) -> Running:
    """The overlay built with origin annotations on (`buildMetadata: [originAnnotations]`);
    the Running's `relative_to` is the folder the annotations' paths are relative to.

    The overlay is not edited: a temporary kustomization beside nothing but itself names the
    overlay as its one resource and asks for the annotations, which kustomize then sets on
    every object, bases included. kustomize refuses an absolute resource path, so the
    overlay is named relative to the temporary folder."""
    standalone = shutil.which("kustomize")
    kubectl = shutil.which("kubectl")
    if standalone is None and kubectl is None:
        raise ToolMissing("not rendered: kubectl not found (nor kustomize; install one, or pass "
                          "--no-render to lint the files as they are)")
    wrapper = Path(tempfile.mkdtemp(prefix="gpupolicy-kustomize-")).resolve()
    try:
        target = os.path.relpath(overlay.resolve(), wrapper)
        (wrapper / "kustomization.yaml").write_text(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
            f"resources:\n  - {_quote(target)}\nbuildMetadata: [originAnnotations]\n",
            encoding="utf-8")
        argv = ([standalone, "build", str(wrapper)] if standalone is not None
                else [str(kubectl), "kustomize", str(wrapper)])
        return Running(argv, "kustomize build", relative_to=wrapper,
                       cleanup=lambda: shutil.rmtree(wrapper, ignore_errors=True))
    except BaseException:
        shutil.rmtree(wrapper, ignore_errors=True)
        raise


def helm(chart: Path, *, values: Sequence[str] = (), sets: Sequence[str] = (),
         namespace: str | None = None) -> bytes:
    return start_helm(chart, values=values, sets=sets, namespace=namespace).result()


def kustomize(overlay: Path) -> tuple[bytes, Path]:
    running = start_kustomize(overlay)
    return running.result(), running.relative_to or overlay


def _quote(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


def run(argv: list[str], what: str, *, timeout: float = TIMEOUT, limit: int = LIMIT) -> bytes:
    """The tool's standard output; RenderError when it fails, runs too long or prints too
    much (it is stopped then). Of its standard error only the end is kept."""
    return Running(argv, what).result(timeout=timeout, limit=limit)


class Running:
    """A tool's process, started: nothing but the process, so a caller may fork after
    starting it (a fork copies one thread), and read its answer with result() later (until
    then a tool that prints more than a pipe holds waits)."""

    def __init__(self, argv: list[str], what: str, *, relative_to: Path | None = None,
                 cleanup: Callable[[], None] | None = None) -> None:
        import subprocess  # ~2 ms: only a chart or overlay runs a tool (lint loads RenderError)

        self.what = what
        self.relative_to = relative_to
        self._cleanup = cleanup
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            self._done()
            raise RenderError(f"{what}: cannot run {argv[0]}: {exc.strerror or exc}") from None

    def _done(self) -> None:
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None

    def result(self, *, timeout: float = TIMEOUT, limit: int = LIMIT) -> bytes:
        """What the tool printed, once it has ended; RenderError as run() says."""
        try:
            return self._answer(timeout, limit)
        finally:
            self._done()

    def _answer(self, timeout: float, limit: int) -> bytes:
        proc, what = self._proc, self.what
        assert proc.stdout is not None and proc.stderr is not None
        stopped: list[str] = []

        def stop(why: str) -> None:
            stopped.append(why)
            proc.kill()

        tail = bytearray()

        def drain(stream: IO[bytes]) -> None:  # stderr read as it comes, its end kept
            while chunk := stream.read(1 << 14):
                tail.extend(chunk)
                del tail[:-_ERROR_TAIL * 4]

        reader = threading.Thread(target=drain, args=(proc.stderr,), daemon=True)
        reader.start()
        timer = threading.Timer(timeout, stop, (f"took longer than {timeout:g}s",))
        timer.start()
        chunks: list[bytes] = []
        size = 0
        try:
            while chunk := proc.stdout.read(1 << 16):
                size += len(chunk)
                if size > limit:
                    stop(f"printed more than {limit // (1024 * 1024)} MiB")
                    break
                chunks.append(chunk)
            code = proc.wait()
            reader.join(timeout=5)
        finally:
            timer.cancel()
            proc.stdout.close()
        if stopped:
            raise RenderError(f"{what} {stopped[0]} and was stopped")
        if code != 0:
            text = " ".join(bytes(tail).decode("utf-8", "replace").split())  # one line, bounded
            if len(text) > _ERROR_TAIL:
                text = "..." + text[-_ERROR_TAIL:]
            raise RenderError(f"{what} failed (exit {code}): {text or 'no message'}")
        return b"".join(chunks)
