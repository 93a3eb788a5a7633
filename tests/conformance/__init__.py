"""Replay of the WebNN web-platform-tests conformance vectors (see wpt.py and data/SOURCE.md)."""
