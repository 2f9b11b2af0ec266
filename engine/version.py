"""The engine version: part of every score document and score key."""

__version__ = "0.1.0"
