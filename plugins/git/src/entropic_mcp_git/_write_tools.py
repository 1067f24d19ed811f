"""The WRITE tools: add, commit, create_branch, checkout, reset (reset only ever unstages)."""

from __future__ import annotations

from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition
from entropic_mcp.toolkit import flag

from ._args import revision, text
from ._runner import WorkTree, git_failed
from ._tool import JSON_READ_LIMIT, GitTool, check

PACKAGE = __package__ or "entropic_mcp_git"

_NOTHING_TO_COMMIT = ("nothing to commit", "nothing added to commit", "no changes added to commit")


async def staged_paths(tool: GitTool, ctx: CallContext, tree: WorkTree, paths: list[str]) -> list[str]:
    """The paths whose index entry differs from HEAD (all of them on an unborn branch)."""
    out = await tool.git(
        ctx, tree, ("diff", "--cached", "--no-renames", "--name-only", "-z", "--", *paths), limit=JSON_READ_LIMIT
    )
    check(out, "diff --cached", "Check the repository state with git.status.")
    return [p.decode("utf-8", errors="replace") for p in out.stdout.split(b"\x00") if p]


class Add(GitTool):
    definition = load_tool_definition(PACKAGE, "add")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tree = await self.worktree()
        paths = self.paths(args, tree, access="write", required=True)
        out = await self.git(ctx, tree, ("add", "--", *paths))
        check(out, "add", "Check that the paths exist (and are not ignored) with git.status, then try again.")
        return ToolResult.json({"staged": await staged_paths(self, ctx, tree, paths)})


class Commit(GitTool):
    definition = load_tool_definition(PACKAGE, "commit")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = False

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        message = text(args, "message", required=True)
        add_all = flag(args, "add_all", default=False)
        tree = await self.worktree()
        # the message is one argument in an argument list — no shell ever sees it — and
        # --cleanup=verbatim keeps it byte for byte (no comment or whitespace stripping)
        command = ["commit", "--no-edit", "--cleanup=verbatim", f"--message={message}"]
        if add_all:
            command.append("--all")
        out = await self.git(ctx, tree, command)
        if out.exit_code == 1 and any(marker in out.text for marker in _NOTHING_TO_COMMIT):
            hint = "stage changes with git.add" + ("" if add_all else " (or pass add_all: true for tracked files)")
            raise ToolError("nothing_to_commit", f"there is nothing staged to commit; {hint}, then commit again")
        check(out, "commit", "Resolve what git reports (see git.status) and commit again.")
        head = await self.git(ctx, tree, ("rev-parse", "--verify", "HEAD"))
        check(head, "rev-parse", "The commit was made; read its sha with git.log.")
        return ToolResult.json({"sha": head.text.strip(), "summary": out.text.strip()})


class CreateBranch(GitTool):
    definition = load_tool_definition(PACKAGE, "create_branch")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = False

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = revision(args, "name", required=True)
        base = revision(args, "base")
        switch = flag(args, "checkout", default=True)
        tree = await self.worktree()
        if base is not None:
            sha = await self.verify_commit(ctx, tree, "base", base)
            if switch:
                await self.guard_writes(ctx, tree, await self.switch_writes(ctx, tree, sha))
        start = [] if base is None else ["--end-of-options", base]
        if switch:
            command = ["switch", "--no-guess", "-c", name, *start]
        else:
            command = ["branch", "--end-of-options", name, *([base] if base is not None else [])]
        current = tree.head()
        out = await self.git(ctx, tree, command)
        if not out.ok and "not a valid branch name" in out.stderr:
            raise ToolError(
                "invalid_argument",
                f"'name' {name!r} is not a valid branch name; use letters, digits, "
                "'-', '_', '/' and '.', e.g. \"feature/login\"",
                stderr=out.stderr.strip(),
            )
        check(
            out,
            "switch -c" if switch else "branch",
            "Pick another name (git.branch lists the existing ones) or commit local changes first.",
        )
        return ToolResult.json({"branch": name, "base": base if base is not None else (current or "HEAD")})


class Checkout(GitTool):
    definition = load_tool_definition(PACKAGE, "checkout")
    required_access_level = AccessLevel.WRITE
    destructive = True  # switching rewrites work-tree files
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        target = revision(args, "target", required=True)
        tree = await self.worktree()
        ref = await self.git(
            ctx, tree, ("rev-parse", "--verify", "--quiet", "--symbolic-full-name", "--end-of-options", target)
        )
        full = ref.text.strip()
        sha = await self.verify_commit(ctx, tree, "target", target)
        await self.guard_writes(ctx, tree, await self.switch_writes(ctx, tree, sha))
        if ref.exit_code == 0 and full.startswith("refs/heads/"):
            branch = full[len("refs/heads/") :]
            out = await self.git(ctx, tree, ("switch", "--no-guess", "--end-of-options", branch))
            check(out, "switch", "Commit or stage your local changes (git.status shows them), then switch again.")
            return ToolResult.json({"branch": branch})
        out = await self.git(ctx, tree, ("switch", "--detach", "--end-of-options", sha))
        check(out, "switch --detach", "Commit or stage your local changes (git.status shows them), then try again.")
        return ToolResult.json({"detached": sha})


class Reset(GitTool):
    definition = load_tool_definition(PACKAGE, "reset")
    required_access_level = AccessLevel.WRITE
    destructive = True  # staged content that exists nowhere else is dropped from the index
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tree = await self.worktree()
        paths = self.paths(args, tree, access="write")
        before = await staged_paths(self, ctx, tree, paths)
        if not before:
            return ToolResult.json({"unstaged": []})
        # a mixed reset to HEAD of the index only: never --hard, --soft, or another commit
        out = await self.git(ctx, tree, ("reset", "--quiet", "--", *paths) if paths else ("reset", "--quiet"))
        if not out.ok:
            raise git_failed("reset", out, "Check the repository state with git.status.")
        after = set(await staged_paths(self, ctx, tree, paths))
        return ToolResult.json({"unstaged": [p for p in before if p not in after]})
