"""The command line and the Textual TUI. Importing this package does not import Textual."""

__all__: list[str] = []
