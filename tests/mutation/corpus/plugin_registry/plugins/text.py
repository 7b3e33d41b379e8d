"""Text plugins."""

from plugins import Plugin


class Upper(Plugin):
    name = "upper"
    priority = 2

    def run(self, text):
        return super().run(text).upper()


class Reverse(Plugin):
    name = "reverse"
    priority = 1

    def run(self, text):
        return text[::-1]


class Strip(Plugin):
    name = "strip"
    priority = 3

    def run(self, text):
        return text.strip(" .")
