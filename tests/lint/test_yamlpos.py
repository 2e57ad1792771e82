"""The fast reader: same objects as yaml.safe_load, positions of fields, problems as data."""

from __future__ import annotations

import pickle
import random
from pathlib import Path

import pytest
import yaml

from policies import yamlpos
from policies.yamlpos import read_stream

POD_LIST = """\
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: a}
- apiVersion: v1
  kind: Pod
  spec:
    containers:
      - name: c
        resources:
          limits:
            nvidia.com/gpu: 1
"""

ANCHORS = """\
base: &base
  cpu: 1
d:
  <<: *base
  gpu: 2
"""


@pytest.mark.parametrize(("text", "path", "expected"), [
    ("a: 1\n", (), (1, 1)),
    ("a: 1\nb:\n  c: 2\n", ("b", "c"), (3, 3)),
    ("a: 1\nb:\n  c: 2\n", ("b", "c", "missing", 4), (3, 3)),  # deepest existing prefix
    ("a: 1\nb:\n  c: 2\n", ("nope",), (1, 1)),
    ("l:\n- x\n- y\n", ("l", 1), (3, 3)),
    ("l:\n- x\n- y\n", ("l", 7), (1, 1)),
    ("l: [x, {k: v}]\n", ("l", 1, "k"), (1, 9)),
    (POD_LIST, ("items", 1, "spec", "containers", 0, "resources", "limits"), (13, 11)),
    (POD_LIST, ("items", 1, "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
     (14, 13)),
    (POD_LIST, ("items", 0, "metadata", "name"), (6, 14)),
    ("---\n# c\nx: 1\n---\ny:\n  z: 2\n", ("y", "z"), (6, 3)),
    ("a: 1\na: 2\n", ("a",), (2, 1)),  # the last duplicate wins, as in the dict
    (ANCHORS, ("d", "gpu"), (5, 3)),
    ('{"a": {"b": [1, 2]}}', ("a", "b", 1), (1, 17)),
])
def test_position(text: str, path: tuple[str | int, ...], expected: tuple[int, int]) -> None:
    stream = read_stream(text.encode())
    doc = stream.documents[-1]
    assert doc.position(path) == expected


@pytest.mark.parametrize(("data", "rule", "line", "column"), [
    (b"a: 1\nb: 2\na: 3\n", "yaml-duplicate-key", 3, 1),
    (b"x:\n  env:\n  - name: A\n    name: B\n", "yaml-duplicate-key", 4, 5),
    (b"a: ok\nb: \xff\xfe\n", "yaml-encoding", 2, 4),
    (b"a:\n\tb: 1\n", "yaml-tab", 2, 1),
    (b"a:\n  b: 1\n\t\n", "yaml-tab", 3, 1),
    (b"a: [1, 2\n", "yaml-syntax", 2, 1),
    (b"a: b: c\n", "yaml-syntax", 1, 5),
    (b"a: \x07\n", "yaml-syntax", 1, 4),
    (b"a: !custom 1\n", "yaml-syntax", 1, 4),
    (b"a: &x [*x]\n", "yaml-alias", 1, 4),
    (b"? [a]\n: 1\n", "yaml-syntax", 1, 3),
    (b'{"a": 1, "a": 2}', "yaml-duplicate-key", 1, 10),
    (b"a: 1\n---\nb: {\n", "yaml-syntax", 4, 1),
    (b"x:\n  <<: {a: 1}\n  b: {c: 1, c: 2}\n", "yaml-duplicate-key", 3, 13),  # said once
    (b"a: !!int \xc2\xb2\n", "yaml-syntax", 1, 4),  # a digit int() does not take
    (b"a: 1" + b"0" * 5000 + b"\n", "yaml-syntax", 1, 4),  # more digits than int() reads
])
def test_problem(data: bytes, rule: str, line: int, column: int) -> None:
    problems = read_stream(data).problems
    assert [(p.rule, p.line, p.column) for p in problems] == [(rule, line, column)]


@pytest.mark.parametrize("data", [
    "".join(" " * i + f"k{i}:\n" for i in range(3000)).encode(),
    b"[" * 900 + b"]" * 900,
    b"[" * 5000 + b"]" * 5000,
])
def test_deep_nesting_is_a_problem_not_a_crash(data: bytes) -> None:
    stream = read_stream(data)
    assert [p.rule for p in stream.problems] == ["yaml-syntax"]
    assert "nesting" in stream.problems[0].message


def _bomb(level: str) -> str:
    """Nine levels, each using the one below ten times: 10**9 values once expanded."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [level.format(i=i, uses=", ".join([f"*a{i - 1}"] * 10)) for i in range(1, 9)]
    return "\n".join(lines)


@pytest.mark.parametrize("text", [
    _bomb("a{i}: &a{i} [{uses}]"),  # sequences
    _bomb("a{i}: &a{i} {{k: [{uses}]}}"),  # mappings
    _bomb("a{i}: &a{i} {{<<: [{uses}]}}"),  # merge keys, which copy pairs as they are built
    "a: &a [1]\nb: &b {k: *a}\nc: &c [*b, *b]\nd: &d [*c, *c]\n" + _bomb("a{i}: &a{i} [{uses}]"),
])
def test_alias_bomb_is_refused_quickly(text: str) -> None:
    stream = read_stream(text.encode())
    assert [p.rule for p in stream.problems] == ["yaml-alias"]
    assert stream.documents == []


@pytest.mark.parametrize(("text", "objects"), [
    (POD_LIST, [("items", 0), ("items", 1)]),
    ("kind: PodList\nitems:\n- kind: Pod\n- 3\n", [("items", 0)]),
    ("kind: Pod\n", [()]),
    ("- a\n", []),
    ("", []),
    ("---\n---\nkind: Pod\n", [()]),
])
def test_objects(text: str, objects: list[tuple[str | int, ...]]) -> None:
    found = [prefix for d in read_stream(text).documents for prefix, _ in d.objects()]
    assert found == objects


@pytest.mark.parametrize("text", [
    "a: 1\n---\nb: [1, 2.5, true, null, ~, 0x1F, 2001-12-14, '3']\n",
    ANCHORS, POD_LIST, "{}\n",
    "a: &a {x: 1, y: 2}\nb: {<<: *a, y: 3}\nc: {y: 4, <<: [*a]}\nd: [*a, *a]\n",
    "url: http://x/?a=1&b=2\nk: &k v\n*k : w\n",
    "a: '1'\nb: \"true\"\nc: yes\nd: Off\ne: hello\nf: 1.5\ng: ~\nh: 2001-12-14\ni: .inf\n"
    "j: -1\nk: +1\nl: 0o17\nm: ''\nn:\no: NULL\np: '~'\nq: é\n",
    # without an anchor the tree is built the quick way; a merge key takes it the other way
    "a: {b: [1, 2], c: {d: e}}\nf: [[g], {h: i}]\n", "x: {<<: {a: 1}, b: 2}\n",
    "x:\n  <<: [{a: 1}, {b: 2}]\n  c: {d: 1}\n",
    # plain decimals are read at once, every other integer by PyYAML's constructor
    "a: 8080\nb: 0\nc: 012\nd: 1_000\ne: !!int ١٢\nf: 0x1F\ng: 1:30\nh: !!int '42'\n", '{\n\t"a": {\n\t\t"b": [\n\t\t\t1\n\t\t]\n\t}\n}\n', "---\n...\n", "\ufeffa: 1\n", "a: !!binary aGk=\n",
])
def test_same_objects_as_pyyaml(text: str) -> None:
    expected = [d for d in yaml.load_all(text, Loader=yaml.CSafeLoader) if d is not None]
    stream = read_stream(text.encode("utf-8"))
    assert stream.problems == []
    assert [d.data for d in stream.documents if d.data is not None] == expected


def test_positions_index_covers_every_field() -> None:
    doc = read_stream(POD_LIST).documents[0]
    index = doc.positions()
    for path, where in index.items():
        assert doc.position(path) == where
    assert index[("items", 1, "spec", "containers", 0, "name")] == (11, 9)


@pytest.mark.corpus
def test_corpus_reads_like_pyyaml(corpus_dir: Path) -> None:
    """Every corpus file gives PyYAML's objects; only the duplicate-key files get a problem."""
    duplicates = 0
    for path in sorted(corpus_dir.rglob("*.y*ml")):
        stream = read_stream(path.read_bytes())
        assert {p.rule for p in stream.problems} <= {"yaml-duplicate-key"}, path
        duplicates += bool(stream.problems)
        expected = [d for d in yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader)]
        assert [d.data for d in stream.documents] == expected, path
    assert duplicates == 5  # corpus/SOURCES.md: 5 kubernetes-examples files repeat keys


