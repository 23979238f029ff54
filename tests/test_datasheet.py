"""course_lib.datasheet: lookup by device name, the table, dense-rate sanity."""

import pytest

from course_lib import datasheet
from course_lib.datasheet import SPECS, lookup, peak_tflops

# Strings torch.cuda.get_device_name() returns on these GPUs -> the row they must find.
REAL_NAMES = [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"),
    ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe 80GB"),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 SXM4 80GB"),
    ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB"),
    ("NVIDIA A100 80GB PCIe", "NVIDIA A100 PCIe 80GB"),
    ("NVIDIA H200", "NVIDIA H200 SXM 141GB"),
    ("NVIDIA L4", "NVIDIA L4"),
    ("Tesla T4", "NVIDIA T4"),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
]


@pytest.mark.parametrize("device_name, row", REAL_NAMES)
def test_lookup_finds_the_right_variant(device_name, row):
    spec = lookup(device_name)
    assert spec is not None and spec.name == row
    assert lookup(device_name.upper()) is spec and lookup(device_name.lower()) is spec


def test_variants_differ_where_the_datasheet_does():
    a40, a80 = lookup("NVIDIA A100-SXM4-40GB"), lookup("NVIDIA A100-SXM4-80GB")
    assert a40.mem_bw_gbs < a80.mem_bw_gbs and a40.memory_gib < a80.memory_gib
    sxm, pcie = lookup("NVIDIA H100 80GB HBM3"), lookup("NVIDIA H100 PCIe")
    assert pcie.bf16_tflops < sxm.bf16_tflops and pcie.mem_bw_gbs < sxm.mem_bw_gbs


@pytest.mark.parametrize("device_name", [
    "NVIDIA GeForce RTX 3090", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA GH200 480GB",
    "NVIDIA L40S", "NVIDIA GeForce RTX 4090 D", "NVIDIA A100-PCIE-40GB", "Tesla V100-SXM2-16GB",
    "cpu", "Intel(R) Xeon(R) CPU @ 2.20GHz", "AMD EPYC 7763 64-Core Processor", "",
])
def test_unknown_gpus_and_cpus_give_none(device_name):
    assert lookup(device_name) is None


def test_aliases_are_unambiguous():
    # No alias may be claimed by two rows, else 'longest match' could pick either.
    aliases = [a for s in SPECS for a in s.aliases]
    assert len(aliases) == len(set(aliases))


def test_table_one_line_per_spec_and_no_none():
    text = datasheet.table()
    assert "NVIDIA datasheet figures, not measurements; dense tensor-core rates" in text
    assert "None" not in text
    for unit in ("TFLOP/s", "GB/s", "memory GB "):
        assert unit in text
    for s in SPECS:
        assert sum(line.startswith(s.name + " ") for line in text.splitlines()) == 1, s.name
        assert s.source_url in text
    t4_line = next(line for line in text.splitlines() if line.startswith("NVIDIA T4 "))
    assert " - " in t4_line  # no TF32/bf16 on Turing shows as '-'


def test_table_of_a_subset():
    rows = SPECS[:2]
    lines = datasheet.table(rows).splitlines()
    assert sum(any(line.startswith(s.name) for s in SPECS) for line in lines) == 2


def test_every_spec_has_a_source_and_positive_numbers():
    assert len({s.name for s in SPECS}) == len(SPECS)
    for s in SPECS:
        assert s.source_url.startswith("https://") and s.source_title
        assert s.memory_gib > 0 and s.mem_bw_gbs > 0
        for p in datasheet.PRECISIONS:
            v = peak_tflops(s, p)
            assert v is None or v > 0, (s.name, p)
        assert s.fp32_tflops > 0 and s.fp16_tflops > 0
        major, minor = s.capability.split(".")
        assert major.isdigit() and minor.isdigit()


def test_dense_rates_are_consistent():
    for s in SPECS:
        # Tensor cores beat the CUDA cores at 16 bits on every listed part.
        assert s.fp16_tflops > s.fp32_tflops
        if s.bf16_tflops is not None:
            assert s.bf16_tflops == pytest.approx(s.fp16_tflops, rel=0.01)
        # TF32 and bf16 arrive together (Ampere and later); Turing has neither.
        assert (s.tf32_tflops is None) == (s.bf16_tflops is None)
        assert (s.tf32_tflops is None) == (float(s.capability) < 8.0)


@pytest.mark.parametrize("spec", [s for s in SPECS if "GeForce" not in s.name and s.tf32_tflops],
                         ids=lambda s: s.name)
def test_data_centre_bf16_is_twice_tf32(spec):
    # A data-centre tensor core does twice the bf16 work of TF32 per clock: a row whose
    # sparse figure was halved for one and not the other would break this.
    assert spec.bf16_tflops == pytest.approx(2 * spec.tf32_tflops, rel=0.01)


def test_dense_is_below_the_sparse_headline():
    # The datasheets print the 2:4-sparsity rate (H100 SXM bf16 "1,979*", A100 "312 | 624*");
    # the table must hold half of it.
    assert peak_tflops(lookup("NVIDIA H100 80GB HBM3"), "bf16") == pytest.approx(1979 / 2)
    assert peak_tflops(lookup("NVIDIA A100-SXM4-80GB"), "bf16") == pytest.approx(624 / 2)


def test_peak_tflops_reads_the_row_and_rejects_unknown_precision():
    t4 = lookup("Tesla T4")
    assert peak_tflops(t4, "fp32") == t4.fp32_tflops
    assert peak_tflops(t4, "tf32") is None and peak_tflops(t4, "bf16") is None
    with pytest.raises(ValueError):
        peak_tflops(t4, "fp8")
    with pytest.raises(ValueError):
        peak_tflops(t4, "BF16 ")
