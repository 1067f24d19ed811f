"""The client pool of one external server: plans, admission, listing, binding, lifetime, records.

Everything here runs on the pool's loop (``_loop.py``), so the bookkeeping needs no locks.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import random
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from .._config import ExternalServerConfig
from ._client import ClientBroken, Listed, PooledClient, ToolListIncompleteError
from ._loop import LocalLoop, PoolLoop

log = logging.getLogger("entropic_mcp.external")

SHARED = "\x00shared"
#: The client a per_conversation server's own listing (the one ``tools/list`` shows) runs on: it
#: belongs to no conversation, and no conversation's call ever runs on it.
DISCOVERY = "\x00discovery"
#: How many times a listing is resolved again for a moving binding before it is refused.
MAX_ROUNDS = 3
RECORDS = 2048


#: How much longer than ``idle_seconds`` a client opened but never handed out is kept.
ORPHAN_GRACE_SECONDS = 30.0


@attrs.frozen
class Binding:
    """Who is asking, at this moment: the conversation and the credentials (identity) it holds."""

    conversation: str
    credentials: str | None = None


class PoolError(Exception):
    """A pool operation that could not run; ``code`` is the machine-readable kind."""

    code = "external_error"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra


class DisconnectedError(PoolError):
    code = "server_disconnected"


class BusyError(PoolError):
    code = "server_busy"


class BindingChangedError(PoolError):
    code = "binding_changed"


class DiscoveryFailedError(PoolError):
    """A listing that failed or was refused: reported as ``tools.discovery_failed``, never as a tool result."""

    code = "tools.discovery_failed"


@attrs.frozen(kw_only=True)
class UseRecord:
    """One use of the pool, for diagnosis. ``key`` is a salted hash, never the conversation id."""

    key: str
    server: str
    plan: str
    operation: str  # connect | list | call | evict | close
    how: str  # wire | joined | cached | -
    client: str  # own | not-needed | none
    wait_ms: float
    outcome: str  # ok | <error code>
    time: float = attrs.field(factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


class _Backoff:
    """Exponential backoff with jitter between reconnection attempts of one client key."""

    __slots__ = ("failures", "next_at", "reason")

    def __init__(self) -> None:
        self.failures = 0
        self.next_at = 0.0
        self.reason = ""

    def fail(self, reason: str, initial: float, ceiling: float) -> float:
        self.failures += 1
        self.reason = reason
        base = min(ceiling, initial * 2 ** (self.failures - 1))
        delay = base / 2 + random.uniform(0, base / 2)
        self.next_at = time.monotonic() + delay
        return delay


class _Entry:
    __slots__ = ("expires", "scope", "tools")

    def __init__(self, tools: list[Any], expires: float | None, scope: str) -> None:
        self.tools = tools
        self.expires = expires
        self.scope = scope

    def current(self, now: float) -> bool:
        return self.expires is None or now < self.expires


class Admission:
    """``max_operations`` slots; a waiter honours its deadline and its cancellation."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._semaphore = asyncio.Semaphore(slots)
        self.in_flight = 0
        self.peak = 0

    def slot(self, deadline: float | None) -> _Slot:
        """``async with admission.slot(deadline) as waited``: one slot, and the seconds waited for it."""
        return _Slot(self, deadline)

    async def acquire(self, deadline: float | None) -> float:
        """Take a slot (waiting at most until ``deadline``); the seconds waited."""
        semaphore = self._semaphore
        if not semaphore.locked():
            # A free slot is taken without suspending: no timer, no clock read.
            await semaphore.acquire()
            waited = 0.0
        else:
            started = time.monotonic()
            if deadline is None:
                await semaphore.acquire()
            else:
                remaining = deadline - started
                try:
                    if remaining <= 0:
                        raise TimeoutError
                    async with asyncio.timeout(remaining):
                        await semaphore.acquire()
                except TimeoutError:
                    raise BusyError(
                        f"no free operation slot before the deadline ({self.slots} in use: "
                        f"max_operations = {self.slots})"
                    ) from None
            waited = time.monotonic() - started
        self.in_flight += 1
        if self.in_flight > self.peak:
            self.peak = self.in_flight
        return waited

    def release(self) -> None:
        self.in_flight -= 1
        self._semaphore.release()


