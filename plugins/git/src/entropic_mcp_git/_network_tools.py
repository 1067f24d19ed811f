"""fetch, pull, push: only when ``[servers.git] network = true`` (off by default).

Remotes are named (a configured remote, never a URL); branches are plain names — a refspec
(``+main`` forces, ``:main`` deletes, ``a:b`` renames) is refused, and nothing is ever forced.
Transports: https, http, ssh and local paths (``GIT_ALLOW_PROTOCOL``), never ``ext::`` or
``git://``. Pushing to a local path starts the receiving side as ``git -c core.hooksPath=/dev/null
... receive-pack``, so the destination repository's hooks (which its own config may point
anywhere) do not run either.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition
from entropic_mcp.toolkit import flag

from ._args import revision
from ._runner import WorkTree
from ._tool import GitTool, check

PACKAGE = __package__ or "entropic_mcp_git"

NETWORK_KEY = "[servers.git] network = true"
#: The receiving side of a push to a local path: git itself, with hooks, auto-gc, the alternate
#: refs command and work-tree updates (``receive.denyCurrentBranch=updateInstead`` would check
#: out, running filters) off — the destination's own config cannot turn them back on.
LOCAL_RECEIVE_PACK = (
    "git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.alternateRefsCommand= "
    "-c receive.denyCurrentBranch=refuse -c receive.autogc=false -c gc.auto=0 receive-pack"
)
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
#: Remote names the server places in a refspec (``refs/remotes/<name>/...``).
_REMOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


def is_local_url(url: str) -> bool:
    """git's rule: a local path has no ``scheme://`` and no ``host:`` before its first ``/``."""
    if url.startswith("file://"):
        return True
    if _SCHEME.match(url):
        return False
    colon = url.find(":")
    slash = url.find("/")
    return colon < 0 or (0 <= slash < colon)


def branch_name(args: dict[str, Any], name: str) -> str | None:
    """A branch name, never a refspec: ``+`` (force), ``:`` (delete/rename) and ``-`` are refused."""
    value = revision(args, name)
    if value is None:
        return None
    if value.startswith("+") or ":" in value or "*" in value or "^" in value or "~" in value:
        raise ToolError(
            "invalid_argument",
            f"'{name}' {value!r} is a refspec, not a branch name; pass a plain branch name such as "
            '"main" (the server never forces, deletes or renames remote branches)',
        )
    return value


def tracking_refspec(remote: str, branch: str = "*") -> str:
    """The one mapping fetches use: remote branches into ``refs/remotes/<remote>/``. With
    ``--refmap=`` the repository's ``remote.<r>.fetch`` (which could map onto ``refs/heads/*``
    and force-move local branches) is not used at all."""
    return f"+refs/heads/{branch}:refs/remotes/{remote}/{branch}"


class NetworkTool(GitTool):
    open_world: ClassVar[bool | None] = True

    def require_network(self) -> None:
        if not self.server.runner.network:
            raise ToolError(
                "network_disabled",
                f"git.{self.name} talks to a remote, and network operations are off; set "
                f"{NETWORK_KEY} (in entropic-mcp.toml) to allow fetch, pull and push",
            )

    async def remote(self, ctx: CallContext, tree: WorkTree, name: str) -> str:
        """``name`` (the ``remote`` argument), which must be a configured remote."""
        out = await self.git(ctx, tree, ("remote",))
        check(out, "remote", "Check the repository's remotes with `git remote -v`.")
        remotes = out.text.split()
        if name not in remotes or not _REMOTE_NAME.fullmatch(name) or ".." in name:
            listed = ", ".join(remotes) or "none"
            raise ToolError(
                "invalid_argument",
                f"'remote' {name!r} is not a configured remote (remotes: {listed}); add one with `git remote add`",
            )
        return name

    async def trusted(self, tree: WorkTree) -> list[str]:
        return self.server.runner.trusted_network_config(tree)


