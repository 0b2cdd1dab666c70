"""``skylease reproduce thesis-mapping``: run the chapter-3 campaigns and write the report."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from skylease.experiments.report import write_report
from skylease.experiments.store import out_folder
from skylease.experiments.sweep import check_cluster, run_campaign
from skylease.experiments.thesis.mapping_figures import energy_figure, gains_figure, profiles_figure
from skylease.experiments.thesis.mapping_study import (
    ENERGY_CLASSES,
    SIZES,
    best_counts_table,
    claims,
    energy_cell,
    energy_curves,
    example_table,
    gain_table,
    ratio_table,
    study_cell,
    study_grid,
)
from skylease.experiments.thesis.mapping_text import MappingReproduction, report_text

QUICK_INSTANCES = 3
QUICK_ENERGY_INSTANCES = 5
FULL_INSTANCES = 1000
FULL_ENERGY_INSTANCES = 100




def reproduce_thesis_mapping(
    out: str | Path,
    *,
    quick: bool = False,
    instances: int | None = None,
    energy_instances: int | None = None,
    sizes: tuple[str, ...] = SIZES,
    scenarios: list[str] | None = None,
    mode: str = "processes",
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = True,
) -> MappingReproduction:
    """Run the example, the main study and the energy study; write tables, plots, report.md."""
    check_cluster(scheduler, workers)  # before the folder is made: a mistake leaves nothing
    out = out_folder(out)
    n_inst = instances or (QUICK_INSTANCES if quick else FULL_INSTANCES)
    n_energy = energy_instances or (QUICK_ENERGY_INSTANCES if quick else FULL_ENERGY_INSTANCES)
    example = example_table()
    study = run_campaign(study_cell, study_grid(sizes, scenarios), seeds=n_inst, out=out / "study",
                         mode=mode, workers=workers, scheduler=scheduler, progress=progress,
                         description=f"thesis ch.3 main study, {n_inst} instance(s) per cell")
    energy = run_campaign(energy_cell, {"cls": list(ENERGY_CLASSES)}, seeds=n_energy,
                          out=out / "energy", mode=mode, workers=workers, scheduler=scheduler,
                          progress=progress, description="thesis ch.3 energy study")
    gains = gain_table(study.table)
    rep = MappingReproduction(
        out=out, instances=n_inst, example=example, gains=gains,
        counts=best_counts_table(study.table) if "512x16" in sizes else pd.DataFrame(),
        ratios=ratio_table(study.table), energy=energy_curves(energy.table),
        claims=claims(study.table, gains), failed=len(study.failed) + len(energy.failed),
    )
    for name, df in (("example", rep.example), ("table_3_8_gains", rep.gains),
                     ("tables_3_6_3_7_best_counts", rep.counts), ("ratios", rep.ratios),
                     ("energy_curves", rep.energy)):
        df.to_csv(out / f"{name}.csv", index=False)
    figures = {
        "profiles": profiles_figure(study.table, out),
        "gains": gains_figure(gains, out),
        **{cls: energy_figure(rep.energy, cls, out) for cls in ("f-hihi", "p-hihi", "o-hihi")},
    }
    write_report(out / "report.md", report_text(rep, figures, n_energy))
    return rep
