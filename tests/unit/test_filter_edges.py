"""The filters' edge cases: dynamic filtering judges IF-RL groups by R_IF, not by the reward-model
bonus added to it (§4.4.2); the epoch filter does not count samples the phase skips as truncated
(§4.5.2); the RM bonus reads the whole IF conversation."""

import pytest
import torch

from nemo_cascade.algorithms import group_filter, grpo
from nemo_cascade.config import GRPO
from nemo_cascade.data.prompt_stream import PromptStream
from nemo_cascade.data.schemas import adapt_ifeval
from nemo_cascade.rewards.ifeval.domain import rm_conversation
from nemo_cascade.types import Prompt, PromptGroup

IF = {
    "prompt": "Reply in lowercase.",
    "instruction_id_list": ["change_case:english_lowercase"],
    "kwargs": [{}],
}


def _group(uid, rewards, verdicts=(), finish=None):
    G = len(rewards)
    return PromptGroup(
        prompt=Prompt(prompt_tokens=[1, 2], domain="ifeval", label=IF, uid=uid),
        response_tokens_G_T=[[3, 4]] * G,
        rollout_logprobs_G_T=[[-0.5, -0.5]] * G,
        finish_reason_G=finish or ["stop"] * G,
        response_text_G=["x"] * G,
        rewards_G=list(rewards),
        verdicts_G=list(verdicts),
    )


def test_an_all_pass_if_group_with_unequal_bonuses_is_dropped():
    cfg = GRPO(group_size=4, prompts_per_step=2, drop_zero_variance_groups=True)
    all_pass = _group("a", [1.2, 1.7, 1.5, 1.9], verdicts=[1, 1, 1, 1])
    mixed = _group("b", [1.3, 0.0, 1.8, 0.0], verdicts=[1, 0, 1, 0])
    assert not group_filter.is_informative(all_pass, cfg)
    assert group_filter.is_informative(mixed, cfg)
    batch = grpo.make_batch([all_pass, mixed], cfg, pad_id=0)
    assert batch.metrics["groups_dropped"] == 1.0 and batch.num_sequences == 4
    # the kept group's advantages still come from its rewards, bonus included
    assert batch.advantages_S[0] < batch.advantages_S[2]
    plain = _group("c", [1.2, 1.7, 1.5, 1.9])  # no verdicts recorded: the rewards are the verdicts
    assert group_filter.is_informative(plain, cfg)


def test_verdicts_go_through_the_phase_s_overlong_policy():
    truncated = ["stop", "stop", "length", "length"]
    group = _group("a", [1.4, 1.6, 0.0, 0.0], verdicts=[1, 1, 0, 0], finish=truncated)
    assert not group_filter.is_informative(
        group, GRPO(group_size=4, overlong="filter")
    )  # kept samples all pass
    assert group_filter.is_informative(group, GRPO(group_size=4, overlong="zero"))


def _stream(uids, readmit_unsolved=0.0):
    prompts = [Prompt(prompt_tokens=[1], domain="math", label={"answer": "1"}, uid=u) for u in uids]
    return PromptStream(prompts, seed=0, epoch_filter=(readmit_unsolved, 0.0))


def test_a_prompt_whose_samples_all_truncate_stays_when_truncation_is_skipped():
    stream = _stream(["long", "hard", "open"])
    stream.next_batch(3)
    long = _group("long", [0, 0, 0, 0], finish=["length"] * 4)
    hard = _group("hard", [0, 0, 0, 0], finish=["length", "stop", "stop", "stop"])
    open_ = _group("open", [1, 0, 1, 0])
    stream.record([long, hard, open_], overlong="filter")
    stream.next_batch(
        1
    )  # the next epoch starts: unsolved rows leave it (re-admitted with probability 0)
    assert sorted(stream.state_dict()["active"]) == [0, 2]
    zero = _stream(["long", "open"])  # where truncation scores 0 it is a failure like any other
    zero.next_batch(2)
    zero.record(
        [_group("long", [0, 0, 0, 0], finish=["length"] * 4), _group("open", [1, 0, 1, 0])], "zero"
    )
    zero.next_batch(1)
    assert zero.state_dict()["active"] == [1]


def test_the_epoch_filter_judges_if_groups_by_their_verdicts():
    stream = _stream(["solved", "open"])
    stream.next_batch(2)
    stream.record(
        [
            _group("solved", [1.2, 1.7, 1.5, 1.9], verdicts=[1, 1, 1, 1]),
            _group("open", [1.3, 0, 0, 0], verdicts=[1, 0, 0, 0]),
        ]
    )
    stream.next_batch(1)
    assert stream.state_dict()["active"] == [1]


def test_the_rm_bonus_reads_the_whole_if_conversation():
    chat = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": "Reply in lowercase."},
    ]
    _, label = adapt_ifeval(
        {"messages": chat, "instruction_id_list": IF["instruction_id_list"], "kwargs": [{}]}, "row"
    )
    assert rm_conversation(label) == {"messages": chat}
    _, single = adapt_ifeval(
        {"prompt": IF["prompt"], "instruction_id_list": IF["instruction_id_list"], "kwargs": [{}]},
        "row",
    )
    assert "messages" not in single and rm_conversation(single) == {"prompt": IF["prompt"]}
    truth = "[{'instruction_id': ['change_case:english_lowercase'], 'kwargs': [None]}]"
    _, rlvr = adapt_ifeval({"messages": chat, "ground_truth": truth}, "row")
    assert rm_conversation(rlvr) == {"messages": chat}


@pytest.mark.parametrize("verdicts", [[], [1, 0]])
def test_saved_rollouts_keep_the_verdicts(tmp_path, verdicts):
    from nemo_cascade.runtime import step_rollouts

    group = _group("a", [1.5, 0.0] if verdicts else [1, 0], verdicts=verdicts)
    line = step_rollouts._encode(0, group)
    _, back = step_rollouts._decode(line, [group.prompt], 2)
    assert back.verdicts_G == verdicts and torch.equal(
        torch.tensor(back.rewards_G), torch.tensor(group.rewards_G)
    )
