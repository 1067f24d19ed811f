"""A small toolkit for plugin authors, one submodule per concern.

Everything here is what the first-party plugins each wrote for themselves; one shared version
means one rule for every plugin. Every name is importable from ``entropic_mcp.toolkit`` itself:

- **Argument readers** (:mod:`.args`: ``text``, ``integer``, ``number``, ``flag``, ``choice``,
  ``strings``) raise ``ToolError("invalid_args", ...)`` saying what to send instead.
- **Settings** (:mod:`.settings`): ``settings_from_table(MySettings, table, server=...)`` turns a
  ``[servers.<name>]`` table into a frozen attrs record, checking each key against the field's
  type; errors are ``ConfigError`` naming the file and the key.
- **Result cap** (:mod:`.results`): ``result_limit(ctx)`` is the pipeline's ``max_result_bytes``
  for this call.
- **Processes** (:mod:`.processes`): ``run_process`` (async) and ``run_process_sync`` start a
  program as the leader of a new process group, stop the whole group on timeout or cancellation
  (TERM, then KILL after a grace), and keep the head and the tail of its output within a cap;
  :mod:`.git` holds the git configuration such a run neutralises.
- **Paths** (:mod:`.paths`): confinement under a root, path policies, the permission parts a
  path-taking tool is judged by, and ``cache_directory(name)``, where a plugin keeps a per-user
  cache outside every project.
"""

from . import args, git, paths, processes, results, settings
from .args import *  # noqa: F403
from .git import *  # noqa: F403
from .paths import *  # noqa: F403
from .processes import *  # noqa: F403
from .results import *  # noqa: F403
from .settings import *  # noqa: F403

__all__ = [*args.__all__, *settings.__all__, *results.__all__, *processes.__all__, *git.__all__, *paths.__all__]
