"""The pairwise ranker: its steps against finite differences of the score difference,
its negatives against their distributions, its inputs, and fits that rank."""
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.pipeline import make_pipeline

from polylite import FactorizationMachineRanker, FieldEncoder, kernels, load
from polylite.ranking import _data
from polylite.ranking import fm as ranking_fm
from polylite._engine._pairwise import (draw_negatives, gather_positives, pair_dot,
                                        seen_bitmap, seen_filter)
from polylite.recommend import recommend
from polylite.relational import RelationalMatrix, RelationBlock

STRUCTURES = [dict(degree=2), dict(degree=3), dict(degree=4),
              dict(degree=3, lower_degrees="shared"), dict(degree=3, lower_degrees="none"),
              dict(kernel="all-subsets")]


def _score(est, rows):
    return kernels.predict(rows, est.P_, degrees=est._structure()[1],
                           kernel=est._structure()[0], w=est.w_, gamma=est.gamma_)


def _one_pair(rng, dtype=np.float64, one_feature=False):
    """One positive (user 0, item 0) of a catalogue of two items: item 1 is the only
    negative.  The query has three columns (user part and context), the items share
    column 5 (a genre) and have one of their own each (``one_feature``: only their
    own, of values other than 1, as an id scaled)."""
    users = RelationBlock([0], sp.csr_matrix(rng.uniform(0.5, 1.5, (1, 2))))
    table = [[1.7, 0, 0], [0, 1.3, 0]] if one_feature else [[1.0, 0, 0.7], [0, 1.3, 0.4]]
    items = RelationBlock([0], sp.csr_matrix(np.array(table)))
    context = sp.csr_matrix(rng.uniform(0.5, 1.5, (1, 1)))
    return RelationalMatrix([users, items, context], dtype=dtype)


@pytest.mark.parametrize("structure", STRUCTURES)
@pytest.mark.parametrize("loss", ["bpr", "warp"])
@pytest.mark.parametrize("one_feature", [False, True])
def test_step_is_the_gradient_of_the_score_difference(structure, loss, one_feature, rng):
    # Items of one feature (degree 2: their negatives scored without their values).
    X = _one_pair(rng, one_feature=one_feature)
    rows = [RelationalMatrix([X.parts[0], RelationBlock([i], X.parts[1].table),
                              X.parts[2]]) for i in (0, 1)]
    est = FactorizationMachineRanker(n_components=3, loss=loss, margin=1e6, alpha=0,
                                     beta=0, solver="sgd", learning_rate="constant",
                                     eta0=1e-6, max_iter=1, init_scale=0.5,
                                     random_state=0, **structure)
    # The parameters before the step: a fit of no step (eta0 tiny is not zero, so take
    # them from a zero-iteration start with the same seed).
    start = FactorizationMachineRanker(**{**est.get_params(), "eta0": 1e-300}).fit(X)
    start.w_[:] = rng.normal(0, 0.5, start.w_.shape)

    def delta(w, P, gamma):
        start.w_[...], start.P_[...], start.gamma_[...] = w, P, gamma
        return float(_score(start, rows[0].to_csr())[0] - _score(start, rows[1].to_csr())[0])

    w0, P0, g0 = start.w_.copy(), start.P_.copy(), start.gamma_.copy()
    d0 = delta(w0, P0, g0)
    est.set_params(warm_start=True)
    est.__dict__.update(w_=w0.copy(), P_=P0.copy(), gamma_=g0.copy(), intercept_=0.0,
                        n_features_in_=X.shape[1], n_iter_=0, solver_="sgd")
    est.fit(X)
    # d loss / d delta: BPR -sigmoid(-delta); WARP (every draw violates, rank weight
    # L(1) = 1) -1.  A step moves the parameters by -eta0 dl grad(delta).
    dl = -1 / (1 + np.exp(d0)) if loss == "bpr" else -1.0
    scale = -1e-6 * dl
    eps = 1e-6
    for name, before, after in [("w", w0, est.w_), ("P", P0, est.P_),
                                ("gamma", g0, est.gamma_)]:
        numeric = np.zeros_like(before)
        for idx in np.ndindex(before.shape):
            args = {"w": w0, "P": P0, "gamma": g0}
            plus = {k: v.copy() for k, v in args.items()}
            minus = {k: v.copy() for k, v in args.items()}
            plus[name][idx] += eps
            minus[name][idx] -= eps
            numeric[idx] = (delta(plus["w"], plus["P"], plus["gamma"]) -
                            delta(minus["w"], minus["P"], minus["gamma"])) / (2 * eps)
        if name == "w":  # the query's linear weights cancel: the step leaves them
            numeric[:2] = numeric[5:] = 0
        np.testing.assert_allclose((after - before) / scale, numeric, rtol=1e-5,
                                   atol=1e-7, err_msg=name)


def _numeric_gradient(f, params, eps=1e-6):
    """Central differences of f(params) in every entry of each array of ``params``."""
    grads = {}
    for name, value in params.items():
        grads[name] = np.zeros_like(value)
        for idx in np.ndindex(value.shape):
            plus = {k: v.copy() for k, v in params.items()}
            minus = {k: v.copy() for k, v in params.items()}
            plus[name][idx] += eps
            minus[name][idx] -= eps
            grads[name][idx] = (f(plus) - f(minus)) / (2 * eps)
    return grads


