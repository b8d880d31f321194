"""SFT loss and sequence packing against hand-computed values (nemo_cascade.algorithms.sft)."""
import pytest
import torch

from nemo_cascade.algorithms.packing import pack_sft_batch, segment_causal_mask
from nemo_cascade.algorithms.sft import sft_loss_terms

T = torch.tensor
NEG_INF = float("-inf")


def test_sft_loss_terms_masked_sum_and_count():
    lp = T([[0.0, -1.0, -2.0, NEG_INF], [0.0, -0.5, NEG_INF, NEG_INF]], requires_grad=True)
    mask = T([[0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0]])
    num, den = sft_loss_terms(lp, mask)
    torch.testing.assert_close(num, T(3.5))  # 1 + 2 + 0.5; −inf padding selected away
    assert int(den) == 3 and den.dtype == torch.int
    (num / den).backward()
    # d/dlp of −Σ lp / N = −1/N on masked tokens, 0 elsewhere (no nan from −inf padding)
    third = -1.0 / 3.0
    torch.testing.assert_close(lp.grad, T([[0.0, third, third, 0.0], [0.0, third, 0.0, 0.0]]))


def test_packing_fills_rows_in_order():
    batch = pack_sft_batch([([1, 2], [3, 4, 5]), ([6], [7]), ([8, 9], [10, 11])], max_tokens=7,
                           pad_id=0)
    assert batch.num_sequences == 2 and batch.num_examples == 3
    assert batch.tokens_B_T.tolist() == [[1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 0, 0, 0]]
    # the token at t is trained iff it is a response token; each example's positions restart at 0
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 1, 1, 1, 0, 1], [0, 0, 1, 1, 0, 0, 0]]
    assert batch.position_ids_B_T.tolist() == [[0, 1, 2, 3, 4, 0, 1], [0, 1, 2, 3, 0, 0, 0]]
    assert batch.segment_ids_B_T.tolist() == [[1, 1, 1, 1, 1, 2, 2], [1, 1, 1, 1, 0, 0, 0]]
    assert batch.num_truncated == 0


def test_packing_truncates_from_the_right():
    batch = pack_sft_batch([([1, 2], [3, 4, 5]), ([1, 2, 3, 4, 5], [6]), ([8], [9])], max_tokens=4,
                           pad_id=-1)
    assert batch.tokens_B_T.tolist() == [[1, 2, 3, 4], [1, 2, 3, 4], [8, 9, -1, -1]]
    # the response tail goes first; a prompt longer than max_tokens leaves no trained token
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]]
    assert batch.num_truncated == 2


def test_packing_never_trains_an_example_first_token_and_rejects_bad_max():
    batch = pack_sft_batch([([], [1, 2]), ([], [3])], max_tokens=8, pad_id=0)
    # nothing in an example predicts its first token
    assert batch.loss_mask_B_T.tolist() == [[0, 1, 0]]
    assert pack_sft_batch([], max_tokens=8, pad_id=0).num_sequences == 0
    with pytest.raises(ValueError, match="max_tokens"):
        pack_sft_batch([([1], [2])], max_tokens=0, pad_id=0)


def test_segment_mask_is_block_diagonal_and_causal():
    blocked = segment_causal_mask(T([[1, 1, 2, 0]]))
    assert blocked.shape == (1, 1, 4, 4)
    allowed = (~blocked[0, 0]).int().tolist()
    assert allowed == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]


def test_sft_loss_on_packed_batch():
    batch = pack_sft_batch([([1, 2], [3, 4]), ([5], [6])], max_tokens=8, pad_id=0)
    lp = torch.full(batch.tokens_B_T.shape, -2.0)
    num, den = sft_loss_terms(lp, batch.loss_mask_B_T)
    assert float(num) == 6.0 and int(den) == 3
