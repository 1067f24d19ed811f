"""The READ tools: status, diff, log, show, branch — one git process per call."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolResult, load_tool_definition

from ._args import choice, flag, integer, revision
from ._porcelain import BRANCH_FORMAT, LOG_FORMAT, parse_branches, parse_log, parse_status
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


class Diff(GitTool):
    definition = load_tool_definition(PACKAGE, "diff")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        staged = flag(args, "staged", False)
        target = revision(args, "target")
        context = integer(args, "context_lines", 3, 0, 1000)
        tree = await self.worktree()
        paths = self.paths(args, tree, access="read")
        command = ["diff", *DIFF_SAFETY, f"-U{context}"]
        if staged:
            command.append("--cached")
        if target is not None:
            # --end-of-options: the revision is verified by this same run, never read as an option
            command += ["--end-of-options", target]
        command += ["--", *paths]
        limit = self.text_limit(ctx)
        out = await self.git(ctx, tree, command, limit=limit)
        check(out, "diff", "Check the arguments and try again.", [("target", target)])
        return capped_text(out, limit, "narrow the diff with 'paths' or 'context_lines': 0")


class Log(GitTool):
    definition = load_tool_definition(PACKAGE, "log")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        max_count = integer(args, "max_count", 10, 1, 200)
        rev = revision(args, "revision")
        since = revision(args, "since")
        until = revision(args, "until")
        tree = await self.worktree()
        paths = self.paths(args, tree, access="read")
        command = ["log", "-z", f"--max-count={max_count}", LOG_FORMAT]
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
        return ToolResult.json(parse_log(out.stdout, truncated=out.truncated))


class Show(GitTool):
    definition = load_tool_definition(PACKAGE, "show")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        rev = revision(args, "revision") or "HEAD"
        tree = await self.worktree()
        command = ["show", *DIFF_SAFETY, "--pretty=fuller", "--end-of-options", rev, "--"]
        limit = self.text_limit(ctx)
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
        kind = choice(args, "kind", "local", ("local", "remote", "all"))
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
