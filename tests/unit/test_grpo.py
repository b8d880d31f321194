"""GRPO math against hand-computed values (nemo_cascade.algorithms.grpo)."""
import math

import pytest
import torch

from nemo_cascade.algorithms import group_filter, grpo
from nemo_cascade.config import GRPO
from nemo_cascade.types import Prompt, PromptGroup

T = torch.tensor
NEG_INF = float("-inf")


def close(actual, expected, atol=1e-5):
    torch.testing.assert_close(torch.as_tensor(actual, dtype=torch.float64),
                               torch.as_tensor(expected, dtype=torch.float64), atol=atol, rtol=0)


def group(prompt, responses, rewards, finish=None, mode="no_think"):
    return PromptGroup(
        prompt=Prompt(prompt_tokens=prompt, domain="math", label="1", mode=mode),
        response_tokens_G_T=responses,
        rollout_logprobs_G_T=[[-0.1 * (k + 1) for k in range(len(r))] for r in responses],
        finish_reason_G=finish or ["stop"] * len(responses),
        rewards_G=rewards)


# --------------------------------------------------------------------------------------- advantages

def test_group_advantages_unbiased_std():
    # mean 0.5; unbiased std sqrt(1/3) = 0.57735 → ±0.5/0.57735 = ±0.866 (population std would give
    # ±1)
    close(grpo.group_advantages(T([1.0, 0.0, 0.0, 1.0]), eps=0.0),
          [0.866025, -0.866025, -0.866025, 0.866025])
    # mean 0.25; squared deviations 0.5625 + 3·0.0625 = 0.75, /3 → std 0.5
    close(grpo.group_advantages(T([1.0, 0.0, 0.0, 0.0]), eps=0.0), [1.5, -0.5, -0.5, -0.5])


def test_group_advantages_eps_singleton_and_constant():
    # [1, 0]: mean 0.5, std sqrt(0.5) = 0.70711; 0.5 / (0.70711 + 0.5) = sqrt(2) − 1
    close(grpo.group_advantages(T([1.0, 0.0]), eps=0.5), [0.414214, -0.414214])
    close(grpo.group_advantages(T([3.0]), eps=1e-6), [0.0])
    close(grpo.group_advantages(T([2.0, 2.0, 2.0]), eps=1e-6), [0.0, 0.0, 0.0])
    # exactly 0 for equal rewards: no nan at eps = 0, no rounding noise of the mean amplified by
    # 1/eps
    assert grpo.group_advantages(T([1.0, 1.0]), eps=0.0).tolist() == [0.0, 0.0]
    assert grpo.group_advantages(T([0.1] * 7), eps=1e-6).tolist() == [0.0] * 7


def test_shape_rewards_zscore_tanh():
    # [0,1,3]: mean 4/3, std sqrt(7/3) = 1.527525 → z = [−0.872872, −0.218218, 1.091089] → tanh
    close(grpo.shape_rewards_zscore_tanh(T([0.0, 1.0, 3.0]), eps=0.0),
          [-0.702830, -0.214819, 0.797275])
    assert grpo.SHAPING["none"](T([0.0, 7.0]), 1e-6).tolist() == [0.0, 7.0]


# ------------------------------------------------------------------------------------------ filters

def test_is_zero_variance_and_group_selection():
    assert group_filter.is_zero_variance(T([1.0, 1.0, 1.0]))
    assert group_filter.is_zero_variance(T([0.0, 0.0]))
    assert group_filter.is_zero_variance(T([5.0]))
    assert group_filter.is_zero_variance(T([]))
    assert not group_filter.is_zero_variance(T([1.0, 0.0]))
    assert not group_filter.is_zero_variance(T([0.5, 0.5, 0.25]))
    rewards_P = [T([1.0, 1.0]), T([1.0, 0.0]), T([0.0, 0.0]), T([0.5, 0.2])]
    assert group_filter.nonzero_variance_groups(rewards_P) == [1, 3]


