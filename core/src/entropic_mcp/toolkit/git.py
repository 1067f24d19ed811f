"""The git configuration a plugin running git neutralises, as the core's own git calls do."""

from .._gitconfig import DYNAMIC_KEYS as GIT_DYNAMIC_KEYS
from .._gitconfig import NEUTRALISING_CONFIG as GIT_NEUTRALISING_CONFIG
from .._gitconfig import overrides_for as git_overrides_for

__all__ = ["GIT_DYNAMIC_KEYS", "GIT_NEUTRALISING_CONFIG", "git_overrides_for"]
