import pytest
import torch

from course_lib import device

pytestmark = pytest.mark.versioned  # TF32 and backend flags: make test-oldest runs it


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


def _legacy() -> tuple:
    """The legacy TF32 flags (matmul, cuDNN); they raise when the two APIs are out of step."""
    return (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)


def _new() -> tuple:
    """Whether the newer per-op switches (PyTorch >= 2.9) say TF32 for matmul, conv and rnn."""
    b = torch.backends
    return tuple(x.fp32_precision == "tf32" for x in (b.cuda.matmul, b.cudnn.conv, b.cudnn.rnn))


def _switches() -> tuple:
    return (*_legacy(), torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)


@pytest.fixture
def odd_switches():
    """Start from a setting no default has, so 'restored' cannot pass by accident."""
    b, saved = torch.backends, _switches()
    b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = True, False
    b.cudnn.deterministic, b.cudnn.benchmark = False, True
    yield _switches()
    b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = saved[:2]
    b.cudnn.deterministic, b.cudnn.benchmark = saved[2:]


@pytest.mark.parametrize("enabled", [True, False])
def test_tf32_sets_every_switch_consistently_and_restores_them(odd_switches, enabled):
    with device.tf32(enabled):
        assert _switches() == (enabled, enabled, False, True)  # cuDNN's choice untouched
        if device.NEW_TF32_API:  # the newer API agrees, so PyTorch's own readers do not raise
            assert _new() == (enabled,) * 3
        state = device.tf32_state()
        assert state.count(str(enabled)) >= 2
        assert ("fp32_precision" in state) == device.NEW_TF32_API
    assert _switches() == odd_switches


@pytest.mark.skipif(not device.NEW_TF32_API, reason="the per-op fp32_precision API is PyTorch >= 2.9")
def test_tf32_repairs_a_state_mixed_by_the_newer_api():
    """Setting only cudnn.conv through the newer API leaves the legacy cuDNN flag out of step, and
    PyTorch raises when it is read (inductor's autotuning reads it); device.tf32 sets both."""
    b = torch.backends
    saved = _legacy()
    try:
        b.cudnn.conv.fp32_precision = "ieee"  # rnn stays 'tf32': a mix
        with pytest.raises(RuntimeError):
            b.cudnn.allow_tf32
        with device.tf32(False):
            assert _legacy() == (False, False) and _new() == (False, False, False)
    finally:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32 = saved


def test_tf32_deterministic_and_restored_after_an_exception(odd_switches):
    with pytest.raises(KeyError):
        with device.tf32(False, deterministic=True):
            assert _switches() == (False, False, True, False)
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


def test_cuda_visible_devices_is_named_when_it_hides_gpus(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    assert device.gpu_shortfall(have) is None  # enough: nothing to say
    said = device.gpu_shortfall(have + 1)
    assert "CUDA_VISIBLE_DEVICES" in said and f"needs {have + 1} CUDA GPU" in said and "\n" not in said


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


@pytest.mark.parametrize("capability, native", [((7, 0), False), ((7, 5), False), ((8, 0), True),
                                                ((8, 6), True), ((8, 9), True), ((9, 0), True)])
def test_bf16_is_native_from_ampere_on(capability, native):
    """V100 (7.0) and T4 (7.5) emulate bf16; A100 (8.0), A10G (8.6), L4 (8.9), H100 (9.0) do not."""
    assert device.bf16_native(capability) is native


def _fake_gpu_pair(monkeypatch, capabilities, current=0, total_gib=(16, 80)):
    """Two fake GPUs: bf16 and memory are asked of the device named, not the current one."""
    _fake_gpus(monkeypatch, len(capabilities))
    monkeypatch.setattr(torch.version, "hip", None)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i: capabilities[i])

    class Props:
        def __init__(self, i):
            self.total_memory = int(total_gib[i] * 2**30)
            self.name, (self.major, self.minor) = f"fake GPU {i}", capabilities[i]
    monkeypatch.setattr(torch.cuda, "get_device_properties", Props)


def test_bf16_and_amp_dtype_are_decided_for_the_device_asked_about(monkeypatch):
    _fake_gpu_pair(monkeypatch, [(7, 5), (9, 0)], current=1)  # a T4 beside an H100, H100 current
    assert not device.bf16_supported("cuda:0") and device.bf16_supported("cuda:1")
    assert device.amp_dtype("cuda:0") == torch.float16  # with a GradScaler
    assert device.amp_dtype("cuda") == torch.bfloat16  # 'cuda' is the current GPU
    assert device.bf16_supported("cpu") and device.amp_dtype("cpu") == torch.bfloat16