def _mutations(seed: int, texts: list[bytes], count: int) -> list[bytes]:
    rng = random.Random(seed)
    alphabet = [b"\t", b" ", b":", b"-", b"\n", b"[", b"{", b"}", b"&a", b"*a", b"<<", b"'",
                b'"', b"#", b"\xff", b"\x00", b"---\n", b"? ", b"!!int", b"|", b">", b"\xc3"]
    out = []
    for _ in range(count):
        data = bytearray(rng.choice(texts))
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data) + 1)
            choice = rng.random()
            if choice < 0.5:
                data[at:at] = rng.choice(alphabet)
            elif choice < 0.8:
                del data[at : at + rng.randint(1, 8)]
            else:
                data[at:at] = data[rng.randrange(len(data) + 1):][:20]
        out.append(bytes(data))
    return out


FUZZ_SEEDS = [POD_LIST.encode(), ANCHORS.encode(), b"a: 1\n---\n- [x, {y: z}]\n"]


@pytest.mark.parametrize("seed", range(4))
def test_fuzz_never_raises(seed: int) -> None:
    for data in _mutations(seed, FUZZ_SEEDS, 1500):
        stream = read_stream(data)
        for doc in stream.documents:
            doc.positions()
            doc.position(("items", 1, "spec", "containers", 0, "resources"))
            list(doc.objects())
        for problem in stream.problems:
            assert problem.line >= 1 and problem.column >= 1, (data, problem)


