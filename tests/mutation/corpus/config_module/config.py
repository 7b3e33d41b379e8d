"""Project settings: constants read by the scoring code."""

THRESHOLD = 10
WEIGHTS = {"a": 1.0, "b": 2.5, "c": 0.5}
NAMES = ("alpha", "beta")
DEBUG = False
LIMITS = [0, 100]
