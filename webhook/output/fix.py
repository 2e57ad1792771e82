"""`gpupolicy lint --fix`: write the webhook's mutations into the manifest files.

Only documents that change are touched; the others keep every byte. A changed document is
loaded with ruamel.yaml's round-trip loader, patched, and dumped; then only the lines that the
patch changed are carried into the original text (a three-way merge of original, ruamel's
unchanged dump and ruamel's patched dump), so that quoting, flow lists and odd indentation
elsewhere in the document survive even where ruamel would re-format them. The result is parsed
again and must equal the object the engine produced, or the file is left alone.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any, TextIO

import yaml

from policies.decision import PatchOp
from policies.paths import FieldPath

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BOM = "\ufeff"


class FixError(Exception):
    pass


def apply_edits(
    texts: Mapping[str, bytes],
    edits: Mapping[str, Sequence[Any]],
    *,
    write: bool,
    stdout: TextIO,
    stderr: TextIO,
) -> int:
    """Fix every file that has edits (lint.Edit: document, prefix, patch, mutated); with
    write=False print a unified diff instead. Returns the number of files that could not be
    written (read-only, changed meanwhile, I/O errors): the caller exits 2 then."""
    changed = failed = 0
    for name, file_edits in edits.items():
        raw = texts[name]
        try:
            original = raw.decode("utf-8")
            fixed = fix_text(original, file_edits, json_file=name.endswith(".json"))
        except (FixError, UnicodeDecodeError) as exc:
            # the input itself is at fault (a repeated key...): lint reports it as an error
            stderr.write(f"gpupolicy lint: {name}: not fixed: {exc}\n")
            continue
        if fixed == original:
            continue
        if write:
            try:
                _replace(Path(name), raw, fixed.encode("utf-8"))
            except (OSError, FixError) as exc:
                why = exc.strerror or exc if isinstance(exc, OSError) else exc
                stderr.write(f"gpupolicy lint: {name}: not fixed: {why}\n")
                failed += 1
                continue
        else:
            stdout.write(f"--- {_diff_name('a', name)}\n+++ {_diff_name('b', name)}\n")
            for line in diff_hunks(original, fixed):
                ended = line.endswith("\n")
                stdout.write(line if ended else line + "\n\\ No newline at end of file\n")
        changed += 1
    if write and changed:
        stderr.write(f"gpupolicy lint: fixed {changed} file{'s' * (changed != 1)}\n")
    return failed


def _replace(path: Path, linted: bytes, fixed: bytes) -> None:
    """Write `fixed` in place of `path` only if it still holds what was linted (an editor may
    have saved it meanwhile), through a temporary file and a rename, so a reader never sees
    half a file; the file's mode is kept. A read-only file is refused, not replaced."""
    if not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222:
        raise FixError("the file is read-only")  # its mode says so, even to root
    if path.read_bytes() != linted:
        raise FixError("the file changed while it was linted; run lint --fix again")
    mode = path.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(fixed)
        os.chmod(tmp, mode)
        os.replace(tmp, path.resolve())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def diff_hunks(original: str, fixed: str) -> Iterator[str]:
    """Unified-diff hunks (3 lines of context) of original -> fixed. Lines are matched document
    by document, since one match over a long stream is quadratic in its repeated lines; the
    hunks are then cut from the whole file, so context runs across document boundaries."""
    old, new = original.splitlines(keepends=True), fixed.splitlines(keepends=True)
    try:
        pairs = list(zip(document_slices(original, len(old)), document_slices(fixed, len(new)),
                         strict=True))
    except (FixError, ValueError):
        pairs = [((0, 0, len(old)), (0, 0, len(new)))]
    opcodes: list[tuple[str, int, int, int, int]] = []
    for (a0, _, a1), (b0, _, b1) in pairs:
        local: Sequence[tuple[str, int, int, int, int]]
        if old[a0:a1] == new[b0:b1]:
            local = [("equal", 0, a1 - a0, 0, b1 - b0)]
        else:
            local = SequenceMatcher(None, old[a0:a1], new[b0:b1], autojunk=False).get_opcodes()
        for tag, i1, i2, j1, j2 in local:
            if tag == "equal" and opcodes and opcodes[-1][0] == "equal":
                _, p1, _, q1, _ = opcodes.pop()
                opcodes.append(("equal", p1, i2 + a0, q1, j2 + b0))
            else:
                opcodes.append((tag, i1 + a0, i2 + a0, j1 + b0, j2 + b0))
    matcher: SequenceMatcher[str] = SequenceMatcher(None, [], [])
    # get_grouped_opcodes() groups these instead of matching anew (difflib caches `opcodes`).
    matcher.opcodes = opcodes  # type: ignore[attr-defined]
    for group in matcher.get_grouped_opcodes(3):
        first, last = group[0], group[-1]
        yield (f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                yield from (" " + line for line in old[i1:i2])
                continue
            yield from ("-" + line for line in old[i1:i2])
            yield from ("+" + line for line in new[j1:j2])


def _range(start: int, stop: int) -> str:
    """A hunk range as unified diffs write it: 1-based start, length unless 1."""
    length = stop - start
    begin = start + 1 if length else start
    return f"{begin}" if length == 1 else f"{begin},{length}"


def _diff_name(side: str, name: str) -> str:
    return name if Path(name).is_absolute() else f"{side}/{name}"


def fix_text(text: str, edits: Sequence[Any], *, json_file: bool = False) -> str:
    bom = _BOM if text.startswith(_BOM) else ""
    text = text.removeprefix(_BOM)
    if "\r\n" in text:  # Windows line ends: work on \n, give the file its own back
        return bom + fix_text(text.replace("\r\n", "\n"), edits,
                              json_file=json_file).replace("\n", "\r\n")
    if json_file or text.lstrip().startswith(("{", "[")):
        return bom + _fix_json(text, edits)
    lines = text.splitlines(keepends=True)
    slices = document_slices(text, len(lines))
    by_doc: dict[int, list[Any]] = {}
    for edit in edits:
        by_doc.setdefault(edit.document, []).append(edit)
    out: list[str] = []
    for index, (start, body_start, end) in enumerate(slices, start=1):
        head, body = lines[start:body_start], "".join(lines[body_start:end])
        out.extend(head)
        out.append(fix_document(body, by_doc[index]) if index in by_doc else body)
    return bom + "".join(out)


def document_slices(text: str, line_count: int) -> list[tuple[int, int, int]]:
    """(first line, first body line, end line) per document; the body excludes a bare `---`
    line so that the marker and the comments above it stay as written."""
    try:
        starts = [e for e in yaml.parse(text, Loader=_Loader)
                  if isinstance(e, yaml.DocumentStartEvent)]
    except yaml.YAMLError as exc:
        raise FixError(f"cannot parse: {exc}") from None
    lines = text.splitlines()
    marks = [int(e.start_mark.line) if e.start_mark is not None else 0 for e in starts]
    bounds = [0, *marks[1:], line_count]
    out = []
    for k, event in enumerate(starts):
        marker = marks[k]
        bare = (event.explicit and marker < len(lines)
                and lines[marker].split("#", 1)[0].strip() == "---")
        out.append((bounds[k], marker + 1 if bare else max(bounds[k], marker), bounds[k + 1]))
    return out


def fix_document(body: str, edits: Sequence[Any]) -> str:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError as RuamelError

    try:
        rt = YAML(typ="rt")
        rt.preserve_quotes = True
        rt.width = 1 << 16  # never re-wrap long strings
        mapping, offset = guess_indent(body)
        rt.indent(mapping=mapping, sequence=offset + 2, offset=offset)
        data = rt.load(body)
        base = _dump(rt, data)
        for edit in edits:
            target = _walk(data, edit.prefix)
            for op in edit.ops:
                _apply(target, op)
        new = _dump(rt, data)
    except RuamelError as exc:
        raise FixError(str(exc).splitlines()[0]) from None
    merged = merge(body, base, new)
    for candidate in (merged, new):
        if candidate is not None and _verify(candidate, edits):
            return candidate
    raise FixError("the patched document does not match what the webhook would produce")


def guess_indent(body: str) -> tuple[int, int]:
    """(mapping indent, dash offset of a sequence under its key) as the document writes them
    first; (2, 0) when it does not say. Cheaper than a second load to let ruamel guess."""
    mapping: int | None = None
    offset: int | None = None
    parent: int | None = None  # column of the last `key:` that opens a block
    for line in body.splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        column = _indent_of(line)
        item = text.startswith("- ")
        if parent is not None and column > parent:
            if item and offset is None:
                offset = column - parent
            elif not item and mapping is None:
                mapping = column - parent
        if mapping is not None and offset is not None:
            break
        key = text[2:].lstrip() if item else text
        opens = key.split(" #", 1)[0].rstrip().endswith(":")
        parent = (column + len(text) - len(key) if item else column) if opens else None
    return mapping or 2, offset or 0


def _dump(rt: Any, data: Any) -> str:
    buffer = io.StringIO()
    rt.dump(data, buffer)
    return buffer.getvalue()


def _verify(text: str, edits: Sequence[Any]) -> bool:
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return False
    return all(_walk(data, e.prefix) == e.mutated for e in edits)


def _walk(data: Any, path: FieldPath) -> Any:
    for part in path:
        data = data[part]
    return data


def _apply(target: Any, op: PatchOp) -> None:
    """One patch op (add; remove for `migrate --write`) on ruamel or plain containers."""
    if not op.path:
        raise FixError(f"cannot {op.op} the whole object")
    parent = target
    for part in op.path[:-1]:
        parent = parent[part]
    last = op.path[-1]
    if op.op == "remove":  # `migrate --write` takes extended resources out for claims
        del parent[last]
        return
    if op.op != "add":
        raise FixError(f"unsupported patch operation {op.op!r}")
    if isinstance(parent, list):
        parent.insert(len(parent) if last == "-" else int(last), op.value)
    else:
        parent[last] = op.value


def _fix_json(text: str, edits: Sequence[Any]) -> str:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FixError(f"cannot parse JSON: {exc}") from None
    for edit in edits:
        if edit.document != 1:
            raise FixError("a JSON file holds one document")
        target = _walk(data, edit.prefix)
        for op in edit.ops:
            _apply(target, op)
    first = next((line for line in text.splitlines()[1:] if line.strip()), "")
    indent = len(first) - len(first.lstrip()) or None
    return json.dumps(data, indent=indent, ensure_ascii=False) + "\n"


# -- three-way merge ---------------------------------------------------------------------------

def merge(original: str, base: str, new: str) -> str | None:
    """Carry the base -> new changes into original, where base is ruamel's re-dump of
    original. None when a change falls where original and base disagree about the layout."""
    orig = original.splitlines(keepends=True)
    if orig and not orig[-1].endswith("\n"):
        orig[-1] += "\n"
    base_lines = base.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    to_orig = _line_map(base_lines, orig)
    out: list[str] = []
    cursor = 0  # next original line not yet copied
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, base_lines, new_lines,
                                               autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        start = to_orig.get(i1) if i1 < len(base_lines) else len(orig)
        if start is None or start < cursor:
            return None
        replaced = [to_orig.get(i) for i in range(i1, i2)]
        if any(r is None for r in replaced) or replaced != list(range(start, start + i2 - i1)):
            return None
        out.extend(orig[cursor:start])
        added = [_reindent(line, _indent_shift(base_lines, orig, to_orig, i1, block))
                 for block in _blocks(new_lines[j1:j2]) for line in block]
        blanks: list[str] = []
        while i1 == i2 and added and added[0].strip() and out and not out[-1].strip():
            blanks.insert(0, out.pop())  # ruamel keeps a blank line before what it appends
        out.extend(added + blanks)
        cursor = start + (i2 - i1)
    out.extend(orig[cursor:])
    return "".join(out)


def _blocks(lines: list[str]) -> list[list[str]]:
    """Inserted lines split where one ends at a shallower level than it began (a value added
    to a mapping, then a new key of its parent), so each part is indented by its siblings."""
    blocks: list[list[str]] = []
    level = -1
    for line in lines:
        column = _indent_of(line)
        if not blocks or (line.strip() and not line.lstrip().startswith("#") and column < level):
            blocks.append([])
            level = column
        blocks[-1].append(line)
    return blocks


def _line_map(base: list[str], orig: list[str]) -> dict[int, int]:
    """base line -> original line, for lines that are the same or only re-formatted one for
    one (same number of lines in a changed block)."""
    mapping: dict[int, int] = {}
    # Compared without indentation: a re-indented block still lines up one for one.
    plain_base, plain_orig = [line.strip() for line in base], [line.strip() for line in orig]
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, plain_base, plain_orig,
                                               autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            mapping.update({i1 + k: j1 + k for k in range(i2 - i1)})
    return mapping


def _indent_of(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _shape(line: str) -> tuple[bool, int, int]:
    """(is a sequence item, column of its dash or key, column of the key it holds)."""
    indent = _indent_of(line)
    rest = line[indent:]
    if rest.startswith("- ") or rest.rstrip() == "-":
        after = rest[1:]
        return True, indent, indent + 1 + len(after) - len(after.lstrip(" "))
    return False, indent, indent


def _indent_shift(
    base: list[str], orig: list[str], to_orig: dict[int, int], at: int, inserted: list[str]
) -> int:
    """How much further the original indents the block where lines are inserted, from a
    sibling in base and its counterpart in the original: another item of the same sequence for
    an inserted item, another key of the same mapping (maybe written after a dash) for a key."""
    if not inserted:
        return 0
    item, level, _ = _shape(inserted[0])
    for order in (range(at - 1, -1, -1), range(at, len(base))):
        for i in order:
            if not base[i].strip() or base[i].lstrip().startswith("#"):
                continue
            is_item, column, key = _shape(base[i])
            if (key if not item else column) < level or (not is_item and column <= level and item):
                break  # the parent: no sibling on this side
            sibling = (is_item and column == level) if item else key == level
            if sibling and i in to_orig:
                other = _shape(orig[to_orig[i]])
                return (other[1] if item else other[2]) - (column if item else key)
    return 0


def _reindent(line: str, shift: int) -> str:
    if shift > 0:
        return " " * shift + line
    if shift < 0 and line[: -shift].strip() == "":
        return line[-shift:]
    return line
