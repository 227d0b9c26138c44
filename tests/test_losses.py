"""Tests of the losses shared by the solvers (polylite._engine._losses)."""
import warnings

import numpy as np
import pytest
from scipy.special import expit

from polylite._engine import _losses as L

NAMES = ["squared", "logistic", "squared_hinge"]


def closed_form(name, y, p):
    """(value, derivative in p) of the named loss, written independently in NumPy."""
    y, p = np.asarray(y, dtype=np.float64), np.asarray(p, dtype=np.float64)
    if name == "squared":
        return 0.5 * (p - y) ** 2, p - y
    if name == "logistic":
        return np.logaddexp(0.0, -y * p), -y * expit(-y * p)
    if name == "squared_hinge":
        margin = np.maximum(0.0, 1.0 - y * p)
        return margin ** 2, -2.0 * y * margin
    raise AssertionError(name)


def sample(name, rng, n=200):
    """Labels (real for squared, +-1 otherwise) and predictions away from the hinge kink."""
    p = rng.uniform(-4, 4, size=n)
    if name == "squared":
        y = rng.normal(scale=2.0, size=n)
    else:
        y = rng.choice([-1.0, 1.0], size=n)
        if name == "squared_hinge":
            keep = np.abs(1 - y * p) > 1e-3
            y, p = y[keep], p[keep]
    return y, p


