"""Command line: ``course check`` (readiness, a short measurement, ``--json`` for a workshop's
pre-flight), ``course run`` (execute notebooks), ``course student`` (copies without solutions),
``course cohort`` (many attendees' reports) and ``course test-gpu`` (the whole course checked
on a CUDA machine, in parts)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import nbformat

from tqdm.auto import tqdm

from course_lib import device, files, peaks, profiles, report, utilisation
from course_lib.workshop import catalog, cohort, gpucheck, runner, student


def cmd_check(args: argparse.Namespace) -> int:
    """Print the hardware, what each notebook can demonstrate on it and a short measurement;
    with ``--json`` write all of it as one check report instead (``-``: to stdout)."""
    info = device.describe()
    rows = catalog.readiness(info, Path(args.dir))
    if args.json is not None:
        dest = None if args.json == "-" else Path(args.json)
        if dest is not None and dest.is_dir():
            dest = dest / f"{args.name or cohort.attendee_name()}.json"
        name = args.name or (dest.stem if dest is not None else cohort.attendee_name())
        data = cohort.check_report(name, info, rows, cohort.quick_measure(device.pick()),
                                   profiles.resolve("auto"))
        return _write_json(data, dest)
    _print_check(info, rows)
    quick = cohort.quick_measure(device.pick())
    print("\nA short measurement (median per call, ± half the interquartile range of the repeats)")
    print(f"{quick.matmul}\n{quick.copy}")
    return 0


def _write_json(data: dict, dest: Path | None) -> int:
    """Write `data` as JSON to the file `dest`, or to stdout when `dest` is None."""
    text = json.dumps(data, indent=1, ensure_ascii=False) + "\n"
    if dest is None:
        sys.stdout.write(text)
        return 0
    try:
        print(f"check report of {data['name']!r} written to {files.write_text_atomic(dest, text)}")
    except OSError as exc:
        print(f"course check: cannot write {dest}: {exc.strerror or exc}.", file=sys.stderr)
        return 2
    return 0


def _print_check(info: device.DeviceInfo, rows: list[tuple[str, str, str]]) -> None:
    """The hardware and the readiness table, as ``course check`` prints them."""
    print("This machine")
    for key, value in info.rows():
        print(f"  {key:<12} {value}")
    print(f"  profile      auto -> {profiles.resolve('auto')}")
    print(f"  utilisation  {utilisation.readable(device.pick(limit=False))}\n")
    width = max(len(r[0]) for r in rows)
    print(f"{'notebook':<{width}}  {'status':<15}  what this machine can demonstrate")
    for stem, status, what in rows:
        print(f"{stem:<{width}}  {status:<15}  {what}")


def cmd_cohort(args: argparse.Namespace) -> int:
    """Print one table of many attendees' reports and draw their measurements in one plot."""
    folder = Path(args.folder)
    if not folder.is_dir():
        return _refuse(f"{folder} is not a folder; give the folder that holds the attendees' reports.")
    attendees, notes = cohort.read(folder)
    for note in notes:
        print(f"course cohort: {note}", file=sys.stderr)
    if not attendees:
        return _refuse(f"no report in {folder} could be read: put each attendee's "
                       f"`course check --json` report (and build/reports) there.")
    print(cohort.table(attendees))
    import matplotlib  # here, not at the top: only this command draws
    matplotlib.use("Agg")  # to a file, never a window
    from course_lib import plot
    path = Path(args.plot) if args.plot else folder / "cohort.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(attendees)
    fig = plot.cohort(cohort.panels(attendees), title=f"{n} attendee{'s' * (n != 1)}: median, error "
                                                      f"bars the middle half of the repeats")
    fig.savefig(path, dpi=120)
    print(f"\nplot: {path}")
    return 0


def cmd_student(args: argparse.Namespace) -> int:
    """Write student copies of the chosen notebooks: nbgrader replaces each solution with a stub."""
    out = Path(args.out)
    notebooks = _select(args.notebooks, Path(args.dir))
    peaks.forget(out)  # this run measures its own peaks, once (course_lib.peaks)
    exercises = sum(len(student.exercise_cells(nbformat.read(p, as_version=4))) for p in notebooks)
    written = student.write_copies(notebooks, out)
    print(f"{len(written)} student copies with {exercises} exercises to do in {out}/ "
          f"(the notebooks in {args.dir} keep the solutions)")
    return 0


