"""The Gibbs sampler of the Bayesian FMs (``polylite.bayes._sampler`` and the ``prior`` of
``polylite._engine._cd.cd_epoch``) against exact posteriors.

Every random check runs at a fixed seed with a threshold a correct sampler fails with
probability about 1e-4 or less, so the tests are deterministic.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

from _reference import run_cd_epoch
from polylite import kernels
from polylite._engine import _losses
from polylite.bayes import _sampler
from polylite.bayes._sampler import FeatureGroups, GibbsPrior
from polylite._engine import solvers as _solvers

SQUARED = _losses.loss_code("squared")
VARIANTS = {  # degrees of the blocks, kernel, number of dummy rows
    "m2": ((2,), "anova", 0), "m2-3": ((2, 3), "anova", 0), "m3": ((3,), "anova", 0),
    "m4": ((4,), "anova", 0), "m5": ((5,), "anova", 0), "m3-shared": ((3,), "anova", 2),
    "subsets": ((0,), "all-subsets", 0)}


def _data(n=60, seed=0, dtype=np.float64):
    """A complete one-hot field (first in the CD order), a field with missing values, two
    dense columns, a sparse one and a column no row shows."""
    rng = np.random.RandomState(seed)
    blocks = []
    for levels, missing in ((6, 0.0), (4, 0.3)):
        level = rng.randint(levels, size=n)
        present = rng.rand(n) >= missing
        blocks.append(sp.csr_matrix((np.ones(present.sum()),
                                     (np.flatnonzero(present), level[present])),
                                    shape=(n, levels)))
    blocks += [sp.csr_matrix(rng.randn(n, 2)),
               sp.random(n, 1, density=0.4, random_state=rng, format="csr"),
               sp.csr_matrix((n, 1))]
    X = sp.hstack(blocks).tocsr().astype(dtype)
    X.sort_indices()
    return X, rng


def _params(rng, d, degrees, n_dummy, k=2):
    return dict(intercept=np.array([0.3]), w=0.3 * rng.randn(d),
                P=0.5 * rng.randn(len(degrees), d, k), gamma=0.5 * rng.randn(n_dummy, k))


def _predict(X, params, degrees, kernel):
    return kernels.predict(X, params["P"], degrees=degrees, kernel=kernel,
                           intercept=float(params["intercept"][0]), w=params["w"],
                           gamma=params["gamma"])


def _prior(rng, d, n_blocks, k, feature_group, *, alpha, n, seed=0):
    """Random precisions lam and means of the groups of ``feature_group``, as a GibbsPrior
    for noise precision alpha and n rows; returns it with the precisions and means."""
    G = feature_group.max() + 1
    lam = dict(w=rng.uniform(2, 40, G), P=rng.uniform(2, 40, (n_blocks, G, k)),
               gamma=rng.uniform(2, 40, k))
    mean = dict(w=rng.randn(G), P=rng.randn(n_blocks, G, k), gamma=rng.randn(k))
    unit = 1.0 / (alpha * n)
    prior = GibbsPrior(feature_group, lam["w"] * unit, mean["w"], lam["P"] * unit,
                       mean["P"], lam["gamma"] * unit, mean["gamma"], unit, seed)
    return prior, lam, mean


def _sweep(X, y, params, groups, degrees, kernel, y_pred, prior, *, fit_intercept=True,
           fit_linear=True, n_threads=1, sw=None, alpha=0.0, beta=0.0):
    n = X.shape[0]
    sw = np.full(n, 1.0 / n) if sw is None else sw
    run_cd_epoch(groups, X.data, X.indices, X.indptr, y, sw, params["intercept"],
                 params["w"], params["P"], np.asarray(degrees, np.intc), params["gamma"],
                 kernels.KERNELS[kernel], SQUARED, alpha, beta, fit_intercept, fit_linear,
                 y_pred, n_threads=n_threads, thread_min_entries=1, prior=prior)


# ---- a sweep of variance zero is a coordinate descent epoch ------------------------------

@pytest.mark.parametrize("n_threads", [1, 3])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("variant", VARIANTS.values(), ids=VARIANTS.keys())
def test_a_sweep_of_variance_zero_is_a_coordinate_descent_epoch(variant, dtype, weighted,
                                                                 n_threads):
    """With variance 0 and prior means 0, every draw is its conditional mean, which is
    coordinate descent's step with the prior's precision as the penalty: three sweeps
    reproduce three CD epochs bit for bit (the same caches, passes and order)."""
    degrees, kernel, n_dummy = variant
    X, rng = _data(dtype=dtype)
    n, d = X.shape
    y = rng.randn(n)
    sw = rng.uniform(0.2, 2, n) if weighted else np.ones(n)
    sw /= sw.sum()
    groups = _solvers.column_groups(X, kernel)
    start = {name: a.astype(dtype) for name, a in
             _params(rng, d, degrees, n_dummy).items()}
    alpha, beta = 0.03, 0.05
    G = 3
    prior = GibbsPrior(rng.randint(G, size=d).astype(np.intp), np.full(G, alpha),
                       np.zeros(G), np.full((len(degrees), G, 2), beta),
                       np.zeros((len(degrees), G, 2)), np.full(2, beta), np.zeros(2), 0.0,
                       12345)
    results = []
    for sampling in (False, True):
        params = {name: a.copy() for name, a in start.items()}
        y_pred = _predict(X, params, degrees, kernel).astype(np.float64)
        for _ in range(3):
            _sweep(X, y, params, groups, degrees, kernel, y_pred,
                   prior if sampling else None, n_threads=n_threads, sw=sw, alpha=alpha,
                   beta=beta)
        results.append((params, y_pred))
    (cd, cd_pred), (gibbs, gibbs_pred) = results
    for name in cd:
        np.testing.assert_array_equal(gibbs[name], cd[name], err_msg=name)
    np.testing.assert_array_equal(gibbs_pred, cd_pred)


# ---- one coordinate's draws against its exact conditional --------------------------------

def _standardised_draws(X, y, start, degrees, kernel, prior, lam, mean, alpha, *,
                        what, fit_intercept, fit_linear, replications=2000):
    """Run ``replications`` sweeps, each from the same parameters ``start``, and return
    the draws of the coordinates drawn first (so from their exact conditional given
    ``start``), standardised by the conditional computed by brute force: (z, count).
    With ``prior.relaxation`` = omega, a draw from N(m, s^2) over-relaxed from the
    value v is N(m + (1 - omega) (v - m), omega (2 - omega) s^2): the standardisation
    is that distribution's."""
    n, d = X.shape
    column_groups = _solvers.column_groups(X, kernel)
    if what == "intercept":
        coordinates = [("intercept", (0,), None, None)]
    elif what == "w":
        first = column_groups[2][column_groups[1][0]:column_groups[1][1]]
        coordinates = [("w", (j,), lam["w"][prior.feature_group[j]],
                        mean["w"][prior.feature_group[j]]) for j in first]
    elif what == "gamma":
        coordinates = [("gamma", (0, 0), lam["gamma"][0], mean["gamma"][0])]
    else:  # block 0, component 0: the first group's columns
        first = column_groups[2][column_groups[1][0]:column_groups[1][1]]
        coordinates = [("P", (0, j, 0), lam["P"][0, prior.feature_group[j], 0],
                        mean["P"][0, prior.feature_group[j], 0]) for j in first]
    # The exact conditional of each: the prediction is affine in the coordinate.
    exact = []
    for name, index, precision, prior_mean in coordinates:
        at = []
        for value in (0.0, 1.0):
            params = {key: a.copy() for key, a in start.items()}
            params[name][index] = value
            at.append(_predict(X, params, degrees, kernel))
        slope, offset = at[1] - at[0], at[0]
        if precision is None:  # the intercept: flat prior
            precision, prior_mean = 0.0, 0.0
        total = alpha * slope @ slope + precision
        exact.append(((alpha * slope @ (y - offset) + precision * prior_mean) / total,
                      total ** -0.5))
    draws = np.empty((replications, len(coordinates)))
    y_start = _predict(X, start, degrees, kernel)
    for r in range(replications):
        params = {key: a.copy() for key, a in start.items()}
        _sweep(X, y, params, column_groups, degrees, kernel, y_start.copy(),
               prior._replace(seed=r), fit_intercept=fit_intercept, fit_linear=fit_linear)
        draws[r] = [params[name][index] for name, index, _, _ in coordinates]
    m, s = np.array(exact).T
    omega = prior.relaxation
    v = np.array([start[name][index] for name, index, _, _ in coordinates])
    m, s = m + (1 - omega) * (v - m), s * np.sqrt(omega * (2 - omega))
    return (draws - m) / s, len(coordinates)