def test_describe_reads_the_gpu_it_is_given(monkeypatch):
    _fake_gpu_pair(monkeypatch, [(7, 5), (9, 0)], current=0)
    info = device.describe(torch.device("cuda", 1))
    assert (info.name, info.capability, info.memory_gib, info.bf16, info.tf32) == (
        "fake GPU 1", "9.0", 80.0, True, True)
    info = device.describe()  # the current GPU: the T4-like one
    assert (info.name, info.memory_gib, info.bf16, info.tf32) == ("fake GPU 0", 16.0, False, False)


def test_memory_cap_shrinks_what_the_course_sees_and_limits_the_allocator(monkeypatch):
    _fake_gpu_pair(monkeypatch, [(9, 0), (9, 0)], total_gib=(80, 80))
    GiB = 2**30  # each GPU: 0.5 GiB held outside PyTorch's allocator (the CUDA context), nothing reserved
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i=None: (int(79.5 * GiB), 80 * GiB))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i=None: 0)
    calls = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                        lambda fraction, index: calls.append((fraction, index)))
    monkeypatch.delenv(device.MEMORY_CAP_ENV, raising=False)
    assert device.gpu_memory_gib("cuda:1") == 80.0
    device.limit_memory("cuda:1")
    assert calls == []  # no cap asked for: nothing limited
    monkeypatch.setenv(device.MEMORY_CAP_ENV, "8")
    assert device.gpu_memory_gib("cuda:1") == 8.0
    assert device.pick("cuda:1") == torch.device("cuda", 1)
    # pick applies the cap: an 8 GiB card less the 0.5 GiB its context takes, of 80 GiB, on GPU 1
    assert calls == [(7.5 / 80, 1)] and device.allocator_limit("cuda:1") == int(7.5 * GiB)
    assert device.pick() == torch.device("cuda")  # the notebooks' call: the current GPU, capped too
    assert calls == [(7.5 / 80, 1), (7.5 / 80, 0)]
    monkeypatch.setenv(device.MEMORY_CAP_ENV, "200")  # larger than the card: the card's size
    assert device.gpu_memory_gib("cuda:0") == 80.0


@pytest.mark.parametrize("raw", ["eight", "0", "-4"])
def test_a_bad_memory_cap_is_one_sentence(monkeypatch, raw):
    monkeypatch.setenv(device.MEMORY_CAP_ENV, raw)
    with pytest.raises(ValueError) as err:
        device.memory_cap_gib()
    assert "COURSE_GPU_MEMORY_GIB" in str(err.value) and "\n" not in str(err.value)


def test_exact_pins_attention_to_the_math_backend_and_restores():
    q = torch.randn(1, 2, 8, 4)
    with device.exact():
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.backends.cuda.flash_sdp_enabled() is False
        assert torch.backends.cuda.math_sdp_enabled() is True
        assert torch.nn.functional.scaled_dot_product_attention(q, q, q).shape == q.shape
    assert torch.backends.cuda.flash_sdp_enabled() is True


@pytest.mark.parametrize("allow_tf32", [False, True])
def test_exact_sets_tf32_as_asked_with_deterministic_cudnn_and_restores(allow_tf32):
    b = torch.backends
    before = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.deterministic, b.cudnn.benchmark)
    b.cudnn.benchmark = True  # as 02's timing loops leave it: exact() must not pick kernels by timing
    try:
        with device.exact(allow_tf32=allow_tf32):
            assert (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32) == (allow_tf32, allow_tf32)
            assert (b.cudnn.deterministic, b.cudnn.benchmark) == (True, False)
        assert b.cudnn.benchmark is True
    finally:
        b.cudnn.benchmark = before[3]
    assert (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.deterministic) == before[:3]


# -- 16-bit precisions this device runs natively (used by notebooks 00-04, train.amp_for) --

def test_available_on_cpu():
    assert device.available("cpu") == ["fp32", "fp16+GradScaler", "bf16"]


def test_cpu_16bit_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f amx_fp16 avx512_bf16 f16c\n\n"
                    "processor\t: 1\nflags\t\t: avx512_fp16\n")
    assert device.cpu_16bit_flags(str(info)) == ["avx512_bf16", "amx_fp16"]  # the first CPU's
    assert device.cpu_16bit_flags(str(tmp_path / "missing")) == []