def test_overlong_policies():
    rewards_G, truncated_G = T([1.0, 0.5, 1.0]), T([False, True, False])
    r, keep = group_filter.OVERLONG["none"](rewards_G, truncated_G)
    assert r.tolist() == [1.0, 0.5, 1.0] and keep.tolist() == [True, True, True]
    r, keep = group_filter.OVERLONG["zero"](rewards_G, truncated_G)
    assert r.tolist() == [1.0, 0.0, 1.0] and keep.tolist() == [True, True, True]
    r, keep = group_filter.OVERLONG["filter"](rewards_G, truncated_G)
    assert r.tolist() == [1.0, 0.5, 1.0] and keep.tolist() == [True, False, True]


# -------------------------------------------------------------------------------------------- batch

def test_make_batch_shapes_masks_alignment_and_metrics():
    groups = [
        group([11, 12], [[21, 22, 23], [24]], [1.0, 0.0], mode="think"),
        group([13], [[25, 26], [27, 28]], [1.0, 1.0]),  # zero variance → dropped
    ]
    batch = grpo.make_batch(groups, GRPO(adv_eps=0.0, share_prompts=False), pad_id=99)
    assert batch.num_sequences == 2
    assert batch.tokens_B_T.tolist() == [[11, 12, 21, 22, 23], [11, 12, 24, 99, 99]]
    assert batch.tokens_B_T.dtype == torch.long
    # position t is 1 iff the token at t is a response token (predicted from tokens[:t])
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 1, 1, 1], [0, 0, 1, 0, 0]]
    close(batch.rollout_logprobs_B_T, [[0, 0, -0.1, -0.2, -0.3], [0, 0, -0.1, 0, 0]])
    # [1, 0]: mean 0.5, unbiased std 0.70711 → ±0.70711
    close(batch.advantages_S, [0.707107, -0.707107])
    assert batch.lengths_S.tolist() == [5, 3]
    assert batch.modes_S == ["think", "think"]
    m = batch.metrics
    assert (m["groups"], m["groups_dropped"], m["num_sequences"], m["num_loss_tokens"]) == \
        (2, 1, 2, 4)
    # rewards before dropping [1, 0, 1, 1]: mean 0.75, population std sqrt(0.1875) = 0.433013
    close(m["reward_mean"], 0.75)
    close(m["reward_std"], 0.433013)
    assert m["truncation_rate"] == 0.0
    assert m["response_len_mean"] == 2.0  # (3 + 1 + 2 + 2) / 4


def test_make_batch_keeps_zero_variance_groups_when_asked():
    groups = [group([1], [[2], [3]], [1.0, 1.0]), group([1], [[4], [5]], [1.0, 0.0])]
    batch = grpo.make_batch(groups, GRPO(drop_zero_variance_groups=False, adv_eps=0.0), pad_id=0)
    assert batch.num_sequences == 4 and batch.metrics["groups_dropped"] == 0
    close(batch.advantages_S, [0.0, 0.0, 0.707107, -0.707107])


def test_make_batch_empty_when_every_group_dropped():
    batch = grpo.make_batch([group([1], [[2], [3]], [0.0, 0.0]),
                             group([1], [[4], [5]], [1.0, 1.0])], GRPO(), pad_id=0)
    assert batch.num_sequences == 0
    assert batch.tokens_B_T.shape == (0, 0) and batch.advantages_S.shape == (0,)
    assert batch.metrics["groups_dropped"] == 2 and batch.metrics["reward_mean"] == 0.5


def test_make_batch_overlong_none_zero_filter():
    g = lambda: group([7], [[1, 2], [3, 4, 5], [6], [8]], [1.0, 1.0, 0.0, 0.0],
                      finish=["stop", "length", "stop", "stop"])
    none = grpo.make_batch([g()], GRPO(overlong="none", adv_eps=0.0), pad_id=0)
    close(none.advantages_S, [0.866025, 0.866025, -0.866025, -0.866025])
    # zero: rewards [1, 0, 0, 0] → [1.5, −0.5, −0.5, −0.5]
    zero = grpo.make_batch([g()], GRPO(overlong="zero", adv_eps=0.0), pad_id=0)
    close(zero.advantages_S, [1.5, -0.5, -0.5, -0.5])
    assert zero.num_sequences == 4
    # filter: the truncated sample leaves the batch and the statistics; [1, 0, 0] → mean 1/3, std
    # 1/sqrt(3)
    filt = grpo.make_batch([g()], GRPO(overlong="filter", adv_eps=0.0), pad_id=0)
    close(filt.advantages_S, [1.154701, -0.577350, -0.577350])
    assert filt.tokens_B_T.tolist() == [[7, 1, 2], [7, 6, 0], [7, 8, 0]]
    assert (filt.metrics["samples_overlong_filtered"] == 1
            and filt.metrics["truncation_rate"] == 0.25)
    assert filt.metrics["num_loss_tokens"] == 4