def _assert_standard_normal(z):
    """Every column of z (draws, coordinates) has mean 0; together they are N(0, 1)."""
    z = z.reshape(z.shape[0], -1)
    assert np.all(np.abs(z.mean(axis=0)) * np.sqrt(z.shape[0]) < 4.5), z.mean(axis=0)
    z = z.ravel()
    # Variance: (N - 1) s^2 ~ chi2(N - 1), checked at about 4 standard deviations.
    chi2 = (z.size - 1) * z.var(ddof=1)
    assert stats.chi2.sf(chi2, z.size - 1) > 1e-4 and stats.chi2.cdf(chi2, z.size - 1) > 1e-4
    assert stats.kstest(z, "norm").pvalue > 1e-4


@pytest.mark.parametrize("what, variant, relaxation", [
    ("intercept", "m2", 1.0), ("w", "m2", 1.0), ("P", "m2", 1.0), ("P", "m2-3", 1.0),
    ("P", "m3", 1.0), ("P", "m5", 1.0), ("P", "subsets", 1.0), ("gamma", "m3-shared", 1.0),
    ("intercept", "m2", 1.5), ("w", "m2", 1.5), ("P", "m2", 1.5), ("P", "m3", 0.6),
    ("P", "subsets", 1.9), ("gamma", "m3-shared", 1.5)])
