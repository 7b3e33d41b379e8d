"""Class attributes, overridden in subclasses."""


class Plan:
    RATE = 0.10
    INCLUDED = 100
    UNITS = {"gb": 1, "tb": 1000}

    def __init__(self, usage, unit="gb"):
        self.usage = usage * self.UNITS[unit]

    def cost(self):
        extra = max(self.usage - self.INCLUDED, 0)
        return round(extra * self.RATE, 4)

    @classmethod
    def describe(cls):
        return f"{cls.__name__}: {cls.INCLUDED} included at {cls.RATE}"


class ProPlan(Plan):
    RATE = 0.05
    INCLUDED = 1000

    def cost(self):
        return super().cost() + 20
