"""Small click data of one-hot fields for the tests of the field models."""
import numpy as np
import pandas as pd

from polylite import FieldEncoder

# The field of each of the columns :func:`encoded` makes, as an array.
FIELDS = [0] * 6 + [1] * 6 + [2] * 5 + [3] * 5


def clicks(n=2000, seed=0):
    """Rows of four categorical columns (a, b: 6 levels, c, e: 5) whose click depends on
    one pair of fields, the parity of a against that of b; the pairs with the noise
    fields c and e carry nothing."""
    rng = np.random.RandomState(seed)
    a, b = rng.randint(0, 6, n), rng.randint(0, 6, n)
    c, e = rng.randint(0, 5, n), rng.randint(0, 5, n)
    logit = 2.0 * ((a % 2) == (b % 2)) - 1.0
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-2 * logit))).astype(int)
    return pd.DataFrame({"a": a, "b": b, "c": c, "e": e}), y


def encoded(n, seed=0):
    """(fitted FieldEncoder, its one-hot rows of :func:`clicks`, the clicks): 22 columns
    in 4 fields (``FIELDS``)."""
    frame, y = clicks(n, seed)
    encoder = FieldEncoder(user="a", item="b", context_features={
        "c": "categorical", "e": "categorical"}).fit(frame)
    return encoder, encoder.transform(frame), y
