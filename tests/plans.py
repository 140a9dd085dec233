"""What PostgreSQL does for a query: ``EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)`` read back as figures.

For tests that a list's cost follows the caller's rows, not the tenant's: compare the shared buffers a query
touches before and after the tenant fills with other people's rows, and look for sequential scans. Counting
buffers, not timing, keeps such tests deterministic on a loaded machine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.db import connection
from django.db.models import Model, QuerySet


@dataclass(frozen=True)
class Plan:
    tree: dict[str, Any]

    @property
    def buffers(self) -> int:
        """Shared buffers the whole query touched (hit or read); the top node counts its children's."""
        return int(self.tree.get("Shared Hit Blocks", 0)) + int(self.tree.get("Shared Read Blocks", 0))

    def nodes(self) -> Iterator[dict[str, Any]]:
        stack = [self.tree]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(node.get("Plans", []))

    def seq_scanned(self, model: type[Model]) -> bool:
        table = model._meta.db_table
        return any(n["Node Type"] == "Seq Scan" and n.get("Relation Name") == table for n in self.nodes())

    def __str__(self) -> str:
        """One line a node: type, relation and index, rows, buffers (for assertion messages)."""
        lines: list[str] = []

        def walk(node: dict[str, Any], depth: int) -> None:
            where = " ".join(str(node[k]) for k in ("Relation Name", "Index Name") if k in node)
            touched = int(node.get("Shared Hit Blocks", 0)) + int(node.get("Shared Read Blocks", 0))
            lines.append(f"{'  ' * depth}{node['Node Type']} {where} rows={node.get('Actual Rows')} buffers={touched}")
            for child in node.get("Plans", []):
                walk(child, depth + 1)

        walk(self.tree, 0)
        return "\n".join(lines)


def explain(queryset: QuerySet[Any]) -> Plan:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", params)
        raw = cursor.fetchone()[0]
    document = json.loads(raw) if isinstance(raw, str) else raw
    return Plan(document[0]["Plan"])


def analyze(*models: type[Model]) -> None:
    with connection.cursor() as cursor:
        for model in models:
            cursor.execute(f"ANALYZE {connection.ops.quote_name(model._meta.db_table)}")
