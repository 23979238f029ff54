"""Each notebook records its key measurements, so the runner, tests and learners can
compare runs: ``build/reports/<notebook>.json`` for this run, ``results/<device>.json``
for reference runs recorded on real hardware."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
from pathlib import Path

import torch

from course_lib import files
from course_lib.device import describe

REPO = Path(__file__).resolve().parent.parent


def build_dir() -> Path:
    """Where executed notebooks and reports go: ``$COURSE_BUILD_DIR`` or ``<repo>/build``."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or REPO / "build")


def results_dir() -> Path:
    """Reference measurements recorded on real hardware: ``<repo>/results``."""
    return Path(os.environ.get("COURSE_RESULTS_DIR") or REPO / "results")


class RecordError(ValueError):
    """Reports that must not become reference results (wrong profile, device or file)."""


def report_path(notebook: str, build: Path | None = None) -> Path:
    """Where a run whose build folder is `build` (default :func:`build_dir`) keeps the report
    of `notebook` (the notebook file's stem): ``<build>/reports/<notebook>.json``."""
    return Path(build or build_dir()) / "reports" / f"{notebook}.json"


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


class Report:
    """Key measurements of one notebook run, with units and the device that made them."""

    def __init__(self, notebook: str, profile: str, device: torch.device | str):
        self.notebook = notebook
        info = describe()
        dev = torch.device(device)
        self.meta = {
            "notebook": notebook,
            "profile": profile,
            "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else f"cpu: {info.name}",
            "device_type": dev.type,  # "cuda" for a GPU run: only those become reference results
            "torch": info.torch,
            "cuda": info.cuda,
            "date": _dt.date.today().isoformat(),
        }
        self.rows: dict[str, dict] = {}

    def add(self, key: str, value: float | int | str | bool, unit: str = "", note: str = "") -> None:
        """Record one measurement (`value` in `unit`), replacing an earlier one of the same key."""
        if isinstance(value, torch.Tensor):
            value = value.item()
        self.rows[key] = {"value": value, "unit": unit, "note": note}

    def to_dict(self) -> dict:
        return {**self.meta, "measurements": self.rows}

    def save(self, folder: Path | None = None) -> Path:
        """Write ``<folder>/<notebook>.json`` (default :func:`report_path`) atomically and
        return its path."""
        path = Path(folder) / f"{self.notebook}.json" if folder else report_path(self.notebook)
        return files.write_text_atomic(path, json.dumps(self.to_dict(), indent=1))

    def table(self) -> str:
        """This run's measurements beside the recorded reference run, if there is one."""
        ref_device, ref = reference(self.notebook)
        head = f"{'measurement':<34} | {'this run':>16} | unit"
        if ref:
            head += f" | reference ({ref_device})"
        lines = [f"{self.meta['device']}, profile {self.meta['profile']}", head, "-" * len(head)]
        for key, row in self.rows.items():
            line = f"{key:<34} | {_fmt(row['value']):>16} | {row['unit']}"
            if ref:
                line += f" | {_fmt(ref[key]['value']) if key in ref else '-'}"
            lines.append(line)
        if not ref:
            lines.append("(no reference GPU run recorded in results/ for this notebook yet)")
        return "\n".join(lines)


def reference(notebook: str) -> tuple[str | None, dict]:
    """(device, measurements) of the first recorded reference run that has `notebook`."""
    for path in sorted(results_dir().glob("*.json")):
        data = json.loads(path.read_text())
        if notebook in data.get("notebooks", {}):
            return data.get("device"), data["notebooks"][notebook]["measurements"]
    return None, {}


def device_slug(device: str) -> str:
    """File name stem of a device's reference results: 'NVIDIA H100 80GB' -> 'nvidia-h100-80gb'."""
    return re.sub(r"[^a-z0-9]+", "-", device.lower()).strip("-")


def check_reference(reports: dict[str, dict]) -> str:
    """The one GPU that made every report in `reports` (notebook -> report dict), or a
    :class:`RecordError` if they are empty, from a profile other than gpu, from several
    devices, or from a CPU."""
    if not reports:
        raise RecordError("Nothing to record: no notebook of this run wrote a report.")
    not_gpu_profile = sorted(nb for nb, r in reports.items() if r.get("profile") != "gpu")
    if not_gpu_profile:
        raise RecordError(f"Reference results come from the gpu profile only, but the reports of "
                          f"{', '.join(not_gpu_profile)} were made under another profile.")
    devices = sorted({str(r.get("device")) for r in reports.values()})
    if len(devices) > 1:
        raise RecordError(f"The reports name {len(devices)} devices ({'; '.join(devices)}): "
                          f"a reference run must come from one GPU.")
    on_cpu = sorted(nb for nb, r in reports.items() if r.get("device_type") != "cuda")
    if on_cpu:
        raise RecordError(f"Reference results must come from a GPU, but {', '.join(on_cpu)} ran "
                          f"on {devices[0]}.")
    return devices[0]


def record_reference(reports: dict[str, dict], folder: Path | None = None) -> Path:
    """Merge this run's reports (notebook -> report dict) into ``results/<device>.json``.

    Every report must come from the same GPU under the gpu profile (else
    :class:`RecordError`, nothing written). Each notebook entry keeps its own device,
    torch/CUDA versions and date; the top level names the device and the latest recording.
    Notebooks recorded again replace their old entry; the file is written atomically.
    """
    dev = check_reference(reports)
    path = Path(folder or results_dir()) / f"{device_slug(dev)}.json"
    data: dict = {"notebooks": {}}
    if path.exists():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("notebooks"), dict):
            raise RecordError(f"{path} is not a reference results file (JSON with a 'notebooks' "
                              f"object); move it aside to record a new one.")
        if data.get("device") != dev:
            raise RecordError(f"{path} holds results of {data.get('device')!r}, not {dev!r}; move "
                              f"it aside to record this device.")
    latest = max(reports.values(), key=lambda r: str(r.get("date")))
    data.update({k: latest.get(k) for k in ("device", "torch", "cuda", "date")})
    data["notebooks"].update(reports)
    data["notebooks"] = dict(sorted(data["notebooks"].items()))
    return files.write_text_atomic(path, json.dumps(data, indent=1))
