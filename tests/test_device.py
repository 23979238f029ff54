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


def _fake_gpus(monkeypatch, n: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)


@pytest.mark.parametrize("name", ["cuda:1", "cuda:7"])
def test_a_gpu_index_that_does_not_exist_names_the_ones_that_do(monkeypatch, name):
    _fake_gpus(monkeypatch, 1)
    with pytest.raises(device.NotEnoughGPUs) as err:
        device.pick(name)
    assert str(err.value) == f"{name} does not exist here: PyTorch sees 1 GPU (cuda:0)."
    _fake_gpus(monkeypatch, 4)
    with pytest.raises(device.NotEnoughGPUs, match=r"sees 4 GPUs \(cuda:0 to cuda:3\)\.$"):
        device.pick("cuda:4")


def test_existing_gpus_are_picked(monkeypatch):
    _fake_gpus(monkeypatch, 2)
    assert device.pick() == torch.device("cuda")
    assert device.pick("cuda") == torch.device("cuda")
    assert device.pick("cuda:1") == torch.device("cuda", 1)
    assert device.pick(torch.device("cuda", 0)) == torch.device("cuda", 0)


def test_cuda_index_without_any_gpu_explains(monkeypatch):
    _fake_gpus(monkeypatch, 0)
    with pytest.raises(device.NotEnoughGPUs, match="sees no GPU"):
        device.pick("cuda:0")


def test_unknown_device_name_is_one_sentence():
    with pytest.raises(ValueError) as err:
        device.pick("gpu")
    assert str(err.value) == "Unknown device 'gpu': use 'cpu', 'cuda' or 'cuda:N'."


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9B14
flags\t\t: fpu sse2 avx512f avx512_bf16
bogomips\t: 5200.00

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: Some Other CPU
flags\t\t: fpu

"""


def test_cpuinfo_reads_the_first_processor(tmp_path):
    path = tmp_path / "cpuinfo"
    path.write_text(CPUINFO)
    info = device.cpuinfo(path)
    assert info == {"processor": "0", "vendor_id": "AuthenticAMD", "model name": "AMD EPYC 9B14",
                    "flags": "fpu sse2 avx512f avx512_bf16", "bogomips": "5200.00"}
    assert device.cpu_name(path) == "AMD EPYC 9B14"
    assert device.cpu_flags(path) == ["fpu", "sse2", "avx512f", "avx512_bf16"]


def test_cpuinfo_on_arm_and_where_unreadable(tmp_path):
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd bf16\n\n"
                   "processor\t: 1\nFeatures\t: fp\n")
    assert device.cpu_flags(arm) == ["fp", "asimd", "bf16"]
    assert device.cpu_name(arm)  # no model name: falls back to what the platform reports
    missing = tmp_path / "missing"
    assert device.cpuinfo(missing) == {} and device.cpu_flags(missing) == []
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00")
    assert device.cpuinfo(binary) == {}


def _tf32() -> tuple:
    """The two TF32 switches through the API device.tf32 uses on this release."""
    b = torch.backends
    if device.NEW_TF32_API:
        return (b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision)
    return (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32)


def _set_tf32(matmul, conv) -> None:
    b = torch.backends
    if device.NEW_TF32_API:
        b.cuda.matmul.fp32_precision, b.cudnn.conv.fp32_precision = matmul, conv
    else:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = matmul, conv


def _switches() -> tuple:
    return (*_tf32(), torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)


def _on(enabled: bool):
    """How the TF32 switches read when device.tf32(enabled) set them."""
    return ("tf32" if enabled else "ieee") if device.NEW_TF32_API else enabled


@pytest.fixture
def odd_switches():
    """Start from a setting no default has, so 'restored' cannot pass by accident."""
    b, saved = torch.backends, _switches()
    _set_tf32(_on(True), _on(False))
    b.cudnn.deterministic, b.cudnn.benchmark = False, True
    yield _switches()
    _set_tf32(*saved[:2])
    b.cudnn.deterministic, b.cudnn.benchmark = saved[2:]


def test_the_current_api_is_used_where_the_release_has_it():
    assert device.NEW_TF32_API == hasattr(torch.backends.cudnn, "conv")


@pytest.mark.parametrize("enabled", [True, False])
def test_tf32_sets_both_switches_and_restores_them(odd_switches, enabled):
    with device.tf32(enabled):
        assert _switches() == (_on(enabled), _on(enabled), False, True)  # cuDNN's choice untouched
        state = device.tf32_state()
        assert state.count(repr(_on(enabled)) if device.NEW_TF32_API else str(enabled)) >= 2
        assert ("fp32_precision" in state) == device.NEW_TF32_API
    assert _switches() == odd_switches


def test_tf32_deterministic_and_restored_after_an_exception(odd_switches):
    with pytest.raises(KeyError):
        with device.tf32(False, deterministic=True):
            assert _switches() == (_on(False), _on(False), True, False)
            raise KeyError("boom")
    assert _switches() == odd_switches


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


def test_deterministic_switches_on_inside_and_restores_the_setting():
    before = (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled())
    with device.deterministic():
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()  # warns, never fails
    assert (torch.are_deterministic_algorithms_enabled(),
            torch.is_deterministic_algorithms_warn_only_enabled()) == before
    with pytest.raises(KeyError):
        with device.deterministic():
            raise KeyError("inside")
    assert torch.are_deterministic_algorithms_enabled() == before[0]
