"""The tuned comparison of ``bench_ranking.py --tune`` (see its docstring): every tool's
hyperparameters chosen on the mean P@10 over validation splits of the training
positives, then the chosen settings on the test split, and the ids-only whole-data FM
beside ``implicit``'s ALS at the same k on one thread; and ``--folds``: the ids-only
settings it chose on the test splits of the five folds."""
import itertools
import json
import os
import types

import numpy as np
import scipy.sparse as sp

import _results
import _ranking_data as D

VALIDATION_FRACTION = 0.2
VALIDATION_SEEDS = (0, 1, 2)   # the validation splits a setting's mean P@10 is taken over
EPOCHS_ALS = 15   # iterations of implicit's ALS and epochs of the whole-data FM (and twice)
SAME_K = 16       # the k of the one-thread comparison
ALS_MAX_K = 64    # the largest k at which the whole-data FM's grid tries side_solver="als"
FOLDS = ("u1", "u2", "u3", "u4", "u5")


def grid(**axes):
    """Every combination of the axes' values, as dicts."""
    names = list(axes)
    return [dict(zip(names, values)) for values in itertools.product(*axes.values())]


def ials_epochs(settings):
    """Each setting at EPOCHS_ALS and 2 * EPOCHS_ALS epochs of one sweep of each side,
    at EPOCHS_ALS epochs of two sweeps, and, up to ALS_MAX_K factors, at EPOCHS_ALS
    epochs of exact steps of the users' and the items' factors (``side_solver="als"``,
    whose k x k solves cost k^3 per user and item)."""
    return [{**params, "max_iter": epochs, "side_sweeps": sweeps} for params in settings
            for epochs, sweeps in ((EPOCHS_ALS, 1), (2 * EPOCHS_ALS, 1), (EPOCHS_ALS, 2))
            ] + [{**params, "max_iter": EPOCHS_ALS, "side_sweeps": 1, "side_solver": "als"}
                 for params in settings if params["n_components"] <= ALS_MAX_K]


# The grids searched on the validation splits, per tool: (label, features, scorer, grid,
# the peer package it needs or None).  The whole-data models (implicit's ALS and the
# whole-data FM) run EPOCHS_ALS or 2 * EPOCHS_ALS epochs.
def _tools():
    epochs = [EPOCHS_ALS, 2 * EPOCHS_ALS]
    return [
        ("implicit ALS", "ids", implicit_scores,
         grid(factors=[16, 32, 64, 128], regularization=[3.0, 10.0, 20.0, 30.0, 50.0],
              alpha=[1.0, 2.0, 3.0, 5.0], iterations=epochs), "implicit"),
        ("LightFM WARP", "ids", lightfm_scores,
         grid(no_components=[10, 32, 64], epochs=[10, 30, 50]), "lightfm-next"),
        ("polylite FM WARP", "ids+side+rated", polylite_scorer(D.POLYLITE_SIDE_RATED),
         grid(n_components=[10, 32], max_iter=[10, 15, 20]), None),
        ("polylite FM iALS", "ids", polylite_scorer(D.POLYLITE_IDS, loss="ials",
                                                    fit_linear=False),
         # one penalty for every column (frequency_exponent 0), and frequency-scaled
         # penalties (1), whose best beta is larger; one sweep of each side per epoch
         # (15 or 30 epochs), or two (15 epochs, about the CPU time of 30 of one)
         ials_epochs(grid(n_components=[16, 32, 64, 128], alpha0=[0.1, 0.2, 0.3, 0.5],
                          beta=[1e-4, 1.4e-4, 2e-4, 3e-4], frequency_exponent=[0.0]))
         + ials_epochs(grid(n_components=[32, 64, 128], alpha0=[0.05, 0.1, 0.2],
                            beta=[1e-4, 1.4e-4, 2e-4, 3e-4], frequency_exponent=[1.0])),
         None),
        ("polylite FM iALS", "ids+side+rated",
         polylite_scorer(D.POLYLITE_SIDE_RATED, own_item_left_out=True, loss="ials"),
         # frequency-scaled penalties: one penalty for every column ranks lower with
         # the rated items' and side features' columns
         grid(n_components=[64, 128], alpha0=[0.1, 0.2, 0.3], beta=[3e-4, 4e-4, 5e-4],
              frequency_exponent=[1.0], max_iter=epochs), None),
    ]


# ---- the validation splits -------------------------------------------------------------

