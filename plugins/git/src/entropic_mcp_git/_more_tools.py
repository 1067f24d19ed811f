"""blame, stash (list and push/pop/apply/drop), restore, tag (list and create)."""

from __future__ import annotations

import datetime
import re
from typing import Any

from entropic_mcp import AccessLevel, CallContext, ToolError, ToolResult, load_tool_definition
from entropic_mcp.toolkit import choice, flag, integer
from entropic_mcp.toolkit.paths import printable

from ._args import pathspecs, revision, text
from ._tool import JSON_READ_LIMIT, GitTool, check

PACKAGE = __package__ or "entropic_mcp_git"

_BLAME_HEADER = re.compile(rb"^([0-9a-f]{40,64}) (\d+) (\d+)(?: (\d+))?$")
_NO_CHANGES = ("No local changes to save",)
_DONE = {"pop": "popped", "apply": "applied", "drop": "dropped"}


def parse_blame(data: bytes) -> list[tuple[int, str, str, str, str]]:
    """``git blame --porcelain``: (final line number, sha, author, author date, line text)."""
    commits: dict[str, dict[str, str]] = {}
    lines: list[tuple[int, str, str, str, str]] = []
    current: str | None = None
    number = 0
    for raw in data.split(b"\n"):
        if raw.startswith(b"\t"):
            if current is not None:
                info = commits.get(current, {})
                text_line = raw[1:].decode("utf-8", errors="replace")
                lines.append((number, current, info.get("author", ""), info.get("date", ""), text_line))
            continue
        header = _BLAME_HEADER.match(raw)
        if header is not None:
            current = header[1].decode()
            number = int(header[3])
            commits.setdefault(current, {})
            continue
        if current is None:
            continue
        key, _, value = raw.decode("utf-8", errors="replace").partition(" ")
        if key == "author":
            commits[current]["author"] = value
        elif key == "author-time" and value.isdigit():
            stamp = datetime.datetime.fromtimestamp(int(value), tz=datetime.UTC)
            commits[current]["date"] = stamp.strftime("%Y-%m-%d")
    return lines


class Blame(GitTool):
    definition = load_tool_definition(PACKAGE, "blame")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> str:
        raw = text(args, "path", required=True)
        rev = revision(args, "revision")
        start = integer(args, "start_line", default=1, minimum=1, maximum=10_000_000)
        end = args.get("end_line")
        if end is not None:
            end = integer(args, "end_line", default=start, minimum=start, maximum=10_000_000)
        tree = await self.worktree()
        path = pathspecs([raw], root=self.server.root, top=tree.top, tool="git.blame", access="read", name="path")[0]
        reason = self.hidden(ctx, tree, path)
        if reason is not None:
            raise ToolError("path_hidden", f"{reason}; git.blame does not print it")
        # blame parses its own options (no --end-of-options): the revision goes as a verified sha
        sha = None if rev is None else await self.verify_commit(ctx, tree, "revision", rev)
        command = ["blame", "--porcelain", "--no-textconv", f"-L{start},{'' if end is None else end}"]
        if sha is not None:
            command.append(sha)
        command += ["--", path]
        out = await self.git(ctx, tree, command, limit=JSON_READ_LIMIT)
        if not out.ok and "has only" in out.stderr:
            raise ToolError("invalid_args", f"'start_line' {start} is past the end of {path}: {out.stderr.strip()}")
        check(out, "blame", "Check that the file exists at that revision (git.log with paths lists its commits).")
        limit = self.text_limit(ctx)
        rendered = "".join(
            f"{number:>6} {sha_[:10]} {date} {author}\t{line}\n"
            for number, sha_, author, date, line in parse_blame(out.stdout)
        )
        data = rendered.encode()
        if len(data) <= limit:
            return rendered
        cut = data[:limit].decode("utf-8", errors="ignore")
        cut = cut[: cut.rfind("\n") + 1]
        return f"{cut}[... output cut at {limit} bytes; ask for fewer lines with 'start_line' and 'end_line']\n"


