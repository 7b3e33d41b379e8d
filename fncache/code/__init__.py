"""The code wing: what a function *is* for caching (its fingerprint), and what it depends on."""
