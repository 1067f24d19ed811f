"""The project's own tests run with broken plugins as errors (never silently skipped)."""

import os

os.environ["ENTROPIC_MCP_STRICT_PLUGINS"] = "1"
