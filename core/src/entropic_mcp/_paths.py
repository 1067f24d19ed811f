"""Path confinement: the one function every directory-aware tool resolves paths through.

``confine`` decides *where* a path is (steps 1-6 of filesystem.md); the tools that then open
the path do it relative to a verified directory descriptor without following links (step 7),
so a component swapped for a symlink after this check cannot redirect a read or a write.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from ._calls import OutsideRootRequest
from ._envelope import json_safe_text
from ._errors import ConfigError, ToolError

if TYPE_CHECKING:
    from ._context import CallContext

OutsidePolicy = bool | Literal["optional"]

#: The config keys that widen access outside the root, named in ``outside_root_approval_required``.
OUTSIDE_ROOT_KEYS = ("outside_root_allow", "allow_outside_root")


def _absolute_paths(value: Iterable[str | Path]) -> tuple[Path, ...]:
    if isinstance(value, (str, Path)):
        raise ConfigError(f"outside-root entries must be a list of absolute paths, got the single value {str(value)!r}")
    out = []
    for entry in value:
        if not isinstance(entry, (str, Path)) or not str(entry) or "\x00" in str(entry):
            raise ConfigError(f"outside-root entries must be absolute paths (~ is expanded), got {entry!r}")
        path = Path(entry).expanduser()
        if not path.is_absolute():
            raise ConfigError(f"outside-root entries must be absolute paths (~ is expanded), got {str(entry)!r}")
        out.append(Path(os.path.realpath(path)))
    return tuple(out)


def _check_policy(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value not in (True, False, "optional") or (isinstance(value, int) and not isinstance(value, bool)):
        raise ConfigError(f'allow_outside_root: expected false, true or "optional", got {value!r}')


@attrs.frozen(kw_only=True)
class PathPolicy:
    """What happens to paths outside the root: deny list, then allow list, then the tri-state."""

    allow_outside_root: OutsidePolicy = attrs.field(default="optional", validator=_check_policy)
    outside_root_allow: tuple[Path, ...] = attrs.field(default=(), converter=_absolute_paths)
    outside_root_deny: tuple[Path, ...] = attrs.field(default=(), converter=_absolute_paths)
    #: False for servers with no approval path (git): outside is simply refused.
    approvable: bool = True


@attrs.frozen(kw_only=True)
class ResolvedPath:
    """A canonical path and where it lies; ``display`` is root-relative with ``/`` (or absolute)."""

    path: Path
    inside: bool
    display: str


def is_within(path: Path, root: Path) -> bool:
    """True when ``path`` is ``root`` or below it, compared by components (not string prefix)."""
    return path == root or root in path.parents


def canonicalize(raw: str, root: Path) -> Path:
    """Resolve ``raw`` against ``root``: every ``..`` and symlink in the existing part resolved.

    Raises ``ValueError`` for text the OS cannot take as a path (NUL, unencodable characters).
    """
    if "\x00" in raw:
        raise ValueError("embedded NUL")
    os.fsencode(raw)  # lone surrogates that cannot become bytes raise here, not half-way through
    path = Path(raw)
    if not path.is_absolute():
        path = root / path
    # realpath resolves the existing prefix and appends the rest lexically (``..`` in the rest is
    # applied after the links before it are resolved), which is what a path that does not exist
    # yet needs; non-strict so a dangling link resolves to its target, not to the link.
    return Path(os.path.realpath(path))


def printable(path: str) -> str:
    """``path`` as JSON-safe text: a name that is not UTF-8 on disk (Python holds each bad byte as
    a lone surrogate, which JSON cannot carry) shows U+FFFD where its bytes are not UTF-8, as
    ``bytes.decode("utf-8", "replace")`` shows them; ``shown_entry`` finds the name again."""
    return json_safe_text(path)  # type: ignore[no-any-return]


def shown_entry(directory: Path, part: str, *, display: str) -> str | None:
    """The entry of ``directory`` that ``printable`` shows as ``part`` (which holds U+FFFD and is
    not itself an entry), so a name a tool showed names the same file when a model sends it back;
    None when no entry prints so (or the directory cannot be listed).

    Raises ``ToolError("ambiguous_path")`` naming each candidate's bytes when several print alike.
    """
    try:
        names = [n for n in os.listdir(directory) if n != part and not n.isascii() and printable(n) == part]
    except OSError:
        return None
    if len(names) > 1:
        shown = ", ".join(repr(os.fsencode(n))[2:-1] for n in sorted(names))
        raise ToolError(
            "ambiguous_path",
            f"{display} matches {len(names)} names that are not UTF-8 on disk ({shown}; U+FFFD stands "
            "for bytes that are not UTF-8); rename them apart with a shell (mv with $'\\xNN' escapes)",
        )
    return names[0] if names else None


def relative_display(path: Path, root: Path) -> str:
    if path == root:
        return "."
    if is_within(path, root):
        return path.relative_to(root).as_posix()
    return str(path)


def _server_of(tool: str) -> str:
    return tool.partition(".")[0] if "." in tool else "<server>"


#: The longest path argument accepted (Linux PATH_MAX is 4096 bytes including the NUL).
MAX_PATH_CHARS = 4095


def confine(
    raw: object,
    *,
    root: Path,
    policy: PathPolicy,
    tool: str,
    access: Literal["read", "write"],
    ctx: CallContext | None = None,
    argument: str = "path",
    resolved: ResolvedPath | None = None,
) -> ResolvedPath:
    """Resolve a tool's path argument or raise ``ToolError`` with a code saying how to recover.

    ``~`` is a literal character; relative paths resolve against ``root``, never the process's
    working directory. Outside the root: ``outside_root_deny`` wins, then ``outside_root_allow``,
    then ``allow_outside_root`` (``"optional"`` asks ``ctx.services.approve_outside_root`` once).

    Args:
        raw: the argument as the model sent it.
        root: the project root (canonicalised here too).
        policy: the server's outside-root policy.
        tool: the full tool name (``filesystem.read_file``), passed to the approver.
        access: ``"read"`` or ``"write"``, passed to the approver.
        ctx: the call context (conversation, and the manager that asks the approver).
        argument: the argument's name, for error messages.
        resolved: ``raw`` as already resolved (by the permission check, with another policy, and
            handed to the tool as ``ctx.prepared_for``): only the policy is applied, so the tool
            uses the path that was judged rather than a second look at the tree.

    Raises:
        ToolError: ``invalid_args``, ``outside_root`` (``approvable=False``),
            ``outside_root_denied``, ``outside_root_rejected``, ``outside_root_approval_required``.
    """
    root = Path(os.path.realpath(root))
    path = _canonical(raw, root, argument) if resolved is None else resolved.path
    if is_within(path, root):
        return ResolvedPath(path=path, inside=True, display=relative_display(path, root))
    return _outside(ResolvedPath(path=path, inside=False, display=str(path)), raw, root, policy, tool, access, ctx)


def _canonical(raw: object, root: Path, argument: str) -> Path:
    if not isinstance(raw, str) or not raw:
        raise ToolError("invalid_args", f"'{argument}' must be a non-empty string path relative to the project root")
    if "\x00" in raw:
        raise ToolError("invalid_args", f"'{argument}' contains a NUL byte; pass a plain path")
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates (invalid UTF-8 smuggled through JSON escapes) could name a different
        # file than the text shows, and cannot be echoed back in a JSON message.
        raise ToolError("invalid_args", f"'{argument}' is not valid Unicode text; pass a plain path") from None
    if len(raw) > MAX_PATH_CHARS:
        # Longer than the system's PATH_MAX: such a path cannot be opened by name, and a tree that
        # deep (reachable only descriptor by descriptor) is one no ordinary tool can remove.
        raise ToolError(
            "invalid_args",
            f"'{argument}' is {len(raw)} characters long; paths are limited to {MAX_PATH_CHARS}. Use a shorter path",
        )
    path = None
    for _attempt in range(3):
        try:
            path = canonicalize(raw, root)
            break
        except ValueError as exc:
            raise ToolError("invalid_args", f"'{argument}' is not a usable path ({exc}); pass a plain path") from None
        except OSError:
            continue  # a link vanished between lstat and readlink: the tree is changing, look again
    if path is None:
        raise ToolError(
            "invalid_args", f"'{argument}' could not be resolved: its symbolic links kept changing; call again"
        )
    return path


def _outside(
    resolved: ResolvedPath,
    raw: object,
    root: Path,
    policy: PathPolicy,
    tool: str,
    access: Literal["read", "write"],
    ctx: CallContext | None,
) -> ResolvedPath:
    """``resolved`` (outside the root) if the policy lets a tool use it: its lists, then the approver."""
    path = resolved.path
    if not policy.approvable:
        raise ToolError(
            "outside_root",
            f"{raw!r} resolves to {path}, outside the work tree {root}; use a path inside it",
        )
    server = _server_of(tool)
    if any(is_within(path, d) for d in policy.outside_root_deny):
        raise ToolError(
            "outside_root_denied",
            f"{path} is outside the project root and under an outside_root_deny entry of "
            f"[servers.{server}]; use a path inside {root}",
        )
    if any(is_within(path, a) for a in policy.outside_root_allow):
        return resolved
    if policy.allow_outside_root is True:
        return resolved
    if policy.allow_outside_root is False:
        raise ToolError(
            "outside_root_denied",
            f"{path} is outside the project root {root} and allow_outside_root is false in "
            f"[servers.{server}]; use a path inside the root",
        )
    answer = None
    if ctx is not None:
        answer = ctx.services.approve_outside_root(
            OutsideRootRequest(path=path, tool=tool, access=access, root=root, conversation_id=ctx.conversation_id)
        )
    if answer is True:
        return resolved
    if answer is False:
        raise ToolError(
            "outside_root_rejected",
            f"access to {path} outside the project root was rejected; use a path inside {root}",
        )
    keys = [f"[servers.{server}] {key}" for key in OUTSIDE_ROOT_KEYS]
    raise ToolError(
        "outside_root_approval_required",
        f"{path} is outside the project root {root} and no approver answered. To allow it, add its "
        f"directory to outside_root_allow (or set allow_outside_root = true) in [servers.{server}] "
        f"of entropic-mcp.toml; otherwise use a path inside the root",
        config_keys=keys,
    )
