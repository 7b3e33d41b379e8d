"""Two scalers and a pipeline."""

from base import BaseEstimator, TransformerMixin


class StandardScaler(BaseEstimator, TransformerMixin):
    def __init__(self, with_mean=True):
        self.with_mean = with_mean

    def fit(self, X):
        n = len(X)
        self.mean_ = sum(X) / n if self.with_mean else 0.0
        self.scale_ = (sum((x - self.mean_) ** 2 for x in X) / n) ** 0.5 or 1.0
        return self

    def transform(self, X):
        return [(x - self.mean_) / self.scale_ for x in X]


class Clipper(BaseEstimator, TransformerMixin):
    def __init__(self, low=-1.0, high=1.0):
        self.low = low
        self.high = high

    def fit(self, X):
        return self

    def transform(self, X):
        return [min(max(x, self.low), self.high) for x in X]


class Pipeline(BaseEstimator):
    def __init__(self, steps):
        self.steps = steps

    def fit(self, X):
        for _, step in self.steps:
            X = step.fit_transform(X)
        self.output_ = X
        return self