def test_first_draws_of_a_sweep_follow_their_exact_conditional(what, variant, relaxation):
    """Each sweep starts from the same parameters: the first coordinates drawn (the
    intercept; the first group of linear weights or factors, whose columns share no row,
    so each is drawn given the rest as it was; the first dummy) are then independent draws
    from their conditional, which is computed here by brute force from predictions with
    the coordinate at 0 and 1 (the model is affine in it), with per-group priors; or,
    over-relaxed, from the distribution the over-relaxed draw has given the start."""
    degrees, kernel, n_dummy = VARIANTS[variant]
    X, rng = _data(n=40)
    n, d = X.shape
    y = rng.randn(n)
    start = _params(rng, d, degrees, n_dummy)
    alpha = 3.0
    prior, lam, mean = _prior(rng, d, len(degrees), 2, rng.randint(3, size=d).astype(np.intp),
                              alpha=alpha, n=n)
    prior = prior._replace(relaxation=relaxation)
    z, count = _standardised_draws(X, y, start, degrees, kernel, prior, lam, mean,
                                   alpha, what=what, fit_intercept=what == "intercept",
                                   fit_linear=what == "w")
    assert count >= 1 and (what not in ("w", "P") or count > 1)
    _assert_standard_normal(z)


@pytest.mark.parametrize("relaxation", [1.0, 1.5])
def test_linear_chain_samples_the_exact_joint_posterior(relaxation):
    """A whole chain over the intercept and linear weights of correlated columns (factor
    blocks: none), hyperparameters fixed: the sample mean and covariance match the exact
    Gaussian posterior (means by batch-means z-tests, covariances to 10%), with plain
    and with over-relaxed draws."""
    rng = np.random.RandomState(3)
    n, d = 40, 4
    dense = rng.randn(n, d) + 0.8 * rng.randn(n, 1)  # correlated columns
    X = sp.csr_matrix(dense)
    y = dense @ rng.randn(d) + 0.5 + 0.7 * rng.randn(n)
    alpha = 2.0
    feature_group = np.array([0, 0, 1, 1], dtype=np.intp)
    lam, mu = np.array([1.5, 4.0]), np.array([0.3, -0.2])
    unit = 1 / (alpha * n)
    empty = np.zeros((0, 2, 1))
    prior = GibbsPrior(feature_group, lam * unit, mu, empty, empty, np.zeros(1),
                       np.zeros(1), unit, 0, relaxation)
    # Exact posterior of theta = (intercept, w): flat prior on the intercept.
    design = np.column_stack([np.ones(n), dense])
    precision = alpha * design.T @ design + np.diag(np.r_[0.0, lam[feature_group]])
    cov = np.linalg.inv(precision)
    post_mean = cov @ (alpha * design.T @ y + np.r_[0.0, lam[feature_group] * mu[feature_group]])
    params = dict(intercept=np.zeros(1), w=np.zeros(d), P=np.zeros((0, d, 1)),
                  gamma=np.zeros((0, 1)))
    y_pred = np.zeros(n)
    groups = _solvers.column_groups(X, "anova")
    sweeps, burn_in = 20000, 100
    trace = np.empty((sweeps, d + 1))
    for t in range(sweeps):
        run_cd_epoch(groups, X.data, X.indices, X.indptr, y, np.full(n, 1 / n),
                     params["intercept"], params["w"], params["P"], np.zeros(0, np.intc),
                     params["gamma"], 0, SQUARED, 0.0, 0.0, True, True, y_pred,
                     prior=prior._replace(seed=t))
        trace[t] = np.r_[params["intercept"], params["w"]]
    trace = trace[burn_in:]
    batches = trace.reshape(50, -1, d + 1).mean(axis=1)  # batch means: autocorrelation
    error = batches.std(axis=0, ddof=1) / np.sqrt(50)
    assert np.all(np.abs(trace.mean(axis=0) - post_mean) < 4 * error), (
        trace.mean(axis=0), post_mean, error)
    np.testing.assert_allclose(np.cov(trace.T), cov, rtol=0.1, atol=0.1 * np.abs(cov).max())
    # And the predictions kept by the sweeps are those of the parameters.
    np.testing.assert_allclose(y_pred, design @ trace[-1], atol=1e-10)


