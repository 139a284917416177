"""Renderers: each takes a core result object and draws it (terminal, Markdown, HTML)."""

__all__: list[str] = []
