"""Reviewed coding memory and the plast-mem bridge (seed 003)."""
