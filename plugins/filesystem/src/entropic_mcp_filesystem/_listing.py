"""filesystem.list_directory: a directory's entries (optionally recursive), gitignore-aware."""

from __future__ import annotations

import os
import stat
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolResult, load_tool_definition, toolkit

from ._base import FilesystemTool, truncation, walk_note
from ._fsio import printable
from ._rules import WalkGate
from ._text import fit_result, listing_lines, wants_json
from ._walk import Walk, start

MAX_ENTRIES = 2000
#: A one-directory listing this small records its files' status in the read tracker (they may
#: then be moved or deleted unchanged without a read); a bigger one would evict real reads.
MAX_STAT_RECORDS = 256


def _entry(entry: os.DirEntry[str], path: str, kind: str) -> dict[str, Any]:
    size = None
    if kind != "directory":
        try:
            size = entry.stat(follow_symlinks=False).st_size
        except OSError:
            size = None
    return {"name": printable(entry.name), "path": printable(path), "type": kind, "size": size}


class ListDirectory(FilesystemTool):
    definition = load_tool_definition(__package__, "list_directory")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read", default=".")
        recursive = toolkit.flag(args, "recursive")
        as_json = wants_json(args)
        max_depth = toolkit.integer(args, "max_depth", default=3, minimum=1, maximum=64)
        top = start(loc, inside=resolved.inside, root=fs.root, cache=fs.ignore_cache)
        walk = Walk(limit=fs.settings.max_walk_entries, cache=fs.ignore_cache, cancelled=ctx.cancelled)
        gate = WalkGate(ctx, fs.root)
        entries: list[dict[str, Any]] = []
        shown_files: list[os.DirEntry[str]] = []
        try:
            for directory in walk.walk(
                top.fd, top.rel, top.stack, top.entropic, max_depth=max_depth if recursive else 1
            ):
                for entry in directory.files:
                    rel = directory.join(entry.name)
                    if directory.file_ignored(entry.name) or gate.refused(top.display(rel)):
                        continue
                    try:
                        kind = "symlink" if entry.is_symlink() else "file"
                    except OSError:
                        continue
                    entries.append(_entry(entry, top.display(rel), kind))
                    if kind == "file" and not recursive:
                        shown_files.append(entry)
                for entry in directory.dirs:
                    shown = top.display(directory.join(entry.name))
                    if not gate.refused(shown):
                        entries.append(_entry(entry, shown, "directory"))
                if len(entries) > MAX_ENTRIES:
                    break
        finally:
            os.close(top.fd)
        if resolved.inside and len(shown_files) <= MAX_STAT_RECORDS:
            for entry in shown_files:
                try:
                    st = entry.stat(follow_symlinks=False)  # DirEntry keeps the stat _entry took
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    fs.tracker.record_stat(ctx.conversation_id, str(resolved.path / entry.name), st)
        entries.sort(key=(lambda e: e["path"]) if recursive else (lambda e: e["name"]))
        results: list[Any] = entries[:MAX_ENTRIES]
        skipped = gate.note()
        if skipped is not None:
            results.append(skipped)
        if len(entries) > MAX_ENTRIES:
            results.append(
                truncation(
                    f"more than {MAX_ENTRIES} entries; list a sub-directory, lower max_depth, "
                    "or use filesystem.glob with a pattern"
                )
            )
        elif walk.truncated:
            results.append(truncation(walk_note(fs.settings.max_walk_entries, "the listing")))
        elif walk.stopped:
            results.append(truncation("the call was cancelled before the listing was complete"))
        return fit_result(
            results,
            lambda items: listing_lines(items, recursive=recursive),
            as_json=as_json,
            cap=toolkit.result_limit(ctx),
            note="list a sub-directory or lower max_depth",
            empty="(empty directory)",
        )
