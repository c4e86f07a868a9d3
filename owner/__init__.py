"""privfed.owner."""
