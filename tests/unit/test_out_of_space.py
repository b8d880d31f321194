"""A full disk in one line (files.py): the error found behind another (torch.save reports a failed
write as a RuntimeError raised while handling the OSError), and the line naming the file system
and the project's code that was writing. The full disk itself: test_disk_full.py (integration)."""
from __future__ import annotations

import errno
from pathlib import Path

import pytest

from nemo_cascade import files


def _full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_the_line_names_the_writer_and_the_file_system(tmp_path, monkeypatch):
    monkeypatch.setattr(Path, "write_text", _full)
    with pytest.raises(OSError) as caught:
        files.write_text_atomically(tmp_path / "metrics.json", "{}")
    try:  # as torch.save reports it
        try:
            raise caught.value
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos")
    except RuntimeError as e:
        wrapped = e
    full = files.out_of_space(wrapped)
    assert full is caught.value
    assert files.writer_of(wrapped) == "files.write_text_atomically"
    line = files.out_of_space_line(full, tmp_path, files.writer_of(wrapped))
    assert line.startswith(f"no space left on device writing under {tmp_path} "
                           f"(in files.write_text_atomically): the file system at ")
    assert "\n" not in line and not (tmp_path / "metrics.json").exists()


def test_other_errors_are_not_a_full_disk():
    assert files.out_of_space(OSError(errno.EACCES, "Permission denied")) is None
    assert files.out_of_space(ValueError("x")) is None
    assert files.writer_of(ValueError("never raised")) == ""
