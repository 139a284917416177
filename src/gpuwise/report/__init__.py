"""Renderers: each takes a core result object and draws it (terminal, Markdown, HTML)."""
