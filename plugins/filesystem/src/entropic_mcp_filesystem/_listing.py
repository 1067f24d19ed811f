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
from ._tracker import store_of
from ._walk import Walk, start

MAX_ENTRIES = 2000
#: A one-directory listing this small records its files' status in the read tracker (they may
#: then be moved or deleted unchanged without a read); a bigger one would evict real reads.
MAX_STAT_RECORDS = 256


def _size(entry: os.DirEntry[str]) -> int | None:
    """The entry's own size; taken during the walk (a DirEntry of a descriptor walk can only be
    stat'ed while its directory is open). The stat is kept by the DirEntry for the tracker."""
    try:
        return entry.stat(follow_symlinks=False).st_size
    except OSError:
        return None


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
        offset = toolkit.integer(args, "offset", default=0, minimum=0)
        gate = WalkGate(ctx, fs.root)
        # (sort key, shown path, entry, kind, size) for every entry, sorted, so that a page
        # (``offset``) is a slice of one stable order.
        found: list[tuple[str, str, os.DirEntry[str], str, int | None]] = []
        try:
            for directory in walk.walk(
                top.fd, top.rel, top.stack, top.entropic, max_depth=max_depth if recursive else 1
            ):
                for entry in directory.files:
                    rel = directory.join(entry.name)
                    shown = top.display(rel)
                    if directory.file_ignored(entry.name) or gate.refused(shown):
                        continue
                    try:
                        kind = "symlink" if entry.is_symlink() else "file"
                    except OSError:
                        continue
                    found.append((shown if recursive else entry.name, shown, entry, kind, _size(entry)))
                for entry in directory.dirs:
                    shown = top.display(directory.join(entry.name))
                    if not gate.refused(shown):
                        found.append((shown if recursive else entry.name, shown, entry, "directory", None))
        finally:
            os.close(top.fd)
        found.sort(key=lambda item: item[0])
        page = found[offset : offset + MAX_ENTRIES]
        entries = [
            {"name": printable(entry.name), "path": printable(shown), "type": kind, "size": size}
            for _, shown, entry, kind, size in page
        ]
        shown_files = [entry for _, _, entry, kind, _ in page if kind == "file"]
        if resolved.inside and not recursive and len(shown_files) <= MAX_STAT_RECORDS:
            statuses = []
            for entry in shown_files:
                try:
                    st = entry.stat(follow_symlinks=False)  # DirEntry keeps the stat _entry took
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    statuses.append((str(resolved.path / entry.name), st))
            fs.tracker.record_stats(ctx.conversation_id, statuses, store_of(ctx))
        results: list[Any] = list(entries)
        skipped = gate.note()
        if skipped is not None:
            results.append(skipped)
        if offset and offset >= len(found):
            results.append(
                {"note": f"offset {offset} is past the last entry: {len(found)} entries; pass a smaller offset"}
            )
        if len(found) > offset + MAX_ENTRIES:
            results.append(
                truncation(
                    f"{len(found)} entries; {offset + 1}-{offset + MAX_ENTRIES} are listed — call again with "
                    f"offset={offset + MAX_ENTRIES} for the next ones, list a sub-directory, lower max_depth, "
                    "or use filesystem.glob with a pattern",
                    next_offset=offset + MAX_ENTRIES,
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
            note="call again with offset=next_offset for the next ones, or list a sub-directory",
            empty="(empty directory)",
            offset=offset,
        )
