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

from course_lib.device import describe

REPO = Path(__file__).resolve().parent.parent


def build_dir() -> Path:
    """Where executed notebooks and reports go: ``$COURSE_BUILD_DIR`` or ``<repo>/build``."""
    return Path(os.environ.get("COURSE_BUILD_DIR") or REPO / "build")


def results_dir() -> Path:
    """Reference measurements recorded on real hardware: ``<repo>/results``."""
    return Path(os.environ.get("COURSE_RESULTS_DIR") or REPO / "results")


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
        """Write ``<folder>/<notebook>.json`` (default ``build/reports``) and return its path."""
        folder = Path(folder or build_dir() / "reports")
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{self.notebook}.json"
        path.write_text(json.dumps(self.to_dict(), indent=1))
        return path

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


def load_reports(folder: Path) -> dict[str, dict]:
    """All notebook reports in `folder`, keyed by notebook name."""
    return {p.stem: json.loads(p.read_text()) for p in sorted(Path(folder).glob("*.json"))}


def record_reference(reports: dict[str, dict], folder: Path | None = None) -> Path:
    """Merge this run's reports into ``results/<device>.json`` (one file per device)."""
    first = next(iter(reports.values()))
    slug = re.sub(r"[^a-z0-9]+", "-", first["device"].lower()).strip("-")
    path = Path(folder or results_dir()) / f"{slug}.json"
    data = json.loads(path.read_text()) if path.exists() else {"notebooks": {}}
    data.update({k: first[k] for k in ("device", "torch", "cuda", "date")})
    data["notebooks"].update(reports)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path