def test_cpu_support_is_one_sentence_from_the_flags():
    none = device.cpu_support("fp16", flags=["avx512_bf16"])
    assert "none of avx512_fp16, amx_fp16" in none and "is for a measurement to say" in none
    have = device.cpu_support("bf16", flags=["avx512_bf16"])
    assert "reports avx512_bf16" in have and "measurement" not in have
    assert none.count(". ") == 0 and have.count(". ") == 0
    with pytest.raises(ValueError, match="fp16 or bf16"):
        device.cpu_support("fp8", flags=[])


def test_sixteen_bit_choice_where_bf16_is_not_native(monkeypatch):
    assert device.amp_name("cpu") == "bf16" and device.amp_note("cpu") is None
    monkeypatch.setattr(device, "bf16_supported", lambda dev: False)  # a T4
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (7, 5))
    monkeypatch.setattr(device, "label", lambda dev: "Tesla T4")
    assert device.amp_name("cuda") == "fp16+GradScaler"
    assert device.available("cuda") == ["fp32", "fp16+GradScaler"]  # no TF32, no emulated bf16
    note = device.amp_note("cuda")
    assert "sm 7.5" in note and "fp16" in note and note.count(". ") == 0
    monkeypatch.setattr(device, "bf16_supported", lambda dev: True)  # an A100
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda dev=None: (8, 0))
    assert device.available("cuda") == ["fp32", "fp32+TF32", "fp16+GradScaler", "bf16"]
    assert device.amp_note("cuda") is None


def test_cpu_cache_bytes_reads_the_last_level_or_says_none(tmp_path, monkeypatch):
    for level, size in ((1, "32K"), (2, "512K"), (3, "32768K")):
        index = tmp_path / f"index{level}"
        index.mkdir()
        (index / "level").write_text(f"{level}\n")
        (index / "size").write_text(f"{size}\n")
    real = device.Path
    monkeypatch.setattr(device, "Path", lambda p: tmp_path if "cpu0/cache" in str(p) else real(p))
    assert device.cpu_cache_bytes() == 32 * 2**20
    monkeypatch.setattr(device, "Path", lambda p: tmp_path / "missing")
    assert device.cpu_cache_bytes() is None


_STEP_FAULTS = """
import ctypes, statistics, sys, torch, torch.nn.functional as F
from course_lib import device, models
print(device.keep_freed_memory() is not None)  # what device.pick sets; False: not set (opted out, not glibc)
if sys.argv[1] == "low":  # glibc's starting thresholds (128 KiB), held: its handing back at its most, every step alike
    libc = ctypes.CDLL(None)
    libc.mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 128 * 1024)  # M_TRIM_THRESHOLD
torch.manual_seed(0)
m = models.GPT(models.GPTConfig(vocab_size=256, block_size=128, n_layer=2, n_head=4, n_embd=128, dropout=0.0))
opt, x, faults = torch.optim.AdamW(m.parameters()), torch.randint(0, 256, (16, 128)), []
for _ in range(9):  # a training step's activations: blocks of many sizes, all freed by its end
    before = device.minor_faults()
    F.cross_entropy(m(x).flatten(0, 1), x.flatten()).backward()
    opt.step()
    opt.zero_grad()
    faults.append(device.minor_faults() - before)
print(statistics.median(faults[3:]))  # after the first steps' growth
"""


def _step_faults(keep: bool) -> tuple[bool, float]:
    import os
    import subprocess
    import sys
    env = {**os.environ, device.KEEP_FREED_ENV: "1" if keep else "0", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", _STEP_FAULTS, "kept" if keep else "low"], env=env, capture_output=True,
                         text=True, check=True)
    kept, faults = out.stdout.split()
    return kept == "True", float(faults)


@pytest.mark.skipif(device.minor_faults() is None or __import__("platform").libc_ver()[0] != "glibc",
                    reason="glibc's malloc on Linux only")
def test_kept_freed_memory_spares_a_training_step_its_page_faults():
    kept, with_policy = _step_faults(keep=True)
    not_kept, without = _step_faults(keep=False)
    assert kept and not not_kept  # the variable switches the policy off
    assert without > 1000  # low thresholds hand a step's freed blocks back: the next step faults them in again
    # (glibc's own defaults move with the process's history: a fresh process may or may not reach this; CI once read 0)
    assert with_policy < without / 4  # kept for reuse: the steps after the first few fault (almost) nothing


def test_opting_out_of_kept_freed_memory_sets_nothing(monkeypatch):
    monkeypatch.setenv(device.KEEP_FREED_ENV, "0")
    assert device.keep_freed_memory() is None
