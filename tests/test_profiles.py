import pytest
import torch

from course_lib import profiles


def test_explicit_beats_environment(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "cpu")
    assert profiles.resolve("smoke") == "smoke"


def test_environment_beats_auto(monkeypatch):
    monkeypatch.setenv("COURSE_PROFILE", "smoke")
    assert profiles.resolve(None) == "smoke"
    assert profiles.resolve("") == "smoke"


def test_auto_follows_hardware(monkeypatch):
    monkeypatch.delenv("COURSE_PROFILE", raising=False)
    expected = "gpu" if torch.cuda.is_available() else "cpu"
    assert profiles.resolve("auto") == expected
    assert profiles.resolve(None) == expected


def test_unknown_profile_is_one_sentence_naming_valid_ones():
    with pytest.raises(profiles.ProfileError) as err:
        profiles.resolve("bogus")
    msg = str(err.value)
    assert "\n" not in msg and "'bogus'" in msg
    assert all(p in msg for p in ("smoke", "cpu", "gpu", "auto"))


def test_sizes_are_attributes_of_the_resolved_profile():
    cfg = profiles.sizes("01_gpu_vs_cpu", "smoke")
    assert cfg.profile == "smoke"
    assert cfg.sizes == profiles.SIZES["01_gpu_vs_cpu"]["smoke"]["sizes"]


def test_every_notebook_has_all_three_profiles_with_the_same_knobs():
    for notebook, table in profiles.SIZES.items():
        assert set(table) == set(profiles.PROFILES), notebook
        keys = {p: set(table[p]) for p in profiles.PROFILES}
        assert keys["smoke"] == keys["cpu"] == keys["gpu"], notebook


def test_unknown_notebook_is_reported():
    with pytest.raises(profiles.ProfileError, match="No sizes"):
        profiles.sizes("99_nothing", "smoke")