def _refuse(sentence: str) -> int:
    print(f"course cohort: {sentence}", file=sys.stderr)
    return 2


def _select(names: list[str], folder: Path) -> list[Path]:
    """Notebook paths from names like '01', '01_gpu_vs_cpu' or a path; all when empty."""
    every = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return every
    chosen = []
    for name in names:
        hits = [p for p in every if p.stem == Path(name).stem or p.stem.startswith(f"{name}_")]
        if not hits:
            raise SystemExit(f"course: no notebook matches {name!r} in {folder}.")
        chosen += hits
    return chosen


def asked_profile(name: str | None) -> str:
    """The profile as the user asked for it: --profile, else $COURSE_PROFILE, else 'auto'
    (unresolved: 'auto' stays 'auto'; surrounding blanks and case are tidied)."""
    return (name or os.environ.get("COURSE_PROFILE") or "auto").strip().lower()


def cmd_run(args: argparse.Namespace) -> int:
    """Execute notebooks under one profile; non-zero exit if any fails.

    With ``--record`` (gpu profile only, checked before anything runs) the reports that the
    notebooks executed OK in this run saved are merged into ``results/<device>.json``.
    The notebooks get the profile as asked ('auto' stays 'auto', so a notebook can say how
    it was chosen); it is resolved here only to validate it, for --record and the summary.
    """
    asked = asked_profile(args.profile)
    profile = profiles.resolve(asked)
    if args.record and profile != "gpu":
        raise report.RecordError(f"--record takes only the gpu profile, not {profile!r}: "
                                 f"reference results come from full runs on a GPU.")
    if args.record and device.gpu_count() == 0:  # refused before hours of gpu sizes on a CPU
        raise report.RecordError("--record needs a CUDA GPU, and PyTorch sees none here: reference "
                                 "results come from full runs on a GPU.")
    out = Path(args.out)
    notebooks = _select(args.notebooks, Path(args.dir))
    given = {nb: runner.parameters(nb, args.parameters) for nb in notebooks}  # all checked first
    results = []
    bar = tqdm(notebooks, desc=f"course run ({profile})", unit="notebook")
    for nb in bar:
        bar.set_postfix_str(nb.stem)
        result = runner.execute(nb, asked, out, timeout_s=args.timeout, parameters=given[nb])
        results.append(result)
        if result.ok and not args.no_html:
            runner.export_html(Path(result.output))
        if not result.ok:
            tqdm.write(f"FAILED {nb.name}, {result.error}")
    print(runner.write_summary(results, profile if asked == profile else f"{profile} (asked: {asked})", out))
    failed = [r.notebook for r in results if not r.ok]
    if args.record:
        _record([r for r in results if r.ok], failed, out)
    return 1 if failed else 0


def _record(ok: list[runner.RunResult], failed: list[str], out: Path) -> None:
    """Record the reports of the notebooks in `ok` (this run's, executed OK) as reference."""
    found = runner.reports(ok, out)
    silent = [r.notebook for r in ok if r.notebook not in found]
    if failed:
        print(f"course: not recorded, failed in this run: {', '.join(failed)}.", file=sys.stderr)
    if silent:
        print(f"course: not recorded, saved no report: {', '.join(silent)}.", file=sys.stderr)
    if found or not failed:
        path = report.record_reference(found)
        print(f"reference results of {', '.join(found)} recorded in {path}")


def cmd_test_gpu(args: argparse.Namespace) -> int:
    """pytest -m gpu, the course in the gpu profile with --record, then again as on an 8 GiB
    card, in parts (``--part N``; ``--list`` shows them), all under ``--out``."""
    return gpucheck.command(Path(args.dir), Path(args.out), part=args.part, list_only=args.list,
                            timeout_s=args.timeout)


