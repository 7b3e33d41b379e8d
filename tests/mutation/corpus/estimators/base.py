"""A scikit-learn-style estimator API built on abstract base classes."""

import abc


class BaseEstimator(abc.ABC):
    def get_params(self):
        return {k: v for k, v in sorted(vars(self).items()) if not k.endswith("_")}

    @abc.abstractmethod
    def fit(self, X):
        """Learn from X."""


class TransformerMixin(abc.ABC):
    @abc.abstractmethod
    def transform(self, X):
        """Transform X."""

    def fit_transform(self, X):
        return self.fit(X).transform(X)
