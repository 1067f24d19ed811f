"""GitTool: what every git tool shares — the work tree, running git, turning failures into errors."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from entropic_mcp import CallContext, ToolBase, ToolError
from entropic_mcp.toolkit import result_limit

from ._args import pathspecs, raw_paths
from ._hidden import refused_read, refused_write, root_relative, rules_may_refuse_reads
from ._runner import GitOutput, WorkTree, git_failed

if TYPE_CHECKING:
    from ._server import GitServer

#: What git says when a revision does not name an object (LC_ALL=C is set for every run).
_UNKNOWN_REVISION = re.compile(
    r"unknown revision|bad revision|bad object|invalid object name|not a valid object name|"
    r"malformed object name|ambiguous argument|not a commit|needed a single revision|invalid reference",
    re.IGNORECASE,
)
_NOT_A_REPOSITORY = re.compile(r"not a git repository", re.IGNORECASE)

#: Read ceiling for tools whose output is parsed into JSON: cutting it would drop records, not text.
JSON_READ_LIMIT = 16 * 1024 * 1024


class GitTool(ToolBase):
    """A tool of the git server; ``open_world`` is False for all of them (local repository only)."""

    open_world: ClassVar[bool | None] = False

    def __init__(self, server: GitServer) -> None:
        super().__init__()
        self.server = server

    async def worktree(self) -> WorkTree:
        return await self.server.runner.worktree(self.server.root)

    async def git(
        self,
        ctx: CallContext,
        tree: WorkTree,
        args: Sequence[str],
        *,
        limit: int | None = None,
        config: Sequence[str] = (),
    ) -> GitOutput:
        # inside the pipeline its deadline governs (per-tool timeouts may exceed the server's)
        remaining = ctx.remaining()
        out = await self.server.runner.run(tree.top, args, limit=limit, timeout=remaining, tree=tree, config=config)
        if out.exit_code == 128 and _NOT_A_REPOSITORY.search(out.stderr):
            # the repository went away since it was found: forget it and say so
            self.server.runner.forget(self.server.root)
            raise ToolError(
                "not_a_repository",
                f"{self.server.root} is no longer inside a git work tree; run `git init` there or "
                "point the server at a repository",
            )
        return out

    def text_limit(self, ctx: CallContext) -> int:
        """Bytes of text output to keep: the server's cap, kept under the pipeline's result cap so
        the note saying how to narrow the output is what gets cut last, not git's text."""
        limit = self.server.runner.max_output_bytes
        cap = result_limit(ctx)
        if cap > 0:
            limit = min(limit, max(1024, cap - 256))
        return limit

    def paths(
        self, args: dict[str, Any], tree: WorkTree, *, access: str, required: bool = False, name: str = "paths"
    ) -> list[str]:
        """The confined paths of argument ``name`` as literal pathspecs (``:(literal)<path>``):
        a file named ``*.md`` or ``:(top)x`` is that file, never a glob or pathspec magic."""
        raws = raw_paths(args, name, required=required)
        if raws is None:
            return []
        found = pathspecs(raws, root=self.server.root, top=tree.top, tool=f"git.{self.name}", access=access, name=name)
        return [f":(literal){path}" for path in found]

    # -- what must not be printed: .entropicignore and the host's path read rules ---------------

    def hidden_excludes(self, tree: WorkTree) -> list[str]:
        """Exclude pathspecs for everything the project's ``.entropicignore`` hides."""
        rules = self.server.ignores.rules(self.server.root)
        if rules is None:
            return []
        # the root lies inside the top (discovery checks it); its patterns apply below it
        base = self.real_root().relative_to(tree.top).as_posix()
        return rules.excludes("" if base == "." else base)

    def real_root(self) -> Path:
        return Path(os.path.realpath(self.server.root))

    def hidden(self, ctx: CallContext, tree: WorkTree, path: str) -> str | None:
        """Why ``path`` (relative to the work tree top) must not be printed, or None."""
        rules = self.server.ignores.rules(self.server.root)
        relative = root_relative(self.real_root(), tree.top, path)
        if (
            rules is not None
            and relative is not None
            and relative not in ("", ".")
            # a tree path may name a directory, which "dir/" lines match
            and (rules.hides(relative) or rules.hides(relative.rstrip("/") + "/"))
        ):
            return f"{path} is excluded by the project's .entropicignore"
        rule = refused_read(ctx, self.real_root(), tree.top, path)
        if rule is not None:
            return f"reading {path} is refused by the permission rule {rule!r}"
        return None

    async def refused_excludes(self, ctx: CallContext, tree: WorkTree, names_command: Sequence[str]) -> list[str]:
        """Exclude pathspecs for the files a read rule refuses, among those ``names_command``
        (a ``--name-only -z`` run) lists; no run at all when no rule could refuse a read."""
        if not rules_may_refuse_reads(ctx):
            return []
        out = await self.git(ctx, tree, names_command, limit=JSON_READ_LIMIT)
        check(out, names_command[0], "Check the arguments and try again.")
        names = dict.fromkeys(n.decode("utf-8", "surrogateescape") for n in out.stdout.split(b"\x00") if n)
        return [
            f":(exclude,literal){name}"
            for name in names
            if name and refused_read(ctx, self.real_root(), tree.top, name) is not None
        ]

    async def names(self, ctx: CallContext, tree: WorkTree, command: Sequence[str]) -> list[str]:
        """The NUL-separated paths a ``-z`` listing command prints (deduplicated, in order)."""
        out = await self.git(ctx, tree, command, limit=JSON_READ_LIMIT)
        check(out, command[0], "Check the repository state with git.status.")
        return list(dict.fromkeys(n.decode("utf-8", "surrogateescape") for n in out.stdout.split(b"\x00") if n))

    async def guard_writes(self, ctx: CallContext, tree: WorkTree, *commands: Sequence[str]) -> None:
        """Refuse the call when a work-tree file it would rewrite may not be written.

        ``commands`` list (``-z``) the files the operation will write; each is judged like a
        ``write_file`` of it: policy files are protected, write rules apply. One refused file
        refuses the whole call before anything changes.
        """
        files: list[str] = []
        for command in commands:
            files += await self.names(ctx, tree, command)
        refused = []
        for path in dict.fromkeys(files):
            reason = refused_write(ctx, self.real_root(), tree.top, path)
            if reason is not None:
                refused.append(f"{path} ({reason})")
        if refused:
            shown = "; ".join(refused[:5]) + (f"; and {len(refused) - 5} more" if len(refused) > 5 else "")
            raise ToolError(
                "path_protected",
                f"git.{self.name} would rewrite files that may not be written: {shown}. Leave them out "
                "(name other 'paths') or change them yourself outside the agent",
            )

    async def switch_writes(self, ctx: CallContext, tree: WorkTree, target: str) -> tuple[str, ...]:
        """The listing of files a switch from HEAD to the commit ``target`` rewrites."""
        head = await self.git(ctx, tree, ("rev-parse", "--verify", "--quiet", "HEAD"))
        if head.exit_code != 0:  # unborn branch: every file of the target is written
            return ("ls-tree", "-r", "--name-only", "-z", target)
        return ("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "HEAD", target, "--")

    async def verify_commits(self, ctx: CallContext, tree: WorkTree, name: str, value: str) -> None:
        """A revision or a range (``a..b``, ``a...b``) whose every side is a commit.

        ``git diff`` also takes blobs and trees (``HEAD:secrets/key..HEAD:x`` prints both files,
        ``HEAD:dir`` compares a subtree), which would bypass the hidden-path checks.
        """
        sides = re.split(r"\.\.\.?", value) if ".." in value else [value]
        if len(sides) > 2:
            raise ToolError("invalid_argument", f"'{name}' {value!r} is not a revision or a range a..b")
        specs = [f"{side or 'HEAD'}^{{commit}}" for side in sides]
        out = await self.git(ctx, tree, ("rev-parse", "--quiet", "--verify", "--end-of-options", specs[0]))
        if out.exit_code == 0 and len(specs) == 2:
            out = await self.git(ctx, tree, ("rev-parse", "--quiet", "--verify", "--end-of-options", specs[1]))
        if out.exit_code != 0:
            raise ToolError(
                "invalid_argument",
                f"'{name}' {value!r} is not a commit or a range of commits in this repository; pass a branch, "
                'tag or commit (e.g. "main", "HEAD~1", "main..feature") — list them with git.branch or git.log',
            )

    async def verify_commit(self, ctx: CallContext, tree: WorkTree, name: str, value: str) -> str:
        """``rev-parse --verify`` a revision as a commit; its sha, or ``invalid_argument``."""
        out = await self.git(ctx, tree, ("rev-parse", "--verify", "--quiet", "--end-of-options", f"{value}^{{commit}}"))
        if out.exit_code != 0:
            raise unknown_revision(name, value, out)
        return out.text.strip()


def unknown_revision(name: str, value: str, out: GitOutput) -> ToolError:
    return ToolError(
        "invalid_argument",
        f"'{name}' {value!r} is not a commit in this repository; list branches with git.branch or "
        "commits with git.log and pass one of those",
        exit_code=out.exit_code,
        stderr=out.stderr.strip(),
    )


def check(out: GitOutput, subcommand: str, hint: str, revisions: Sequence[tuple[str, str | None]] = ()) -> GitOutput:
    """Raise the right error for a failed run: an unknown revision argument, else ``git_failed``."""
    if out.ok:
        return out
    given = [(name, value) for name, value in revisions if value is not None]
    if given and _UNKNOWN_REVISION.search(out.stderr):
        name, value = next(((n, v) for n, v in given if v in out.stderr), given[0])
        raise unknown_revision(name, value, out)
    raise git_failed(subcommand, out, hint)