class Fetch(NetworkTool):
    definition = load_tool_definition(PACKAGE, "fetch")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        prune = flag(args, "prune", default=False)
        name = revision(args, "remote") or "origin"
        self.require_network()
        tree = await self.worktree()
        remote = await self.remote(ctx, tree, name)
        command = ["fetch", "--no-recurse-submodules", "--no-write-fetch-head", "--refmap="]
        if prune:
            command.append("--prune")
        command += ["--end-of-options", remote, tracking_refspec(remote)]
        out = await self.git(ctx, tree, command, config=await self.trusted(tree))
        check(out, "fetch", "Check the remote's URL and your credentials (git remote -v).")
        return ToolResult.json({"remote": remote, "output": out.stderr.strip()})


class Pull(NetworkTool):
    definition = load_tool_definition(PACKAGE, "pull")
    required_access_level = AccessLevel.WRITE
    destructive = True  # fast-forwards rewrite work-tree files
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        branch = branch_name(args, "branch")
        name = revision(args, "remote") or "origin"
        self.require_network()
        tree = await self.worktree()
        remote = await self.remote(ctx, tree, name)
        # fetch, then fast-forward in a step of our own: the files the fast-forward rewrites are
        # checked first (policy files, write rules), and no merge commit, driver or rebase happens
        fetch = ["fetch", "--no-recurse-submodules", "--refmap=", "--end-of-options", remote]
        fetch.append(tracking_refspec(remote, branch or "*"))
        out = await self.git(ctx, tree, fetch, config=await self.trusted(tree))
        check(out, "fetch", "Check the remote's URL, the branch name and your credentials (git remote -v).")
        wanted = "FETCH_HEAD" if branch else "@{upstream}"
        target = await self.git(ctx, tree, ("rev-parse", "--verify", "--quiet", f"{wanted}^{{commit}}"))
        if target.exit_code != 0:
            raise ToolError(
                "invalid_argument",
                "the current branch tracks no upstream branch; name the remote 'branch' to pull "
                "(or push with set_upstream first)",
            )
        sha = target.text.strip()
        await self.guard_writes(ctx, tree, await self.switch_writes(ctx, tree, sha))
        out = await self.git(ctx, tree, ("merge", "--ff-only", "--no-edit", "--no-verify", "--end-of-options", sha))
        if not out.ok and ("Not possible to fast-forward" in out.stderr or "diverg" in out.stderr.lower()):
            raise ToolError(
                "not_fast_forward",
                "the branch and the remote have diverged; pull only fast-forwards. Merge or rebase in a terminal",
                stderr=out.stderr.strip(),
            )
        check(out, "merge --ff-only", "Commit or stash local changes (git.stash), then pull again.")
        return ToolResult.json({"remote": remote, "branch": branch, "head": sha, "output": out.text.strip()})


class Push(NetworkTool):
    definition = load_tool_definition(PACKAGE, "push")
    required_access_level = AccessLevel.WRITE
    destructive = False  # never forced: a push that would lose remote commits is rejected
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        branch = branch_name(args, "branch")
        upstream = flag(args, "set_upstream", default=False)
        name = revision(args, "remote") or "origin"
        self.require_network()
        tree = await self.worktree()
        remote = await self.remote(ctx, tree, name)
        if branch is None:
            branch = tree.head()
            if branch is None:
                raise ToolError("invalid_argument", "HEAD is detached: name the 'branch' to push")
        url = await self.git(ctx, tree, ("remote", "get-url", "--push", "--end-of-options", remote))
        check(url, "remote get-url", "Check the remote's URL (git remote -v).")
        command = ["push", "--porcelain", "--no-recurse-submodules"]
        if is_local_url(url.text.strip()):
            command.append(f"--receive-pack={LOCAL_RECEIVE_PACK}")
        if upstream:
            command.append("--set-upstream")
        # refs/heads/<branch>:refs/heads/<branch> — a full refspec of our own, never forced
        refspec = f"refs/heads/{branch}:refs/heads/{branch}"
        out = await self.git(
            ctx, tree, [*command, "--end-of-options", remote, refspec], config=await self.trusted(tree)
        )
        if not out.ok and ("[rejected]" in out.text or "non-fast-forward" in out.stderr or "fetch first" in out.stderr):
            raise ToolError(
                "push_rejected",
                f"the remote has commits that {branch!r} does not; pull (git.pull) first — the server never forces",
                stderr=out.stderr.strip(),
            )
        check(out, "push", "Check the remote's URL and your credentials (git remote -v).")
        return ToolResult.json({"remote": remote, "branch": branch, "output": out.text.strip()})