def cmd_agree(args: argparse.Namespace) -> int:
    """The quantities that several notebooks of one run recorded under one name: do they agree?
    Exit 1 if any does not (``report.shared``), 2 if the folder holds no reports."""
    folder = Path(args.folder)
    found = {p.stem: json.loads(p.read_text()) for p in sorted((folder / "reports").glob("*.json"))}
    if not found:
        print(f"course: {folder / 'reports'} holds no notebook reports: run the notebooks first "
              f"(course run --out {folder}).", file=sys.stderr)
        return 2
    try:
        both = report.shared(found)
    except ValueError as exc:  # reports of several runs: one sentence, not a traceback
        print(f"course: {folder / 'reports'}: {exc}", file=sys.stderr)
        return 2
    for s in both:
        print(s)
    bad = [s.key for s in both if not s.agree]
    print(f"{len(both)} quantities measured by several of {len(found)} notebooks; "
          + (f"{len(bad)} disagree: {', '.join(bad)}" if bad else "all agree"))
    return 1 if bad else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course", description=__doc__)
    p.add_argument("--dir", default=str(catalog.NOTEBOOK_DIR), help="folder of the notebooks")
    sub = p.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="what this machine can demonstrate, and a short measurement")
    check.add_argument("--json", nargs="?", const="-", default=None, metavar="FILE",
                       help="write this machine's check report as JSON to FILE (no FILE or '-': stdout)")
    check.add_argument("--name", default=None, help="the attendee's name in the report (default: the "
                       "JSON file's name without .json, else user@hostname)")
    check.set_defaults(fn=cmd_check)
    many = sub.add_parser("cohort", help="many attendees' reports: one table, one plot")
    many.add_argument("folder", metavar="DIR", help="check reports (*.json) and DIR/<attendee>/ folders")
    many.add_argument("--plot", default=None, metavar="FILE", help="the plot's PNG (default DIR/cohort.png)")
    many.set_defaults(fn=cmd_cohort)
    copies = sub.add_parser("student", help="student copies: each solution replaced by nbgrader's stub")
    copies.add_argument("notebooks", nargs="*", help="e.g. 00 01_gpu_vs_cpu (default: all)")
    copies.add_argument("--out", default=str(report.build_dir() / "student"), help="output folder (default build/student)")
    copies.set_defaults(fn=cmd_student)
    run = sub.add_parser("run", help="execute notebooks headless with papermill")
    run.add_argument("notebooks", nargs="*", help="e.g. 00 01_gpu_vs_cpu (default: all)")
    run.add_argument("--profile", default=None, help="smoke | cpu | gpu | auto (default: $COURSE_PROFILE or auto)")
    run.add_argument("--out", default=str(report.build_dir()), help="output folder (default build/)")
    run.add_argument("-p", "--parameter", dest="parameters", nargs=2, action="append", default=[],
                     metavar=("NAME", "VALUE"), help="a parameter of the notebooks run, as papermill's "
                     "-p: course run 08 -p TEXT_PATH my_corpus/ -p SEED 1 (repeatable)")
    run.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    run.add_argument("--no-html", action="store_true", help="skip the HTML export")
    run.add_argument("--record", action="store_true",
                     help="gpu profile only: merge the reports of the notebooks that ran OK into "
                          "results/<device>.json (reference runs)")
    run.set_defaults(fn=cmd_run)
    agree = sub.add_parser("agree", help="one run, one set of numbers: the quantities several notebooks "
                           "measured, compared (exit 1 if any disagree)")
    agree.add_argument("folder", nargs="?", default=str(report.build_dir()),
                       help="a run's output folder, with its reports/ (default build/)")
    agree.set_defaults(fn=cmd_agree)
    gpu = sub.add_parser("test-gpu", help="on a CUDA machine: pytest -m gpu, the gpu profile with "
                         "--record, then as on an 8 GiB card; in parts of at most 9 min on one H100")
    gpu.add_argument("--part", default=None, metavar="N", help="run part N only (default: all, in turn)")
    gpu.add_argument("--list", action="store_true", help="print the parts and what each runs, run nothing")
    gpu.add_argument("--out", default=str(report.REPO / "gpu-check"),
                     help="output folder, shared by the parts (default gpu-check/ in the repository)")
    gpu.add_argument("--timeout", type=int, default=gpucheck.CELL_TIMEOUT_S, help="seconds allowed per cell")
    gpu.set_defaults(fn=cmd_test_gpu)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (profiles.ProfileError, report.RecordError, student.StudentError, gpucheck.GpuCheckError,
            runner.ParameterError) as exc:
        print(f"course: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
