"""Fit a pipeline of user transformers."""

import fncache
from scalers import Clipper, Pipeline, StandardScaler


@fncache.memoize
def fit_pipeline(data, high=1.5):
    pipe = Pipeline([("scale", StandardScaler()), ("clip", Clipper(high=high))])
    pipe.fit(data)
    return {"params": pipe.steps[1][1].get_params(), "out": [round(x, 6) for x in pipe.output_]}


if __name__ == "__main__":
    from _oracle import report

    report(fit_pipeline, [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
