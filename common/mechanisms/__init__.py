"""privfed.common.mechanisms."""
