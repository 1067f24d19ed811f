"""FilesystemServer: settings, confinement, the read tracker and ignore rules the tools share."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
from entropic_mcp import CallContext, MCPServerBase, ToolError
from entropic_mcp.storage import StateStore
from entropic_mcp.toolkit.paths import PermissionPart, PreparedParts, ResolvedPath, confine, is_within, path_part

from ._fsio import Location, locate, on_disk, printable
from ._ignore import ENTROPICIGNORE, IgnoreCache
from ._settings import CONFIG_KEYS, Settings, read_settings
from ._tracker import ReadTracker

PATTERN_TOOLS = frozenset({"glob", "grep"})
#: (root, tool, argument, raw path) of one path argument: what the permission check pinned.
PinKey = tuple[str, str, str, str]
Access = Literal["read", "write"]
#: tool -> (access, argument, default, neutral) for every path it touches. A move reads its
#: source as well as removing it: a read rule on the source must stop moving it into view.
PATH_ARGUMENTS: dict[str, tuple[tuple[Access, str, str | None, bool], ...]] = {
    "read_file": (("read", "path", None, False),),
    "read_files": (("read", "paths", None, False),),
    "file_info": (("read", "path", None, False),),
    "list_directory": (("read", "path", ".", False),),
    "glob": (("read", "path", ".", False),),
    "grep": (("read", "path", ".", False),),
    "write_file": (("write", "path", None, False),),
    "edit_file": (("write", "path", None, False),),
    "delete_file": (("write", "path", None, False),),
    "create_directory": (("write", "path", None, False),),
    "move_file": (
        ("write", "source", None, False),
        ("read", "source", None, True),
        ("write", "destination", None, False),
    ),
}


def _raw_paths(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


class FilesystemServer(MCPServerBase):
    """Eleven tools confined to the project root: read, write, edit, search, list and manage files."""

    name = "filesystem"
    config_keys = CONFIG_KEYS

    def __init__(self, name: str | None = None, *, root: str | Path | None = None) -> None:
        super().__init__(name, root=root)
        self.root = Path(os.path.realpath(root if root is not None else Path.cwd()))
        self.settings = Settings()
        self.tracker = ReadTracker()
        self.ignore_cache = IgnoreCache()
        self._persist_listings()
        from ._read import LineIndex

        self.line_index = LineIndex()
        from ._edit import EditFile
        from ._glob import Glob
        from ._grep import Grep
        from ._info import FileInfo
        from ._listing import ListDirectory
        from ._manage import CreateDirectory, DeleteFile, MoveFile
        from ._read import ReadFile, ReadFiles
        from ._write import WriteFile

        for tool in (
            ReadFile,
            WriteFile,
            EditFile,
            Glob,
            Grep,
            ListDirectory,
            ReadFiles,
            FileInfo,
            MoveFile,
            DeleteFile,
            CreateDirectory,
        ):
            self.register_tool(tool(self))
        self.describe()

    # -- configuration and lifecycle ----------------------------------------------------------

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.settings = read_settings(self.name, config)
        self._persist_listings()
        self.describe()

    def _persist_listings(self) -> None:
        from ._dirstore import ListingStore

        self.ignore_cache.persist_to(ListingStore(self.root) if self.settings.listing_cache else None)

    def describe(self) -> None:
        """Render the tools' descriptions with the configured values (``${key}`` in the JSON)."""
        from ._base import described

        for tool in self.tools.values():
            tool.definition = described(type(tool).definition, self.settings)

    def set_working_dir(self, path: str | Path) -> bool:
        """Re-root the server (ignore rules are re-read from the new root); False if not a directory."""
        try:
            candidate = Path(os.path.realpath(path))
        except (TypeError, ValueError, OSError):
            return False
        if not candidate.is_dir():
            return False
        self.root = candidate
        self._persist_listings()  # the new root's store (and empty caches)
        return True

    def end_conversation(self, conversation_id: str) -> None:
        self.tracker.forget(conversation_id)

    def conversation_ended(self, ctx: CallContext) -> None:
        """``end_conversation``, and the conversation's reads deleted from a shared store (one already open)."""
        config = ctx.services.config
        storage = ctx.services.storage_if_open if config is not None and config.storage.shares_state else None
        self.tracker.forget(ctx.conversation_id, storage if isinstance(storage, StateStore) else None)

    def close(self) -> None:
        self.tracker.clear()
        self.line_index.clear()
        self.ignore_cache.clear()
        super().close()

    # -- pipeline queries -----------------------------------------------------------------------

    def permission_parts(self, tool_name: str, args: Mapping[str, Any]) -> list[PermissionPart]:
        """One part per file access, by kind: ``path_part("read" | "write", <canonical path>)``.

        The canonical paths judged here go to the tool with the parts (``PreparedParts``: the
        pipeline hands them over as ``ctx.prepared_for(args)``), so a link flipped after the check
        cannot redirect the operation. glob and grep also carry their pattern as a name
        (``filesystem.grep:<pattern>``), as rules written for them before did.
        """
        full = f"{self.name}.{tool_name}"
        accesses = PATH_ARGUMENTS.get(tool_name)
        if accesses is None or not isinstance(args, Mapping):
            return [PermissionPart(names=(full,), store=full)]
        parts: list[PermissionPart] = []
        pins: dict[PinKey, Path] = {}
        root = str(self.root)
        for access, argument, default, neutral in accesses:
            for raw in _raw_paths(args.get(argument, default)):
                canonical = self.canonical_path(raw)
                if canonical is None:
                    continue  # the tool refuses it with invalid_args before touching anything
                pins[(root, tool_name, argument, raw)] = canonical
                display = printable(self.display_of(canonical))  # a name not UTF-8 on disk: U+FFFD
                also = (printable(str(canonical)),) if display != printable(str(canonical)) else ()
                part = path_part(access, display, tool=tool_name, also=also, neutral=neutral)
                if tool_name in PATTERN_TOOLS and isinstance(args.get("pattern"), str) and args["pattern"]:
                    part = attrs.evolve(part, names=(*part.names, f"{full}:{args['pattern']}"))
                parts.append(part)
        return PreparedParts(parts or [PermissionPart(names=(full,), store=full)], pins or None)

    def permission_pattern(self, tool_name: str, args: Mapping[str, Any]) -> str:
        """The first part's stored rule: ``filesystem.<tool>:<canonical root-relative path>``."""
        return self.permission_parts(tool_name, args)[0].store

    def skip_duplicate_check(self, tool_name: str) -> bool:
        # read_file must always run: it refreshes the read tracker for a later write.
        return tool_name in ("read_file", "read_files")

    # -- shared by the tools --------------------------------------------------------------------------

    def canonical_path(self, raw: object) -> Path | None:
        """``raw`` resolved against the root, every link followed; None if unusable."""
        if not isinstance(raw, str) or not raw or "\x00" in raw:
            return None
        try:
            os.fsencode(raw)
            raw.encode("utf-8")
            path = Path(os.path.realpath(self.root / raw))
            return on_disk(path, self.root) if "\ufffd" in raw else path
        except ToolError:  # several names shown alike: the tool refuses it when it resolves
            return path
        except (ValueError, OSError, UnicodeEncodeError):
            return None

    def display_of(self, path: Path) -> str:
        if path == self.root:
            return "."
        return path.relative_to(self.root).as_posix() if is_within(path, self.root) else str(path)

    def canonical_display(self, raw: object) -> str | None:
        """The canonical root-relative form of ``raw`` (absolute outside the root); None if unusable."""
        path = self.canonical_path(raw)
        return None if path is None else self.display_of(path)

    def resolve(
        self,
        args: Mapping[str, Any],
        ctx: CallContext,
        *,
        tool: str,
        access: Literal["read", "write"],
        argument: str = "path",
        default: str | None = None,
    ) -> tuple[ResolvedPath, Location]:
        raw = args.get(argument)
        if raw is None:
            raw = default
        if raw is None:
            raise ToolError("invalid_args", f"'{argument}' is required: a path relative to the project root")
        return self.resolve_value(raw, ctx, tool=tool, access=access, argument=argument, args=args)

    def resolve_value(
        self,
        raw: object,
        ctx: CallContext,
        *,
        tool: str,
        access: Literal["read", "write"],
        argument: str = "path",
        args: Mapping[str, Any] | None = None,
    ) -> tuple[ResolvedPath, Location]:
        """Resolve one path value of the call ``args``: the canonical path the permission stage
        judged (``permission_parts``), else a fresh resolution. A path to write is
        also checked against ``.entropicignore`` and ``.git`` here, so no writing tool can skip it."""
        resolved, loc = self._resolve_value(raw, ctx, tool=tool, access=access, argument=argument, args=args)
        if access == "write":
            self.refuse_ignored(resolved, loc, write=True)
        return resolved, loc

    def _resolve_value(
        self,
        raw: object,
        ctx: CallContext,
        *,
        tool: str,
        access: Literal["read", "write"],
        argument: str,
        args: Mapping[str, Any] | None,
    ) -> tuple[ResolvedPath, Location]:
        pinned = None
        if isinstance(raw, str) and args is not None:
            pins: dict[PinKey, Path] | None = ctx.prepared_for(args)
            if pins:
                # Taken once: a tool resolving the same argument again (after it changed the tree) looks afresh.
                pinned = pins.pop((str(self.root), tool, argument, raw), None)
        if pinned is not None and is_within(pinned, self.root):
            # The permission stage judged this canonical path: operate on exactly it (opened
            # component by component without following links), never on a fresh resolution.
            # a name shown with U+FFFD: on_disk raises ambiguous_path when several entries show so
            if isinstance(raw, str) and "\ufffd" in raw and on_disk(pinned, self.root) != pinned:
                raise ToolError(
                    "unsafe_path",
                    f"{raw!r} names a file that is not UTF-8 on disk and appeared after its permission "
                    "was checked; nothing was read or written. Call again",
                )
            resolved = ResolvedPath(path=pinned, inside=True, display=self.display_of(pinned))
            return resolved, locate(resolved, self.root)
        resolved = confine(
            raw,
            root=self.root,
            policy=self.settings.policy,
            tool=f"{self.name}.{tool}",
            access=access,
            ctx=ctx,
            argument=argument,
        )
        if isinstance(raw, str) and "\ufffd" in raw and resolved.inside:  # a name shown with U+FFFD: its file
            found = on_disk(resolved.path, self.root)
            if found != resolved.path:
                if not is_within(found, self.root):
                    raise ToolError(
                        "outside_root",
                        f"{raw!r} names a symbolic link whose target {printable(str(found))} is outside the "
                        "project root; use a path inside it",
                    )
                resolved = ResolvedPath(path=found, inside=True, display=self.display_of(found))
        if pinned is not None and resolved.path != pinned:
            raise ToolError(
                "unsafe_path",
                f"{raw!r} resolved to {resolved.display} now but to {self.display_of(pinned)} when its "
                "permission was checked (a symbolic link changed meanwhile); nothing was read or "
                "written. Check the path with filesystem.list_directory and call again",
            )
        return resolved, locate(resolved, self.root)

    def refuse_hard_link(self, st: os.stat_result, display: str) -> None:
        """Refuse a regular file with several names unless ``allow_hard_links`` (see decisions.md).

        A hard link inside the root can name a file outside it (a key, another project's
        config); nothing in the path shows it, so the only safe reading is "several names".
        """
        if st.st_nlink > 1 and not self.settings.allow_hard_links and stat.S_ISREG(st.st_mode):
            raise ToolError(
                "hard_link",
                f"{display} is a hard link (the file has {st.st_nlink} names, which may lie outside the "
                "project), so the filesystem tools do not read or write it; if hard links in this "
                "project are trusted, set allow_hard_links = true under [servers.filesystem]",
            )

    def inspect_existing(self, display: str) -> Callable[[os.stat_result], None]:
        """What write_file and edit_file check before reading the file they replace."""

        def inspect(st: os.stat_result) -> None:
            self.refuse_hard_link(st, display)
            limit = self.settings.max_edit_bytes
            if st.st_size > limit:
                raise ToolError(
                    "too_large",
                    f"{display} is {st.st_size} bytes, more than max_edit_bytes ({limit}) under "
                    "[servers.filesystem], so it is not rewritten or edited here (that would hold it "
                    "whole in memory); edit it with a tool made for large files, or ask the user to "
                    "raise the limit",
                )

        return inspect

    def refuse_ignored(self, resolved: ResolvedPath, loc: Location, *, write: bool = False) -> None:
        """Refuse a path the root's ``.entropicignore`` excludes (``ignored``), and writes into ``.git``.

        Writing ``.git`` internals (hooks, config) would let a tool call run code the next time the
        user runs git, outside every rule of this server; reading them is harmless.
        """
        if write and ".git" in loc.parts:
            raise ToolError(
                "ignored",
                f"{loc.display} is inside a .git directory, which the filesystem tools "
                "never write; use the git tools to change the repository",
            )
        if not resolved.inside or not loc.parts:
            return
        from ._fsio import open_dir

        try:
            fd = open_dir(self.root, ())
        except OSError:
            return
        try:
            rules = self.ignore_cache.load(fd, ENTROPICIGNORE)
        finally:
            os.close(fd)
        if rules is None:
            return
        last = len(loc.parts) - 1
        for index in range(len(loc.parts)):
            probe = "/".join(loc.parts[: index + 1]) + ("/" if index < last else "")
            if rules.verdict(probe):
                raise ToolError(
                    "ignored",
                    f"{loc.display} is excluded by the project's .entropicignore, so the "
                    "filesystem tools do not read or write it; ask the user if you need it",
                )
