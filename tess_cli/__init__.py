"""``tess``: the command-line client of the Tess API (REST over httpx, the live stream over websockets).

It talks to the server only; it imports no server package (an import-linter contract enforces it).
"""

__version__ = "0.1.0"
