"""The SpeQuloS Fig. 8 and the Haizea Figure 2 can be read (issue 18, item 9): bars from zero on a
linear axis, and legends that cover neither data nor titles."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from skylease.experiments import haizea_figures, spequlos_figures
from skylease.experiments.haizea import DELTAS
from skylease.experiments.haizea_report import CONFIGS
from skylease.experiments.spequlos import TRACES


@pytest.fixture
def drawn(monkeypatch):
    """The figures a plotting function makes, drawn, instead of saved."""
    figs = []

    def keep(fig, path):
        fig.canvas.draw()
        figs.append(fig)
        return Path(path).name

    monkeypatch.setattr(spequlos_figures, "save_figure", keep)
    monkeypatch.setattr(haizea_figures, "save_figure", keep)
    return figs


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _fig8_frame(traces) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    rows = []
    for mw in spequlos_figures.MIDDLEWARES:
        for bot in spequlos_figures.BOT_CATEGORIES:
            for t in traces:
                without = rng.uniform(1e3, 7e4)
                rows.append(dict(middleware=mw, bot=bot, trace=t, without_s=without,
                                 with_s=without * rng.uniform(0.85, 1.0), paper_without_s=np.nan,
                                 paper_with_s=np.nan))
    rows[4].update(paper_without_s=2524.0, paper_with_s=2521.0)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("traces", [("nd", "spot10"), TRACES])
def test_fig8_bars_start_at_zero_on_a_linear_axis_and_the_legend_is_off_the_data(drawn, tmp_path, traces):
    f8 = _fig8_frame(traces)
    spequlos_figures.plot_fig8(f8, tmp_path)
    (fig,) = drawn
    panels = fig.axes
    assert len(panels) == 6
    for ax in panels:
        assert ax.get_yscale() == "linear"
        assert ax.get_ylim()[0] == 0
        assert ax.get_legend() is None
        assert len(ax.get_yticks()) <= 7  # not crowded
    (legend,) = fig.legends
    box = legend.get_window_extent()
    assert not any(_overlap(box, ax.get_window_extent()) for ax in panels)
    # a 1 % difference looks like 1 %: bar heights are proportional to the times
    ax = panels[0]
    heights = sorted(p.get_height() for p in ax.patches)
    first = f8[(f8["middleware"] == "boinc") & (f8["bot"] == "SMALL")]
    assert np.allclose(heights, sorted([*first["without_s"] / 3600, *first["with_s"] / 3600]))


@pytest.mark.parametrize("deltas", [(3,), DELTAS])
def test_haizea_fig2_legend_hides_no_title_and_no_panel(drawn, tmp_path, deltas):
    rng = np.random.default_rng(0)
    sizes = ("medium",) if deltas == (3,) else ("small", "medium", "large")
    rhos = (10, 20, 30) if deltas == (3,) else (5, 10, 15, 20, 25, 30)
    f2 = pd.DataFrame([dict(size=s, delta=d, config=c, rho=r, x=1 + rng.uniform(0, 0.1),
                            paper_x=1 + rng.uniform(0, 0.1))
                       for s in sizes for d in deltas for c in CONFIGS for r in rhos])
    haizea_figures.plot_fig2(f2, tmp_path / "f.png")
    (fig,) = drawn
    (legend,) = fig.legends
    box = legend.get_window_extent()
    for ax in fig.axes:
        assert ax.title.get_text()
        assert not _overlap(box, ax.title.get_window_extent()), ax.title.get_text()
        assert not _overlap(box, ax.get_window_extent())
