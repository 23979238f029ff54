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


CLASSES = [name for name, _, _ in profiles.GPU_CLASSES]


def test_every_notebook_has_all_three_profiles_with_the_same_knobs():
    for notebook, table in profiles.SIZES.items():
        assert set(profiles.PROFILES) <= set(table), notebook
        assert set(table) - set(profiles.PROFILES) <= {f"gpu/{c}" for c in CLASSES[1:]}, notebook
        keys = {p: set(table[p]) for p in profiles.PROFILES}
        assert keys["smoke"] == keys["cpu"] == keys["gpu"], notebook
        for cls in CLASSES[1:]:  # a smaller class changes knobs the gpu entry has, nothing else
            assert set(table.get(f"gpu/{cls}", {})) <= keys["gpu"], (notebook, cls)


@pytest.mark.parametrize("gib, cls", [(5.8, "small"), (7.6, "small"), (11.8, "small"),
                                      (14.6, "medium"), (22.0, "medium"), (31.7, "medium"),
                                      (39.4, "large"), (79.1, "large"), (None, "large")])
def test_gpu_class_from_memory(gib, cls):
    """An 8 GB card, a 12 GB RTX 3060 (11.8 GiB), a T4 (14.6), an A10G (22), a V100 32 GB,
    an A100 40 GB, an H100; no GPU: the reference run's sizes."""
    assert profiles.gpu_class(gib) == cls


def test_gpu_sizes_follow_the_class_and_say_why():
    for notebook, table in profiles.SIZES.items():
        for gib, cls in [(80.0, "large"), (14.6, "medium"), (7.6, "small")]:
            cfg = profiles.sizes(notebook, "gpu", memory_gib=gib)
            assert cfg.gpu_class == cls and f"{gib:.1f} GiB" in cfg.why and cls in cfg.why
            expected = {**table["gpu"], **table.get(f"gpu/{cls}", {})}
            assert {k: getattr(cfg, k) for k in table["gpu"]} == expected
    cpu = profiles.sizes("01_gpu_vs_cpu", "cpu")
    assert cpu.gpu_class is None and cpu.why is None


# The notebooks whose H100 sizes do not fit a small card (issue 26): each declares smaller ones.
# The others state in a comment beside their sizes why one table fits every card.
SHRINK_ON_SMALL_CARDS = ["02_first_cnn", "03_mixed_precision", "04_grad_accumulation",
                         "07_attention", "08_transformer", "09_memory", "10_compile_and_profile"]


@pytest.mark.parametrize("notebook", SHRINK_ON_SMALL_CARDS)
def test_notebooks_sized_for_an_h100_shrink_on_an_8_gb_card(notebook):
    large = vars(profiles.sizes(notebook, "gpu", memory_gib=79.1))
    small = vars(profiles.sizes(notebook, "gpu", memory_gib=7.6))
    changed = {k for k in large if k not in ("gpu_class", "why") and large[k] != small[k]}
    assert changed, f"{notebook} runs an H100's sizes on an 8 GB card"


def test_the_banner_names_the_class_under_gpu():
    cfg = profiles.sizes("01_gpu_vs_cpu", "gpu", memory_gib=7.6)
    assert "small sizes for a GPU of 7.6 GiB" in profiles.banner(cfg, torch.device("cpu"))
    smoke = profiles.sizes("01_gpu_vs_cpu", "smoke")
    assert profiles.banner(smoke, torch.device("cpu")).count("\n") == 0


def test_unknown_notebook_is_reported():
    with pytest.raises(profiles.ProfileError, match="No sizes"):
        profiles.sizes("99_nothing", "smoke")


def test_notebooks_sharing_a_peak_measure_it_at_the_same_sizes():
    # course_lib.peaks stores one peak per set of sizes: 08's MFU and 10's roofline divide by it,
    # and 00 measures the fp32 peak that 01 reads (and 08 and 10 where they run in fp32)
    for profile in profiles.PROFILES:
        for gib in ((7.6, 15.0, 79.1) if profile == "gpu" else (None,)):
            a = profiles.sizes("08_transformer", profile, memory_gib=gib).peak_sizes
            b = profiles.sizes("10_compile_and_profile", profile, memory_gib=gib).peak_sizes
            p00 = profiles.sizes("00_setup_check", profile, memory_gib=gib).peak_sizes
            p01 = profiles.sizes("01_gpu_vs_cpu", profile, memory_gib=gib).peak_sizes
            assert a == b == p00["cuda"], (profile, gib)
            assert p00 == p01, (profile, gib)
            if profile != "gpu":  # without a GPU, 08 and 10 measure their peak on the CPU
                assert p00["cpu"] == a, profile