def _stash_ref(args: dict[str, Any]) -> str:
    # built from an integer: never an option, never another ref
    return f"stash@{{{integer(args, 'index', default=0, minimum=0, maximum=100_000)}}}"


class StashList(GitTool):
    definition = load_tool_definition(PACKAGE, "stash_list")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        tree = await self.worktree()
        out = await self.git(
            ctx, tree, ("stash", "list", "-z", "--format=%gd%x1f%H%x1f%aI%x1f%gs"), limit=JSON_READ_LIMIT
        )
        check(out, "stash list", "Check the repository state with git.status.")
        entries = []
        for record in out.stdout.split(b"\x00"):
            fields = record.decode("utf-8", errors="replace").lstrip("\n").split("\x1f")
            if len(fields) == 4:
                ref, sha, date, message = fields
                index = ref[len("stash@{") : -1] if ref.startswith("stash@{") else ""
                entries.append(
                    {"index": int(index) if index.isdigit() else None, "sha": sha, "date": date, "message": message}
                )
        return ToolResult.json(entries)


class Stash(GitTool):
    definition = load_tool_definition(PACKAGE, "stash")
    required_access_level = AccessLevel.WRITE
    destructive = True  # push clears the work tree's changes; pop and drop remove an entry
    idempotent = False

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        action = choice(args, "action", ("push", "pop", "apply", "drop"), default="push")
        tree = await self.worktree()
        if action == "push":
            message = text(args, "message")
            untracked = flag(args, "include_untracked", default=False)
            paths = self.paths(args, tree, access="write")
            command = ["stash", "push"]
            if untracked:
                command.append("--include-untracked")
            if message is not None:
                command.append(f"--message={message}")
            command += ["--", *paths]
            # push puts tracked files back to HEAD (and removes untracked ones when asked)
            writes = [("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "HEAD", "--", *paths)]
            if untracked:
                writes.append(("ls-files", "--others", "--exclude-standard", "-z", "--", *paths))
            if (await self.git(ctx, tree, ("rev-parse", "--verify", "--quiet", "HEAD"))).exit_code == 0:
                await self.guard_writes(ctx, tree, *writes)
            out = await self.git(ctx, tree, command)
            if out.ok and any(marker in out.stdout.decode("utf-8", "replace") + out.stderr for marker in _NO_CHANGES):
                return ToolResult.json({"stashed": False, "reason": "no local changes to save"})
            check(out, "stash push", "Check the repository state with git.status.")
            return ToolResult.json({"stashed": True, "ref": "stash@{0}"})
        ref = _stash_ref(args)
        if action != "drop":
            exists = await self.git(ctx, tree, ("rev-parse", "--verify", "--quiet", ref))
            if exists.exit_code == 0:
                # applying writes the entry's files, and its untracked part when it has one
                writes = [("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", f"{ref}^1", ref, "--")]
                third = await self.git(ctx, tree, ("rev-parse", "--verify", "--quiet", f"{ref}^3"))
                if third.exit_code == 0:
                    writes.append(("ls-tree", "-r", "--name-only", "-z", f"{ref}^3"))
                await self.guard_writes(ctx, tree, *writes)
        out = await self.git(ctx, tree, ("stash", action, "--quiet", ref))
        if not out.ok and ("is not a valid reference" in out.stderr or "No stash entries" in out.stderr):
            raise ToolError(
                "invalid_argument", f"there is no stash entry {ref}; list them with git.stash_list", stderr=out.stderr
            )
        check(
            out,
            f"stash {action}",
            "Resolve what git reports (git.status shows conflicts); the stash entry is kept when applying fails.",
        )
        return ToolResult.json({_DONE[action]: ref})


class Restore(GitTool):
    definition = load_tool_definition(PACKAGE, "restore")
    required_access_level = AccessLevel.WRITE
    destructive = True  # uncommitted changes to the paths are discarded
    idempotent = True

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        source = revision(args, "source")
        staged = flag(args, "staged", default=False)
        worktree = flag(args, "worktree", default=not staged)
        if not staged and not worktree:
            raise ToolError("invalid_args", "'staged' and 'worktree' are both false: restore nothing? set one of them")
        tree = await self.worktree()
        paths = self.paths(args, tree, access="write", required=True)
        command = ["restore", "--quiet"]
        sha = None if source is None else await self.verify_commit(ctx, tree, "source", source)
        if worktree:
            # the files restore will overwrite: those differing from what it restores them to
            base = sha if sha is not None else ("HEAD" if staged else None)
            listing = ["diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", *([base] if base else [])]
            await self.guard_writes(ctx, tree, [*listing, "--", *paths])
        if sha is not None:
            command.append(f"--source={sha}")
        if staged:
            command.append("--staged")
        if worktree:
            command.append("--worktree")
        out = await self.git(ctx, tree, [*command, "--", *paths])
        check(out, "restore", "Check the paths with git.status (a path must exist in the source).")
        restored = [printable(p[len(":(literal)") :]) for p in paths]  # a name not UTF-8 on disk: U+FFFD
        return ToolResult.json({"restored": restored, "staged": staged, "worktree": worktree, "source": source})


TAG_FORMAT = "--format=%(refname:strip=2)%00%(objecttype)%00%(*objectname)%00%(objectname)%00%(contents:subject)"


class Tag(GitTool):
    definition = load_tool_definition(PACKAGE, "tag")
    required_access_level = AccessLevel.READ

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        pattern = revision(args, "pattern")
        contains = revision(args, "contains")
        tree = await self.worktree()
        # a ref pattern under refs/tags/ can never be read as an option
        command = ["for-each-ref", "--sort=-creatordate", TAG_FORMAT]
        if contains is not None:
            command.append(f"--contains={contains}")
        command.append(f"refs/tags/{pattern}" if pattern is not None else "refs/tags/")
        out = await self.git(ctx, tree, command, limit=JSON_READ_LIMIT)
        check(out, "for-each-ref", "Check the arguments and try again.", [("contains", contains)])
        tags = []
        for line in out.stdout.decode("utf-8", errors="replace").split("\n"):
            fields = line.split("\x00")
            if len(fields) != 5:
                continue
            name, kind, peeled, sha, subject = fields
            annotated = kind == "tag"
            tags.append(
                {
                    "name": name,
                    "sha": peeled if annotated and peeled else sha,
                    "annotated": annotated,
                    "message": subject if annotated else None,
                }
            )
        return ToolResult.json(tags)


class CreateTag(GitTool):
    definition = load_tool_definition(PACKAGE, "create_tag")
    required_access_level = AccessLevel.WRITE
    destructive = False
    idempotent = False

    async def execute(self, args: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = revision(args, "name", required=True)
        target = revision(args, "revision")
        message = text(args, "message")
        tree = await self.worktree()
        sha = await self.verify_commit(ctx, tree, "revision", target or "HEAD")
        command = ["tag", "--no-sign"]
        if message is not None:
            command += ["--annotate", f"--message={message}", "--cleanup=verbatim"]
        out = await self.git(ctx, tree, [*command, "--end-of-options", name, sha])
        if not out.ok and "already exists" in out.stderr:
            raise ToolError(
                "invalid_argument",
                f"tag {name!r} already exists; pick another name (git.tag lists them) — tags are never overwritten",
                stderr=out.stderr.strip(),
            )
        if not out.ok and "not a valid tag name" in out.stderr:
            raise ToolError("invalid_argument", f"'name' {name!r} is not a valid tag name, e.g. \"v1.2.0\"")
        check(out, "tag", "Check the arguments and try again.")
        return ToolResult.json({"tag": name, "sha": sha, "annotated": message is not None})
