"""Weight-gather buckets (actor/buckets.py): grouping, and the size taken from free memory with a
cap."""
from nemo_cascade.actor.buckets import CAP_BYTES, bucket_limit, free_memory_bytes, plan_buckets


def test_buckets_respect_the_size_bound_and_never_mix_owners():
    sizes = {"a": 400, "b": 400, "c": 400, "d": 2000, "e": 100, "f": 100}
    owner = {"a": 0, "b": 0, "c": 0, "d": 0, "e": 0, "f": 1}
    got = plan_buckets(list(sizes), sizes.get, owner.get, limit=1000)
    # d alone (over the bound); f: another stage
    assert got == [["a", "b"], ["c"], ["d"], ["e"], ["f"]]
    assert plan_buckets([], sizes.get, owner.get, limit=1000) == []


def test_bucket_size_comes_from_free_memory_with_a_cap():
    assert bucket_limit(10 * 2**20) == 2**20                  # a tenth of what is free
    assert bucket_limit(10 * CAP_BYTES) == CAP_BYTES          # capped
    assert bucket_limit(0) == 1
    import torch

    assert 0 < free_memory_bytes(torch.device("cpu"))
