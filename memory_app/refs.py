"""Reference resolvers for pinned contexts (seed 002): ``session:<id>``, ``approval:<id>``,
``handoff:<id>``, ``audit:<id>``.

The app that owns each kind of object registers a resolver at start-up (``AppConfig.ready``); memory_app
never imports those apps. A resolver answers one question: can the scope's operator read that object in
Tess right now? Pinning is refused when it cannot, and recall skips a pin that no longer resolves.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tess_site.scope import Scope

ReferenceResolver = Callable[[Scope, str], bool]  # (scope, object id) -> readable now?

REF_KINDS = ("session", "approval", "handoff", "audit")
REF_RE = re.compile(r"^(?P<kind>session|approval|handoff|audit):(?P<id>[A-Za-z0-9_-]{1,64})$")

_resolvers: dict[str, ReferenceResolver] = {}


def register_reference_resolver(kind: str, resolver: ReferenceResolver) -> None:
    if kind not in REF_KINDS:
        raise ValueError(f"unknown reference kind {kind!r}")
    _resolvers[kind] = resolver


def resolve(scope: Scope, ref: str) -> bool:
    """True only if ``ref`` is well-formed, its kind has a resolver, and the operator can read it now."""
    match = REF_RE.match(ref)
    if match is None:
        return False
    resolver = _resolvers.get(match.group("kind"))
    return bool(resolver and resolver(scope, match.group("id")))
