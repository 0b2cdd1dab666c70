"""`skylease reproduce`: regenerate a paper's tables and figures, ours beside theirs."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from skylease.cli import format as fmt
from skylease.cli.app import reproduce_app
from skylease.cli.common import _out_dir, err, out
from skylease.model.errors import UserError


@reproduce_app.command("ilp")
def reproduce_ilp_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for tables, plots and report.md.")],
) -> None:
    """ILP provisioning paper: R11-R14, the 91 % / 11.4 % comparisons, MapReduce points, fronts."""
    from skylease.experiments.ilp_report import reproduce_ilp

    rep = reproduce_ilp(out_dir)
    table = fmt.table("claim", "paper", "ours (plan)", "ours (simulated)", title="Watershed points")
    for r in rep.points.itertuples(index=False):
        table.add_row(r.claim, f"{r.paper_min:g} min, ${r.paper_cost:.2f}",
                      f"{r.ours_min:g} min, ${r.ours_cost:.2f}", f"{r.sim_min:g} min, ${r.sim_cost:.2f}")
    out.print(table)
    for r in rep.ratios.itertuples(index=False):
        out.print(f"  {r.claim}: paper {r.paper:g}, ours {r.ours:.2f}")
    out.print(f"Report: {out_dir / 'report.md'}")


@reproduce_app.command("a2ha")
def reproduce_a2ha_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for tables, plots and report.md.")],
    quick: Annotated[bool, typer.Option(help="20 orderings and a smaller grid (seconds, not minutes).")]
    = False,
    orderings: Annotated[int | None, typer.Option(min=1, help="Orderings per configuration (default: "
                                                  "200, the paper's; 20 with --quick).")] = None,
    workers: Annotated[int | None, typer.Option("--processes", min=1, help="Local processes the "
                                                "simulations are spread over (a local Dask cluster; "
                                                "default: one per core).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
) -> None:
    """A2HA paper: Figures 9-12, Tables 1-2, Figures 4b/6b and what billing awareness buys."""
    from rich.progress import Progress

    from skylease.experiments.a2ha_report import reproduce_a2ha

    kwargs = dict(quick=quick, orderings=orderings, workers=workers, scheduler=scheduler)
    if err.is_terminal:
        with Progress(console=err.made(), transient=True) as bar:
            task = bar.add_task("simulated runs", total=None)
            rep = reproduce_a2ha(out_dir, progress=lambda d, t: bar.update(task, completed=d, total=t),
                                 **kwargs)
    else:
        rep = reproduce_a2ha(out_dir, **kwargs)
    table = fmt.table("claim", "paper", "ours", "holds", title=f"A2HA, {rep['orderings']} orderings per "
                  f"configuration ({rep['seconds']:.0f} s)")
    for c in rep["claims"]:
        table.add_row(c["claim"], str(c["paper"]), str(c["ours"]), "yes" if c["holds"] else "no")
    out.print(table)
    out.print(f"{rep['held']} of {rep['checked']} checks hold; the report says why the others differ.")
    out.print(f"Report: {Path(rep['out']) / 'report.md'}")


@reproduce_app.command("spequlos")
def reproduce_spequlos_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for runs.csv, tables, plots and report.md.")],
    quick: Annotated[bool, typer.Option(help="Two traces (nd, spot10) and 2 seeds: seconds, not minutes.")]
    = False,
    seeds: Annotated[int | None, typer.Option(min=1, help="Runs per environment (default 10; 2 with "
                                              "--quick; the paper's scale is about 37).")] = None,
    traces: Annotated[str | None, typer.Option(help="Comma-separated traces (default: all six).")] = None,
    workers: Annotated[int | None, typer.Option("--processes", min=1, help="Local processes the "
                                                "simulations are spread over (a local Dask cluster; "
                                                "default: one per core).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
    cloud_buffer: Annotated[int, typer.Option(min=1, help="BOINC: replicas a cloud worker asks for per "
                                              "request (its work buffer; 3 as a BOINC client).")] = 3,
) -> None:
    """SpeQuloS paper: Table 1, Figure 2, the 18 strategies (Figures 6-7), 9C-C-R (Figures 8-9), Table 7."""
    from skylease.experiments.spequlos_report import reproduce_spequlos

    chosen = None if traces is None else [t.strip() for t in traces.split(",") if t.strip()]
    if chosen is not None and not chosen:
        raise UserError("no trace given", field="--traces")
    rep = reproduce_spequlos(out_dir, quick=quick, seeds=seeds, traces=chosen, workers=workers,
                             scheduler=scheduler, progress=err.is_terminal, cloud_buffer=cloud_buffer)
    table = fmt.table("claim", "paper", "ours", "holds", "gated", title=f"SpeQuloS, {rep['runs']} runs "
                  f"({rep['seconds']:.0f} s)")
    for c in rep["claims"]:
        table.add_row(c["claim"], str(c["paper"]), str(c["ours"]), "yes" if c["holds"] else "no",
                      "gated" if c["gated"] else "reported")
    out.print(table)
    out.print(f"{rep['held']} of {rep['checked']} gated checks hold ({rep['reported']} values reported); "
              "the report says why the others differ.")
    out.print(f"Report: {Path(rep['out']) / 'report.md'}")


@reproduce_app.command("haizea")
def reproduce_haizea_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for runs.csv, tables, plots and report.md.")],
    quick: Annotated[bool, typer.Option(help="The three Table 1 workloads only, one image draw "
                                        "(about 2.5 minutes instead of about 31 on 2 cores).")] = False,
    workloads: Annotated[str | None, typer.Option(help="Comma-separated RHO/DELTA/SIZE workloads, e.g. "
                                                  "10/3/medium,30/1/small (default: all 72).")] = None,
    configs: Annotated[str | None, typer.Option(help="Comma-separated configurations (default: all six: "
                                                "NOVM-NOSR, NOVM-SR, VM-PREDEPLOY, VM-MULT, "
                                                "VM-REUSE-UNIFORM, VM-REUSE-SKEWED).")] = None,
    image_seeds: Annotated[int | None, typer.Option(min=1, help="Image draws for the Table 1 rows of the "
                                                    "image configurations (default 5; 1 with --quick).")]
    = None,
    workers: Annotated[int | None, typer.Option("--processes", min=1, help="Local processes the "
                                                "simulations are spread over (a local Dask cluster; "
                                                "default: one per core).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")] = None,
) -> None:
    """Haizea paper: the no-AR baseline, Table 1 and Figure 2 (72 workloads x 6 configurations)."""
    from skylease.experiments.haizea_report import reproduce_haizea

    def split(text: str | None, name: str) -> list[str] | None:
        if text is None:
            return None
        items = [t.strip() for t in text.split(",") if t.strip()]
        if not items:
            raise UserError("nothing given", field=name)
        return items

    rep = reproduce_haizea(out_dir, quick=quick, workloads=split(workloads, "--workloads"),
                           configs=split(configs, "--configs"), image_seeds=image_seeds, workers=workers,
                           scheduler=scheduler, progress=err.is_terminal)
    table = fmt.table("claim", "paper", "ours", "holds",
                  title=f"Haizea, {rep['runs']} runs ({rep['seconds']:.0f} s)")
    for c in rep["claims"]:
        table.add_row(c["claim"], str(c["paper"]), str(c["ours"]), "yes" if c["holds"] else "no")
    out.print(table)
    out.print(f"{rep['held']} of {rep['checked']} checks hold; the report says why the others differ.")
    out.print(f"Report: {Path(rep['out']) / 'report.md'}")


@reproduce_app.command("thesis-mapping")
def reproduce_thesis_mapping_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir, help="Folder for tables, plots and "
                                          "report.md (re-running resumes).")],
    quick: Annotated[bool, typer.Option(help="A few instances per cell (minutes, not days).")]
    = False,
    instances: Annotated[int | None, typer.Option(min=1, help="Instances per cell (default: "
                                                  "3 with --quick, else the thesis's 1000).")]
    = None,
    sizes: Annotated[str, typer.Option(help="Comma-separated sizes.")] = "512x16,1024x32,2048x64",
    workers: Annotated[int | None, typer.Option("--processes", min=1, help="Local processes the "
                                                "simulations are spread over (a local Dask cluster; "
                                                "default: one per core).")] = None,
    scheduler: Annotated[str | None, typer.Option(help="Address of a running Dask scheduler.")]
    = None,
) -> None:
    """Thesis chapter 3: the section 3.4 example, Tables 3.6-3.8, Figure 3.14 and the energy study."""
    from skylease.experiments.thesis.mapping_agreement import oc_agreement
    from skylease.experiments.thesis.mapping_report import reproduce_thesis_mapping
    from skylease.experiments.thesis.mapping_study import SIZES

    chosen = tuple(s.strip() for s in sizes.split(",") if s.strip())
    bad = [s for s in chosen if s not in SIZES]
    if bad or not chosen:
        raise UserError(f"sizes must be among {', '.join(SIZES)}, got {sizes!r}", field="--sizes")
    rep = reproduce_thesis_mapping(out_dir, quick=quick, instances=instances, sizes=chosen,
                                   workers=workers, scheduler=scheduler,
                                   progress=sys.stderr.isatty())
    oc = oc_agreement(rep.gains)
    table = fmt.table("heuristic", "makespan", "thesis", title="Section 3.4 example (λ = 0.8)")
    for r in rep.example.itertuples(index=False):
        table.add_row(r.heuristic, f"{r.makespan:,.0f}", f"{r.thesis_makespan:,.0f}")
    out.print(table)
    out.print(f"Table 3.8, OC cells within 2 pp of the thesis: "
              f"{oc.within} of {oc.cells} "
              f"(max |diff| {oc.max_diff_pp:.2f} pp, {rep.instances} instances/cell)")
    for c in rep.claims:
        mark = "ok" if c["holds"] else "differs"
        out.print(f"  \\[{mark}] {c['claim']}: {c['ours']}")
    out.print(f"Report: {out_dir / 'report.md'}")


@reproduce_app.command("thesis-placement")
def reproduce_thesis_placement_cmd(
    out_dir: Annotated[Path, typer.Option("--out", parser=_out_dir,
                                          help="Folder for CSVs, plots and report.md "
                                          "(re-running resumes).")],
    quick: Annotated[bool, typer.Option(help="5 instances, 4 sizes, a short online study (seconds).")]
    = False,
    instances: Annotated[int | None, typer.Option(min=1, help="Instances per cell (default: the "
                                                  "thesis's 30; 5 with --quick).")] = None,
    online: Annotated[bool, typer.Option(help="Also run the placement-over-time study.")] = True,
) -> None:
    """Thesis chapter 6: the worked example, Figures 6.2-6.3 (0-50 % users, 40-130 VMs), online variant."""
    from skylease.experiments.thesis.placement_report import reproduce_thesis_placement

    rep = reproduce_thesis_placement(out_dir, quick=quick, instances=instances, online=online,
                                     progress=err.is_terminal)
    table = fmt.table("claim", "thesis", "ours", "holds",
                  title=f"Thesis ch. 6, {rep.instances} instances per cell (grid {rep.grid_s:.1f} s)")
    for c in rep.claims:
        table.add_row(c["claim"], c["thesis"], c["ours"], "yes" if c["holds"] else "no")
    out.print(table)
    dw = rep.done_when
    out.print(f"Sorting saves {', '.join(f'{v:.1f} % vs {a.upper()}' for a, v in dw['savings'].items())} "
              f"at 50 % busy, {dw['n_vms']} VMs; 50 % busy below 0 % in {dw['lower_at_50']} of "
              f"{dw['cells']} cells.")
    out.print(f"Report: {out_dir / 'report.md'}")
