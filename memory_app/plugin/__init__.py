"""The operator-memory plugin (seed 000): Tess's operational memory of the work, behind replaceable adapters.

Use ``operator_memory_plugin()`` and pass it your Scope; see ``contract`` for the types and ``registry``
for adapter kinds, ``observers`` for capture observers.
"""

from .observers import register_capture_observer
from .registry import create_operator_memory_plugin, operator_memory_plugin, register_operator_memory_adapter

__all__ = [
    "create_operator_memory_plugin",
    "operator_memory_plugin",
    "register_capture_observer",
    "register_operator_memory_adapter",
]
