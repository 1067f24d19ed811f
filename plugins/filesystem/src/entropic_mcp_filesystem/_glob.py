"""filesystem.glob: sorted root-relative paths matching a glob, gitignore-aware, bounded."""

from __future__ import annotations

import os
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition

from . import _args
from ._base import FilesystemTool, fit_list, result_cap, truncation, walk_note
from ._fsio import Location, printable
from ._globpat import compile_glob
from ._walk import Walk, start


class Glob(FilesystemTool):
    definition = load_tool_definition(__package__, "glob")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        pattern = compile_glob(_args.text(args, "pattern"))
        resolved, loc = fs.resolve(args, ctx, tool=self.name, access="read", default=".")
        search_rel = loc.display if resolved.inside and loc.display != "." else ""
        prefix_parts = tuple(pattern.prefix.split("/")) if pattern.prefix else ()
        walk_loc = Location(
            base=loc.base,
            parts=loc.parts + prefix_parts,
            display=f"{loc.display}/{pattern.prefix}" if prefix_parts else loc.display,
        )
        try:
            top = start(walk_loc, inside=resolved.inside, root=fs.root, cache=fs.ignore_cache)
        except ToolError as exc:
            if prefix_parts and exc.code in ("not_found", "not_directory"):
                return ToolResult.json([])  # the literal directories of the pattern do not exist
            raise
        settings = fs.settings
        walk = Walk(limit=settings.max_walk_entries, cache=fs.ignore_cache, cancelled=ctx.cancelled)
        depth = None if pattern.max_depth is None else max(1, pattern.max_depth - len(prefix_parts))
        if resolved.inside:
            cut = len(search_rel) + 1 if search_rel else 0

            def to_match(rel: str) -> str:
                return rel[cut:]
        else:
            lead = pattern.prefix + "/" if pattern.prefix else ""

            def to_match(rel: str) -> str:
                return lead + rel

        suffixes = pattern.name_suffixes
        name_match = pattern.name_regex.match if pattern.name_regex is not None else None
        path_match = pattern.regex.match
        found: list[str] = []
        try:
            for directory in walk.walk(top.fd, top.rel, top.stack, top.entropic, max_depth=depth, sort=False):
                if suffixes is not None:
                    names = [n for n in directory.file_names if n.endswith(suffixes)]
                elif name_match is not None:
                    names = [n for n in directory.file_names if name_match(n) is not None]
                else:
                    join = directory.join
                    names = [n for n in directory.file_names if path_match(to_match(join(n))) is not None]
                if names:
                    ignored = directory.file_ignored
                    lead = directory.rel + "/" if directory.rel else ""
                    found.extend(lead + name for name in names if not ignored(name))
        finally:
            os.close(top.fd)
        found.sort()
        limit = settings.max_glob_results
        results: list[Any] = [printable(top.display(r) if top.display_base else r) for r in found[:limit]]
        if len(found) > limit:
            results.append(
                truncation(
                    f"{len(found)} paths matched; only the first {limit} (max_glob_results) "
                    "are listed — narrow the pattern or pass a sub-directory as 'path'"
                )
            )
        elif walk.truncated:
            results.append(truncation(walk_note(settings.max_walk_entries, "the search")))
        elif walk.stopped:
            results.append(truncation("the call was cancelled before the search was complete"))
        if walk.too_deep and not (results and isinstance(results[-1], dict)):
            results.append(truncation("directories nested deeper than 128 levels were not searched"))
        return ToolResult.json(
            fit_list(results, result_cap(ctx), "narrow the pattern or pass a sub-directory as 'path'")
        )
