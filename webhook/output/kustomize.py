"""Findings on a rendered Kustomize overlay, moved to the file that defines the object.

kustomize, asked for origin annotations (`buildMetadata: [originAnnotations]`), names the file
each object came from (`config.kubernetes.io/origin: {path: ../base/deploy.yaml}`); the
annotation is taken off before review, so it cannot change a verdict. The field is then looked
up in that file. When one of the overlay's patches (a patch file, or an inline patch in the
kustomization) set the offending field to the value the object ends up with, the finding goes
to the patch instead: that is the line to change. kustomize does not say which patch changed
what (its transformer annotations name only the kustomization), so this is read from the
patches themselves: strategic-merge patches by the field they hold (list items matched by
`name`, as the merge does), JSON 6902 patches by the path of each `add`/`replace` op.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policies import yamlpos
from policies.paths import FieldPath
from webhook.inputs import discover
from webhook.output.findings import Finding

ORIGIN = "config.kubernetes.io/origin"
_BUILD_ANNOTATIONS = (ORIGIN, "alpha.config.kubernetes.io/transformations",
                      "config.kubernetes.io/transformations")
_ORIGIN_PATH = re.compile(r"^path:[ \t]*(\S[^\n]{0,4000})$", re.MULTILINE)
_MAX_FILE = 4 * 1024 * 1024  # a base or patch file larger than this is not looked into


@dataclass(frozen=True, slots=True)
class Object:
    """One rendered object: where it came from, and what it looks like rendered."""

    origin: Path | None  # the file that defines it, when kustomize said
    kind: str
    name: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class _Patch:
    file: Path  # the patch file, or the kustomization holding an inline patch
    at: FieldPath  # where the patch is in `file` (() for a whole file)
    document: yamlpos.Document | None  # the patch file's document (None: inline)
    data: Any
    target: Mapping[str, Any]


class Overlay:
    """Placement of the findings of one rendered overlay."""

    def __init__(self, overlay: Path, relative_to: Path) -> None:
        self.overlay = overlay
        self.relative_to = relative_to  # the folder the origin paths are relative to
        self._docs: dict[Path, list[yamlpos.Document]] = {}
        self.patches = [p for folder in (overlay, *discover.builds_on(overlay))
                        for p in self._patches_of(folder)]

    def take(self, obj: dict[str, Any]) -> Object:
        """Take kustomize's build annotations off `obj` (in place: the engine must not see
        them) and say where it came from."""
        meta = obj.get("metadata")
        origin: Path | None = None
        if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict):
            notes = meta["annotations"]
            text = notes.get(ORIGIN)
            for key in _BUILD_ANNOTATIONS:
                notes.pop(key, None)
            if not notes:
                del meta["annotations"]
            origin = self._origin_path(text)
        name = meta.get("name") if isinstance(meta, dict) else None
        kind = obj.get("kind")
        return Object(origin, kind if isinstance(kind, str) else "",
                      name if isinstance(name, str) else "", obj)

    def _origin_path(self, text: Any) -> Path | None:
        """The `path:` line of the annotation (kustomize writes it plain; read by pattern,
        so an annotation a base wrote itself cannot make the reader do much work)."""
        match = _ORIGIN_PATH.search(text) if isinstance(text, str) else None
        if match is None:
            return None
        path = match.group(1).strip().strip("'\"")
        if not path or "://" in path:
            return None
        return Path(os.path.normpath(self.relative_to / path))

    def place(self, f: Finding, obj: Object, path: FieldPath | None) -> Finding:
        """`f` (at the rendered text) at the patch that set the field, else at the object's
        own file; the overlay is named in the message either way."""
        message = f"{f.message} (rendered by overlay {self.overlay})"
        rendered = f.where()
        if path is not None:
            for patch in self.patches:
                at = self._in_patch(patch, obj, path)
                if at is not None:
                    line, column = at
                    return dataclasses.replace(f, file=_shown(patch.file), line=line,
                                               column=column, message=message,
                                               rendered=rendered)
        if obj.origin is not None:
            doc = self._find(obj)
            if doc is not None:
                line, column = doc.position(_translate(obj.data, doc.data, path or ()))
                return dataclasses.replace(f, file=_shown(obj.origin), line=line,
                                           column=column, message=message, rendered=rendered)
        file = discover.kustomization_file(self.overlay)
        return dataclasses.replace(f, file=_shown(file) if file else str(self.overlay),
                                   line=None, column=None, message=message, rendered=rendered)

    # ---- the object's own file ----

    def _documents(self, file: Path) -> list[yamlpos.Document]:
        if file not in self._docs:
            try:
                raw = file.read_bytes() if file.stat().st_size <= _MAX_FILE else b""
            except OSError:
                raw = b""
            self._docs[file] = yamlpos.read_stream(raw).documents if raw else []
        return self._docs[file]

    def _find(self, obj: Object) -> yamlpos.Document | None:
        """The document of the origin file that holds the object: same kind, and the name
        it had before a prefix or suffix was added."""
        assert obj.origin is not None
        same_kind = [d for d in self._documents(obj.origin)
                     if isinstance(d.data, dict) and d.data.get("kind") == obj.kind]
        for doc in same_kind:
            name = _name(doc.data)
            if name and name in obj.name:
                return doc
        return same_kind[0] if same_kind else None

    # ---- patches ----

    def _patches_of(self, folder: Path) -> Iterator[_Patch]:
        file = discover.kustomization_file(folder)
        data = discover.kustomization(folder)
        if file is None:
            return
        entries: list[tuple[FieldPath, Any]] = []
        for key in ("patches", "patchesStrategicMerge", "patchesJson6902"):
            items = data.get(key)
            entries += [((key, i), item) for i, item in
                        enumerate(items if isinstance(items, list) else ())]
        for at, entry in reversed(entries):  # the last patch applied is the one that stuck
            target = entry.get("target") if isinstance(entry, dict) else None
            target = target if isinstance(target, dict) else {}
            ref = entry.get("path") if isinstance(entry, dict) else entry
            inline = entry.get("patch") if isinstance(entry, dict) else None
            if isinstance(ref, str) and "\n" not in ref:
                patch_file = folder / ref
                for doc in self._documents(patch_file):
                    yield _Patch(patch_file, (), doc, doc.data, target)
            elif isinstance(inline if inline is not None else ref, str):
                # through the hardened reader: a patch that does not read is kustomize's to say
                for doc in yamlpos.read_stream(str(inline if inline is not None else ref)
                                               ).documents:
                    yield _Patch(file, at, None, doc.data, target)

    def _in_patch(self, patch: _Patch, obj: Object, path: FieldPath
                  ) -> tuple[int, int | None] | None:
        data = patch.data
        if isinstance(data, list):  # JSON 6902: a list of ops
            if not _targets(patch.target, obj):
                return None
            for i, op in enumerate(data):
                if not isinstance(op, dict) or op.get("op") not in ("add", "replace"):
                    continue
                pointer = _parse_pointer(op.get("path"))
                if pointer is not None and _is_prefix(pointer, path, obj.data):
                    return self._position(patch, (i, "value"))
            return None
        if not isinstance(data, dict):
            return None
        if patch.target and not _targets(patch.target, obj):
            return None
        if not patch.target and (data.get("kind") != obj.kind
                                 or not (_name(data) and _name(data) in obj.name)):
            return None
        translated = _translate(obj.data, data, path)
        if len(translated) != len(path) or _get(data, translated) != _get(obj.data, path):
            return None  # the patch does not set this field, or set it to another value
        return self._position(patch, translated)

    def _position(self, patch: _Patch, at: FieldPath) -> tuple[int, int | None]:
        if patch.document is not None:
            return patch.document.position(at)
        for doc in self._documents(patch.file):  # inline: the entry in the kustomization
            return doc.position(patch.at)
        return 1, None


def _targets(target: Mapping[str, Any], obj: Object) -> bool:
    kind, name = target.get("kind"), target.get("name")
    return (kind is None or kind == obj.kind) and (name is None or name == obj.name
                                                   or (isinstance(name, str) and name in obj.name))


def _name(data: Any) -> str:
    meta = data.get("metadata") if isinstance(data, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def _parse_pointer(pointer: Any) -> FieldPath | None:
    if not isinstance(pointer, str) or not pointer.startswith("/"):
        return None
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]
    return tuple(int(p) if p.isdigit() else p for p in parts)


def _is_prefix(pointer: FieldPath, path: FieldPath, rendered: Any) -> bool:
    """The op at `pointer` wrote the field at `path` (or one of its parents). "-" (append)
    means the list's last item."""
    if len(pointer) > len(path):
        return False
    node = rendered
    for want, got in zip(pointer, path, strict=False):
        if want == "-" and isinstance(node, list):
            want = len(node) - 1
        if want != got:
            return False
        node = _child(node, got)
    return True


