"""Widgets of the run and runs screens, one job each."""
