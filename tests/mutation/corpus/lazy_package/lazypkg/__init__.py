"""A local package whose modules import each other lazily, inside functions."""
