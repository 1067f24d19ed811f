"""The distribution's version, in a module of its own: the core's modules read it from here, not
from the package (which imports them), and hatch reads it from this file."""

__version__ = "0.1.0"
