"""Path confinement: the one function every directory-aware tool resolves paths through."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import attrs

from ._calls import OutsideRootRequest
from ._errors import ConfigError, ToolError

if TYPE_CHECKING:
    from ._context import CallContext

OutsidePolicy = bool | Literal["optional"]


def _absolute_paths(value: Iterable[str | Path]) -> tuple[Path, ...]:
    out = []
    for entry in value:
        path = Path(entry).expanduser()
        if not path.is_absolute():
            raise ConfigError(f"outside-root entries must be absolute paths (~ is expanded), got {str(entry)!r}")
        out.append(Path(os.path.realpath(path)))
    return tuple(out)


def _check_policy(instance: object, attribute: attrs.Attribute, value: object) -> None:
    if value not in (True, False, "optional"):
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
    """Resolve ``raw`` against ``root``: every ``..`` and symlink in the existing part resolved."""
    path = Path(raw)
    if not path.is_absolute():
        path = root / path
    # realpath resolves the existing prefix and appends the rest lexically, which is what a
    # path that does not exist yet needs; non-strict so dangling links resolve to their target.
    return Path(os.path.realpath(path))


def relative_display(path: Path, root: Path) -> str:
    if path == root:
        return "."
    if is_within(path, root):
        return path.relative_to(root).as_posix()
    return str(path)


def confine(
    raw: object,
    *,
    root: Path,
    policy: PathPolicy,
    tool: str,
    access: Literal["read", "write"],
    ctx: CallContext | None = None,
    argument: str = "path",
) -> ResolvedPath:
    """Resolve a tool's path argument or raise ``ToolError`` with a code saying how to recover.

    ``~`` is a literal character; relative paths resolve against ``root``, never the process's
    working directory.
    """
    if not isinstance(raw, str) or not raw:
        raise ToolError("invalid_args", f"'{argument}' must be a non-empty string path relative to the project root")
    if "\x00" in raw:
        raise ToolError("invalid_args", f"'{argument}' contains a NUL byte; pass a plain path")
    root = Path(os.path.realpath(root))
    path = canonicalize(raw, root)
    if is_within(path, root):
        return ResolvedPath(path=path, inside=True, display=relative_display(path, root))
    resolved = ResolvedPath(path=path, inside=False, display=str(path))
    if not policy.approvable:
        raise ToolError(
            "outside_root",
            f"{raw!r} resolves to {path}, outside the work tree {root}; use a path inside it",
        )
    if any(is_within(path, d) for d in policy.outside_root_deny):
        raise ToolError(
            "outside_root_denied",
            f"{path} is outside the project root and in outside_root_deny; use a path inside {root}",
        )
    if any(is_within(path, a) for a in policy.outside_root_allow):
        return resolved
    if policy.allow_outside_root is True:
        return resolved
    if policy.allow_outside_root is False:
        raise ToolError(
            "outside_root_denied",
            f"{path} is outside the project root {root} and allow_outside_root is false; use a path inside the root",
        )
    manager = ctx.manager if ctx is not None else None
    answer = None
    if manager is not None:
        answer = manager.approve_outside_root(
            OutsideRootRequest(
                path=path,
                tool=tool,
                access=access,
                root=root,
                conversation_id=ctx.conversation_id if ctx else "default",
            )
        )
    if answer is True:
        return resolved
    if answer is False:
        raise ToolError(
            "outside_root_rejected", f"access to {path} outside the project root was rejected; use a path inside {root}"
        )
    raise ToolError(
        "outside_root_approval_required",
        f"{path} is outside the project root {root} and no approver answered. To allow it, add its "
        f"directory to outside_root_allow (or set allow_outside_root = true) in [servers.<server>] "
        f"of entropic-mcp.toml",
    )
