"""Command line: ``course check`` (readiness) and ``course run`` (execute notebooks)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tqdm.auto import tqdm

from course_lib import catalog, device, profiles, report, runner


def cmd_check(args: argparse.Namespace) -> int:
    """Print the hardware and what each notebook can demonstrate on it."""
    info = device.describe()
    print("This machine")
    for key, value in info.rows():
        print(f"  {key:<12} {value}")
    print(f"  profile      auto -> {profiles.resolve('auto')}\n")
    rows = catalog.readiness(info, Path(args.dir))
    width = max(len(r[0]) for r in rows)
    print(f"{'notebook':<{width}}  {'status':<15}  what this machine can demonstrate")
    for stem, status, what in rows:
        print(f"{stem:<{width}}  {status:<15}  {what}")
    return 0


def _select(names: list[str], folder: Path) -> list[Path]:
    """Notebook paths from names like '01', '01_gpu_vs_cpu' or a path; all when empty."""
    every = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if not names:
        return every
    chosen = []
    for name in names:
        hits = [p for p in every if p.stem == Path(name).stem or p.stem.startswith(f"{name}_")]
        if not hits:
            raise SystemExit(f"course run: no notebook matches {name!r} in {folder}.")
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
    out = Path(args.out)
    notebooks = _select(args.notebooks, Path(args.dir))
    results = []
    bar = tqdm(notebooks, desc=f"course run ({profile})", unit="notebook")
    for nb in bar:
        bar.set_postfix_str(nb.stem)
        result = runner.execute(nb, asked, out, timeout_s=args.timeout)
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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="course", description=__doc__)
    p.add_argument("--dir", default=str(catalog.NOTEBOOK_DIR), help="folder of the notebooks")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="what this machine can demonstrate").set_defaults(fn=cmd_check)
    run = sub.add_parser("run", help="execute notebooks headless with papermill")
    run.add_argument("notebooks", nargs="*", help="e.g. 00 01_gpu_vs_cpu (default: all)")
    run.add_argument("--profile", default=None, help="smoke | cpu | gpu | auto (default: $COURSE_PROFILE or auto)")
    run.add_argument("--out", default=str(report.build_dir()), help="output folder (default build/)")
    run.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    run.add_argument("--no-html", action="store_true", help="skip the HTML export")
    run.add_argument("--record", action="store_true",
                     help="gpu profile only: merge the reports of the notebooks that ran OK into "
                          "results/<device>.json (reference runs)")
    run.set_defaults(fn=cmd_run)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.fn(args)
    except (profiles.ProfileError, report.RecordError) as exc:
        print(f"course: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
