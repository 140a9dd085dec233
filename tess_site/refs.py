"""Reference resolvers for pinned contexts (seed 002): ``session:<id>``, ``approval:<id>``,
``handoff:<id>``, ``audit:<id>``.

The app that owns each kind of object registers a resolver at start-up (``AppConfig.ready``); memory_app
never imports those apps. A resolver answers one question: can the scope's operator read that object in
Tess right now? Pinning is refused when it cannot (or when no app resolves that kind yet), and recall skips
a pin that no longer resolves. A resolver may also answer for many ids at once (``many``), so recall
re-grounds every pin of a kind in one query.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable

from tess_site.scope import Scope

ReferenceResolver = Callable[[Scope, str], bool]  # (scope, object id) -> readable now?
ManyReferenceResolver = Callable[[Scope, list[str]], set[str]]  # (scope, ids) -> the readable ones

REF_KINDS = ("session", "approval", "handoff", "audit")
REF_RE = re.compile(r"^(?P<kind>session|approval|handoff|audit):(?P<id>[A-Za-z0-9_-]{1,64})$")

_resolvers: dict[str, ReferenceResolver] = {}
_many_resolvers: dict[str, ManyReferenceResolver] = {}


def register_reference_resolver(
    kind: str, resolver: ReferenceResolver, *, many: ManyReferenceResolver | None = None
) -> None:
    if kind not in REF_KINDS:
        raise ValueError(f"unknown reference kind {kind!r}")
    _resolvers[kind] = resolver
    if many is not None:
        _many_resolvers[kind] = many
    else:
        _many_resolvers.pop(kind, None)


def unregister_reference_resolver(kind: str) -> None:
    """For tests that need a kind nobody resolves."""
    _resolvers.pop(kind, None)
    _many_resolvers.pop(kind, None)


def parse_ref(ref: str) -> tuple[str, str] | None:
    match = REF_RE.match(ref)
    return (match.group("kind"), match.group("id")) if match else None


def has_resolver(kind: str) -> bool:
    return kind in _resolvers


def resolve(scope: Scope, ref: str) -> bool:
    """True only if ``ref`` is well-formed, its kind has a resolver, and the operator can read it now."""
    parsed = parse_ref(ref)
    if parsed is None:
        return False
    resolver = _resolvers.get(parsed[0])
    return bool(resolver and resolver(scope, parsed[1]))


def resolve_many(scope: Scope, refs: Iterable[str]) -> set[str]:
    """The subset of ``refs`` the operator can read now: one call per kind where a batch resolver exists."""
    by_kind: dict[str, list[str]] = defaultdict(list)
    for ref in refs:
        parsed = parse_ref(ref)
        if parsed is not None and parsed[0] in _resolvers:
            by_kind[parsed[0]].append(parsed[1])
    readable: set[str] = set()
    for kind, ids in by_kind.items():
        many = _many_resolvers.get(kind)
        if many is not None:
            found = many(scope, ids)
        else:
            found = {object_id for object_id in ids if _resolvers[kind](scope, object_id)}
        readable.update(f"{kind}:{object_id}" for object_id in found)
    return readable