@pytest.mark.parametrize("name", NAMES)
def test_values_and_derivatives_match_closed_form(name, rng):
    y, p = sample(name, rng)
    value, deriv = closed_form(name, y, p)
    np.testing.assert_allclose(L.loss(name, y, p), value, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(L.loss_gradient(name, y, p), deriv, rtol=1e-13, atol=1e-15)


def test_hand_computed_values():
    assert L.loss("squared", [3.0], [1.0])[0] == 2.0
    assert L.loss_gradient("squared", [3.0], [1.0])[0] == -2.0
    assert L.loss("logistic", [1.0], [0.0])[0] == pytest.approx(np.log(2))
    assert L.loss_gradient("logistic", [1.0], [0.0])[0] == pytest.approx(-0.5)
    assert L.loss_gradient("logistic", [-1.0], [0.0])[0] == pytest.approx(0.5)
    assert L.loss("squared_hinge", [1.0], [0.25])[0] == pytest.approx(0.5625)
    assert L.loss_gradient("squared_hinge", [1.0], [0.25])[0] == pytest.approx(-1.5)
    assert L.loss("squared_hinge", [-1.0], [-2.0])[0] == 0.0
    assert L.loss_gradient("squared_hinge", [-1.0], [-2.0])[0] == 0.0
    assert L.loss_gradient("squared_hinge", [1.0], [1.0])[0] == 0.0   # continuous at kink


@pytest.mark.parametrize("name", NAMES)
def test_derivative_matches_finite_differences(name, rng):
    y, p = sample(name, rng)
    h = 1e-6
    num = (L.loss(name, y, p + h) - L.loss(name, y, p - h)) / (2 * h)
    np.testing.assert_allclose(L.loss_gradient(name, y, p), num, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name", NAMES)
def test_finite_difference_check_is_not_vacuous(name, rng):
    y, p = sample(name, rng)
    h = 1e-6
    num = (L.loss(name, y, p + h) - L.loss(name, y, p - h)) / (2 * h)
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(1.001 * L.loss_gradient(name, y, p) + 1e-3, num,
                                   rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("p", [1000.0, -1000.0, 1e6, -1e300])
@pytest.mark.parametrize("y", [1.0, -1.0])
def test_logistic_is_stable_for_large_predictions(y, p):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise"):
            value = L.loss("logistic", [y], [p])[0]
            deriv = L.loss_gradient("logistic", [y], [p])[0]
    z = y * p
    assert np.isfinite(value) and np.isfinite(deriv)
    if z > 0:          # confident and right: log(1 + e^-z) underflows to 0
        assert value == pytest.approx(0.0, abs=1e-300)
        assert deriv == pytest.approx(0.0, abs=1e-300)
    else:              # confident and wrong: loss -z, derivative -y
        assert value == pytest.approx(-z, rel=1e-15)
        assert deriv == pytest.approx(-y, rel=1e-15)


def test_logistic_stable_vectorised():
    y = np.array([1.0, -1.0, 1.0, -1.0])
    p = np.array([1000.0, 1000.0, -1000.0, -1000.0])
    np.testing.assert_allclose(L.loss("logistic", y, p), [0.0, 1000.0, 1000.0, 0.0])
    np.testing.assert_allclose(L.loss_gradient("logistic", y, p), [0.0, 1.0, -1.0, 0.0],
                               atol=1e-300)


def test_smoothness_constants():
    assert L.smoothness("squared") == 1.0
    assert L.smoothness("logistic") == 0.25
    assert L.smoothness("squared_hinge") == 2.0


@pytest.mark.parametrize("name", NAMES)
def test_smoothness_bounds_second_derivative(name):
    mu = L.smoothness(name)
    p = np.linspace(-6, 6, 2401)            # includes 0 and the hinge kinks at +-1
    h = 1e-4
    labels = [-2.5, -1.0, 0.0, 1.0, 3.0] if name == "squared" else [-1.0, 1.0]
    curvature = []
    for yv in labels:
        y = np.full_like(p, yv)
        second = (L.loss_gradient(name, y, p + h) - L.loss_gradient(name, y, p - h)) / (2 * h)
        assert np.all(second >= -1e-8)      # convex
        curvature.append(second)
        # The same from the values alone.
        second_v = (L.loss(name, y, p + h) - 2 * L.loss(name, y, p)
                    + L.loss(name, y, p - h)) / h ** 2
        assert np.all(second_v <= mu * (1 + 1e-4) + 1e-6)
    curvature = np.concatenate(curvature)
    assert np.all(curvature <= mu * (1 + 1e-6))
    # ... and the bound is tight (attained: at p = 0 for logistic, y p < 1 for the hinge).
    assert curvature.max() == pytest.approx(mu, rel=1e-6)


def test_inputs_are_flattened_and_cast(rng):
    y = rng.choice([-1.0, 1.0], size=(3, 4)).astype(np.float32)
    p = rng.normal(size=(3, 4)).astype(np.float32)
    out = L.loss("logistic", y, p)
    assert out.shape == (12,) and out.dtype == np.float64
    np.testing.assert_allclose(out, closed_form("logistic", y.ravel(), p.ravel())[0],
                               rtol=1e-13)
    assert L.loss_gradient("squared", [], []).shape == (0,)


def test_length_mismatch_raises():
    with pytest.raises(ValueError, match="y has 3 entries but p has 2"):
        L.loss("squared", [1.0, 2.0, 3.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="y has 1 entries but p has 2"):
        L.loss_gradient("logistic", [1.0], [1.0, 2.0])


@pytest.mark.parametrize("name", ["hinge", "Squared", "log", "", None, 0, ["squared"]])
def test_unknown_loss_raises(name):
    with pytest.raises(ValueError, match="unknown loss"):
        L.loss_code(name)
    with pytest.raises(ValueError, match="unknown loss"):
        L.loss(name, [1.0], [1.0])
    with pytest.raises(ValueError, match="unknown loss"):
        L.loss_gradient(name, [1.0], [1.0])
    with pytest.raises(ValueError, match="unknown loss"):
        L.smoothness(name)


def test_loss_codes_are_distinct():
    codes = [L.loss_code(n) for n in NAMES]
    assert sorted(codes) == sorted(set(codes))
    assert set(L.LOSSES) == set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_local_model_has_the_loss_derivative_and_a_curvature(name, rng):
    """The local model (coordinate descent's on relational tables) touches the loss: its
    derivative is the loss's; its curvature is the second derivative (squared, and
    logistic on the right side), the Jaakkola-Jordan one on the logistic's wrong side, and
    for the squared hinge 2 within hinge_slack of the hinge or beyond it, 0 past that."""
    y, p = sample(name, rng)
    derivative, curvature = L.local_model(name, y, p)
    np.testing.assert_allclose(derivative, L.loss_gradient(name, y, p), rtol=1e-13,
                               atol=1e-15)
    z = y * p
    if name == "squared":
        expected = np.ones_like(p)
    elif name == "logistic":
        expected = np.where(z >= 0, expit(z) * expit(-z), np.tanh(z / 2) / (2 * z))
    else:
        expected = np.where(z < 1.5, 2.0, 0.0)
    np.testing.assert_allclose(curvature, expected, rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_local_model_excess_bounds_the_loss_above_the_model(name, rng):
    """For every move r of margin at most the radius, the loss exceeds its local model
    by at most loss_local_excess(kappa r^2, radius); the bound is not vacuous (the
    logistic loss's is within a factor 3 of the largest excess), and the hinge's is 0
    within hinge_slack."""
    y, p = sample(name, rng)
    derivative, curvature = L.local_model(name, y, p)
    value = L.loss(name, y, p)
    for radius in (1e-4, 0.1, 0.5, 2.0):
        r = rng.uniform(-radius, radius, size=p.shape)  # (|y| = 1: moves of the margin)
        excess = L.loss(name, y, p + r) - (value + derivative * r + 0.5 * curvature * r ** 2)
        bounds = np.array([L.local_model_excess(name, c * m ** 2, 1.0, radius)
                           for c, m in zip(curvature, r)])
        assert np.all(excess <= bounds + 1e-12 * np.maximum(value, 1)), radius
        if name == "logistic" and radius >= 0.1:
            worst = np.argmax(excess / np.maximum(bounds, 1e-300))
            assert excess[worst] > bounds[worst] / 3
    if name == "squared_hinge":
        assert L.local_model_excess(name, 1.0, 2.0, 0.5) == 0
        assert L.local_model_excess(name, 1.0, 2.0, 0.75) == pytest.approx(2 * 0.25 ** 2)
    if name == "squared":
        assert L.local_model_excess(name, 1.0, 1.0, 100.0) == 0
