"""The call pipeline: every stage of a tool call, in one package (docs/architecture.md).

``_spine`` runs the stages in order (``CallPipeline.run``); ``_permission`` works out a call's
permission parts and verdict, ``_rules`` holds the rules and verdict records it judges with,
``_keys`` the access keys, ``_guards`` the duplicate and loop guards, ``_deadlines`` the per-call
deadlines, ``_hooks`` the hook calls, ``_batch`` a model turn's calls, ``_idempotency`` a call run once
per idempotency key (around the whole run, at the manager's ``call``), ``_outcome`` what a call
and a batch came to.

Only the outcome records are named here: importing them (storage, serve, hookspecs do) must
not load the stages.
"""

from __future__ import annotations

from ._outcome import BatchOutcome, CallOutcome

__all__ = ["BatchOutcome", "CallOutcome"]
