"""Typed errors of operator memory: stable codes clients and the confirm outcome branch on."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import DatabaseError, IntegrityError
from rest_framework import status

from approvals_app.cards import Unavailable
from tess_site.errors import Conflict, InvalidInput, NotFound, TessError

logger = logging.getLogger(__name__)


class InvalidMemoryInput(InvalidInput):
    code = "validation_error"


class AmbiguousShape(InvalidInput):
    code = "ambiguous_shape"
    default_message = "Say exactly what to forget: a category and a slot for one note, or all=true for everything."


class MemberDataRefused(InvalidInput):
    code = "member_data_refused"
    default_message = "Operator memory never holds end-customer data (e-mail addresses, member ids)."


class DuplicateContent(Conflict):
    code = "duplicate_content"
    default_message = "Another slot of this category already holds the same note."


class SlotInUse(Conflict):
    code = "slot_in_use"
    default_message = "This slot already holds a different note; correct it instead."


class CategoryFull(Conflict):
    code = "category_full"
    default_message = "This category is full; forget a note first."


class MemoryNotFound(NotFound):
    code = "memory_not_found"
    default_message = "You have no note in that slot."


class ReferenceKindUnsupported(InvalidInput):
    code = "reference_kind_unsupported"
    default_message = "Tess cannot check references of this kind yet, so it cannot pin them."


class ReferenceNotReadable(InvalidInput):
    code = "reference_not_readable"
    default_message = "You cannot read the referenced object in Tess now, so it cannot be pinned."


class MemoryOff(TessError):
    code = "memory_off"
    status_code = status.HTTP_409_CONFLICT
    default_message = (
        "Operator memory is not served to you (switched off, or you are not an operator); nothing was read or written."
    )


class MemoryUnavailable(Unavailable):
    code = "memory_unavailable"
    default_message = "Operator memory cannot be reached right now; retry shortly. Nothing was changed."


P = ParamSpec("P")
R = TypeVar("R")


def loud(fn: Callable[P, R]) -> Callable[P, R]:
    """A database failure inside ``fn`` becomes ``MemoryUnavailable`` (503, Retry-After), never an empty memory."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except MemoryUnavailable:
            raise
        except Unavailable as exc:
            raise MemoryUnavailable() from exc
        except IntegrityError:
            raise
        except DatabaseError as exc:
            logger.error("database error in %s: %s", fn.__qualname__, exc.__class__.__name__)
            raise MemoryUnavailable() from exc

    return wrapper
