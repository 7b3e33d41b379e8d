"""Features of a signal."""

import fncache
import numpy as np
from features import CLIP, smooth, trend, zscore


@fncache.memoize
def featurize(values):
    x = np.asarray(values, dtype=float)
    z = np.clip(zscore(x), -CLIP, CLIP)
    return {"smooth": np.round(smooth(z), 9).tolist(), "trend": [round(t, 9) for t in trend(x)]}


if __name__ == "__main__":
    from _oracle import report

    report(featurize, [3.0, 4.5, 4.0, 6.5, 8.0, 7.5, 9.0])
