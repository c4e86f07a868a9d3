"""privfed.common."""