class _Slot:
    """One admitted operation as an async context manager (a class: cheaper than a generator)."""

    __slots__ = ("admission", "deadline")

    def __init__(self, admission: Admission, deadline: float | None) -> None:
        self.admission = admission
        self.deadline = deadline

    async def __aenter__(self) -> float:
        return await self.admission.acquire(self.deadline)

    async def __aexit__(self, *exc: object) -> None:
        self.admission.release()


class Pool:
    """The clients of one external server and everything the pool knows about it.

    Args:
        config: the server's validated ``[external.<name>]`` table.
        root: the project root (a relative ``cwd`` is resolved against it).
        loop: the loop every operation runs on (set when the pool starts, if not given).
        on_listing: called (on the pool loop) with the server's own tool list whenever it is
            read anew, and with ``None`` when the server goes down (its tools are withdrawn).
    """

    def __init__(
        self,
        config: ExternalServerConfig,
        root: Path,
        loop: PoolLoop | LocalLoop | None,
        on_listing: Callable[[list[Any] | None], None],
    ) -> None:
        self.config = config
        self.name = config.name
        self.plan = config.plan
        self.root = root
        self.loop = loop
        self.home = SHARED if self.plan == "shared" else DISCOVERY
        self.clients: OrderedDict[str, PooledClient] = OrderedDict()
        self._records: deque[tuple[Any, ...]] = deque(maxlen=RECORDS)
        self.state = "connecting"
        self.last_error: str | None = None
        self._on_listing = on_listing
        self._opening: dict[str, asyncio.Task[PooledClient]] = {}
        self._cache: dict[str, _Entry] = {}
        self._flights: dict[str, asyncio.Task[Listed]] = {}
        self._private_lists = False
        self._generation = 0
        self._backoff: dict[str, _Backoff] = {}
        self._retiring: set[str] = set()
        self._salt = os.urandom(16)
        #: key_hash per conversation: the records would otherwise hash once per call.
        self._hashes: dict[str | None, str] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._refreshing: asyncio.Task[None] | None = None
        self._dirty = False
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False
        self._outage_reported = False
        self.admission: Admission | None = None

    # -- small helpers -------------------------------------------------------------------------

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def key_hash(self, conversation: str | None) -> str:
        known = self._hashes.get(conversation)
        if known is not None:
            return known
        text = f"{self.name}\x00{self.plan}\x00{conversation or ''}".encode()
        digest = hashlib.sha256(self._salt + text).hexdigest()[:16]
        if len(self._hashes) >= RECORDS:  # one hash per record kept is plenty; start over
            self._hashes.clear()
        self._hashes[conversation] = digest
        return digest

    def record(
        self,
        conversation: str | None,
        operation: str,
        how: str,
        client: str,
        wait: float,
        outcome: str,
    ) -> None:
        # Kept as a tuple, made a UseRecord when read: a frozen record built on every call costs
        # more than the rest of the bookkeeping together.
        entry = (self.key_hash(conversation), operation, how, client, wait, outcome, time.time())
        self._records.append(entry)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("external use %s", self._use_record(entry))

    def _use_record(self, entry: tuple[Any, ...]) -> UseRecord:
        key, operation, how, client, wait, outcome, when = entry
        return UseRecord(
            key=key,
            server=self.name,
            plan=self.plan,
            operation=operation,
            how=how,
            client=client,
            wait_ms=round(wait * 1000.0, 3),
            outcome=outcome,
            time=when,
        )

    @property
    def records(self) -> list[UseRecord]:
        """The last RECORDS uses, oldest first."""
        return [self._use_record(entry) for entry in self._records]

    def client_key(self, binding: Binding) -> str:
        return SHARED if self.plan == "shared" else binding.conversation

    def _admission(self) -> Admission:
        if self.admission is None:
            self.admission = Admission(self.config.max_operations)
        return self.admission

    # -- start, refresh, reconnect ---------------------------------------------------------------

    async def start(self) -> None:
        """The first discovery (on the pool's loop); the sweeper of idle per-conversation clients."""
        self._admission()
        if self.plan == "per_conversation":
            self._spawn(self._sweep())
        await self.refresh()

    async def refresh(self) -> None:
        """Read the server's own list (on its home client) and publish it; on failure, withdraw."""
        binding = Binding(self.home)
        try:
            listed = await self._listing(binding, None, force=True)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reason = _reason(exc)
            self.record(self.home, "list", "wire", "own", 0.0, _code(exc))
            # Once per outage: the reconnection attempts that follow log at debug level.
            level = logging.DEBUG if self._outage_reported else logging.WARNING
            self._outage_reported = True
            log.log(level, "tools.discovery_failed: external server %r: %s", self.name, reason)
            self._down(reason)
            return
        self.state = "connected"
        self.last_error = None
        self._outage_reported = False
        self._on_listing(listed.tools)

    def _schedule_refresh(self) -> None:
        if self._closed:
            return
        if self._refreshing is not None and not self._refreshing.done():
            self._dirty = True
            return

        async def again() -> None:
            while True:
                self._dirty = False
                await self.refresh()
                if not self._dirty or self._closed:
                    return

        self._refreshing = self._spawn(again())

    def _down(self, reason: str) -> None:
        """The server is unreachable: withdraw its tools, drop its lists, reconnect with backoff."""
        was = self.state
        self.state = "disconnected"
        self.last_error = reason
        self._generation += 1
        self._cache.clear()
        if was != "disconnected":
            self._on_listing(None)
        if not self._closed and (self._reconnecting is None or self._reconnecting.done()):
            self._reconnecting = self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = self._backoff.setdefault(self.home, _Backoff())
        while not self._closed and self.state == "disconnected":
            if backoff.next_at <= time.monotonic():
                backoff.fail(
                    self.last_error or "", self.config.backoff_initial_seconds, self.config.backoff_max_seconds
                )
            await asyncio.sleep(max(0.0, backoff.next_at - time.monotonic()))
            if self._closed:
                return
            await self.refresh()
            if self.state == "disconnected":
                backoff.fail(
                    self.last_error or "", self.config.backoff_initial_seconds, self.config.backoff_max_seconds
                )

    # -- clients ----------------------------------------------------------------------------------

    async def _client_for(self, key: str, conversation: str | None, *, force: bool = False) -> PooledClient:
        """The key's client, opened (once, however many ask at the same time) if need be."""
        client = self.clients.get(key)
        if client is not None:
            if client.usable:
                self.clients.move_to_end(key)
                return client
            self.clients.pop(key, None)
        backoff = self._backoff.get(key)
        now = time.monotonic()
        if backoff is not None and backoff.failures and now < backoff.next_at and not force:
            raise DisconnectedError(
                f"server '{self.name}' is disconnected ({backoff.reason}); the next reconnection attempt is in "
                f"{backoff.next_at - now:.1f} s",
                retry_in_seconds=round(backoff.next_at - now, 1),
            )
        opening = self._opening.get(key)
        if opening is None:
            opening = self._opening[key] = self._spawn(self._open(key, conversation))
            opening.add_done_callback(functools.partial(_forget, self._opening, key))
        return await asyncio.shield(opening)

    async def _open(self, key: str, conversation: str | None) -> PooledClient:
        started = time.monotonic()
        client = PooledClient(
            self.config, self.root, key, on_broken=self._client_broken, on_tools_changed=self._tools_changed
        )
        try:
            await client.open(self.config.connect_timeout_seconds)
        except BaseException as exc:
            reason = _reason(exc)
            self._backoff.setdefault(key, _Backoff()).fail(
                reason, self.config.backoff_initial_seconds, self.config.backoff_max_seconds
            )
            self.record(conversation, "connect", "wire", "own", time.monotonic() - started, _code(exc))
            self._spawn(client.aclose())
            if isinstance(exc, Exception) and not isinstance(exc, ClientBroken):
                raise ClientBroken(reason) from exc
            raise
        self._backoff.pop(key, None)
        self.clients[key] = client
        self.record(conversation, "connect", "wire", "own", time.monotonic() - started, "ok")
        self._evict_over_limit(keep=key)
        return client

    def _client_broken(self, client: PooledClient) -> None:
        key = client.key
        if self.clients.get(key) is client:
            self.clients.pop(key, None)
            self._backoff.setdefault(key, _Backoff()).fail(
                client.broken or "", self.config.backoff_initial_seconds, self.config.backoff_max_seconds
            )
            log.warning("external server %r: %s; disconnected", self.name, client.broken)
        self._forget_lists(key)
        if key == self.home and not self._closed:
            self._down(client.broken or "the connection failed")

    def _tools_changed(self, client: PooledClient) -> None:
        """``notifications/tools/list_changed``: drop the lists it may have changed, read again."""
        self._forget_lists(client.key)
        self._schedule_refresh()

    def _forget_lists(self, key: str) -> None:
        self._generation += 1
        if key in (SHARED, DISCOVERY):
            self._cache.clear()
        else:
            self._cache.pop("public", None)
            self._cache.pop(f"private:{key}", None)

    def _use(self, client: PooledClient) -> None:
        client.handed_out = True
        client.in_use += 1
        client.last_used = time.monotonic()

    def _release(self, client: PooledClient) -> None:
        client.in_use -= 1
        client.last_used = time.monotonic()
        if client.in_use == 0 and client.key in self._retiring:
            self._retiring.discard(client.key)
            self._close_client(client, "close")

    def _close_client(self, client: PooledClient, why: str) -> None:
        if self.clients.get(client.key) is client:
            self.clients.pop(client.key, None)
        self.record(None if client.key.startswith("\x00") else client.key, why, "-", "none", 0.0, "ok")
        self._spawn(client.aclose())

    def _evict_over_limit(self, keep: str) -> None:
        """Keep at most ``max_clients``: least recently used first, never one in use."""
        excess = len(self.clients) - self.config.max_clients
        if excess <= 0:
            return
        for key, client in list(self.clients.items()):
            if excess <= 0:
                break
            # A client not yet handed to the caller that opened it is about to be in use.
            if client.in_use == 0 and client.handed_out and key not in (self.home, keep):
                self._close_client(client, "evict")
                excess -= 1

    async def _sweep(self) -> None:
        """Close per-conversation clients idle for ``idle_seconds`` (never one in use)."""
        idle = self.config.idle_seconds
        interval = max(0.05, min(idle / 2, 5.0))
        while not self._closed:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for key, client in list(self.clients.items()):
                if key == self.home or client.in_use or now - client.last_used < idle:
                    continue
                # A client whose opening took longer than ``idle`` is about to be handed to the
                # caller that opened it; one never handed out (its caller gone) goes later.
                if client.handed_out or now - client.last_used >= idle + ORPHAN_GRACE_SECONDS:
                    self._close_client(client, "evict")

    # -- listing ----------------------------------------------------------------------------------

    def _cached(self, binding: Binding, now: float) -> _Entry | None:
        for key in (f"private:{binding.conversation}", "public"):
            entry = self._cache.get(key)
            if entry is not None:
                if entry.current(now):
                    return entry
                del self._cache[key]
        return None

    def _flight_key(self, binding: Binding) -> str:
        key = self.client_key(binding)
        return f"{key}\x00{binding.conversation}" if self._private_lists else key

    async def list(self, resolve: Callable[[], Binding], deadline: float | None = None) -> list[Any]:
        """The tools the caller may see now, under one admitted operation.

        A current cached list is served without touching a client; a listing under way for the
        same key is joined; the binding is resolved again after every wait (at most
        ``MAX_ROUNDS`` rounds). Raises ``DiscoveryFailedError`` (wrapping the cause) or
        ``BindingChangedError``.
        """
        binding = resolve()
        for _round in range(MAX_ROUNDS):
            now = time.monotonic()
            entry = self._cached(binding, now)
            if entry is not None:
                self.record(binding.conversation, "list", "cached", "not-needed", 0.0, "ok")
                return entry.tools
            flight_key = self._flight_key(binding)
            task = self._flights.get(flight_key)
            how = "joined"
            if task is None:
                how = "wire"
                task = self._flights[flight_key] = self._spawn(self._listing(binding, deadline))
                task.add_done_callback(functools.partial(_forget, self._flights, flight_key))
            try:
                if deadline is None:
                    listed = await asyncio.shield(task)
                else:
                    async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                        listed = await asyncio.shield(task)
            except Exception as exc:
                self.record(binding.conversation, "list", how, "own", time.monotonic() - now, _code(exc))
                raise DiscoveryFailedError(
                    f"the tools of '{self.name}' could not be listed: {_reason(exc)}", cause=_code(exc)
                ) from exc
            waited = time.monotonic() - now
            current = resolve()
            if current == binding:
                self.record(binding.conversation, "list", how, "own", waited, "ok")
                return listed.tools
            self.record(binding.conversation, "list", how, "own", waited, "binding_moved")
            binding = current
        raise BindingChangedError(
            f"the caller's binding changed during each of {MAX_ROUNDS} listings of '{self.name}'; refused"
        )

    async def _listing(self, binding: Binding, deadline: float | None, *, force: bool = False) -> Listed:
        """One ``tools/list`` on the binding's own client, inside one admitted slot."""
        generation = self._generation
        key = self.client_key(binding)
        async with self._admission().slot(deadline):
            client = await self._client_for(key, binding.conversation, force=force)
            self._use(client)
            try:
                listed = await client.list_tools(self.config.call_timeout_seconds)
            finally:
                self._release(client)
        if listed.scope == "private":
            self._private_lists = True
        if generation == self._generation:
            self._store(binding, listed)
        return listed

    def _store(self, binding: Binding, listed: Listed) -> None:
        ttl = None if listed.ttl_ms is None else listed.ttl_ms / 1000.0
        if self.config.list_ttl_seconds is not None:
            ttl = self.config.list_ttl_seconds if ttl is None else min(ttl, self.config.list_ttl_seconds)
        if ttl is not None and ttl <= 0:
            return
        expires = None if ttl is None else time.monotonic() + ttl
        cache_key = "public" if listed.scope != "private" else f"private:{binding.conversation}"
        self._cache[cache_key] = _Entry(listed.tools, expires, listed.scope)

    # -- calls ------------------------------------------------------------------------------------

    async def call(self, binding: Binding, tool: str, args: dict[str, Any], deadline: float | None) -> Any:
        """One ``tools/call`` on the binding's own client, inside one admitted slot."""
        if self.plan == "shared" and self.state == "disconnected":
            backoff = self._backoff.get(self.home)
            retry = max(0.0, backoff.next_at - time.monotonic()) if backoff is not None else 0.0
            self.record(binding.conversation, "call", "-", "none", 0.0, DisconnectedError.code)
            raise DisconnectedError(
                f"server '{self.name}' is disconnected ({self.last_error}); it is being reconnected, next attempt "
                f"in {retry:.1f} s: call the tool again after that",
                retry_in_seconds=round(retry, 1),
            )
        started = time.monotonic()
        key = self.client_key(binding)
        admission = self._admission()
        try:
            waited = await admission.acquire(deadline)
            try:
                client = await self._client_for(key, binding.conversation)
                self._use(client)
                try:
                    result = await client.call_tool(tool, args, self.config.call_timeout_seconds)
                finally:
                    self._release(client)
            finally:
                admission.release()
        except BaseException as exc:
            self.record(binding.conversation, "call", "wire", "own", time.monotonic() - started, _code(exc))
            raise
        self.record(binding.conversation, "call", "wire", "own", waited, "ok")
        return result

    # -- conversations and closing -------------------------------------------------------------------

    async def end_conversation(self, conversation: str) -> None:
        """Close the conversation's clients (after their current use) and forget its private lists."""
        self._cache.pop(f"private:{conversation}", None)
        if self.plan != "per_conversation":
            return
        client = self.clients.get(conversation)
        if client is None:
            return
        if client.in_use:
            self._retiring.add(conversation)
        else:
            self._close_client(client, "close")

    async def close(self) -> None:
        self._closed = True
        self.state = "closed"
        for task in list(self._tasks):
            if task is not asyncio.current_task():
                task.cancel()
        clients = list(self.clients.values())
        self.clients.clear()
        await asyncio.gather(*(client.aclose() for client in clients), return_exceptions=True)

    def snapshot(self) -> dict[str, Any]:
        """What the pool holds now (for ``entropic-mcp`` diagnostics and tests)."""
        return {
            "server": self.name,
            "plan": self.plan,
            "state": self.state,
            "last_error": self.last_error,
            "clients": len(self.clients),
            "in_flight": self.admission.in_flight if self.admission else 0,
            "peak_in_flight": self.admission.peak if self.admission else 0,
            "cached_lists": len(self._cache),
        }


def _forget(table: dict[str, Any], key: str, task: Any) -> None:
    if table.get(key) is task:
        del table[key]


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ClientBroken):
        return exc.reason
    if isinstance(exc, PoolError):
        return exc.message
    if isinstance(exc, ToolListIncompleteError):
        return str(exc)
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, TimeoutError):
        return "the caller's deadline passed"
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"the server answered an error: {message}" if type(exc).__name__ == "MCPError" else message


def _code(exc: BaseException) -> str:
    if isinstance(exc, PoolError):
        return exc.code
    if isinstance(exc, ToolListIncompleteError):
        return "tool_list_incomplete"
    if isinstance(exc, ClientBroken):
        return "server_failed"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    if isinstance(exc, TimeoutError):
        return "deadline"
    return "server_error" if type(exc).__name__ == "MCPError" else "error"
