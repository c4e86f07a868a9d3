"""privfed.proto."""
