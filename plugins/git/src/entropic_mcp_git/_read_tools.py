"""The READ tools: status, diff, log, show, branch — one git process per call."""

from __future__ import annotations

import posixpath
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition
from entropic_mcp.toolkit import choice, flag, integer

from ._args import date, revision
from ._hidden import rules_may_refuse_reads
from ._porcelain import (
    BRANCH_FORMAT,
    LOG_DETAIL_FORMAT,
    LOG_FORMAT,
    parse_branches,
    parse_log,
    parse_log_detail,
    parse_status,
)
from ._runner import GitOutput
from ._tool import JSON_READ_LIMIT, GitTool, check

PACKAGE = __package__ or "entropic_mcp_git"

#: Diff options that keep a repository's config from running programs or changing the format.
DIFF_SAFETY = ("--no-ext-diff", "--no-textconv", "--no-color")


def capped_text(out: GitOutput, limit: int, narrow: str) -> str:
    """The output as text; when git was stopped at the cap, cut at a line end with a note."""
    text = out.text
    if not out.truncated:
        return text
    cut = text.rfind("\n")
    if cut > 0:
        text = text[: cut + 1]
    return f"{text}[... output cut at {limit} bytes; {narrow}]\n"


class Status(GitTool):
    definition = load_tool_definition(PACKAGE, "status")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tree = await self.worktree()
        out = await self.git(ctx, tree, ("status", "--porcelain=v2", "--branch", "-z"), limit=JSON_READ_LIMIT)
        check(out, "status", "Check the repository state with `git status` in a terminal.")
        return ToolResult.json(parse_status(out.stdout, truncated=out.truncated))


#: How ``diff`` reports: the patch, git's per-file summary, or just the names.
DIFF_FORMATS = {
    "patch": (),
    "stat": ("--stat=200,150",),
    "name_only": ("--name-only",),
    "name_status": ("--name-status",),
}


class Diff(GitTool):
    definition = load_tool_definition(PACKAGE, "diff")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        staged = flag(args, "staged", default=False)
        target = revision(args, "target")
        context = integer(args, "context_lines", default=3, minimum=0, maximum=1000)
        shape = choice(args, "format", tuple(DIFF_FORMATS), default="patch")
        tree = await self.worktree()
        paths = self.paths(args, tree, access="read")
        compare = ["--cached"] if staged else []
        if target is not None:
            await self.verify_commits(ctx, tree, "target", target)
            # --end-of-options: the revision is verified by this same run, never read as an option
            compare += ["--end-of-options", target]
        hidden = self.hidden_excludes(tree)
        refused = await self.refused_excludes(
            ctx, tree, ["diff", "--name-only", "-z", "--no-renames", *compare, "--", *paths, *hidden]
        )
        options = DIFF_FORMATS[shape] or (f"-U{context}",)
        command = ["diff", *DIFF_SAFETY, *options, *compare, "--", *paths, *hidden, *refused]
        limit = self.text_limit(ctx)
        out = await self.git(ctx, tree, command, limit=limit)
        check(out, "diff", "Check the arguments and try again.", [("target", target)])
        return capped_text(out, limit, "narrow the diff with 'paths', 'context_lines': 0 or 'format': \"stat\"")


class Log(GitTool):
    definition = load_tool_definition(PACKAGE, "log")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        max_count = integer(args, "max_count", default=10, minimum=1, maximum=200)
        rev = revision(args, "revision")
        since = date(args, "since")
        until = date(args, "until")
        body = flag(args, "body", default=False)
        stats = flag(args, "stats", default=False)
        tree = await self.worktree()
        paths = self.paths(args, tree, access="read")
        detailed = body or stats
        command = ["log", "-z", f"--max-count={max_count}", LOG_DETAIL_FORMAT if detailed else LOG_FORMAT]
        if stats:
            command += [*DIFF_SAFETY, "--numstat"]
        if since is not None:
            command.append(f"--since={since}")
        if until is not None:
            command.append(f"--until={until}")
        if rev is not None:
            command += ["--end-of-options", rev]
        command += ["--", *paths]
        out = await self.git(ctx, tree, command, limit=JSON_READ_LIMIT)
        if not out.ok and rev is None and "does not have any commits yet" in out.stderr:
            return ToolResult.json([])
        check(out, "log", "Check the arguments and try again.", [("revision", rev)])
        if not detailed:
            return ToolResult.json(parse_log(out.stdout, truncated=out.truncated))
        commits = parse_log_detail(out.stdout, stats=stats, truncated=out.truncated)
        for commit in commits:
            if not body:
                del commit["body"]
            if stats:
                # files the project hides are left out of the statistics, names and all
                commit["files"] = [
                    entry
                    for entry in commit["files"]
                    if self.hidden(ctx, tree, entry["path"]) is None
                    and ("from" not in entry or self.hidden(ctx, tree, entry["from"]) is None)
                ]
        return ToolResult.json(commits)


