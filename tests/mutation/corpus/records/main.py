"""Summarize sensor readings."""

import fncache
from models import Reading, Serializer, Window


@fncache.memoize
def summarize(raw, start):
    readings = [Reading(s, v) for s, v in raw]
    chosen = Window(start).select(readings)
    kelvin = [r.in_kelvin() for r in chosen]
    return {"sensors": [r.sensor for r in chosen], "kelvin": Serializer().dump(kelvin)}


if __name__ == "__main__":
    from _oracle import report

    report(summarize, [("a", 20.5), ("b", -3.0), ("c", 11.25)], 1)
