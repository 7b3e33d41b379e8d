"""An inventory driven by a table of handlers; one handler carries a function attribute."""


def _add(stock, item, qty):
    stock[item] = stock.get(item, 0) + qty


def _remove(stock, item, qty):
    if stock.get(item, 0) < qty:
        raise ValueError(f"not enough {item}")
    stock[item] -= qty


def _scale(stock, item, qty):
    stock[item] = stock.get(item, 0) * qty * _scale.factor


_scale.factor = 2

HANDLERS = {"add": _add, "remove": _remove, "scale": _scale}


def apply(ops):
    stock = {}
    errors = []
    for op, item, qty in ops:
        try:
            HANDLERS[op](stock, item, qty)
        except ValueError as e:
            errors.append(str(e))
    return stock, errors
