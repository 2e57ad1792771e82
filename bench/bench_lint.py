"""Linter speed: `gpupolicy lint` over every YAML file of ../shared/corpus with the bundled
policies, against `checkov -d` (Kubernetes framework only) and `yamllint` on the same folder,
in the same run: wall time (interpreter start included), documents per second, peak RSS.
Also one small file, where start-up is the whole cost.

checkov and yamllint are not project dependencies: they live in their own virtualenv,
$GPUPOLICY_BENCH_VENV (default /tmp/gpupolicy-bench/venv), created with pip on first use.
Without network or on failure their rows are skipped, and the reason is printed.

Two floors are measured in the same run, the least any linter in Python can take: the corpus
loaded with libyaml's CSafeLoader and nothing else, and an interpreter importing
yaml, pydantic and jsonpatch (what start-up alone costs).

Targets (issue 4): corpus <= 1.0 s, >= 10x faster than checkov, peak RSS <= 200 MB,
one small file <= 300 ms; (issue 19) corpus <= 1.5x its floor, one small file <= 1.5x its
floor. main() returns 1 when a target is missed.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
SMALL = ROOT / "tests" / "lint" / "fixtures" / "manifests" / "training.yaml"
VENV = Path(os.environ.get("GPUPOLICY_BENCH_VENV", "/tmp/gpupolicy-bench/venv"))
FLOOR_RATIO = 1.5
# The corpus read by libyaml alone: every document of every file built into Python objects.
LOAD_FLOOR = [sys.executable, "-c",
              "import sys, yaml\n"
              "for name in sys.argv[1:]:\n"
              "    with open(name, 'rb') as f:\n"
              "        list(yaml.load_all(f, Loader=yaml.CSafeLoader))"]
IMPORT_FLOOR = [sys.executable, "-c", "import yaml, pydantic, jsonpatch"]
LINT = [sys.executable, "-c",
        "import sys; from webhook.cli import main; sys.argv[0] = 'gpupolicy'; main()", "lint"]


@dataclass
class Measure:
    name: str
    seconds: float  # median wall time
    rss_mb: float  # peak resident set size of the process
    runs: int


# A child's peak RSS starts from its parent's at fork: this process holds the parsed corpus,
# so every tool is started through a small launcher whose own children start near zero.
LAUNCHER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
    " stderr=subprocess.DEVNULL).returncode\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def measure(name: str, argv: list[str], runs: int, env: dict[str, str] | None = None) -> Measure:
    """Median wall time and peak RSS of `argv` run `runs` times (output discarded)."""
    times, peaks = [], []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-S", "-c", LAUNCHER, *argv], cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - start)
        peaks.append(int(done.stdout.split()[-1]) / 1024)
    return Measure(name, statistics.median(times) - _launcher_seconds(), max(peaks), runs)


@functools.cache
def _launcher_seconds() -> float:
    """What the launcher itself costs (it runs `true`), taken off every measured time."""
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-S", "-c", LAUNCHER, "true"], check=True,
                       capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def corpus_files() -> list[Path]:
    return sorted(p for p in CORPUS.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def count_documents(files: list[Path]) -> int:
    sys.path.insert(0, str(ROOT))
    from policies import yamlpos
    from webhook.commands import lint

    return sum(
        1 for f in files for d in yamlpos.read_stream(f.read_bytes()).documents
        for _, obj in d.objects() if lint.is_kubernetes_object(obj)
    )


def tools_venv() -> tuple[Path | None, str]:
    """The virtualenv with checkov and yamllint, created on first use."""
    checkov = VENV / "bin" / "checkov"
    if checkov.exists() and (VENV / "bin" / "yamllint").exists():
        return VENV, ""
    print(f"installing checkov and yamllint into {VENV} (first run only) ...", flush=True)
    try:
        if not (VENV / "bin" / "pip").exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True,
                           capture_output=True, timeout=300)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "checkov", "yamllint"],
                       check=True, capture_output=True, timeout=1200)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"could not install checkov/yamllint ({type(exc).__name__}): rows skipped"
    return VENV, ""


def main() -> int:
    if not CORPUS.is_dir():
        print(f"corpus not present at {CORPUS}: lint bench skipped")
        return 0
    files = corpus_files()
    docs = count_documents(files)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    # Directory walking is part of the job, as for checkov -d: hand over the folder itself.
    # Only YAML counts here, so pass the files (the admissionreview JSON is not manifests).
    file_args = [str(f) for f in files]
    rows = [measure("gpupolicy lint (corpus)", [*LINT, *file_args], 5, env)]
    small = measure("gpupolicy lint (one small file)", [*LINT, str(SMALL)], 10, env)
    # floors interleaved with the runs they bound: the same minute on a noisy machine
    load_floor = measure("floor: CSafeLoader load (corpus)", [*LOAD_FLOOR, *file_args], 5, env)
    import_floor = measure("floor: import yaml, pydantic, jsonpatch", IMPORT_FLOOR, 10, env)
    venv, why = tools_venv()
    if venv is not None:
        tool_env = {**os.environ, "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false",
                    "BC_SKIP_MAPPING": "TRUE", "LOG_LEVEL": "ERROR"}
        rows.append(measure("checkov -d --framework kubernetes",
                            [str(venv / "bin" / "checkov"), "-d", str(CORPUS), "--framework",
                             "kubernetes", "--quiet", "--compact", "--skip-download",
                             "-o", "json"], 1, tool_env))
        rows.append(measure("yamllint", [str(venv / "bin" / "yamllint"), "-f", "parsable",
                                         *file_args], 3, tool_env))
    print(f"corpus: {len(files)} YAML files, {docs} Kubernetes objects "
          f"({sum(f.stat().st_size for f in files) / 1e6:.1f} MB); 2 cores")
    print(f"{'tool':<36} {'wall s':>8} {'objects/s':>10} {'peak RSS MB':>12} {'runs':>5}")
    for row in [*rows, small, load_floor, import_floor]:
        rate = f"{docs / row.seconds:,.0f}" if row in (rows[0], load_floor) else "-"
        print(f"{row.name:<36} {row.seconds:>8.3f} {rate:>10} {row.rss_mb:>12.0f} {row.runs:>5}")
    if why:
        print(why)
    lint_row = rows[0]
    checks = [
        ("corpus <= 1.0 s", lint_row.seconds <= 1.0, f"{lint_row.seconds:.3f} s"),
        ("peak RSS <= 200 MB", lint_row.rss_mb <= 200, f"{lint_row.rss_mb:.0f} MB"),
        ("one small file <= 300 ms", small.seconds <= 0.3, f"{small.seconds * 1000:.0f} ms"),
        (f"corpus <= {FLOOR_RATIO}x the CSafeLoader floor",
         lint_row.seconds <= FLOOR_RATIO * load_floor.seconds,
         f"{lint_row.seconds / load_floor.seconds:.2f}x ({load_floor.seconds:.3f} s)"),
        (f"one small file <= {FLOOR_RATIO}x the import floor",
         small.seconds <= FLOOR_RATIO * import_floor.seconds,
         f"{small.seconds / import_floor.seconds:.2f}x ({import_floor.seconds:.3f} s)"),
    ]
    checkov = next((r for r in rows if r.name.startswith("checkov")), None)
    if checkov is not None:
        ratio = checkov.seconds / lint_row.seconds
        checks.append((">= 10x faster than checkov", ratio >= 10, f"{ratio:.1f}x"))
    failed = 0
    for label, ok, value in checks:
        print(f"  {'ok  ' if ok else 'MISS'} {label}: {value}")
        failed += not ok
    return 1 if failed else 0