def _translate(rendered: Any, source: Any, path: FieldPath) -> FieldPath:
    """The longest prefix of `path` (a path in the rendered object) that `source` holds,
    written as a path in `source`: list items are matched by `name` (the merge key of the
    lists a pod spec has), else by position."""
    out: list[str | int] = []
    for part in path:
        if isinstance(part, int) and isinstance(rendered, list) and isinstance(source, list):
            if not 0 <= part < len(rendered):
                break
            item = rendered[part]
            name = item.get("name") if isinstance(item, dict) else None
            index = next((i for i, s in enumerate(source)
                          if name is not None and isinstance(s, dict) and s.get("name") == name),
                         part if name is None and part < len(source) else None)
            if index is None:
                break
            out.append(index)
            rendered, source = item, source[index]
        elif isinstance(part, str) and isinstance(rendered, dict) and isinstance(source, dict) \
                and part in source and part in rendered:
            out.append(part)
            rendered, source = rendered[part], source[part]
        else:
            break
    return tuple(out)


def _get(data: Any, path: FieldPath) -> Any:
    for part in path:
        data = _child(data, part)
    return data


def _child(node: Any, key: str | int) -> Any:
    if isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
        return node[key]
    if isinstance(node, dict):
        return node.get(key)
    return None


def _shown(path: Path) -> str:
    """A path as the report names files: relative to the working folder when under it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
