"""SFT loss and packing against hand-computed values (nemo_cascade.algorithms.sft)."""
import pytest
import torch

from nemo_cascade.algorithms.sft import make_sft_batch, sft_loss_terms

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


def test_make_sft_batch_alignment():
    batch = make_sft_batch([([1, 2], [3, 4, 5]), ([6], [7])], max_tokens=10, pad_id=0)
    assert batch.num_sequences == 2
    assert batch.tokens_B_T.tolist() == [[1, 2, 3, 4, 5], [6, 7, 0, 0, 0]]
    # position t is 1 iff the token at t is a response token (predicted from tokens[:t])
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 1, 1, 1], [0, 1, 0, 0, 0]]
    assert batch.lengths_B.tolist() == [5, 2]
    assert batch.num_truncated == 0


def test_make_sft_batch_truncates_from_the_right():
    batch = make_sft_batch([([1, 2], [3, 4, 5]), ([1, 2, 3, 4, 5], [6]), ([8], [9])], max_tokens=4, pad_id=-1)
    assert batch.tokens_B_T.tolist() == [[1, 2, 3, 4], [1, 2, 3, 4], [8, 9, -1, -1]]
    # the response tail goes first; a prompt longer than max_tokens leaves no trained token
    assert batch.loss_mask_B_T.tolist() == [[0, 0, 1, 1], [0, 0, 0, 0], [0, 1, 0, 0]]
    assert batch.lengths_B.tolist() == [4, 4, 2]
    assert batch.num_truncated == 2


def test_make_sft_batch_never_masks_position_zero_and_rejects_bad_max():
    batch = make_sft_batch([([], [1, 2])], max_tokens=8, pad_id=0)
    assert batch.loss_mask_B_T.tolist() == [[0, 1]]
    assert make_sft_batch([], max_tokens=8, pad_id=0).num_sequences == 0
    with pytest.raises(ValueError, match="max_tokens"):
        make_sft_batch([([1], [2])], max_tokens=0, pad_id=0)


def test_sft_loss_on_packed_batch():
    batch = make_sft_batch([([1, 2], [3, 4]), ([5], [6])], max_tokens=8, pad_id=0)
    lp = torch.full(batch.tokens_B_T.shape, -2.0)
    num, den = sft_loss_terms(lp, batch.loss_mask_B_T)
    assert float(num) == 6.0 and int(den) == 3
