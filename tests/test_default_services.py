"""An xdist worker's own data directory (`tests/default_services.py`): each worker's runs live
apart, under the data directory the settings would read, and the built models stay shared."""

from __future__ import annotations

import os

from tests.default_services import _own_data_dir


def test_a_worker_gets_its_own_folder_and_shares_the_models(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("TROUPE_DATA_DIR", "~/data")
    _own_data_dir("gw1")
    own = tmp_path / "data" / "gw1"
    assert os.environ["TROUPE_DATA_DIR"] == str(own)
    assert (own / "models").is_symlink()
    assert (own / "models").resolve() == tmp_path / "data" / "models"


def test_a_second_session_of_the_same_worker_reuses_its_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("TROUPE_DATA_DIR", str(tmp_path))
    _own_data_dir("gw0")
    (tmp_path / "models" / "tiny-s").mkdir()
    monkeypatch.setenv("TROUPE_DATA_DIR", str(tmp_path))
    _own_data_dir("gw0")
    assert (tmp_path / "gw0" / "models" / "tiny-s").is_dir()
    assert os.environ["TROUPE_DATA_DIR"] == str(tmp_path / "gw0")