def test_columns_no_row_shows_are_drawn_from_their_prior():
    """Draws of unseen columns are their prior N(mean, 1 / lam) exactly, one per column,
    independent across columns and across sweeps (another seed), also on threads."""
    n, d = 30, 3000
    X = sp.csr_matrix((n, d))
    rng = np.random.RandomState(1)
    feature_group = rng.randint(2, size=d).astype(np.intp)
    lam, mu = np.array([4.0, 0.25]), np.array([1.0, -2.0])
    alpha = 1.5
    unit = 1 / (alpha * n)
    P_reg = np.broadcast_to((lam * unit)[np.newaxis, :, np.newaxis], (1, 2, 2))
    P_mean = np.broadcast_to(mu[np.newaxis, :, np.newaxis], (1, 2, 2))
    draws = []
    for seed, threads in ((7, 1), (8, 2)):
        params = dict(intercept=np.zeros(1), w=np.zeros(d), P=np.zeros((1, d, 2)),
                      gamma=np.zeros((0, 2)))
        prior = GibbsPrior(feature_group, lam * unit, mu, P_reg, P_mean, np.zeros(2),
                           np.zeros(2), unit, seed)
        _sweep(X, np.zeros(n), params, _solvers.column_groups(X, "anova"), (2,), "anova",
               np.zeros(n), prior, n_threads=threads)
        z = (np.column_stack([params["w"], params["P"][0]])
             - mu[feature_group, np.newaxis]) * np.sqrt(lam[feature_group, np.newaxis])
        _assert_standard_normal(z)
        assert np.all(np.abs(np.corrcoef(z.T) - np.eye(3)) < 4 / np.sqrt(d))
        draws.append(z)
    assert abs(np.corrcoef(draws[0].ravel(), draws[1].ravel())[0, 1]) < 4 / np.sqrt(3 * d)