def test_make_batch_overlong_filter_can_make_a_group_zero_variance():
    g = group([7], [[1], [2], [3]], [0.0, 1.0, 0.0], finish=["stop", "length", "stop"])
    assert grpo.make_batch([g], GRPO(overlong="none"), pad_id=0).num_sequences == 3
    batch = grpo.make_batch([g], GRPO(overlong="filter"), pad_id=0)
    assert batch.num_sequences == 0 and batch.metrics["groups_dropped"] == 1


def test_overlong_filter_stats_all_masks_the_loss_only():
    """``overlong_filter_stats=all``: the truncated sample leaves the loss but its reward stays in
    the group's mean/std — the same advantages as no filtering, for the kept samples only."""
    g = lambda: group([7], [[1, 2], [3, 4, 5], [6], [8]], [1.0, 1.0, 0.0, 0.0],
                      finish=["stop", "length", "stop", "stop"])
    cfg = GRPO(overlong="filter", overlong_filter_stats="all", adv_eps=0.0)
    batch = grpo.make_batch([g()], cfg, pad_id=0)
    close(batch.advantages_S, [0.866025, -0.866025, -0.866025])
    assert batch.tokens_B_T.tolist() == [[7, 1, 2], [7, 6, 0], [7, 8, 0]]
    # A group whose kept samples agree still carries signal when the filtered one differs …
    h = group([7], [[1], [2], [3]], [0.0, 1.0, 0.0], finish=["stop", "length", "stop"])
    assert group_filter.is_informative(h, cfg)
    assert not group_filter.is_informative(h, GRPO(overlong="filter"))
    close(grpo.make_batch([h], cfg, pad_id=0).advantages_S, [-0.577350, -0.577350])
    # … and a group with every sample filtered carries none.
    every = group([7], [[1], [2]], [0.0, 1.0], finish=["length", "length"])
    assert not group_filter.is_informative(every, cfg)
    assert grpo.make_batch([every], cfg, pad_id=0).metrics["groups_dropped"] == 1


def test_make_batch_reward_shaping():
    g = group([1], [[2], [3], [4]], [0.0, 1.0, 3.0])
    plain = grpo.make_batch([g], GRPO(adv_eps=0.0), pad_id=0)
    close(plain.advantages_S, [-0.872872, -0.218218, 1.091089])
    # z-scores of tanh([−0.702830, −0.214819, 0.797275]): mean −0.040125, std 0.764127
    shaped = grpo.make_batch([g], GRPO(adv_eps=0.0, reward_shaping="zscore_tanh"), pad_id=0)
    close(shaped.advantages_S, [-0.866102, -0.228311, 1.094413])


def test_make_batch_rejects_unscored_or_inconsistent_groups():
    with pytest.raises(ValueError, match="rewards"):
        grpo.make_batch([group([1], [[2], [3]], [])], GRPO(), pad_id=0)
    bad = group([1], [[2], [3]], [1.0, 0.0])
    bad.rollout_logprobs_G_T[0] = [-0.1, -0.2]
    with pytest.raises(ValueError, match="logprobs"):
        grpo.make_batch([bad], GRPO(), pad_id=0)
    with pytest.raises(ValueError, match="empty prompt"):
        grpo.make_batch([group([], [[2], [3]], [1.0, 0.0])], GRPO(), pad_id=0)


# --------------------------------------------------------------------------------------------- loss