@pytest.mark.parametrize("structure", STRUCTURES)
def test_a_query_batch_steps_the_query_once_on_its_summed_gradient(structure, rng):
    # One user's two positives (items 0 and 1, in this order) and one negative (item
    # 2, the only item the user has not seen), by BPR with plain SGD steps of 0.2: in
    # one batch, the items step at each positive (the second's gradient taken after
    # the first's step) while the query keeps its parameters, then steps once on the
    # sum of both gradients, each taken at the query's parameters of the batch's start.
    users = RelationBlock([0, 0], sp.csr_matrix(rng.uniform(0.5, 1.5, (1, 2))))
    table = sp.csr_matrix(np.array([[1.0, 0, 0, 0.7], [0, 1.3, 0, 0.4], [0, 0, 0.9, 1.1]]))
    context = sp.csr_matrix(rng.uniform(0.5, 1.5, (1, 1)))[[0, 0]]  # one query row
    X = RelationalMatrix([users, RelationBlock([0, 1], table), context])
    rows = [RelationalMatrix([users, RelationBlock([item, item], table),
                              context]).to_csr()[[0]] for item in (0, 2, 1, 2)]
    eta = 0.2
    params = dict(n_components=3, loss="bpr", alpha=0, beta=0, solver="sgd",
                  learning_rate="constant", eta0=eta, max_iter=1, init_scale=0.5,
                  shuffle=False, random_state=0, **structure)
    start = FactorizationMachineRanker(**{**params, "eta0": 1e-300}).fit(X)
    start.w_[:] = rng.normal(0, 0.5, start.w_.shape)
    theta0 = {"w": start.w_.copy(), "P": start.P_.copy(), "gamma": start.gamma_.copy()}

    def loss(theta, positive):
        start.w_[...], start.P_[...], start.gamma_[...] = theta["w"], theta["P"], theta["gamma"]
        delta = (_score(start, rows[2 * positive])[0] - _score(start, rows[2 * positive + 1])[0])
        return float(np.logaddexp(0, -delta))

    item_columns = np.zeros(X.shape[1], dtype=bool)
    item_columns[2:6] = True

    def item_part(grad):  # the gradient's entries on the items' parameters
        return {"w": grad["w"] * item_columns, "P": grad["P"] * item_columns[:, None],
                "gamma": 0 * grad["gamma"]}

    g1 = _numeric_gradient(lambda theta: loss(theta, 0), theta0)
    theta1 = {k: theta0[k] - eta * item_part(g1)[k] for k in theta0}
    g2 = _numeric_gradient(lambda theta: loss(theta, 1), theta1)
    expected = {k: theta1[k] - eta * item_part(g2)[k]
                - eta * (g1[k] + g2[k] - item_part(g1)[k] - item_part(g2)[k])
                for k in theta0}

    def fitted(query_batch):
        est = FactorizationMachineRanker(**params, query_batch=query_batch,
                                         warm_start=True)
        est.__dict__.update(w_=theta0["w"].copy(), P_=theta0["P"].copy(),
                            gamma_=theta0["gamma"].copy(), intercept_=0.0,
                            n_features_in_=X.shape[1], n_iter_=0, solver_="sgd")
        est.fit(X)
        return {"w": est.w_, "P": est.P_, "gamma": est.gamma_}

    batched = fitted(2)
    for name in theta0:
        np.testing.assert_allclose(batched[name], expected[name], rtol=1e-6, atol=1e-8,
                                   err_msg=name)
    # Stepping the query at each positive is another path: the test tells them apart.
    single = fitted(1)
    assert max(np.abs(single[k] - expected[k]).max(initial=0) for k in theta0) > 1e-4


def test_query_batches_group_each_querys_positives():
    codes = np.array([3, 1, 3, 3, 2, 1, 3, 3, 3, 3, 2])
    rng = np.random.RandomState(0)
    order, batch_end = _data.query_batches(rng.permutation(11), codes, 3, rng)
    assert sorted(order) == list(range(11)) and batch_end[-1] == 1
    batches = np.split(order, np.flatnonzero(batch_end)[:-1] + 1)
    for batch in batches:
        assert len(set(codes[batch])) == 1 and len(batch) <= 3
    # Code 3's seven positives in three batches of near-equal sizes (3, 2, 2); each
    # batch a run of the query's positives in the order the shuffle gave them.
    assert sorted(len(b) for b in batches if codes[b[0]] == 3) == [2, 2, 3]
    given = list(np.random.RandomState(0).permutation(11))
    for batch in batches:
        runs = [p for p in given if codes[p] == codes[batch[0]]]
        first = runs.index(batch[0])
        assert list(batch) == runs[first:first + len(batch)]
    # Without a random state the order is kept: runs of one query, a run of four cut
    # into two batches of two.
    order, batch_end = _data.query_batches(np.arange(11), codes, 3, None)
    np.testing.assert_array_equal(order, np.arange(11))
    np.testing.assert_array_equal(batch_end, [1, 1, 0, 1, 1, 1, 0, 1, 0, 1, 1])


