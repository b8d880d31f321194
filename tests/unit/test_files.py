"""Files and folders published whole: an error while writing keeps the old version and leaves no
temporary."""
import pytest

from nemo_cascade.runtime.files import published_folder, replaced_atomically, write_text_atomically


def test_a_file_is_replaced_whole_and_an_error_keeps_the_old_one(tmp_path):
    target = tmp_path / "sub" / "status.json"
    write_text_atomically(target, "old")
    assert target.read_text() == "old"
    with pytest.raises(RuntimeError):
        with replaced_atomically(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old"
    write_text_atomically(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in target.parent.iterdir()) == ["status.json"]


def test_a_folder_appears_only_when_complete(tmp_path):
    out = tmp_path / "hf"
    with pytest.raises(RuntimeError):
        with published_folder(out, replace=True) as tmp:
            (tmp / "model-00001.safetensors").write_bytes(b"x")
            raise RuntimeError("bad shard")
    assert list(tmp_path.iterdir()) == []

    with published_folder(out, replace=True) as tmp:
        (tmp / "config.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]

    with published_folder(out, replace=True) as tmp:  # replacing drops the old folder's files
        (tmp / "model.safetensors").write_bytes(b"y")
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]


def test_a_folder_that_must_not_be_replaced_is_refused_and_kept(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text("mine")
    with pytest.raises(FileExistsError, match="already exists"):
        with published_folder(out, replace=False) as tmp:
            (tmp / "config.json").write_text("theirs")
    assert (out / "config.json").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]