def split_object_path(rev: str) -> tuple[str, str | None]:
    """``<rev>:<path>`` (or ``:<path>``, ``:<stage>:<path>``) as git reads it: the path part, or
    None when the revision names no file (``:/message`` searches; ``:`` inside ``^{...}``)."""
    if rev.startswith(":"):
        if rev.startswith(":/"):
            return rev, None
        if len(rev) > 2 and rev[1] in "0123" and rev[2] == ":":
            return rev[:3], rev[3:]
        return ":", rev[1:]
    depth = 0
    for index, char in enumerate(rev):
        if char == "{":
            depth += 1
        elif char == "}" and depth:
            depth -= 1
        elif char == ":" and not depth:
            return rev[:index], rev[index + 1 :]
    return rev, None


def tree_path(path: str) -> str:
    """A path inside a tree object as git resolves it from the top (``./`` is the top here)."""
    while path.startswith("./"):
        path = path[2:]
    return posixpath.normpath(path) if path else ""


class Show(GitTool):
    definition = load_tool_definition(PACKAGE, "show")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        rev = revision(args, "revision") or "HEAD"
        tree = await self.worktree()
        _, path = split_object_path(rev)
        guarded = self.server.ignores.rules(self.server.root) is not None or rules_may_refuse_reads(ctx)
        if path is not None:
            for spelling in dict.fromkeys((tree_path(path), path)):
                if spelling and spelling != ".":
                    reason = self.hidden(ctx, tree, spelling)
                    if reason is not None:
                        raise ToolError("path_hidden", f"{reason}; git.show does not print it")
        elif guarded and ".." not in rev:
            # a blob or tree named by its id could be a hidden file: only <rev>:<path> is checked
            kind = await self.git(ctx, tree, ("cat-file", "-t", f"{rev}^{{}}"))
            if kind.exit_code == 0 and kind.text.strip() in ("blob", "tree"):
                raise ToolError(
                    "invalid_argument",
                    f"'revision' {rev!r} names a file or directory by its object id; name it as "
                    '"<revision>:<path>" (e.g. "HEAD:src/app.py") so the project\'s rules can be checked',
                )
        limit = self.text_limit(ctx)
        if path is None:
            hidden = self.hidden_excludes(tree)
            refused = await self.refused_excludes(
                ctx,
                tree,
                ["show", "--name-only", "-z", "--format=", "--no-renames", "--end-of-options", rev, "--", *hidden],
            )
            command = ["show", *DIFF_SAFETY, "--pretty=fuller", "--end-of-options", rev, "--", *hidden, *refused]
        else:
            command = ["show", *DIFF_SAFETY, "--pretty=fuller", "--end-of-options", rev, "--"]
        out = await self.git(ctx, tree, command, limit=limit)
        check(out, "show", "Check the revision and try again.", [("revision", rev)])
        return capped_text(
            out,
            limit,
            "the patch is longer than the output cap: raise "
            "[servers.git] max_output_bytes and [pipeline] max_result_bytes to see more",
        )


class Branch(GitTool):
    definition = load_tool_definition(PACKAGE, "branch")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        kind = choice(args, "kind", ("local", "remote", "all"), default="local")
        contains = revision(args, "contains")
        tree = await self.worktree()
        command = ["branch", "--list", "--no-color", BRANCH_FORMAT]
        if kind == "remote":
            command.append("--remotes")
        elif kind == "all":
            command.append("--all")
        if contains is not None:
            # the value rides inside the option itself, so it can never become an option
            command.append(f"--contains={contains}")
        out = await self.git(ctx, tree, command, limit=JSON_READ_LIMIT)
        check(out, "branch", "Check the arguments and try again.", [("contains", contains)])
        return ToolResult.json({"current": tree.head(), "branches": parse_branches(out.stdout)})