def test_query_batches_cut_by_threads_and_chunks_still_rank(monkeypatch):
    # Batches end where a thread's share of a chunk ends (a short chunk here) and start
    # again with the query's values recomputed: the fit ranks as one of whole batches.
    table, items, affinity = _clicks(n_users=100, per_user=20)
    monkeypatch.setattr(_data, "CHUNK_ROWS", 301)
    monkeypatch.setattr(ranking_fm, "MIN_POSITIVES_PER_THREAD", 64)
    monkeypatch.setattr(_data, "EXPANDED_NNZ", 0)  # query rows expanded per chunk
    aucs = []
    for jobs in (1, 2):
        model = make_pipeline(FieldEncoder(output="relational", implicit="user"),
                              FactorizationMachineRanker(
                                  n_components=4, max_iter=20, eta0=0.2, init_scale=0.1,
                                  random_state=0, n_jobs=jobs))
        model.fit(table)
        assert model[-1].query_batch_ == 16
        aucs.append(_held_out_auc(model, table, affinity, 40))
    assert min(aucs) > 0.8 and abs(aucs[0] - aucs[1]) < 0.05


def test_query_batch_auto_batches_long_query_rows_only():
    table, items, affinity = _clicks(n_users=100, per_user=20)
    ids = make_pipeline(FieldEncoder(output="relational"),
                        FactorizationMachineRanker(n_components=4, max_iter=2))
    assert ids.fit(table)[-1].query_batch_ == 1
    rated = make_pipeline(FieldEncoder(output="relational", implicit="user"),
                          FactorizationMachineRanker(n_components=4, max_iter=20,
                                                     eta0=0.2, init_scale=0.1,
                                                     random_state=0))
    rated.fit(table)
    assert rated[-1].query_batch_ == 16
    assert _held_out_auc(rated, table, affinity, 40) > 0.8
    with pytest.raises(ValueError, match="query_batch"):
        FactorizationMachineRanker(query_batch=0).fit(ids[0].transform(table))


def _draws(seen_indptr, seen, cumulative, n_items, user, n_draws, seed, bits=False):
    """The draws of draw_negatives, the seen items looked up in their lists
    (``bits=False``), their bitmap (True) or their filter then the lists ("filter")."""
    seen_indptr, seen = np.asarray(seen_indptr, np.int64), np.asarray(seen, np.int64)
    owners = np.repeat(np.arange(seen_indptr.size - 1), np.diff(seen_indptr))
    bitmap = (seen_bitmap(owners, seen, seen_indptr.size - 1, n_items) if bits is True
              else np.zeros(0, np.uint64))
    return draw_negatives(seen_indptr, seen, bitmap, np.asarray(cumulative, np.float64),
                          n_items, user, n_draws, seed,
                          seen_filter(seen_indptr, seen) if bits == "filter" else None)


@pytest.mark.parametrize("bits", [False, True, "filter"])
def test_negatives_are_uniform_over_unseen_items(bits):
    n_items = 70
    seen_indptr, seen = [0, 3, 3], [1, 2, 65]
    draws = _draws(seen_indptr, seen, [], n_items, 0, 67000, 1, bits)
    counts = np.bincount(draws, minlength=n_items)
    assert counts[[1, 2, 65]].sum() == 0
    np.testing.assert_allclose(np.delete(counts, [1, 2, 65]) / 67000, 1 / 67, atol=0.003)
    # A user who has seen nothing draws from every item.
    counts = np.bincount(_draws(seen_indptr, seen, [], n_items, 1, 70000, 2, bits),
                         minlength=n_items)
    np.testing.assert_allclose(counts / 70000, 1 / n_items, atol=0.003)


def test_negatives_by_popularity_skip_seen_items():
    positives = np.array([0, 0, 0, 0, 0, 0, 0, 1, 1, 3])  # items' positives
    cumulative = _data.popularity(positives, 5)
    draws = _draws([0, 1], [1], cumulative, 5, 0, 60000, 3)
    weights = 1.0 + np.bincount(positives, minlength=5)
    weights[1] = 0
    np.testing.assert_allclose(np.bincount(draws, minlength=5) / 60000,
                               weights / weights.sum(), atol=0.01)


@pytest.mark.parametrize("bits", [False, True, "filter"])
@pytest.mark.parametrize("popularity", [False, True])
def test_a_user_who_saw_almost_everything_still_gets_the_unseen_items(popularity, bits):
    # Draws land on seen items 32 times in a row, then a uniform draw among the unseen
    # items ends the search (never a hang), uniform over them.
    n_items = 1000
    unseen = [17, 617, 999]
    seen = [i for i in range(n_items) if i not in unseen]
    cumulative = np.cumsum(np.ones(n_items)) if popularity else []
    draws = _draws([0, len(seen)], seen, cumulative, n_items, 0, 30000, 4, bits)
    counts = np.bincount(draws, minlength=n_items)
    assert counts.sum() == counts[unseen].sum()
    np.testing.assert_allclose(counts[unseen] / 30000, 1 / 3, atol=0.015)


