"""Replay and fork recorded runs (to be built on the recorder store)."""

__all__: list[str] = []
