"""The thin CLI: parse -> call the core -> render. No logic lives here."""