def test_sweeps_are_reproducible_and_draws_do_not_depend_on_the_thread():
    """The same seed gives the same sweep; on 3 threads the draws are the same numbers
    (the sums only add in another order), another seed gives another sweep."""
    X, rng = _data(n=90)
    n, d = X.shape
    y = rng.randn(n)
    start = _params(rng, d, (2, 3), 0)
    prior, _, _ = _prior(rng, d, 2, 2, rng.randint(3, size=d).astype(np.intp), alpha=2.0,
                         n=n, seed=99)
    groups = _solvers.column_groups(X, "anova")
    runs = []
    for threads, seed in ((1, 99), (1, 99), (3, 99), (1, 100)):
        params = {name: a.copy() for name, a in start.items()}
        y_pred = _predict(X, params, (2, 3), "anova")
        _sweep(X, y, params, groups, (2, 3), "anova", y_pred, prior._replace(seed=seed),
               n_threads=threads)
        runs.append(np.concatenate([a.ravel() for a in params.values()]))
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_allclose(runs[2], runs[0], rtol=1e-9, atol=1e-9)
    assert np.mean(np.abs(runs[3] - runs[0]) > 1e-3) > 0.9


def test_cd_epoch_rejects_a_prior_it_cannot_sample_or_of_the_wrong_shape():
    X, rng = _data(n=20)
    n, d = X.shape
    params = _params(rng, d, (2,), 0)
    prior, _, _ = _prior(rng, d, 1, 2, np.zeros(d, np.intp), alpha=1.0, n=n)
    groups = _solvers.column_groups(X, "anova")
    args = (groups, X.data, X.indices, X.indptr, rng.randn(n), np.full(n, 1 / n),
            params["intercept"], params["w"], params["P"], np.array([2], np.intc),
            params["gamma"], 0)
    with pytest.raises(ValueError, match="squared loss"):
        run_cd_epoch(*args, _losses.loss_code("logistic"), 0.0, 0.0, True, True,
                     np.zeros(n), prior=prior)
    for bad in (prior._replace(P_reg=np.ones((2, 1, 2))),
                prior._replace(feature_group=np.full(d, 1, np.intp)),
                prior._replace(scale=-1.0), prior._replace(relaxation=2.0),
                prior._replace(relaxation=0.0)):
        with pytest.raises(ValueError, match="prior"):
            run_cd_epoch(*args, SQUARED, 0.0, 0.0, True, True, np.zeros(n), prior=bad)


# ---- the hyperparameters and latent targets against their definitions ----------------------

def _grid_check(draws, log_density, grid):
    """Chi-square test of ``draws`` against the density exp(log_density) tabulated on an
    even ``grid`` (unnormalised), in 20 bins of equal probability."""
    density = np.exp(log_density - log_density.max())
    cdf = np.cumsum(density)
    cdf /= cdf[-1]
    edges = np.interp(np.linspace(0, 1, 21)[1:-1], cdf, grid)
    observed = np.bincount(np.searchsorted(edges, draws), minlength=20)
    assert stats.chisquare(observed).pvalue > 1e-4, observed


def test_hyperpriors_have_libfm_defaults():
    assert (_sampler.ALPHA_0, _sampler.BETA_0, _sampler.GAMMA_0, _sampler.MU_0) == (1, 1, 1, 0)


