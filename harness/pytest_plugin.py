"""pytest plugin: ducktape-style fixtures for kipcheck (filled in by the harness)."""
