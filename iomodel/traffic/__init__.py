"""Symbolic byte-traffic models, one module per algorithm (see ``base`` for the shared structures)."""
