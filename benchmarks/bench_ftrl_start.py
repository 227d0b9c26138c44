"""Where FTRL-proximal starts the field models: at their initial model, or at zero.

The field-aware and field-weighted factorization machines start with random latent
vectors (and the field-weighted model with every pair of fields weighing 1), where
McMahan et al.'s FTRL-proximal starts every weight at 0.  polylite centres FTRL's first
proximal term (its beta / alpha) at the initial model, so that the first step moves each
weight from where it is; FTRL's zero state (z = 0) would instead set each weight near 0
on its first step (keeping about |g| / (beta + |g|) of it).  This script fits both field
models by FTRL from both states, with and without an L1 penalty, on ``make_ctr`` click
logs (--rows training rows, --test-rows test rows of the same draw, k = 4, the models'
defaults otherwise), and prints the test log loss, the AUC and the weights each keeps.
The fits are deterministic: one run each.  The zero state is the estimators' private
switch ``_ftrl_from_start = False``, set here on the instance.

    python benchmarks/bench_ftrl_start.py [--rows 100000] [--test-rows 20000]
        [--max-categories 100000] [--epochs 5] [--l1 0 1] [--quick]
"""
import argparse
import warnings

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

from polylite import (FieldAwareFactorizationMachineClassifier,
                      FieldWeightedFactorizationMachineClassifier)
from polylite.datasets import make_ctr

MODELS = {"FFM": FieldAwareFactorizationMachineClassifier,
          "FwFM": FieldWeightedFactorizationMachineClassifier}
STARTS = {"initial model": True, "zero state": False}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--test-rows", type=int, default=20_000)
    parser.add_argument("--max-categories", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--l1", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="5,000 + 2,000 rows, 1,000 categories, 1 epoch")
    args = parser.parse_args(argv)
    if args.quick:
        args.rows, args.test_rows, args.max_categories, args.epochs = 5000, 2000, 1000, 1
    n = args.rows
    X, y, fields = make_ctr(n + args.test_rows, max_categories=args.max_categories,
                            random_state=args.seed, dtype=np.float32)
    X = X.tocsr()
    print(f"data: {n:,} training and {args.test_rows:,} test rows of make_ctr (seed "
          f"{args.seed}), {X.shape[1]:,} features in {int(fields.max()) + 1} fields; "
          f"k = 4, {args.epochs} epochs, solver='ftrl'")
    print(f"\n{'model':6s} {'FTRL starts at':15s} {'l1':>5s} {'test logloss':>12s} "
          f"{'AUC':>7s} {'weights kept':>14s} {'of':>12s}")
    for name, cls in MODELS.items():
        for l1 in args.l1:
            for start, from_start in STARTS.items():
                est = cls(fields=fields, max_iter=args.epochs, random_state=args.seed,
                          solver="ftrl", l1=l1)
                est._ftrl_from_start = from_start
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    est.fit(X[:n], y[:n])
                p = np.clip(est.predict_proba(X[n:])[:, 1], 1e-15, 1 - 1e-15)
                total = est.w_.size + est.P_.size + (
                    est.n_fields_ * (est.n_fields_ + 1) // 2
                    if hasattr(est, "field_weights_") else 0)
                print(f"{name:6s} {start:15s} {l1:5g} {log_loss(y[n:], p):12.5f} "
                      f"{roc_auc_score(y[n:], p):7.4f} {est.n_nonzero_weights_:14,d} "
                      f"{total:12,d}")


if __name__ == "__main__":
    main()
