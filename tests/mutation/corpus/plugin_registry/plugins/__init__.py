"""Plugins register themselves by subclassing Plugin."""

REGISTRY = {}


class Plugin:
    name = "base"
    priority = 0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        REGISTRY[cls.name] = cls

    def run(self, text):
        return text

    def __repr__(self):
        return f"{type(self).__name__}({self.priority})"
