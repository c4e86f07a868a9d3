"""privfed.deploy."""
