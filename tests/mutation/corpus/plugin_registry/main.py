"""Apply registered plugins in priority order."""

import fncache
import plugins.text  # noqa: F401 - registers the text plugins
from plugins import REGISTRY


@fncache.memoize
def process(text, names):
    chain = sorted((REGISTRY[n]() for n in names), key=lambda p: p.priority, reverse=True)
    for plugin in chain:
        text = plugin.run(text)
    return {"text": text, "chain": [repr(p) for p in chain]}


if __name__ == "__main__":
    from _oracle import report

    report(process, "  hello plugins. ", ["upper", "reverse", "strip"])
