"""Screens of the graphtape TUI."""