def test_prior_precision_and_mean_follow_their_conditionals():
    """lam | mu, theta and then mu | lam, theta, against the densities written from the
    model (Gamma(ALPHA_0/2, GAMMA_0/2) prior on lam, N(MU_0, 1/(BETA_0 lam)) on mu, theta
    ~ N(mu, 1/lam)), tabulated on a grid."""
    rng = np.random.RandomState(5)
    theta = 0.7 + 0.5 * rng.randn(12, 1)
    groups = FeatureGroups(np.zeros(12, np.intp), 1)
    mu_old = np.array([[0.4]])
    draws = np.array([np.r_[_sampler.draw_group_prior(rng, theta, groups, mu_old)].ravel()
                      for _ in range(4000)])
    lam, mu = draws[:, 0], draws[:, 1]
    a0, b0, g0, m0 = _sampler.ALPHA_0, _sampler.BETA_0, _sampler.GAMMA_0, _sampler.MU_0
    grid = np.linspace(1e-4, 30, 20001)
    log_density = ((a0 / 2 - 1) * np.log(grid) - g0 / 2 * grid  # hyperprior
                   + 0.5 * np.log(grid) - b0 * grid / 2 * (mu_old[0, 0] - m0) ** 2
                   + 6 * np.log(grid) - grid / 2 * np.sum((theta - mu_old) ** 2))
    _grid_check(lam, log_density, grid)
    # mu given each drawn lam: standardise by the conditional, tabulated per draw.
    z = np.empty(lam.shape[0])
    mus = np.linspace(-3, 4, 4001)
    for i in range(lam.shape[0]):
        log_density = (-b0 * lam[i] / 2 * (mus - m0) ** 2
                       - lam[i] / 2 * np.sum((theta - mus) ** 2, axis=0))
        weights = np.exp(log_density - log_density.max())
        weights /= weights.sum()
        mean = weights @ mus
        z[i] = (mu[i] - mean) / np.sqrt(weights @ (mus - mean) ** 2)
    _assert_standard_normal(z)


def test_groups_have_their_own_hyperparameters():
    """Two groups of very different spread get precisions of their own."""
    rng = np.random.RandomState(0)
    index = np.repeat([0, 1], 200).astype(np.intp)
    theta = np.column_stack([np.r_[0.1 * rng.randn(200), 5 + 3 * rng.randn(200)]] * 2)
    lam, mu = _sampler.draw_group_prior(rng, theta, FeatureGroups(index, 2),
                                        np.zeros((2, 2)))
    assert lam.shape == mu.shape == (2, 2)
    assert np.all(lam[0] > 50) and np.all(lam[1] < 0.5)
    assert np.all(np.abs(mu[0]) < 0.1) and np.all(np.abs(mu[1] - 5) < 0.8)


def test_noise_precision_follows_its_conditional():
    rng = np.random.RandomState(6)
    residuals = 0.8 * rng.randn(25)
    draws = np.array([_sampler.draw_noise_precision(rng, residuals) for _ in range(4000)])
    a0, g0 = _sampler.ALPHA_0, _sampler.GAMMA_0
    grid = np.linspace(1e-4, 10, 20001)
    log_density = ((a0 / 2 - 1) * np.log(grid) - g0 / 2 * grid
                   + 12.5 * np.log(grid) - grid / 2 * (residuals @ residuals))
    _grid_check(draws, log_density, grid)


@pytest.mark.parametrize("f", [-9.0, -1.0, 0.0, 0.5, 3.0, 40.0])
@pytest.mark.parametrize("label", [-1.0, 1.0])
def test_latent_targets_are_truncated_normals(f, label):
    """z ~ N(f, 1) truncated to the side of 0 of the label, also far in the tail."""
    rng = np.random.RandomState(2)
    z = _sampler.Probit().draw_latent(rng, np.full(3000, f), np.full(3000, label))
    assert np.all(np.isfinite(z)) and np.all(z * label >= 0)
    low, high = (-f, np.inf) if label > 0 else (-np.inf, -f)
    assert stats.kstest(z - f, stats.truncnorm(low, high).cdf).pvalue > 1e-4
