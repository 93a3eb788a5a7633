"""Exception classes of webnn-gpu (the WebNN spec's DOMException names as Python classes).

Each subclasses the built-in exception a Python user would catch:

* :class:`MLTypeError` (``TypeError``): an invalid builder argument, descriptor or option.
* :class:`DataError` (``ValueError``): data of the wrong size or element type.
* :class:`InvalidStateError` (``RuntimeError``): use of a destroyed, built or rented object.
* :class:`OperationError` (``RuntimeError``): a failure of the device or of our own kernels.
* :class:`NotSupportedError` (``NotImplementedError``): valid per spec, but not on this adapter.
"""

from __future__ import annotations

__all__ = [
    "WebNNError",
    "MLTypeError",
    "DataError",
    "InvalidStateError",
    "OperationError",
    "NotSupportedError",
    "where",
]


class WebNNError(Exception):
    """Base class of every exception raised by webnn-gpu."""


class MLTypeError(WebNNError, TypeError):
    """An invalid argument, descriptor or option (the spec's TypeError)."""


class DataError(WebNNError, ValueError):
    """Data with the wrong byte length, element type or value range."""


class InvalidStateError(WebNNError, RuntimeError):
    """The object is destroyed, already built, rented, or its context is lost."""


class OperationError(WebNNError, RuntimeError):
    """The device or one of our kernels failed while doing the work."""


class NotSupportedError(WebNNError, NotImplementedError):
    """Valid per the spec but not supported by this adapter (a data type, a limit)."""


def where(op: str, label: str | None = "") -> str:
    """The prefix of an error message: the operator and, when given, its label."""
    return f"{op} [{label!r}]" if label else op
