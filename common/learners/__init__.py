"""privfed.common.learners."""
