"""The reference matrix of fits (``tests/_fit_matrix.py``): every case refitted, its
outputs equal to those recorded, bit for bit on a machine of the processor that recorded
them and within a relative 1e-9 (float64) or 1e-4 (float32) on another.

A failure names the case; if the change of its results is deliberate, re-record the
cases it moves in a commit of its own (``python tests/_fit_matrix.py --record --only
ID_PART``) and say which and why.
"""
import os

import numpy as np
import pytest

import _fit_matrix

CASES = _fit_matrix.cases()


@pytest.fixture(scope="module")
def reference():
    if not os.path.exists(_fit_matrix.REFERENCE):
        pytest.fail(f"{_fit_matrix.REFERENCE} is missing: record it with "
                    f"python tests/_fit_matrix.py --record")
    with np.load(_fit_matrix.REFERENCE, allow_pickle=False) as npz:
        return {name: npz[name] for name in npz.files}


def test_the_recording_has_every_case(reference):
    recorded = set(reference["case_ids"].tolist())
    assert recorded == set(CASES), (
        f"cases added {sorted(set(CASES) - recorded)[:3]}..., removed "
        f"{sorted(recorded - set(CASES))[:3]}...: re-record the matrix")


@pytest.mark.parametrize("case_id", sorted(CASES), ids=sorted(CASES))
def test_fit_matches_the_reference(reference, case_id):
    expected = reference[_fit_matrix.key(case_id)]
    got = _fit_matrix.run(CASES[case_id])
    assert got.shape == expected.shape
    if str(reference["processor"]) == _fit_matrix.processor():
        np.testing.assert_array_equal(got, expected, err_msg=case_id)
    else:
        rtol = 1e-4 if CASES[case_id]["dtype"] == "float32" else 1e-9
        np.testing.assert_allclose(got, expected, rtol=rtol,
                                   atol=rtol * max(1.0, np.abs(expected).max()),
                                   err_msg=case_id)
