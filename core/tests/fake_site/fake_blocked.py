"""A plugin that must never be imported when blocked."""

raise RuntimeError("fake_blocked was imported although it is blocked")
