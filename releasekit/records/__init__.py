"""Typed models of the files of the release directory (and of today's tool's files)."""
