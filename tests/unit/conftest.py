"""Fixtures several unit-test modules share."""
import pytest


@pytest.fixture
def hf_folder(tmp_path):
    """An HF model folder as `nemo-cascade eval` first checks it: a config.json (its content is not
    read)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    return folder
