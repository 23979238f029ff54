import pytest
import torch

from course_lib import device


def test_pick_defaults_to_what_exists():
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert device.pick().type == expected
    assert device.pick("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_asking_for_cuda_without_gpu_explains():
    with pytest.raises(device.NotEnoughGPUs, match="sees no GPU"):
        device.pick("cuda")


def test_describe_is_consistent_with_torch():
    info = device.describe()
    assert info.gpu_count == (torch.cuda.device_count() if torch.cuda.is_available() else 0)
    assert info.kind == ("cuda" if torch.cuda.is_available() else "cpu")
    assert info.torch == torch.__version__
    assert info.gloo == torch.distributed.is_gloo_available()
    assert dict(info.rows())["gpu_count"] == str(info.gpu_count)
    if info.kind == "cpu":
        assert info.memory_gib is None and info.capability is None and not info.nccl


def test_require_gpus_explains_the_shortfall():
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert device.gpu_shortfall(have) is None
    device.require_gpus(have)
    with pytest.raises(device.NotEnoughGPUs) as err:
        device.require_gpus(have + 1)
    assert f"needs {have + 1} CUDA GPU" in str(err.value) and "\n" not in str(err.value)


def test_cuda_visible_devices_is_named_when_it_hides_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert "CUDA_VISIBLE_DEVICES" in device.gpu_shortfall(have + 1)


def test_banner_names_profile_and_device():
    line = device.banner("smoke", torch.device("cpu"))
    assert "profile smoke" in line and "device cpu" in line and torch.__version__ in line


@pytest.mark.gpu
def test_gpu_description():
    info = device.describe()
    assert info.memory_gib > 0 and info.capability and info.name == torch.cuda.get_device_name(0)
    assert "GiB" in device.banner("gpu", torch.device("cuda"))
