"""A plugin that fails to import."""

import entropic_mcp_no_such_dependency  # noqa: F401