BLOCK = "- {}\n"


@pytest.mark.parametrize(("text", "refused"), [
    (BLOCK * 99, None),  # the sequence and 99 mappings: the budget, exactly
    (BLOCK * 100, (1, 1)),  # (line, document)
    (f"a: 1\n---\n{BLOCK * 60}---\n{BLOCK * 60}", None),  # each document under it
    (f"a: 1\n---\n{BLOCK * 60}---\n{BLOCK * 100}", (63, 3)),  # the third, at its line
    ("a:\n" + "".join(f"  k{i}: v\n" for i in range(49)), (1, 1)),  # 3 + 2 x 49 values
    ("a:\n" + "".join(f"  k{i}: v\n" for i in range(48)), None),
    ("x: [" + "a, " * 120 + "]\n", (1, 1)),
    ("x: |\n" + "  - {}\n" * 500, None),  # a block scalar is one value, however it reads
])
def test_a_document_of_more_values_than_the_budget_is_refused_before_it_is_composed(
        monkeypatch: pytest.MonkeyPatch, text: str, refused: tuple[int, int] | None) -> None:
    monkeypatch.setattr(yamlpos, "MAX_EXPANDED_NODES", 100)
    stream = read_stream(text.encode())
    problems = [(p.rule, p.line, p.document) for p in stream.problems]
    if refused is None:
        assert problems == [] and stream.documents
    else:
        assert problems == [(yamlpos.SYNTAX, refused[0], refused[1])] and not stream.documents


HUGE = """
import resource, sys
from policies import yamlpos
text = ("- {}\\n" * (yamlpos.MAX_EXPANDED_NODES + 1)).encode()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
stream = yamlpos.read_stream(text)
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(len(text) // 1024, grown, [p.message for p in stream.problems])
"""


def test_a_huge_block_document_is_refused_in_little_memory() -> None:
    """libyaml composes a document whole, some 450 bytes a value: the 1,000,001 values of a
    5 MB file took 475 MB before they were counted first."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", HUGE], capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[2], check=True, timeout=120)
    size_kib, grown_kib, problems = done.stdout.split(" ", 2)
    assert problems.strip() == repr([
        f"the document holds more than {yamlpos.MAX_EXPANDED_NODES} values; no Kubernetes "
        "object is that large"])
    assert int(grown_kib) < 3 * int(size_kib)  # the decoded text, and little else


def _as_read(items: list[yamlpos.Document | yamlpos.SyntaxProblem]) -> list[object]:
    return [(d.index, d.line, d.data, d.positions()) if isinstance(d, yamlpos.Document) else d
            for d in items]


@pytest.mark.parametrize("seed", range(2))
def test_read_ahead_gives_what_iter_stream_gives(seed: int) -> None:
    """A file read by another process (its documents sent without their node trees) is the
    same file: data, problems, document lines and every position, composed again from the
    text when asked for."""
    texts = [POD_LIST.encode(), ANCHORS.encode(), b"a: 1\na: 2\n", b"x: [\n",
             b"---\n# c\nx: 1\n---\ny:\n  z: 2\n---\nbad: [\n", b"a: *nope\n---\nb: 1\n",
             "\ufeffa: \u00e9\n".encode(), b"\xff\xfe", b"",
             *_mutations(seed, FUZZ_SEEDS, 300)]
    for data in texts:
        sent = pickle.loads(pickle.dumps(yamlpos.read_ahead(data)))
        assert _as_read(list(yamlpos.documents_of(sent, data))) == _as_read(
            list(yamlpos.iter_stream(data))), data


def test_placing_every_key_of_a_large_mapping_costs_its_size() -> None:
    """lint places one finding per violation: a nodeSelector of thousands of unquoted numbers
    is as many lookups, each of which used to scan the whole mapping."""
    import gc
    import time

    def cost(n: int) -> float:
        text = "spec:\n  nodeSelector:\n" + "".join(f"    k{i}: {i}\n" for i in range(n))
        (doc,) = read_stream(text.encode()).documents
        paths = [("spec", "nodeSelector", f"k{i}") for i in range(n)]
        # a collection of the whole heap (whatever earlier tests left in it) lands at random
        # in a millisecond's measure: time the lookups alone
        gc.collect()
        gc.disable()
        try:
            started = time.perf_counter()
            for i, path in enumerate(paths):
                assert doc.position(path) == (i + 3, 5)
            return time.perf_counter() - started
        finally:
            gc.enable()

    small, large = min(cost(1000) for _ in range(5)), min(cost(4000) for _ in range(5))
    assert large < small * 8, (small, large)  # 4x the keys: linear ~4x, a scan per key 16x
