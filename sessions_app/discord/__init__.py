"""The Discord channel: the interactions endpoint, linking Discord users to Tess users, channel bindings,
deferred replies through the interaction webhook, and approval notices (seed 001, "Discord plugin").

An adapter only: it verifies the caller, builds an ingress envelope and hands it to the gateway. It never
calls runtime providers, tmux or Matrix (an import-linter contract in pyproject.toml enforces it).
"""
