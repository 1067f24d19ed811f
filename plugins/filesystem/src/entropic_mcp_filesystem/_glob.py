"""filesystem.glob: sorted root-relative paths matching a glob, gitignore-aware, bounded."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition, toolkit

from ._base import FilesystemTool, truncation, walk_note
from ._fsio import Location, printable
from ._globpat import GlobPattern, Matcher, compile_glob
from ._rules import WalkGate
from ._text import fit_result, path_lines, wants_json
from ._walk import NameDir, Start, Walk, collector_paused, start


class Glob(FilesystemTool):
    definition = load_tool_definition(__package__, "glob")
    required_access_level = AccessLevel.READ

    def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        fs = self.fs
        pattern_text = toolkit.text(args, "pattern", required=True)
        pattern = compile_glob(pattern_text)
        sort = toolkit.choice(args, "sort", ("path", "mtime"), default="path")
        offset = toolkit.integer(args, "offset", default=0, minimum=0)
        as_json = wants_json(args)
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
                # the literal directories of the pattern do not exist
                return ToolResult.json([]) if as_json else ToolResult(text="(no matches)")
            raise
        settings = fs.settings
        cache = fs.ignore_cache
        walk = Walk(limit=settings.max_walk_entries, cache=cache, cancelled=ctx.cancelled)
        depth = None if pattern.max_depth is None else max(1, pattern.max_depth - len(prefix_parts))
        # The whole answer of an earlier walk, if nothing that decided it has changed (``_answers``).
        limit = settings.max_walk_entries
        answer_key = _answer_key("glob", pattern_text, walk_loc, top, depth, limit, resolved.inside)
        # From the root, every file the ignore rules keep is kept too: any later pattern is that
        # list filtered, as the walk would have filtered each directory's names.
        tree_key = _answer_key("tree", "", walk_loc, top, None, limit, resolved.inside) if not walk_loc.parts else None
        if answer_key is not None:
            try:
                with collector_paused():  # the store's records are many small containers, all kept
                    cache.prepare()
                    answers = cache.answers
                    known = answer_key in answers
                    remembered = answers.get(answer_key, top.fd) if known else None
                    if remembered is None and tree_key is not None and not known:
                        every = answers.get(tree_key, top.fd, copy=False)
                        if every is not None:
                            remembered = _select(every, pattern)
            except BaseException:
                os.close(top.fd)
                raise
            if remembered is not None:
                os.close(top.fd)
                return self._answer(remembered, top, walk, ctx, sort, offset, as_json)
            walk.tracing = True
            walk.saves = False
        every_kept: list[str] | None = [] if tree_key is not None and answer_key is not None else None
        if resolved.inside:
            cut = len(search_rel) + 1 if search_rel else 0

            def to_match(rel: str) -> str:
                return rel[cut:]
        else:
            lead = pattern.prefix + "/" if pattern.prefix else ""

            def to_match(rel: str) -> str:
                return lead + rel

        suffixes = pattern.name_suffixes
        name_matcher = pattern.name_matcher
        path_select = pattern.matcher.select
        # No collections while the walk allocates what it keeps (``collector_paused``).
        with collector_paused():
            found: list[str] = []
            extend = found.extend
            try:
                for directory in walk.walk_names(top.fd, top.rel, top.stack, top.entropic, max_depth=depth):
                    if not directory.has_files:
                        continue
                    if every_kept is not None:  # remembered with the listing: a re-walk redoes changed ones
                        every_kept.extend(directory.derived(("kept",), directory.kept_paths))
                    # The matches of one directory depend only on its (cached) names: remembered with them.
                    if suffixes is not None:
                        extend(directory.derived(("suffixes", suffixes), _by_suffix(directory, suffixes)))
                    elif name_matcher is not None:
                        extend(directory.derived(("name", name_matcher.key), _by_name(directory, name_matcher)))
                    else:
                        names, join = directory.names, directory.join
                        lead = to_match(join(""))  # what every name of this directory is matched after
                        matched = [names[i] for i in path_select([lead + n for n in names])]
                        if matched:
                            extend(join(n) for n in directory.kept(matched))
            finally:
                os.close(top.fd)
            if answer_key is not None:  # a walk that ended normally: keep its answer if it saw it all
                trace = walk.trace
                if trace is not None and trace.ok and not (walk.truncated or walk.stopped or walk.too_deep):
                    found.sort()
                    cache.answers.put(answer_key, trace, found)
                    if every_kept is not None and depth is None:  # a depth limit saw part of the tree
                        cache.answers.put(tree_key, trace, every_kept)  # in walk order: filtered, then sorted
                cache.save()
        return self._answer(found, top, walk, ctx, sort, offset, as_json)

    def _answer(
        self, found: list[str], top: Start, walk: Walk, ctx: CallContext, sort: str, offset: int, as_json: bool
    ) -> ToolResult:
        """The result for the root-relative (or walk-relative) matches ``found`` (any order)."""
        fs = self.fs
        settings = fs.settings
        gate = WalkGate(ctx, fs.root)
        if gate.active:
            found = [r for r in found if not gate.refused(top.display(r))]
        if sort == "mtime":
            found = _newest_first(found, top.display if top.display_base else lambda r: str(fs.root / r))
        else:
            found.sort()
        limit = settings.max_glob_results
        shown = found[offset : offset + limit]
        if top.display_base:
            results: list[Any] = [printable(top.display(r)) for r in shown]
        elif "".join(shown).isascii():
            results = shown  # nothing to make printable (the usual case: one check, not one per path)
        else:
            results = [printable(r) for r in shown]
        skipped = gate.note()
        if skipped is not None:
            results.append(skipped)
        if offset and offset >= len(found):
            results.append(
                {"note": f"offset {offset} is past the last match: {len(found)} paths matched; pass a smaller offset"}
            )
        if len(found) > offset + limit:
            results.append(
                truncation(
                    f"{len(found)} paths matched; {offset + 1}-{offset + limit} are listed (max_glob_results) — "
                    f"call again with offset={offset + limit} for the next ones, or narrow the pattern or pass "
                    "a sub-directory as 'path'",
                    next_offset=offset + limit,
                )
            )
        elif walk.truncated:
            results.append(truncation(walk_note(settings.max_walk_entries, "the search")))
        elif walk.stopped:
            results.append(truncation("the call was cancelled before the search was complete"))
        if walk.too_deep and not (results and isinstance(results[-1], dict)):
            results.append(truncation("directories nested deeper than 128 levels were not searched"))
        return fit_result(
            results,
            path_lines,
            as_json=as_json,
            cap=toolkit.result_limit(ctx),
            note="call again with offset=next_offset for the next ones, or narrow the pattern",
            empty="(no matches)",
            offset=offset,
        )


def _select(paths: list[str], pattern: GlobPattern) -> list[str]:
    """The root-relative ``paths`` (every file a walk from the root keeps) that a walk for
    ``pattern`` would have found: the same test on the same names, directory by directory.

    A walk's depth limit needs no test of its own: it is set only for patterns without ``**``,
    whose matcher matches paths of its own number of segments alone. A new list, always.
    """
    suffixes = pattern.name_suffixes
    if suffixes is not None:  # no suffix holds a "/": the path ends as its file name does
        return [p for p in paths if p.endswith(suffixes)]
    if pattern.name_matcher is not None:
        names = [p[p.rfind("/") + 1 :] for p in paths]
        return [paths[i] for i in pattern.name_matcher.select(names)]
    return [paths[i] for i in pattern.matcher.select(paths)]


def _answer_key(
    kind: str, pattern: str, loc: Location, top: Start, depth: int | None, limit: int, inside: bool
) -> tuple[object, ...] | None:
    """What a glob's matches depend on besides the directories it visits, or None: not kept.

    The ignore rules in force at the top go in by their text (two files of the same text decide
    alike); one too large to be kept by text, and walks outside the root, keep no answer.
    """
    if not inside:
        return None
    rules: list[object] = []
    for cut, level in top.stack:
        if level.source is None:
            return None
        rules.append((cut, level.source))
    entropic = top.entropic
    if entropic is not None and entropic.source is None:
        return None
    return (
        kind,
        pattern,
        loc.parts,
        top.rel,
        depth,
        limit,
        tuple(rules),
        entropic.source if entropic is not None else None,
    )


def _by_suffix(directory: NameDir, suffixes: tuple[str, ...]) -> Callable[[], list[str]]:
    def compute() -> list[str]:
        if len(suffixes) == 1 and "\0" not in suffixes[0]:
            matched = ending_with(directory.text, suffixes[0])
        else:
            matched = [n for n in directory.names if n.endswith(suffixes)]
        if not matched:
            return matched
        lead = directory.rel + "/" if directory.rel else ""
        return [lead + n for n in directory.kept(matched)]

    return compute


def ending_with(text: str, suffix: str) -> list[str]:
    """The NUL-separated names of ``text`` that end with ``suffix`` (which holds no NUL), in order.

    ``[n for n in text.split("\\0") if n.endswith(suffix)]`` without a string per name or a call
    per name: each piece of ``text`` cut at ``suffix + "\\0"`` but the last ends where a matching
    name's suffix begins, and that name starts after the piece's last NUL. A first glob from the
    listing store thus takes one step per matching name, not a method call per name, and never
    splits a directory's names into strings it then drops.
    """
    if not text:
        return []
    pieces = (text + "\0").split(suffix + "\0")
    del pieces[-1]
    return [piece[piece.rfind("\0") + 1 :] + suffix for piece in pieces]


def _by_name(directory: NameDir, matcher: Matcher) -> Callable[[], list[str]]:
    def compute() -> list[str]:
        names = directory.names
        matched = [names[i] for i in matcher.select(names)]
        if not matched:
            return matched
        lead = directory.rel + "/" if directory.rel else ""
        return [lead + n for n in directory.kept(matched)]

    return compute


def _newest_first(found: list[str], where: Callable[[str], str]) -> list[str]:
    """``found`` by modification time, newest first (ties by path); vanished files go last."""

    def key(rel: str) -> tuple[int, str]:
        try:
            return (-os.stat(where(rel), follow_symlinks=False).st_mtime_ns, rel)
        except OSError:
            return (1, rel)

    return sorted(found, key=key)
