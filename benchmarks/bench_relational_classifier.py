"""Coordinate descent classifiers on relational input against the same on the expanded
CSR rows: the training objective after each epoch, and the seconds per epoch.

For each data set and each classification loss (logistic, squared hinge),
:class:`~polylite.FactorizationMachineClassifier` (``solver="cd"``, ``tol=0``, the
estimator's other defaults, k = 10) is fitted for ``--epochs`` epochs on the
:class:`~polylite.RelationalMatrix` and on its ``to_csr()``, from the same initial
parameters; the table gives the training objective (penalised mean loss, the
estimator's own) after selected epochs and the ratio relational / CSR.  Below each
loss: the CPU seconds per epoch on both inputs (median over the epochs), and how the
relational fit's block passes ended (accepted on the bound of the objective's change
computed from the table rows, accepted on the change computed from the interactions,
or undone and taken again on the loss's upper bound; ``polylite._engine._cd``'s
``TABLE_CHECKS``).

Data sets (``--datasets``):

- ``movielens``: MovieLens 100K, the u1 training ratings, a click-like label
  (rating >= 4: 55% of them), in the ``side`` encoding of ``bench_relational.py``
  (ids, the items each user rated, the users who rated each item, user and movie side
  features; ``--encoding`` another of ``bench_bayes_movielens.py``); degree 2.
- ``synthetic``: ``make_recommender(20_000, 1_000, 500, 2, implicit="both",
  output="relational", popularity_exponent=0.5)``, labelled by the sign of its target
  less the median; degree 2.
- ``synthetic3``: the same at degree 3 (factor matrices of degrees 2 and 3).

    python benchmarks/bench_relational_classifier.py [--data ../shared/data/movielens/ml-100k]
        [--datasets movielens synthetic synthetic3] [--epochs 20] [--encoding side]
        [--quick]

``--quick`` (a check that the script runs): 2,000 synthetic rows, MovieLens in the
``one-hot`` encoding, 3 epochs unless ``--epochs`` says otherwise.
"""
import argparse
import os
import resource
import sys
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_bayes_movielens import ENCODINGS  # noqa: E402
from bench_relational import movielens_side  # noqa: E402

from polylite import FactorizationMachineClassifier  # noqa: E402
from polylite.datasets import make_recommender  # noqa: E402
from polylite._engine import _cd  # noqa: E402

LOSSES = ("logistic", "squared_hinge")
REPORT_EPOCHS = (1, 2, 3, 5, 10, 20, 50, 100, 200)


def movielens(args):
    ml = movielens_side(args.data, args.encoding)
    X, Xc = ml["relational"][0], ml["csr"][0]
    y = (ml["y"][0] >= 4).astype(int)
    title = (f"MovieLens 100K u1, rating >= 4 ({y.mean():.0%} of {len(y)}), "
             f"'{args.encoding}' encoding ({Xc.nnz / Xc.shape[0]:.0f} nonzeros per row "
             f"expanded, {Xc.shape[1]} columns; {X.nnz} stored), degree 2")
    return X, Xc, y, 2, title


def synthetic(args, degree=2):
    rows, users, items = (2_000, 200, 100) if args.quick else (20_000, 1_000, 500)
    X, target = make_recommender(rows, users, items, 2, implicit="both",
                                 output="relational", popularity_exponent=0.5,
                                 random_state=0)
    y = (target > np.median(target)).astype(int)
    Xc = X.to_csr()
    title = (f"synthetic, {rows} rows of {users} users and {items} items, both implicit "
             f"sets ({Xc.nnz / Xc.shape[0]:.0f} nonzeros per row expanded, {Xc.shape[1]} "
             f"columns; {X.nnz} stored), degree {degree}")
    return X, Xc, y, degree, title


DATASETS = {"movielens": movielens, "synthetic": synthetic,
            "synthetic3": lambda args: synthetic(args, degree=3)}


def fit(X, y, loss, degree, epochs):
    """The objective after each epoch, the CPU seconds of each epoch and the counts of
    the table checks of a fit of ``epochs`` epochs."""
    objectives, seconds = [], []
    checks = np.zeros(len(_cd.TABLE_CHECKS), dtype=np.int64)
    original = _cd.cd_epoch

    def epoch(*args, **kwargs):
        start = resource.getrusage(resource.RUSAGE_SELF)
        out = original(*args, table_checks=checks, **kwargs)
        end = resource.getrusage(resource.RUSAGE_SELF)
        seconds.append(end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime)
        return out

    clf = FactorizationMachineClassifier(loss=loss, degree=degree, n_components=10,
                                         solver="cd", max_iter=epochs, tol=0,
                                         random_state=0)
    clf._epoch_callback = lambda report: objectives.append(report.objective)
    _cd.cd_epoch = epoch
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(X, y)
    finally:
        _cd.cd_epoch = original
    return np.array(objectives), np.array(seconds), checks


def run(name, args):
    X, Xc, y, degree, title = DATASETS[name](args)
    print(f"\n== {name}: {title}; k = 10, {args.epochs} epochs", flush=True)
    print(f"{'loss':>14} {'epoch':>6} {'relational':>12} {'CSR':>12} {'ratio':>8}")
    for loss in LOSSES:
        rel, rel_seconds, checks = fit(X, y, loss, degree, args.epochs)
        csr, csr_seconds, _ = fit(Xc, y, loss, degree, args.epochs)
        for epoch in [e for e in REPORT_EPOCHS if e <= args.epochs]:
            print(f"{loss:>14} {epoch:>6} {rel[epoch - 1]:>12.6f} {csr[epoch - 1]:>12.6f} "
                  f"{rel[epoch - 1] / csr[epoch - 1]:>8.4f}")
        rel_epoch, csr_epoch = np.median(rel_seconds), np.median(csr_seconds)
        print(f"{'':>14} CPU s per epoch: relational {rel_epoch:.4f}, CSR {csr_epoch:.4f} "
              f"(x {csr_epoch / max(rel_epoch, 1e-9):.1f})")
        print(f"{'':>14} block passes: " + ", ".join(
            f"{count} {what}" for what, count in zip(_cd.TABLE_CHECKS, checks)), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=os.path.join(
        HERE, "..", "..", "shared", "data", "movielens", "ml-100k"))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS),
                        choices=list(DATASETS))
    parser.add_argument("--epochs", type=int, default=None,
                        help="epochs of each fit (default 20; 3 with --quick)")
    parser.add_argument("--encoding", default=None, choices=ENCODINGS,
                        help="MovieLens's encoding (default side; one-hot with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="small data and few epochs: a check that the script runs")
    args = parser.parse_args()
    if args.epochs is None:
        args.epochs = 3 if args.quick else 20
    if args.encoding is None:
        args.encoding = "one-hot" if args.quick else "side"
    for name in args.datasets:
        if name == "movielens" and not os.path.isdir(args.data):
            print(f"\n== movielens: skipped, no data at {args.data}")
            continue
        run(name, args)


if __name__ == "__main__":
    main()