# two sequences with 3 and 1 valid tokens; padding positions hold −inf to prove they never leak in
MASK = T([[0.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
ADV = T([1.0, -2.0])


def logprobs_with_padding():
    return T([[NEG_INF, -0.5, -1.0, -1.5], [NEG_INF, -0.7, NEG_INF, NEG_INF]], requires_grad=True)


def test_token_vs_sequence_aggregation_on_policy():
    lp = logprobs_with_padding()
    # ratio 1 → per-token loss −A: seq0 three × −1, seq1 one × +2
    num, den, metrics = grpo.policy_loss_terms(lp, lp.detach(), ADV, MASK,
                                               GRPO(loss_aggregation="token"))
    close(num, -1.0)  # −3 + 2
    assert int(den) == 4 and den.dtype == torch.int
    num_s, den_s, _ = grpo.policy_loss_terms(lp, lp.detach(), ADV, MASK,
                                             GRPO(loss_aggregation="sequence"))
    close(num_s, 1.0)  # mean(seq0) −1 + mean(seq1) 2
    assert int(den_s) == 2
    close(num / den, -0.25)
    close(num_s / den_s, 0.5)
    close(metrics["clip_fraction"], [0.0, 4.0])
    close(metrics["ratio"], [4.0, 4.0])
    close(metrics["kl"], [0.0, 4.0])


@pytest.mark.parametrize("aggregation, expected_grad", [
    ("token", [[0, -0.25, -0.25, -0.25], [0, 0.5, 0, 0]]),          # −A / N, N = 4 tokens
    ("sequence", [[0, -1 / 6, -1 / 6, -1 / 6], [0, 1.0, 0, 0]]),    # −A / (n_b · #sequences)
])
def test_gradient_at_ratio_one(aggregation, expected_grad):
    lp = logprobs_with_padding()
    num, den, _ = grpo.policy_loss_terms(lp, lp.detach(), ADV, MASK,
                                         GRPO(loss_aggregation=aggregation))
    (num / den).backward()
    close(lp.grad, expected_grad)


def test_sequence_aggregation_skips_sequences_without_tokens():
    lp = torch.zeros(2, 3)
    mask = T([[0.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    num, den, _ = grpo.policy_loss_terms(lp, lp, T([3.0, 5.0]), mask,
                                         GRPO(loss_aggregation="sequence"))
    close(num, -3.0)
    assert int(den) == 1


def test_clipping_with_separate_low_and_high_eps():
    ratios = T([[1.5, 0.5, 1.25], [0.5, 1.5, 0.75]])
    lp = ratios.log().requires_grad_(True)
    old = torch.zeros(2, 3)
    cfg = GRPO(clip_eps_low=0.2, clip_eps_high=0.28)
    num, den, metrics = grpo.policy_loss_terms(lp, old, T([1.0, -1.0]), torch.ones(2, 3), cfg)
    # A=+1: 1.5 → clipped at 1.28; 0.5 → 0.5 (low side does not bind for A>0); 1.25 < 1.28 → 1.25
    # A=−1: 0.5 → clipped at 0.8; 1.5 → 1.5 (high side does not bind for A<0); 0.75 → clipped at 0.8
    # losses: [−1.28, −0.5, −1.25] + [0.8, 1.5, 0.8] = 0.07
    close(num, 0.07)
    assert int(den) == 6
    close(metrics["clip_fraction"], [3.0, 6.0])
    close(metrics["ratio"], [6.0, 6.0])
    num.backward()
    # clipped tokens get no gradient; unclipped ones −A·ratio
    close(lp.grad, [[0.0, -0.5, -1.25], [0.0, 1.5, 0.0]])
    # with a symmetric 0.2, 1.5 and 1.25 are both clipped to 1.2: [−1.2, −0.5, −1.2] + [0.8, 1.5,
    # 0.8] = 0.2
    num_sym, _, _ = grpo.policy_loss_terms(lp, old, T([1.0, -1.0]), torch.ones(2, 3),
                                           GRPO(clip_eps_low=0.2, clip_eps_high=0.2))
    close(num_sym, 0.2)


def test_k3_kl_values():
    # d = ref − lp: ln2 → 2 − ln2 − 1 = 0.306853; −ln2 → 0.5 + ln2 − 1 = 0.193147; 0 → 0
    lp = T([math.log(0.5), math.log(0.5), -1.0])
    ref = T([0.0, math.log(0.25), -1.0])
    close(grpo.k3_kl(lp, ref), [0.306853, 0.193147, 0.0])


def test_policy_loss_with_kl():
    lp = T([[math.log(0.5), math.log(0.5), NEG_INF]], requires_grad=True)
    ref = T([[0.0, math.log(0.25), 0.0]])
    mask = T([[1.0, 1.0, 0.0]])
    cfg = GRPO(kl_coef=0.1)
    num, den, metrics = grpo.policy_loss_terms(lp, lp.detach(), T([1.0]), mask, cfg,
                                               ref_logprobs_B_T=ref)
    close(num, -2.0 + 0.1 * 0.5)  # −A per token + 0.1 · (0.306853 + 0.193147)
    assert int(den) == 2
    close(metrics["kl"], [0.5, 2.0])
    num.backward()
    # d k3 / d lp = 1 − exp(ref − lp): 1 − 2 = −1 and 1 − 0.5 = 0.5
    close(lp.grad, [[-1.0 + 0.1 * -1.0, -1.0 + 0.1 * 0.5, 0.0]])
    assert torch.isfinite(lp.grad).all()


def test_kl_requires_reference():
    lp = torch.zeros(1, 2)
    with pytest.raises(ValueError, match="ref_logprobs"):
        grpo.policy_loss_terms(lp, lp, T([1.0]), torch.ones(1, 2), GRPO(kl_coef=1e-3))


def test_make_batch_feeds_policy_loss():
    groups = [group([5, 6], [[1, 2, 3], [4]], [1.0, 0.0])]
    batch = grpo.make_batch(groups, GRPO(adv_eps=0.0), pad_id=0)
    lp = torch.full(batch.tokens_B_T.shape, -0.3, requires_grad=True)
    num, den, _ = grpo.policy_loss_terms(lp, lp.detach(), batch.advantages_B_T, batch.loss_mask_B_T,
                                         GRPO())
    # 3 tokens × −0.707107 and 1 token × +0.707107 over 4 tokens
    close(num, -2 * 0.707107)
    assert int(den) == 4


# ---------------------------------- dynamic sampling with refill, per-mode metrics (§4.4.2, §4.3.2)

def test_is_informative_follows_the_overlong_policy():
    # rewards [1, 0, 0]; the 1 was truncated. none: unequal → informative. filter: the truncated
    # sample leaves the group, [0, 0] remains → zero variance. zero: the truncated 1 becomes 0 → [0,
    # 0, 0] → zero variance.
    g = group([1, 2], [[3], [4], [5]], [1.0, 0.0, 0.0], finish=["length", "stop", "stop"])
    assert group_filter.is_informative(g, GRPO(overlong="none"))
    assert not group_filter.is_informative(g, GRPO(overlong="filter"))
    assert not group_filter.is_informative(g, GRPO(overlong="zero"))


# rewards of prompt k's group: informative (mixed) for k in {1, 3, 4, 6}, zero variance otherwise
REWARDS_OF = {
    0: [0, 0], 1: [1, 0], 2: [1, 1], 3: [0, 1], 4: [1, 0], 5: [0, 0], 6: [0, 1], 7: [1, 0]}


def _fake_rollout():
    """A prompt stream over prompts 0, 1, 2, ... and a sampler that 'generates' REWARDS_OF; both
    record calls."""
    drawn, calls = [], []

    def draw(n):
        batch = [Prompt(prompt_tokens=[len(drawn) + i + 1], domain="math", label="1",
                        uid=str(len(drawn) + i))
                 for i in range(n)]
        drawn.extend(batch)
        return batch

    def sample(prompts, round_):
        calls.append((round_, [int(p.uid) for p in prompts]))
        return [PromptGroup(prompt=p, response_tokens_G_T=[[7], [8]],
                            rollout_logprobs_G_T=[[-0.1], [-0.2]], finish_reason_G=["stop", "stop"],
                            rewards_G=[float(r) for r in REWARDS_OF[int(p.uid)]])
                for p in prompts]
    return draw, sample, calls


def _collect(draw, sample, cfg):
    """The stage loop's use of :class:`group_filter.Refill`: rounds until it wants no more
    prompts."""
    refill = group_filter.Refill(cfg)
    while count := refill.prompts_wanted():
        refill.add(sample(draw(count), refill.round))
    return refill.groups, refill.metrics()


def test_refill_samples_exactly_the_missing_groups_exactly_the_missing_groups():
    draw, sample, calls = _fake_rollout()
    groups, m = _collect(draw, sample, GRPO(group_size=2, prompts_per_step=4, refill_max_rounds=3))
    # round 0: prompts 0-3 → informative 1, 3 (2 of 4); round 1 draws the 2 missing: 4 (yes), 5
    # (no); round 2 draws 1: 6 (yes) → 4 informative, stop before the round budget (3) is spent
    assert calls == [(0, [0, 1, 2, 3]), (1, [4, 5]), (2, [6])]
    assert [g.prompt.uid for g in groups] == ["0", "1", "2", "3", "4", "5", "6"]
    assert m == {"refill_rounds": 2.0, "groups_informative": 4.0}
    batch = grpo.make_batch(groups, GRPO(group_size=2, prompts_per_step=4), pad_id=0)
    assert batch.metrics["groups"] == 7 and batch.metrics["groups_dropped"] == 3
    assert batch.num_sequences == 4 * 2  # exactly prompts_per_step informative groups of G = 2


def test_refill_round_budget_and_drop_only():
    draw, sample, calls = _fake_rollout()
    groups, m = _collect(draw, sample, GRPO(group_size=2, prompts_per_step=4, refill_max_rounds=1))
    assert calls == [(0, [0, 1, 2, 3]), (1, [4, 5])] and len(groups) == 6
    # budget spent: the batch stays short
    assert m == {"refill_rounds": 1.0, "groups_informative": 3.0}
    draw, sample, calls = _fake_rollout()
    # the default refill_max_rounds = 0: drop only
    groups, m = _collect(draw, sample, GRPO(group_size=2, prompts_per_step=4))
    assert calls == [(0, [0, 1, 2, 3])] and m["refill_rounds"] == 0.0


def test_make_batch_reports_reward_per_mode():
    groups = [group([1], [[2], [3], [4], [5]], [1.0, 0.0, 0.0, 0.0], mode="think"),
              group([1], [[2], [3], [4], [5]], [1.0, 1.0, 1.0, 0.0], mode="no_think"),
              group([1], [[2], [3], [4], [5]], [0.0, 0.0, 0.0, 0.0], mode="no_think")]
    m = grpo.make_batch(groups, GRPO(group_size=4), pad_id=0).metrics
    # think: 1/4; no_think: 3/8 over both groups (before the zero-variance drop, like reward_mean)
    assert (m["groups/think"], m["groups/no_think"]) == (1.0, 2.0)
    close(m["reward_mean/think"], 0.25)
    close(m["reward_mean/no_think"], 0.375)
    close(m["reward_mean"], 4 / 12)


def test_actor_loss_reports_the_rollout_logprob_gap():
    logprobs = T([[0.0, -0.5, -1.0, 9.0]], requires_grad=True)
    mb = {"advantages": T([1.0]), "loss_mask": T([[0.0, 1.0, 1.0, 0.0]]),
          "rollout_logprobs": T([[0.0, -0.4, -1.3, 0.0]])}
    num, den, metrics = grpo.actor_loss(GRPO(), logprobs, mb)
    # |−0.5 + 0.4| + |−1.0 + 1.3| over the 2 trained tokens
    close(metrics["logprob_gap"], [0.1 + 0.3, 2.0])
    close(num, -2.0)  # −ratio·A per trained token, ratio ≡ 1 on-policy
    assert int(den) == 2
    num.backward()
    close(logprobs.grad, [[0.0, -1.0, -1.0, 0.0]])  # REINFORCE: −A·∇lp on the trained tokens only