def validation_split(data, seed=0):
    """``data`` with a random VALIDATION_FRACTION of its training positives held out as
    the evaluated positives: the models see the rest; the users with held-out positives
    are evaluated, their other u1.base items (any rating) set aside."""
    n = len(data.train["user_id"])
    held = np.zeros(n, dtype=bool)
    held[np.random.default_rng(seed).permutation(n)[:int(round(VALIDATION_FRACTION * n))]] \
        = True
    u = np.searchsorted(data.user_ids, data.train["user_id"])
    i = np.searchsorted(data.item_ids, data.train["item_id"])
    shape = data.positives.shape

    def matrix(mask):
        return sp.csr_matrix((np.ones(int(mask.sum()), dtype=np.float32),
                              (u[mask], i[mask])), shape=shape)

    held_out = matrix(held)
    rows = np.flatnonzero(held_out.getnnz(axis=1) > 0)
    relevant = held_out[rows].toarray() > 0
    return types.SimpleNamespace(**{
        **vars(data), "train": {key: value[~held] for key, value in data.train.items()},
        "positives": matrix(~held), "test_users": data.user_ids[rows], "test_rows": rows,
        "relevant": relevant, "exclude": (data.rated[rows].toarray() > 0) & ~relevant})


def validation_scores(scorer, validations, params, threads):
    """The metrics of one setting averaged over the validation splits (each fitted with
    seed 0; ``"precision@10_splits"``: the P@10 of each split), and the mean fit's CPU
    seconds."""
    results, cpu = [], []
    for validation in validations:
        scores, times = scorer(validation, params, 0, threads)
        results.append(D.evaluate(scores, validation))
        cpu.append(times[0])
    mean = {key: float(np.mean([r[key] for r in results])) for key in results[0]}
    mean["precision@10_splits"] = [r["precision@10"] for r in results]
    return mean, float(np.mean(cpu))


# ---- the tools --------------------------------------------------------------------------

def implicit_scores(data, params, seed, threads):
    return D.implicit_scores(data, {"iterations": EPOCHS_ALS, **params}, seed, threads)


def lightfm_scores(data, params, seed, threads):
    """LightFM WARP on ids (learning rate 0.05, its defaults otherwise)."""
    from lightfm import LightFM
    params = dict(params)
    epochs = params.pop("epochs")
    model = LightFM(loss="warp", learning_rate=D.LEARNING_RATE, random_state=seed,
                    **params)
    times = D.fit_timed(lambda: model.fit(data.positives.tocoo(), epochs=epochs,
                                          num_threads=threads))
    n_items = len(data.item_ids)
    users = np.repeat(data.test_rows, n_items).astype(np.int32)
    items = np.tile(np.arange(n_items), len(data.test_rows)).astype(np.int32)
    scores = model.predict(users, items, num_threads=threads)
    return scores.reshape(len(data.test_rows), n_items), times


def rated_columns(encoder, data):
    """The columns (start, stop) of the users' rated items in the FieldEncoder's output."""
    from polylite import FieldEncoder
    fields = FieldEncoder(**encoder).fit(data.train, users=data.users,
                                         items=data.items).fields_
    field, = [f for f in fields if f.kind == "implicit" and f.side == "user"]
    return field.start, field.stop


def polylite_scorer(encoder, own_item_left_out=False, **fixed):
    """A scorer of polylite's ranker through a FieldEncoder (``alpha`` follows
    ``beta`` when the grid sets it; ``own_item_left_out``: the ranker's ``rated_items``
    are the encoder's rated items)."""
    def scores(data, params, seed, threads):
        from sklearn.pipeline import make_pipeline
        from polylite import FieldEncoder
        from polylite.ranking import FactorizationMachineRanker
        from polylite.recommend import score_items
        params = {**fixed, **params}
        if "beta" in params:
            params["alpha"] = params["beta"]
        if own_item_left_out:
            params["rated_items"] = rated_columns(encoder, data)
        model = make_pipeline(FieldEncoder(**encoder), FactorizationMachineRanker(
            n_jobs=threads, random_state=seed, **params))
        times = D.fit_timed(lambda: model.fit(data.train, fieldencoder__users=data.users,
                                              fieldencoder__items=data.items))
        return score_items(model, data.test_users, data.item_ids), times
    return scores


def _label(params):
    return ", ".join(f"{key}={value:g}" if isinstance(value, float) else
                     f"{key}={value}" for key, value in params.items())


# ---- the run ----------------------------------------------------------------------------

