"""Plug-in sub-commands of ``tidelog`` (see broker/cli.py)."""
