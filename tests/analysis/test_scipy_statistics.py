"""The distributions behind every interval and test come from scipy (`analysis.intervals`):
checked against published tables and against `scipy.stats` where Troupe's hand-written
versions fell short."""

from __future__ import annotations

import pytest
import scipy.stats

from analysis.intervals import f_sf, normal_sf, student_t_quantile, t_sf


def test_t_quantiles_beyond_a_thousand_df_are_exact_in_the_tails():
    # A run with 1,001 evaluations asks for t(1 − α/n, n − 2): the Cornish–Fisher shortcut
    # the hand-written quantile used beyond 1,000 df was 4e-4 off at 1 − 1e-9.
    for df in (1001, 1500, 5000):
        for q in (0.975, 1 - 0.05 / df, 1 - 1e-9):
            assert student_t_quantile(q, df) == pytest.approx(scipy.stats.t.ppf(q, df), rel=1e-10)


def test_f_tails_match_the_tables():
    # F(0.95; 2, 10) = 4.103, F(0.99; 3, 20) = 4.938, F(0.95; 1, ∞) = 1.96².
    assert f_sf(4.1028, 2, 10) == pytest.approx(0.05, abs=1e-4)
    assert f_sf(4.9382, 3, 20) == pytest.approx(0.01, abs=1e-4)
    assert f_sf(1.959964**2, 1, 1e9) == pytest.approx(0.05, abs=1e-5)
    assert f_sf(0.0, 3, 7) == 1.0
    # Real (Welch) degrees of freedom, as the heterogeneity test passes them.
    assert f_sf(2.5, 3, 7.4) == pytest.approx(scipy.stats.f.sf(2.5, 3, 7.4), rel=1e-12)


def test_t_and_normal_tails():
    assert t_sf(2.7764, 4) == pytest.approx(0.025, abs=1e-5)
    assert t_sf(-2.7764, 4) == pytest.approx(0.975, abs=1e-5)
    assert normal_sf(1.959964) == pytest.approx(0.025, abs=1e-7)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="q must lie"):
        student_t_quantile(1.0, 3)
    with pytest.raises(ValueError, match="df must be"):
        student_t_quantile(0.9, 2.5)
