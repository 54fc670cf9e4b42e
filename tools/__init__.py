"""Plug-in sub-commands of ``tidelog`` (see cli/__init__.py)."""
