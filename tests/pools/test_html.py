"""`audit --pools -o html` in a real headless Chromium (Debian's `chromium`): the page renders
without console errors, every pool is on it with its charts, nothing is fetched from outside,
and the screenshot is a drawn page, not a blank one."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from tests.pools.helpers import DUMP, NOW, cli

WIDTH, HEIGHT = 1280, 2400


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium not installed (Debian package `chromium`; .ci/run installs it): "
                    "the HTML page was not rendered")
    return found


def _run(browser: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # root in a container: no sandbox; a profile of its own, so runs do not share state
    return subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
         *args], capture_output=True, text=True, timeout=120, check=False)


def _png(path: Path) -> tuple[int, int, set[tuple[int, ...]]]:
    """Width, height and the set of colours of an 8-bit RGB(A) PNG (its rows unfiltered)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height, depth, colour = struct.unpack(">IIBB", data[16:26])
    assert depth == 8 and colour in (2, 6)
    bpp = 4 if colour == 6 else 3
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8:pos + 8 + length]
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    colours: set[tuple[int, ...]] = set()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + b) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) \
                    & 0xFF
        if y % 4 == 0:  # every fourth row is plenty to see what is drawn
            colours.update(tuple(line[x:x + 3]) for x in range(0, stride, bpp * 2))
        prev = line
    return width, height, colours


def test_the_pool_page_renders_in_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    code, page, err = cli("audit", str(DUMP), "--pools", "-o", "html", "--now", NOW)
    assert code == 1, err  # the dump holds node facts that are errors
    _, out, _ = cli("audit", str(DUMP), "--pools", "-o", "json", "--now", NOW)
    pools = [p["name"] for p in json.loads(out)["pools"]]
    assert len(pools) == 5
    # self-contained: no script, nothing loaded from elsewhere
    assert not re.search(r"<script|\bsrc=|\bhref=|@import|url\(", page)
    html = tmp_path / "pools.html"
    html.write_text(page, encoding="utf-8")

    dom = _run(browser, tmp_path, "--dump-dom", html.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "CONSOLE" not in dom.stderr and "Uncaught" not in dom.stderr, dom.stderr
    for name in pools:
        section = re.search(rf'<section class="pool" data-pool="{re.escape(name)}">(.*?)'
                            r"</section>", dom.stdout, re.S)
        assert section, name
        assert section.group(1).count("<svg") >= 2  # allocation and waiting time
        assert f"<h2>{name}</h2>" in section.group(1)
    assert "Node facts (11)" in dom.stdout

    shot = tmp_path / "pools.png"
    run = _run(browser, tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}",
               "--hide-scrollbars", html.as_uri())
    assert run.returncode == 0, run.stderr[-2000:]
    assert "CONSOLE" not in run.stderr and "Uncaught" not in run.stderr
    width, height, colours = _png(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    # a drawn page: text (many greys), the bars in the charts' colours
    assert len(colours) > 20
    for colour in ((0x3B, 0x6F, 0xB6), (0x6C, 0xBF, 0x6C)):  # allocated, free
        assert colour in colours


def test_the_utilisation_charts_render_in_chromium(tmp_path: Path) -> None:
    """The page of the recorded Prometheus week: a utilisation chart per pool."""
    import io

    from tests.pools.test_advice import _report_with_utilisation
    from webhook.output.pools_html import write_html

    browser = _chromium()
    doc = _report_with_utilisation({"cluster": "prometheus"})
    page = io.StringIO()
    write_html(doc, page)
    html = tmp_path / "week.html"
    html.write_text(page.getvalue(), encoding="utf-8")
    dom = _run(browser, tmp_path, "--dump-dom", html.as_uri())
    assert dom.returncode == 0 and "CONSOLE" not in dom.stderr, dom.stderr[-2000:]
    for name in ("batch", "infer", "mig"):
        section = re.search(rf'data-pool="{name}">(.*?)</section>', dom.stdout, re.S)
        assert section and 'class="chart utilization"' in section.group(1), name
        path = re.search(r'<path d="M([^"]+)"', section.group(1))
        assert path and path.group(1).count("L") >= 100  # the week, drawn point by point
