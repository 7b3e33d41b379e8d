"""The package's public entry points; imports are inside the functions (cycle avoidance)."""


def summarize(values):
    from .stats import spread

    import lazypkg.fmt

    return lazypkg.fmt.as_text(spread(values), len(values))


def normalize(values):
    from lazypkg import stats

    lo = min(values)
    return [stats.scale(v - lo) for v in values]
