"""privfed.server."""
