"""A notebook exported as a script: cells, globals defined between them, the cached step in __main__."""

# %%
import fncache

# %%
THRESHOLD = 0.5
weights = [0.2, 0.3, 0.5]


def score(row):
    return sum(w * v for w, v in zip(weights, row))


# %%
def label(s):
    if s > THRESHOLD:
        return "high"
    elif s > THRESHOLD / 2:
        return "mid"
    return "low"


# %%
@fncache.memoize
def classify(rows):
    labels = [label(score(r)) for r in rows]
    return {"labels": labels, "n_high": labels.count("high")}


# %%
if __name__ == "__main__":
    from _oracle import report

    report(classify, [[1, 1, 1], [0, 1, 0.4], [0, 0, 0.2], [2, 0, 0]])
