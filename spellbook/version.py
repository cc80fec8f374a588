"""The package's version: one line, on the ground floor, so a module can name it without
importing the package's public face (``spellbook/__init__.py``) and the build reads it here."""

__version__ = "0.1.0"
