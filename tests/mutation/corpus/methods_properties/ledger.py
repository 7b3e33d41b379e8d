"""A ledger with properties, class and static methods."""


class Ledger:
    currency = "EUR"

    def __init__(self, entries, fee=0.02):
        self.entries = list(entries)
        self.fee = fee

    @property
    def balance(self):
        return sum(self.entries)

    @property
    def fees(self):
        return round(sum(abs(e) for e in self.entries) * self.fee, 6)

    @staticmethod
    def fmt(amount):
        return "%.2f" % amount

    @classmethod
    def from_text(cls, text):
        return cls(float(t) for t in text.split(","))

    def statement(self):
        net = self.balance - self.fees
        return f"{self.fmt(net)} {self.currency}"

    def largest(self, n=2):
        return sorted(self.entries, key=abs, reverse=True)[:n]