def tuned(data, seeds, threads, quick, output):
    found = _results.versions("lightfm-next", "implicit")
    validations = [validation_split(data, seed)
                   for seed in VALIDATION_SEEDS[:1 if quick else None]]
    print(f"{len(validations)} validation split(s) (seeds "
          f"{list(VALIDATION_SEEDS[:len(validations)])}): "
          f"{len(validations[0].train['user_id'])} positives fitted, "
          + ", ".join(f"{int(v.relevant.sum())}" for v in validations)
          + f" held out ({', '.join(str(len(v.test_users)) for v in validations)} users); "
          f"the best mean validation P@10 of each grid is refitted on every training "
          f"positive and tested on u1.test, seeds {seeds}", flush=True)
    searched, chosen_rows, tables = [], [], []
    for label, features, scorer, settings, peer in _tools():
        if peer is not None and peer not in found:
            print(f"{peer} is not installed: {label} skipped")
            continue
        settings = settings[:2] if quick else settings
        results = []
        for params in settings:
            result, cpu = validation_scores(scorer, validations, params, threads)
            results.append((params, result))
            searched.append([label, features, _label(params), result["precision@10"],
                             result["auc"], cpu])
            print(f"  validation {label} {features} {_label(params)}: P@10 "
                  f"{result['precision@10']:.4f} ("
                  + " ".join(f"{p:.4f}" for p in result["precision@10_splits"])
                  + f"), AUC {result['auc']:.4f}, fit {cpu:.2f} CPU s", flush=True)
        best, best_result = max(results, key=lambda r: r[1]["precision@10"])
        rows = []
        for seed in seeds:
            scores, times = scorer(data, best, seed, threads)
            rows.append(D.make_row(label, features, None, None, seed,
                                   D.evaluate(scores, data), times))
        entry = D.summarize(rows)[0]
        chosen_rows.append([label, features, _label(best), best_result["precision@10"],
                            entry["precision@10"], entry["precision@10_std"],
                            entry["auc"], entry["auc_std"], entry["fit_cpu_s"]])
        print(f"  test {label} {features} {_label(best)}: P@10 "
              f"{entry['precision@10']:.4f}, AUC {entry['auc']:.4f}", flush=True)
    same_k = _same_k(data, searched, seeds, found)

    print()
    info = _results.machine()
    print(f"{info['cpu']}, {info['cores']} cores; " +
          ", ".join(f"{name} {version}" for name, version in found.items()))
    print(f"\nchosen on the validation splits (mean P@10), tested on u1.test: mean ±std "
          f"over {len(seeds)} seed(s), {threads} thread(s)\n")
    header = (f"{'model':<18}{'features':<16}{'val P@10':>9}{'P@10':>16}{'AUC':>16}"
              f"{'fit CPU s':>10}  setting")
    print(header)
    print("-" * len(header))
    for row in chosen_rows:
        print(f"{row[0]:<18}{row[1]:<16}{row[3]:>9.4f}{row[4]:>10.4f} ±{row[5]:.4f}"
              f"{row[6]:>10.4f} ±{row[7]:.4f}{row[8]:>10.2f}  {row[2]}")
    if same_k:
        print(f"\nids only, k = {SAME_K}, {EPOCHS_ALS} epochs, one thread (each with its "
              f"best validation setting at k = {SAME_K})\n")
        header = (f"{'model':<18}{'P@10':>8}{'AUC':>8}{'CPU s / epoch':>15}"
                  f"{'/ implicit':>12}  setting")
        print(header)
        print("-" * len(header))
        for row in same_k:
            print(f"{row[0]:<18}{row[2]:>8.4f}{row[3]:>8.4f}{row[4]:>15.4f}"
                  f"{row[5]:>12.2f}  {row[1]}")
    print(f"\nthe grids ({len(searched)} settings, each fitted on the {len(validations)} "
          f"validation split(s); P@10 and AUC their means):")
    for row in searched:
        print(f"  {row[0]:<18}{row[1]:<16}P@10 {row[3]:.4f}  AUC {row[4]:.4f}  "
              f"{row[5]:6.2f} CPU s  {row[2]}")
    if output:
        tables = [
            _results.table("Chosen on validation, tested on u1.test",
                           ["model", "features", "setting", "validation P@10", "P@10",
                            "P@10 std", "AUC", "AUC std", "fit CPU s"], chosen_rows),
            _results.table(f"ids only, k = {SAME_K}, one thread",
                           ["model", "setting", "P@10", "AUC", "CPU s per epoch",
                            "ratio to implicit"], same_k),
            _results.table("Validation grids", ["model", "features", "setting",
                                                "P@10", "AUC", "fit CPU s"], searched)]
        _results.save(output, "ranking_tuned", "MovieLens 100K u1, tuned on validation",
                      tables, dict(split=D.SPLIT, positive_rating=D.POSITIVE,
                                   validation_fraction=VALIDATION_FRACTION,
                                   validation_splits=list(VALIDATION_SEEDS[
                                       :len(validations)]), seeds=seeds,
                                   threads=threads), peers=("lightfm-next", "implicit"))
        print(f"\nresults: {os.path.relpath(output)}")


