"""Operator tools behind the ``pylog`` command line (one module per command)."""
