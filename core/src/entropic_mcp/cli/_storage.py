"""``entropic-mcp storage``: look into the configured store (read-only but for ``prune-state``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import click

from ._common import CLIError, UsageProblem, echo_json, load, settle

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_LIMIT = click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Rows to show.")
_OFFSET = click.option(
    "--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Rows to skip (newest first)."
)


@contextlib.contextmanager
def _store(ctx: click.Context) -> Iterator[Any]:
    """The configured backend, or None for a tinydb store that does not exist yet (nothing recorded)."""
    from .._errors import ConfigError, StorageError
    from .._plugins import Plugins
    from .._storage import open_storage

    settle()
    try:
        config = load(ctx)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None
    if config.storage.backend == "none":
        where = config.sources.get("storage.backend", "the config")
        raise CLIError(
            f'storage is disabled ([storage] backend = "none" in {where}); set backend = "tinydb" to keep a store'
        )
    if config.storage.backend == "tinydb" and not config.storage_path.exists():
        yield None
        return
    backend: Any
    try:
        if config.storage.backend == "tinydb":
            # Built in: no need to import every installed plugin to read it.
            from .._storage._tinydb import TinyDBBackend

            backend = TinyDBBackend.from_config(config)
        else:
            plugins = Plugins()
            plugins.load_entry_points(config.plugins)
            backend = open_storage(config, plugins)
    except ConfigError as exc:
        raise UsageProblem(str(exc)) from None
    except StorageError as exc:
        raise CLIError(str(exc)) from None
    try:
        yield backend
    except StorageError as exc:
        raise CLIError(str(exc)) from None
    finally:
        with contextlib.suppress(Exception):
            backend.close()


def table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    """A rich table whose id columns never wrap (people copy them into ``storage show``)."""
    from rich.console import Console
    from rich.table import Table

    view = Table(title=title)
    for column in columns:
        if column in ("id", "field"):
            view.add_column(column, no_wrap=True, min_width=36 if column == "id" else None)
        else:
            view.add_column(column, overflow="fold")
    for row in rows:
        view.add_row(*row)
    Console().print(view)


def _short(text: Any, width: int = 60) -> str:
    text = "" if text is None else str(text)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _when(stamp: Any) -> str:
    return "" if not stamp else str(stamp)[:19].replace("T", " ")


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else message
    if isinstance(content, str):
        return content
    import orjson

    return orjson.dumps(content).decode()


@click.group()
def storage() -> None:
    """Look into the store: conversations, delegations, search, show; prune old plugin state."""


@storage.command()
@_LIMIT
@_OFFSET
@_JSON
@click.pass_context
def conversations(ctx: click.Context, limit: int, offset: int, as_json: bool) -> None:
    """List conversations, newest first."""
    with _store(ctx) as backend:
        rows = [] if backend is None else backend.list_conversations(limit=limit, offset=offset)
    if as_json:
        echo_json(rows)
        return
    table(
        "conversations (newest first)",
        ["id", "title", "messages", "created", "updated", "delegation"],
        [
            [
                r["conversation_id"],
                _short(r["title"], 50),
                str(r["message_count"]),
                _when(r["created_at"]),
                _when(r["updated_at"]),
                r.get("parent_delegation_id") or "",
            ]
            for r in rows
        ],
    )


@storage.command()
@_LIMIT
@_OFFSET
@_JSON
@click.pass_context
def delegations(ctx: click.Context, limit: int, offset: int, as_json: bool) -> None:
    """List delegations, newest first."""
    with _store(ctx) as backend:
        rows = [] if backend is None else backend.list_delegations(limit=limit, offset=offset)
    if as_json:
        echo_json(rows)
        return
    table(
        "delegations (newest first)",
        ["id", "from → to", "status", "task", "summary", "created", "completed"],
        [
            [
                r["delegation_id"],
                f"{r['delegating_tier']} → {r['target_tier']}",
                r["status"],
                _short(r["task"], 40),
                _short(r["summary"], 40),
                _when(r["created_at"]),
                _when(r["completed_at"]),
            ]
            for r in rows
        ],
    )


@storage.command()
@click.argument("query")
@click.option("--max-results", type=click.IntRange(min=1), default=10, show_default=True, help="Results to show.")
@click.option("--scope", default=None, help="Only this scope's delegations (default: every scope).")
@_JSON
@click.pass_context
def search(ctx: click.Context, query: str, max_results: int, scope: str | None, as_json: bool) -> None:
    """Search completed delegations: every word of QUERY in the summary or the task."""
    if not query.strip():
        raise UsageProblem("the search query is empty; give at least one word")
    if scope is not None and not scope.strip():
        raise UsageProblem("--scope is empty; give a scope name, or leave it out to search every scope")
    with _store(ctx) as backend:
        rows = [] if backend is None else backend.search_delegations(query, max_results, scope)
    if as_json:
        echo_json(rows)
        return
    table(
        f"delegations matching {query!r} (best first)",
        ["id", "target", "task", "summary", "completed"],
        [
            [
                r["delegation_id"],
                r["target_tier"],
                _short(r["task"], 40),
                _short(r["summary"], 60),
                _when(r["completed_at"]),
            ]
            for r in rows
        ],
    )


@storage.command()
@click.argument("item_id", metavar="ID")
@_JSON
@click.pass_context
def show(ctx: click.Context, item_id: str, as_json: bool) -> None:
    """Show one delegation (with its child conversation) or one conversation, by id."""
    from .._errors import StorageError

    with _store(ctx) as backend:
        if backend is None:
            raise CLIError(f"no delegation or conversation {item_id!r}: the store is empty")
        kind = "delegation"
        try:
            item = backend.load_delegation_with_messages(item_id)
        except StorageError:
            kind = "conversation"
            try:
                item = backend.load_conversation(item_id)
            except StorageError:
                raise CLIError(
                    f"no delegation or conversation {item_id!r}; list ids with `entropic-mcp storage delegations` "
                    "or `entropic-mcp storage conversations`"
                ) from None
    if as_json:
        echo_json({"kind": kind, **item})
        return
    if kind == "delegation":
        fields = {key: item[key] for key in item if key not in ("messages", "context")}
        fields["context"] = ", ".join(str(c.get("path", c)) for c in item.get("context") or [])
        messages = item["messages"]
    else:
        fields = dict(item["conversation"])
        messages = item["messages"]
    table(
        f"{kind} {item_id}",
        ["field", "value"],
        [[key, "" if value is None else str(value)] for key, value in fields.items()],
    )
    table(
        f"messages ({len(messages)})",
        ["#", "role", "content"],
        [[str(i), str(m.get("role", "")), _short(_content(m), 100)] for i, m in enumerate(messages)],
    )


@storage.command()
@_JSON
@click.pass_context
def stats(ctx: click.Context, as_json: bool) -> None:
    """Counts of conversations, messages, snapshots, delegations and tool calls."""
    with _store(ctx) as backend:
        counts = {} if backend is None else backend.stats()
    if as_json:
        echo_json(counts)
        return
    table("store", ["what", "count"], [[key, str(value)] for key, value in counts.items()])


@storage.command("prune-state")
@click.argument("namespace")
@click.option(
    "--older-than",
    "days",
    type=click.FloatRange(min=0),
    required=True,
    help="Delete documents not saved for this many days (0: every document of the namespace).",
)
@_JSON
@click.pass_context
def prune_state(ctx: click.Context, namespace: str, days: float, as_json: bool) -> None:
    """Delete a plugin's state documents not saved for a while (e.g. entropic.todo lists).

    Lists of conversations that never say they ended (an HTTP client's own conversation keys)
    stay in the store until pruned.
    """
    from .._storage import StateStore

    with _store(ctx) as backend:
        if backend is not None and not isinstance(backend, StateStore):
            raise CLIError(f"the {type(backend).__name__} store keeps no plugin state (it lacks StateStore)")
        pruned = 0 if backend is None else backend.prune_states(namespace, days * 86400)
    if as_json:
        echo_json({"namespace": namespace, "pruned": pruned})
        return
    click.echo(f"pruned {pruned} {namespace} document{'' if pruned == 1 else 's'} older than {days:g} days")