def _same_k(data, searched, seeds, found):
    """implicit's ALS and the ids-only whole-data FM at k = SAME_K on one thread."""
    rows = []
    for label, features, scorer, settings, peer in _tools():
        if features != "ids" or (peer is not None and peer not in found):
            continue
        key = "factors" if label.startswith("implicit") else "n_components"
        if key not in settings[0]:
            continue
        candidates = [p for p in settings if p[key] == SAME_K
                      and p.get("iterations", p.get("max_iter")) == EPOCHS_ALS]
        done = {row[2]: row[3] for row in searched
                if row[0] == label and row[1] == features}
        candidates = [p for p in candidates if _label(p) in done] or candidates[:1]
        best = max(candidates, key=lambda p: done.get(_label(p), 0))
        results, cpu = [], []
        for seed in seeds:
            scores, times = scorer(data, best, seed, 1)
            results.append(D.evaluate(scores, data))
            cpu.append(times[0] / EPOCHS_ALS)
        rows.append([label, _label(best),
                     float(np.mean([r["precision@10"] for r in results])),
                     float(np.mean([r["auc"] for r in results])), float(np.median(cpu))])
    base = [row[4] for row in rows if row[0].startswith("implicit")]
    for row in rows:
        row.append(row[4] / base[0] if base else float("nan"))
    return rows


# ---- the chosen settings on every fold ---------------------------------------------------

def _setting(label):
    """The parameters of a setting's label (:func:`_label`'s inverse)."""
    params = {}
    for item in label.split(", "):
        key, value = item.split("=")
        try:
            params[key] = int(value) if value.lstrip("-").isdigit() else float(value)
        except ValueError:  # (a choice: side_solver)
            params[key] = value
    return params


def folds(path, seeds, threads, quick, results):
    """The ids-only models of ``results`` (the JSON file of ``--tune``), implicit's ALS
    and the whole-data FM, each at the setting chosen on validation and at its k = 16
    setting, on the test split of each of MovieLens 100K's five folds (each fold's base
    split fitted): P@10 and AUC, the mean over ``seeds``."""
    with open(results) as f:
        tables = {table["title"]: table for table in json.load(f)["tables"]}

    def rows_of(title, model_column, setting_column):
        table = tables[title]
        model = table["columns"].index(model_column)
        setting = table["columns"].index(setting_column)
        return [(row[model], row[setting]) for row in table["rows"]
                if "features" not in table["columns"]
                or row[table["columns"].index("features")] == "ids"]

    chosen = [(model, "tuned", setting) for model, setting in rows_of(
        "Chosen on validation, tested on u1.test", "model", "setting")]
    chosen += [(model, f"k = {SAME_K}", setting) for model, setting in rows_of(
        f"ids only, k = {SAME_K}, one thread", "model", "setting")]
    scorers = {"implicit ALS": implicit_scores,
               "polylite FM iALS": polylite_scorer(D.POLYLITE_IDS, loss="ials",
                                                   fit_linear=False)}
    chosen = [row for row in chosen if row[0] in scorers]
    found = _results.versions("implicit")
    if "implicit" not in found:
        chosen = [row for row in chosen if row[0] != "implicit ALS"]
        print("implicit is not installed: its rows are skipped")
    print(f"the ids-only settings of {os.path.relpath(results)} on each fold's test "
          f"split; P@10 and AUC, the mean over seeds {seeds}, {threads} thread(s)")
    for model, which, setting in chosen:
        print(f"  {model} ({which}): {setting}")
    print()
    header = f"{'fold':<6}{'users':>6}" + "".join(
        f"{model.split()[0] + ' ' + which:>22}" for model, which, _ in chosen)
    print(header + "   (P@10 / AUC)")
    print("-" * len(header))
    table = []
    for fold in FOLDS[:2 if quick else None]:
        data = D.load_data(path, split=fold)
        cells = []
        for model, _, setting in chosen:
            params = _setting(setting)
            if quick:  # two epochs: a check that everything runs
                params.update({key: 2 for key in ("iterations", "max_iter")
                               if key in params})
            results_ = [D.evaluate(scorers[model](data, params, seed, threads)[0], data)
                        for seed in seeds]
            cells.append((float(np.mean([r["precision@10"] for r in results_])),
                          float(np.mean([r["auc"] for r in results_]))))
        table.append(cells)
        print(f"{fold:<6}{len(data.test_users):>6}" + "".join(
            f"{p:>13.4f} / {a:.4f}" for p, a in cells), flush=True)
    means = np.mean(np.array(table), axis=0)
    print("-" * len(header))
    print(f"{'mean':<12}" + "".join(f"{p:>13.4f} / {a:.4f}" for p, a in means))