def test_seen_pairs_are_in_the_lists_and_the_bitmap():
    rng = np.random.default_rng(0)
    users, items = rng.integers(0, 50, 300), rng.integers(0, 80, 300)
    indptr, seen, bits, filter_ptr, words = _data.seen_sets(users, items, 50, 80)
    assert filter_ptr.size == words.size == 0  # a small bitmap: no filter
    keys = set((users * 80 + items).tolist())
    owners = np.repeat(np.arange(50), np.diff(indptr))
    assert set((owners * 80 + seen).tolist()) == keys
    dense = np.unpackbits(bits.view(np.uint8), bitorder="little").reshape(50, -1)[:, :80]
    assert set(np.flatnonzero(dense.ravel()).tolist()) == keys


@pytest.mark.parametrize("threads", [1, 2])
def test_a_chunks_positives_are_gathered_as_by_indexing(threads):
    rng = np.random.default_rng(0)
    n = 5000
    query_row, item, user = (rng.integers(0, 300, n) for _ in range(3))
    weight = rng.uniform(0, 2, n)
    rows = rng.permutation(n)[:3000]
    got = gather_positives(rows, query_row, item, user, weight, threads)
    for a, b in zip(got, (query_row[rows], item[rows], user[rows], weight[rows])):
        np.testing.assert_array_equal(a, b)
    # Without query rows (expanded for the chunk), a positive's row is its place.
    got = gather_positives(rows, np.zeros(0, np.int64), item, user, weight, threads)
    np.testing.assert_array_equal(got[0], np.arange(rows.size))
    with pytest.raises(ValueError, match="outside 0..4999"):
        gather_positives(np.array([3, n]), query_row, item, user, weight, threads)
    with pytest.raises(ValueError, match="differ in length"):
        gather_positives(rows, query_row, item, user[:-1], weight, threads)


