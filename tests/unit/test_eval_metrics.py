"""Evaluation arithmetic against hand-computed numbers: avg@K, its standard error, the unbiased
pass@k estimator (Chen et al. 2021), pairwise win / tie / loss, and the forgetting gate."""
import math

import pytest

from nemo_cascade.evaluate import stage_scores
from nemo_cascade.evaluate import estimators


def test_avg_at_k_is_the_mean_of_item_means():
    values = [[1, 0], [1, 1], [0, 0]]  # item means 0.5, 1, 0
    assert estimators.item_means(values) == [0.5, 1.0, 0.0]
    assert estimators.avg_at_k(values) == pytest.approx(0.5)
    # K = 1 is plain accuracy
    assert estimators.avg_at_k([[1], [0], [0], [1]]) == 0.5
    # non-binary values (RLHF ties count 0.5)
    assert estimators.avg_at_k([[0.5, 1.0], [0.0, 0.5]]) == pytest.approx(0.5)


def test_standard_error_over_items():
    # item means 0.5, 1, 0: mean 0.5, sample variance (0 + 0.25 + 0.25) / 2 = 0.25, se = 0.5 /
    # sqrt(3)
    assert estimators.standard_error([[1, 0], [1, 1], [0, 0]]) == pytest.approx(0.5 / math.sqrt(3))
    assert estimators.standard_error([[1, 1]]) == 0.0
    assert estimators.standard_error([[1], [1], [1]]) == 0.0


def test_pass_at_k_hand_computed():
    # n=5, c=2, k=2: 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert estimators.pass_at_k_item(5, 2, 2) == pytest.approx(0.7)
    # n=4, c=1, k=1: c/n
    assert estimators.pass_at_k_item(4, 1, 1) == pytest.approx(0.25)
    # n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252
    assert estimators.pass_at_k_item(10, 3, 5) == pytest.approx(1 - 21 / 252)
    assert estimators.pass_at_k_item(8, 0, 4) == 0.0
    assert estimators.pass_at_k_item(3, 1, 3) == 1.0  # n - c < k: one of all 3 samples is correct
    assert estimators.pass_at_k_item(6, 6, 2) == 1.0


def test_pass_at_k_matches_the_combinatorial_formula_everywhere():
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1.0 if n - c < k else 1 - math.comb(n - c, k) / math.comb(n, k)
                assert estimators.pass_at_k_item(n, c, k) == pytest.approx(exact, abs=1e-12), \
                    (n, c, k)


def test_pass_at_1_equals_avg_for_binary_values_and_summary_keys():
    correct = [[True, False, False, True], [False] * 4, [True] * 4]
    values = [[float(x) for x in row] for row in correct]
    s = estimators.summarize(values, correct)
    assert s["avg@4"] == pytest.approx((0.5 + 0 + 1) / 3)
    assert s["pass@1"] == pytest.approx(s["avg@4"])
    assert s["pass@4"] == pytest.approx(2 / 3)
    assert set(estimators.summarize([[1.0]], [[True]])) == {"avg@1", "stderr", "pass@1"}


def test_bad_shapes_and_arguments_raise():
    with pytest.raises(ValueError):
        estimators.avg_at_k([[1, 0], [1]])
    with pytest.raises(ValueError):
        estimators.avg_at_k([])
    with pytest.raises(ValueError):
        estimators.pass_at_k_item(3, 4, 1)
    with pytest.raises(ValueError):
        estimators.pass_at_k_item(3, 1, 4)


def test_pairwise_outcomes_and_bt_preference():
    assert estimators.pairwise_outcome(2.0, 1.0) == 1.0
    assert estimators.pairwise_outcome(1.0, 2.0) == 0.0
    assert estimators.pairwise_outcome(1.0, 1.0) == 0.5
    assert estimators.pairwise_outcome(1.0 + estimators.TIE_TOLERANCE / 2, 1.0) == 0.5
    assert estimators.bt_preference(1.0, 0.0) == pytest.approx(1 / (1 + math.exp(-1)))
    assert estimators.bt_preference(0.0, 1.0) == pytest.approx(1 - 1 / (1 + math.exp(-1)))
    assert estimators.bt_preference(3.0, 3.0) == 0.5
    assert (estimators.bt_preference(-800.0, 0.0) == pytest.approx(0.0)
            and estimators.bt_preference(800.0, 0.0) == 1.0)


def test_forgetting_gate_needs_a_drop_beyond_noise_and_threshold():
    history = [("0-sft", {"gsm8k": (0.50, 0.01), "ifeval": (0.30, 0.01)}),
               ("1-rlhf", {"gsm8k": (0.60, 0.01), "ifeval": (0.28, 0.01)})]
    # gsm8k: best 0.60 after 1-rlhf; a 0.05 drop > max(0.02, 2 * sqrt(2) * 0.01 = 0.0283) ->
    # regression ifeval: best 0.30; a 0.01 drop is within the threshold
    found = stage_scores.regressions(
        history, {"gsm8k": (0.55, 0.01), "ifeval": (0.29, 0.01), "new": (0.1, 0.0)})
    assert [(r.suite, r.best_stage) for r in found] == [("gsm8k", "1-rlhf")]
    assert found[0].threshold == pytest.approx(2 * math.sqrt(2) * 0.01)
    # a noisy estimate widens the threshold: se 0.05 each -> 2 * sqrt(0.005) = 0.141 > 0.05 drop
    assert stage_scores.regressions([("a", {"x": (0.6, 0.05)})], {"x": (0.55, 0.05)}) == []
    assert stage_scores.regressions([("a", {"x": (0.6, 0.0)})],
                                    {"x": (0.57, 0.0)})[0].threshold == 0.02
    table = stage_scores.forgetting_matrix(history)
    assert table.splitlines()[0] == "| stage | gsm8k | ifeval |"
    assert "| 1-rlhf | 60.0 | 28.0 |" in table
