"""The one base class of the errors a user sees.

A :class:`CascadeError` is a user-facing failure: its message is one line naming the file or field
and what was expected (docs/architecture.md "Command line"). The command line catches this one class
and prints that line with exit code 2, so a new error class needs no entry anywhere else: it
subclasses ``CascadeError`` (and, where callers catch it by a builtin kind, that builtin too, e.g.
``class DataError(CascadeError, ValueError)``).
"""
from __future__ import annotations


class CascadeError(Exception):
    """A user-facing failure: the message is one line naming the file/field and what was
    expected."""


__all__ = ["CascadeError"]