def test_seen_filter_keeps_every_seen_item_and_rules_out_most_others(monkeypatch):
    """Each user's block is a power of two words with at least 16 bits per seen item;
    every seen item's bit is set (no seen item is ever taken for unseen), and few
    unseen items share a bit with a seen one."""
    rng = np.random.default_rng(0)
    n_users, n_items = 300, 5000
    users = rng.integers(0, n_users, 20000)
    items = np.minimum(rng.zipf(1.3, 20000), n_items) - 1
    monkeypatch.setattr(_data, "BITMAP_BYTES", 0)
    indptr, seen, bits, filter_ptr, words = _data.seen_sets(users, items, n_users, n_items)
    assert bits.size == 0 and filter_ptr.size == n_users + 1  # a bitmap too large
    sizes = np.diff(filter_ptr)
    assert np.all(sizes & (sizes - 1) == 0) and np.all(sizes >= 1)
    assert np.all(sizes * 64 >= 16 * np.diff(indptr))
    maybe = np.zeros((n_users, n_items), dtype=bool)
    candidates = np.arange(n_items, dtype=np.uint64)
    for u in range(n_users):
        n_bits = np.uint64(sizes[u] * 64)
        bit = ((candidates * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & (
            n_bits - np.uint64(1))
        block = words[filter_ptr[u]:filter_ptr[u + 1]]
        maybe[u] = (block[(bit >> np.uint64(6)).astype(np.int64)] >> (bit & np.uint64(63))
                    ) & np.uint64(1) == 1
    truth = np.zeros((n_users, n_items), dtype=bool)
    truth[users, items] = True
    assert np.all(maybe[truth])
    assert maybe[~truth].mean() < 0.06
    # A filter of other users (or a bitmap, popularity weights of other items) is
    # refused, not read out of bounds.
    none = np.zeros(0, np.uint64)
    with pytest.raises(ValueError, match="disagree with the users and items"):
        draw_negatives(indptr, seen, none, np.zeros(0), n_items, 0, 5, 0,
                       filter=(filter_ptr[:-1], words))
    with pytest.raises(ValueError, match="disagree with the users and items"):
        draw_negatives(indptr, seen, none, np.ones(n_items - 1), n_items, 0, 5, 0)
    with pytest.raises(ValueError, match="disagree with the users and items"):
        draw_negatives(indptr, seen, np.zeros(3, np.uint64), np.zeros(0), n_items, 0, 5,
                       0)


@pytest.mark.parametrize("loss", ["warp", "bpr"])
def test_fits_equal_with_and_without_the_seen_filter(monkeypatch, loss):
    """The filter only spares searches: a fit whose seen items are looked up through
    it equals, bit for bit, one that searches every draw in the sorted lists."""
    table, items, _ = _clicks(n_users=90, n_items=70, per_user=12)
    X = FieldEncoder(output="relational").fit_transform(table)
    monkeypatch.setattr(_data, "BITMAP_BYTES", 0)
    params = dict(n_components=4, loss=loss, max_iter=3, random_state=0)
    with_filter = FactorizationMachineRanker(**params).fit(X)
    assert _data.seen_sets(np.array([0, 1]), np.array([2, 3]), 2, 5)[3].size == 3
    real = _data.seen_sets

    def without_filter(*args):
        indptr, seen, bits, _, _ = real(*args)
        return indptr, seen, bits, np.zeros(0, np.int64), np.zeros(0, np.uint64)

    monkeypatch.setattr(_data, "seen_sets", without_filter)
    plain = FactorizationMachineRanker(**params).fit(X)
    np.testing.assert_array_equal(with_filter.P_, plain.P_)
    assert with_filter.negatives_drawn_ == plain.negatives_drawn_


@pytest.mark.parametrize("loss", ["bpr", "warp"])
@pytest.mark.parametrize("implicit", [None, "user"])
def test_query_rows_read_from_their_block_table_fit_as_expanded_rows(monkeypatch, loss,
                                                                       implicit):
    """When one block holds every query row (the users' ids, with or without their
    rated items), the passes read the rows from its table by each positive's row of
    it: the fit equals, bit for bit, one whose rows are expanded a chunk at a time."""
    table, _, _ = _clicks(n_users=90, n_items=70, per_user=12)
    X = FieldEncoder(output="relational", implicit=implicit).fit_transform(table)
    monkeypatch.setattr(_data, "CHUNK_ROWS", 301)  # 4 chunks of the 1,080 positives
    params = dict(n_components=4, loss=loss, max_iter=3, random_state=0)
    query_rows = []

    def recorded(problem, schedule, sampling, chunk, *args):
        query_rows.append(chunk.query.shape[0])
        return real_pass(problem, schedule, sampling, chunk, *args)

    real_pass = ranking_fm.pairwise_pass
    monkeypatch.setattr(ranking_fm, "pairwise_pass", recorded)
    from_table = FactorizationMachineRanker(**params).fit(X)
    assert set(query_rows) == {X.parts[0].table.shape[0]}  # the users' table
    query_rows.clear()
    monkeypatch.setattr(_data, "EXPANDED_NNZ", 0)
    expanded = FactorizationMachineRanker(**params).fit(X)
    assert set(query_rows) == {301, 1080 - 3 * 301}  # each chunk's positives
    np.testing.assert_array_equal(from_table.P_, expanded.P_)
    np.testing.assert_array_equal(from_table.w_, expanded.w_)
    assert from_table.negatives_drawn_ == expanded.negatives_drawn_


def _clicks(n_users=60, n_items=40, per_user=8, seed=0):
    """Positives with planted tastes: each user clicks the items nearest its taste."""
    rng = np.random.default_rng(seed)
    u, i = rng.normal(size=(n_users, 3)), rng.normal(size=(n_items, 3))
    affinity = u @ i.T + 0.3 * rng.normal(size=(n_users, n_items))
    top = np.argsort(-affinity, axis=1)[:, :per_user]
    users = np.repeat(np.arange(n_users), per_user)
    items = top.ravel()
    genre = (i[:, 0] > 0).astype(float)
    return ({"user_id": users, "item_id": items},
            {"item_id": np.arange(n_items), "genre": genre}, affinity)


def _held_out_auc(model, table, affinity, n_items):
    scores = np.vstack([model[-1].predict(model[0].transform(
        {"user_id": np.full(n_items, u), "item_id": np.arange(n_items)}))
        for u in range(affinity.shape[0])])
    seen = np.zeros_like(affinity, dtype=bool)
    seen[table["user_id"], table["item_id"]] = True
    # The next best items of each user (not clicked) should outrank the worst ones.
    order = np.argsort(-np.where(seen, -np.inf, affinity), axis=1)
    n_unseen = n_items - seen.sum(axis=1).max()
    good, bad = order[:, :5], order[:, n_unseen - 10:n_unseen]
    rows = np.arange(affinity.shape[0])[:, None]
    return np.mean(scores[rows, good][:, :, None] > scores[rows, bad][:, None, :])


@pytest.mark.parametrize("loss", ["warp", "bpr"])
@pytest.mark.parametrize("structure", [dict(), dict(degree=3, lower_degrees="shared"),
                                       dict(kernel="all-subsets")])
def test_fits_rank_the_users_next_items_first(loss, structure):
    table, items, affinity = _clicks()
    model = make_pipeline(FieldEncoder(output="relational"), FactorizationMachineRanker(
        n_components=4, loss=loss, max_iter=40, eta0=0.2, init_scale=0.1, random_state=0,
        **structure))
    model.fit(table, fieldencoder__items=items)
    assert _held_out_auc(model, table, affinity, 40) > 0.8


def test_relational_and_csr_positives_give_the_same_fit():
    table, items, _ = _clicks()
    # CSR positives number users and items by first appearance, relational ones by
    # their tables (in id order): let every user and item appear first in id order.
    first = {"user_id": np.arange(60), "item_id": np.arange(60) % 40}
    table = {k: np.concatenate([first[k], table[k]]) for k in table}
    enc = FieldEncoder(item_features={"genre": "numeric"}).fit(table, items=items)
    X = enc.transform(table)
    X_rel = enc.set_params(output="relational").transform(table)
    item_columns = (enc.fields_[1].start, enc.fields_[2].stop)
    params = dict(n_components=3, max_iter=3, random_state=0)
    a = FactorizationMachineRanker(**params).fit(X_rel)
    b = FactorizationMachineRanker(item_columns=item_columns, **params).fit(X)
    np.testing.assert_allclose(a.P_, b.P_, rtol=1e-12)
    np.testing.assert_allclose(a.w_, b.w_, rtol=1e-12)


def test_recommend_save_load_and_float32(tmp_path):
    table, items, _ = _clicks()
    model = make_pipeline(
        FieldEncoder(item_features={"genre": "numeric"}, output="relational",
                     dtype=np.float32),
        FactorizationMachineRanker(n_components=4, max_iter=5, random_state=0))
    model.fit(table, fieldencoder__items=items)
    ranker = model[-1]
    assert ranker.P_.dtype == np.float32
    top, scores = recommend(model, np.arange(60), n=5, exclude=table)
    for u in range(60):
        assert not set(top[u]) & set(table["item_id"][table["user_id"] == u])
    ranker.save(tmp_path / "r.npz")
    loaded = load(tmp_path / "r.npz")
    X = model[0].transform(table)
    np.testing.assert_array_equal(loaded.predict(X), ranker.predict(X))
    assert loaded.get_params() == ranker.get_params()


def test_same_fit_from_run_to_run_on_one_thread_and_close_on_two():
    table, items, affinity = _clicks(n_users=300, per_user=10)
    fits = [make_pipeline(FieldEncoder(output="relational"), FactorizationMachineRanker(
        n_components=4, max_iter=10, random_state=0, n_jobs=jobs)).fit(
            table, fieldencoder__items=items) for jobs in (1, 1, 2)]
    np.testing.assert_array_equal(fits[0][-1].P_, fits[1][-1].P_)
    aucs = [_held_out_auc(f, table, affinity, 40) for f in fits]
    assert abs(aucs[2] - aucs[0]) < 0.05


def test_a_zero_weight_positive_takes_no_step():
    # Two positives in a fixed order, the second of weight 0: the same fit as the first
    # alone (its weight, normalised to mean 1, is 2: twice the step size).
    rng = np.random.default_rng(0)
    users = RelationBlock([0, 1], sp.csr_matrix(rng.uniform(0.5, 1.5, (2, 2))))
    items = sp.csr_matrix(np.array([[1.0, 0, 0.7], [0, 1.3, 0.4], [0.2, 0, 1.0]]))
    both = RelationalMatrix([users, RelationBlock([0, 1], items)])
    first = both[[0]]
    params = dict(n_components=2, alpha=0, beta=0, solver="sgd", learning_rate="constant",
                  shuffle=False, max_iter=3, random_state=0, loss="bpr")
    a = FactorizationMachineRanker(eta0=0.01, **params).fit(both, sample_weight=[1, 0])
    b = FactorizationMachineRanker(eta0=0.02, **params).fit(first)
    np.testing.assert_allclose(a.P_, b.P_, rtol=1e-12)
    np.testing.assert_allclose(a.w_, b.w_, rtol=1e-12)
    with pytest.raises(ValueError, match="non-zero"):
        FactorizationMachineRanker(**params).fit(both, sample_weight=[0, 0])


def test_early_stopping_keeps_the_best_epoch_and_partial_fit_continues():
    table, _, affinity = _clicks(n_users=200)
    est = FactorizationMachineRanker(n_components=4, max_iter=30, early_stopping=True,
                                     n_iter_no_change=3, random_state=0)
    model = make_pipeline(FieldEncoder(output="relational"), est).fit(table)
    scores = est.validation_scores_
    assert len(scores) == est.n_iter_ and 0.5 < max(scores) <= 1
    X = model[0].transform(table)
    partial = FactorizationMachineRanker(n_components=4, random_state=0)
    for _ in range(15):
        partial.partial_fit(X)
    assert partial.n_iter_ == 15 and len(partial.loss_curve_) == 15
    assert partial.score(X) > 0.8


def test_bad_input_is_refused_with_the_reason():
    table, items, _ = _clicks()
    enc = FieldEncoder().fit(table)
    with pytest.raises(ValueError, match="item_columns"):
        FactorizationMachineRanker().fit(enc.transform(table))
    with pytest.raises(ValueError, match="item_columns"):
        FactorizationMachineRanker(item_columns=(3, 2)).fit(enc.transform(table))
    X = enc.set_params(output="relational").transform(table)
    with pytest.raises(ValueError, match="item_columns"):
        FactorizationMachineRanker(item_columns=(0, 5)).fit(X)
    with pytest.raises(ValueError, match="loss"):
        FactorizationMachineRanker(loss="hinge").fit(X)
    with pytest.raises(ValueError, match="max_trials"):
        FactorizationMachineRanker(max_trials=0).fit(X)
    with pytest.raises(ValueError, match="0 interactions"):
        FactorizationMachineRanker().fit(X[np.zeros(0, dtype=int)])
    # Unknown items encode as the zero row: nothing to score them by.
    lenient = FieldEncoder(output="relational", handle_unknown="ignore").fit(table)
    with pytest.raises(ValueError, match="without any feature"):
        FactorizationMachineRanker().fit(lenient.transform(
            {"user_id": np.array([0, 1]), "item_id": np.array([0, 999])}))
    # One item only: every user has seen all of it.
    with pytest.raises(ValueError, match="every one of the 1 items"):
        make_pipeline(FieldEncoder(output="relational"), FactorizationMachineRanker()).fit(
            {"user_id": np.array([0, 1]), "item_id": np.array([5, 5])})
    # Some users have seen everything: skipped, with a warning.
    with pytest.warns(UserWarning, match="2 positive"):
        make_pipeline(FieldEncoder(output="relational"),
                      FactorizationMachineRanker(max_iter=2)).fit(
            {"user_id": np.array([0, 0, 1]), "item_id": np.array([5, 6, 5])})


def test_distinct_rows_groups_equal_rows_exactly():
    X = sp.csr_matrix(np.array([[1, 0, 2], [0, 1, 0], [1, 0, 2], [0, 0, 0], [0, 1, 0]],
                               dtype=float))
    codes, first = _data.distinct_rows(X)
    np.testing.assert_array_equal(codes, [0, 1, 0, 2, 1])
    np.testing.assert_array_equal(first, [0, 1, 3])


def test_unused_warnings_are_not_raised_on_clean_fits():
    table, _, _ = _clicks()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        make_pipeline(FieldEncoder(output="relational"),
                      FactorizationMachineRanker(max_iter=2)).fit(table)


def test_partial_fit_continues_a_fit_and_a_loaded_model(tmp_path):
    table, items, _ = _clicks(n_users=200)
    enc = FieldEncoder(output="relational").fit(table, items=items)
    X = enc.transform(table)
    est = FactorizationMachineRanker(n_components=4, max_iter=20, random_state=0).fit(X)
    auc = est.score(X)
    before = est.P_.copy()
    est.partial_fit(X)
    assert est.n_iter_ == 21 and est.score(X) > auc - 0.02
    # A step of an epoch, not a new start: the factors moved little.
    assert np.abs(est.P_ - before).max() < 0.5 * np.abs(before).max()
    est.save(tmp_path / "r.npz")
    loaded = load(tmp_path / "r.npz")
    loaded.partial_fit(X)
    assert loaded.n_iter_ == 22 and loaded.score(X) > auc - 0.02


def test_early_stopping_on_given_validation_positives():
    table, items, _ = _clicks(n_users=200)
    enc = FieldEncoder(output="relational").fit(table, items=items)
    X = enc.transform(table)
    rows = np.random.default_rng(0).permutation(X.shape[0])
    est = FactorizationMachineRanker(n_components=4, max_iter=30, early_stopping=True,
                                     n_iter_no_change=3, random_state=0)
    est.fit(X[np.sort(rows[200:])], X_val=X[np.sort(rows[:200])])
    assert len(est.validation_scores_) == est.n_iter_ and max(est.validation_scores_) > 0.7
    # X_val of other tables (same width, rows in another order) is refused by name.
    users = X.parts[0]
    other = RelationalMatrix([RelationBlock(users.index, users.table[::-1])] + X.parts[1:])
    with pytest.raises(ValueError, match="same relation blocks' tables"):
        est.fit(X, X_val=other)


def test_relational_and_csr_positives_fit_the_same_when_their_catalogues_agree():
    """The documented rule: the same model, and the same fit from the same seed when the
    item table's rows are the positives' items in the order of their first positives
    (the CSR catalogue's order); another table order draws other negatives."""
    rng = np.random.default_rng(0)
    n_users, n_items, n = 30, 40, 400
    items = np.concatenate([np.arange(n_items), rng.integers(0, n_items, n - n_items)])
    users = rng.integers(0, n_users, n)
    user_table = sp.identity(n_users, format="csr")
    item_table = sp.hstack([sp.identity(n_items),
                            sp.random(n_items, 3, density=0.5, random_state=0)]).tocsr()
    X = RelationalMatrix([RelationBlock(users, user_table), RelationBlock(items, item_table)])
    params = dict(random_state=0, max_iter=3, shuffle=False)
    relational = FactorizationMachineRanker(**params).fit(X)
    csr = FactorizationMachineRanker(
        item_columns=(n_users, n_users + item_table.shape[1]), **params).fit(X.to_csr())
    np.testing.assert_array_equal(relational.P_, csr.P_)
    perm = rng.permutation(n_items)
    permuted = RelationalMatrix([RelationBlock(users, user_table),
                                 RelationBlock(perm[items], item_table[np.argsort(perm)])])
    other = FactorizationMachineRanker(**params).fit(permuted)
    assert not np.array_equal(other.P_, csr.P_)


@pytest.mark.parametrize("n_items", [30, 150])
def test_the_sampled_validation_auc_estimates_the_full_one(n_items):
    """The command line's validation (_validation_scores_per_positive set): every
    positive against 50 candidates drawn from the catalogue estimates its AUC against
    all of them, exactly for a catalogue of 50 items or fewer; the training is the
    same, as the scorer draws from a generator of its own."""
    table, items, _ = _clicks(n_users=200, n_items=n_items)
    enc = FieldEncoder(output="relational").fit(table, items=items)
    X = enc.transform(table)
    rows = np.random.default_rng(0).permutation(X.shape[0])
    fits = []
    for per_positive in (None, 1e6):
        est = FactorizationMachineRanker(n_components=4, max_iter=6, n_iter_no_change=100,
                                         random_state=0)
        est._validation_scores_per_positive = per_positive
        fits.append(est.fit(X[np.sort(rows[200:])], X_val=X[np.sort(rows[:200])]))
    full, sampled = fits
    assert full.loss_curve_ == sampled.loss_curve_
    assert sampled._validation_summary[1:] == (200, 200, min(n_items, 50))
    difference = np.abs(np.subtract(full.validation_scores_, sampled.validation_scores_))
    if n_items <= 50:
        np.testing.assert_allclose(sampled.validation_scores_, full.validation_scores_,
                                   rtol=1e-12)
    else:
        assert difference.max() < 0.03 and difference.max() > 0  # (an estimate)


@pytest.mark.parametrize("loss", ["bpr", "warp"])
@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_threads_step_on_every_positive_once(monkeypatch, loss, jobs):
    # Threads claim blocks of a chunk as they become free: every positive of a chunk is
    # visited once whatever the threads (a chunk that is not a whole number of blocks
    # here), its weight counted once and, for BPR, one step each.
    table, items, affinity = _clicks(n_users=200, per_user=10)
    monkeypatch.setattr(_data, "CHUNK_ROWS", 997)
    monkeypatch.setattr(ranking_fm, "MIN_POSITIVES_PER_THREAD", 64)
    weight = np.random.default_rng(0).uniform(0.5, 2.0, size=2000)
    passes = []

    def recorded(problem, schedule, sampling, chunk, *args):
        out = ranking_fm_pass(problem, schedule, sampling, chunk, *args)
        passes.append((chunk.weight.sum(), chunk.positive.shape[0], out))
        return out

    ranking_fm_pass = ranking_fm.pairwise_pass
    monkeypatch.setattr(ranking_fm, "pairwise_pass", recorded)
    X = FieldEncoder(output="relational").fit_transform(table)
    FactorizationMachineRanker(n_components=4, max_iter=2, loss=loss, random_state=0,
                               n_jobs=jobs).fit(X, sample_weight=weight)
    # Chunks of 997 positives per thread (the query rows are kept expanded).
    assert len(passes) == 2 * -(-2000 // (997 * jobs))
    for chunk_weight, n, out in passes:
        assert out["finite"] and out["skipped"] == 0
        np.testing.assert_allclose(out["weight"], chunk_weight, rtol=1e-12)
        assert out["trials"] >= n
        if loss == "bpr":
            assert out["updates"] == out["trials"] == n


def test_negatives_drawn_per_positive_and_epoch():
    table, items, affinity = _clicks(n_users=200, per_user=10)
    X = FieldEncoder(output="relational").fit_transform(table)
    bpr = FactorizationMachineRanker(loss="bpr", n_components=4, max_iter=3,
                                     random_state=0).fit(X)
    assert bpr.negatives_drawn_ == [1.0, 1.0, 1.0]
    warp = FactorizationMachineRanker(loss="warp", n_components=4, max_iter=8,
                                      max_trials=7, eta0=0.2, random_state=0).fit(X)
    drawn = np.asarray(warp.negatives_drawn_)
    assert drawn.shape == (8,) and np.all((drawn >= 1) & (drawn <= 7))
    # The model learns to rank the positives above the items drawn: more draws later.
    assert drawn[-1] > drawn[0] + 0.5
    warp.partial_fit(X)
    assert len(warp.negatives_drawn_) == 9
    whole = FactorizationMachineRanker(loss="ials", n_components=4, max_iter=2,
                                       random_state=0).fit(X)
    assert whole.negatives_drawn_ == []


@pytest.mark.parametrize("n_items", [1, 2, 5, 8, 13])
def test_popularity_draws_follow_the_cumulative_weights(n_items):
    # The bisection finds the first item whose cumulative weight exceeds a uniform draw
    # below the total: items of weight 0 (a flat step) are never drawn, the others in
    # proportion to their weights, the first and the last included.
    rng = np.random.default_rng(n_items)
    weights = rng.integers(0, 4, size=n_items).astype(float)
    weights[[0, -1]] = [1.0, 2.0] if n_items > 1 else [1.0]
    draws = _draws([0, 0], [], np.cumsum(weights), n_items, 0, 40000, 5)
    counts = np.bincount(draws, minlength=n_items)
    assert counts.size == n_items and np.all(counts[weights == 0] == 0)
    np.testing.assert_allclose(counts / 40000, weights / weights.sum(), atol=0.01)


@pytest.mark.parametrize("k", [0, 1, 3, 4, 5, 8, 10, 13, 32, 64])
def test_the_score_dot_is_the_portable_loop_bit_for_bit(k):
    # The k-dot of an item's score (SSE2 on x86-64): four partial sums in float64 of
    # float32 products a[s] (x b[s]), s0 also taking the last k mod 4 coordinates.
    rng = np.random.default_rng(k)
    for _ in range(20):
        a = rng.normal(0, 1, k).astype(np.float32)
        b = (rng.normal(0, 1, k) * 10.0 ** rng.integers(-3, 4, k)).astype(np.float32)
        x = np.float32(rng.uniform(0.3, 3))
        products = (a * (x * b)).astype(np.float64)  # rounded to float32 first
        sums = [0.0] * 4
        for s in range(k // 4 * 4):
            sums[s % 4] += products[s]
        for s in range(k // 4 * 4, k):
            sums[0] += products[s]
        expected = (sums[0] + sums[1]) + (sums[2] + sums[3])
        kernel, _ = pair_dot(a, b, float(x))
        portable, _ = pair_dot(a, b, float(x), portable=True)
        assert portable == expected
        assert kernel == expected
