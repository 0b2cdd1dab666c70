"""`skylease reproduce a2ha`: the A2HA paper's figures and tables, quick version (docs/decisions/a2ha.md)."""

import pandas as pd
import pytest

from skylease.experiments.a2ha_report import reproduce_a2ha

pytestmark = pytest.mark.integration  # the reproduction's report, 25-35 s: CI's second level


@pytest.fixture(scope="module")
def rep(tmp_path_factory):
    out = tmp_path_factory.mktemp("a2ha")
    calls = []
    summary = reproduce_a2ha(out, quick=True, progress=lambda done, total: calls.append((done, total)))
    return out, summary, calls


def test_files_and_sections(rep):
    out, summary, calls = rep
    for f in ("report.md", "grid_figs9_11.csv", "fig12_runs.csv", "fig12_summary.csv", "table1.csv",
              "table2.csv", "table2_runs.csv", "trajectories_fig4b_6b.csv", "billing_awareness.csv",
              "claims.csv", "fig9_image.png", "fig10_synthetic.png", "fig11_outsystems.png",
              "fig12_speedup_vs_hosts.png", "fig4b_6b_trajectories.png", "billing_awareness.png",
              "table2_long_tasks.png"):
        assert (out / f).stat().st_size > 500, f
    text = (out / "report.md").read_text()
    for section in ("## Headline", "## Figs. 9-11", "## Fig. 12", "## Table 1", "## Table 2",
                    "## Figs. 4b and 6b", "## What billing awareness buys"):
        assert section in text
    # the paper's numbers are printed beside ours
    for paper in ("18 / 12 / 29", "19 / 4 / 25 / 3", "14 / 3 / 7 / 1", "38 / 8 / 12 / 8", "3.70 / 104 / 463",
                  "4.14 / 93 / 450", "23 -> 9", "9-10"):
        assert paper in text, paper
    assert summary["orderings"] == 20 and summary["quick"]
    assert summary["checked"] == len(summary["claims"]) >= 30
    assert {"claim", "paper", "ours", "holds"} <= set(summary["claims"][0])
    assert calls and calls[-1][0] == summary["runs"] and all(t == calls[0][1] for _, t in calls)


def test_synthetic_and_image_match_the_paper(rep):
    out, _, _ = rep
    grid = pd.read_csv(out / "grid_figs9_11.csv").set_index(["workload", "cr0", "ir"])
    assert 12 <= grid.loc[("synthetic", 0.5, 0.5), "hosts_mean"] <= 14  # paper: 13 hosts
    assert grid["unfinished_runs"].sum() == 0  # the starvation guard: every run finishes
    claims = pd.read_csv(out / "claims.csv").set_index("claim")["holds"]
    assert claims[claims.index.str.startswith("optimal hosts")].all()
    assert claims[claims.index.str.startswith("synthetic: runs with 13 hosts")].all()
    assert claims[claims.index.str.contains("mean hosts within")].all()
    t1 = pd.read_csv(out / "table1.csv").set_index("workload")
    assert abs(t1.loc["synthetic", "charged_h_ours"] - 14) <= 1.5
    assert (t1["interrupted_ours"] < 10).all() and (t1["continued_ours"] < 10).all()


def test_table2_long_tasks(rep):
    out, _, _ = rep
    t2 = pd.read_csv(out / "table2.csv").set_index("row")
    serial, per_task = t2.loc["serial", "payment_h_ours"], t2.loc["one host per task", "payment_h_ours"]
    assert 376 < serial < 392 and 504 < per_task < 520  # 20 draws of the paper's 384 ± 5, 512 ± 5.8
    heur = t2[t2.index.str.startswith("heuristic")]
    assert ((heur["payment_h_ours"] > serial) & (heur["payment_h_ours"] < per_task)).all()
    sp = [t2.loc[f"heuristic ({k})", "speedup_ours"] for k in ("100 initial hosts", "50 initial hosts",
                                                                "1 initial host")]
    assert sp[0] > sp[1] > sp[2]


def test_trajectories_fig6b(rep):
    out, _, _ = rep
    tr = pd.read_csv(out / "trajectories_fig4b_6b.csv")
    damped = tr[tr["run"].str.startswith("damped")].iloc[0]
    undamped = tr[tr["run"].str.startswith("undamped")].iloc[0]
    assert undamped["predicted_total"] == damped["predicted_total"] == 23
    assert damped["created"] == 9  # ceil(0.4 * 22): 22 beside the host already alive (A15)
    assert undamped["open_loop_total"] == 23
    assert tr[tr["run"] == "submission order"]["open_loop_total"].iloc[-1] == 16  # round(939 / 60)


def test_billing_awareness(rep):
    out, _, _ = rep
    b = pd.read_csv(out / "billing_awareness.csv")
    for wl in ("synthetic", "image"):
        w = b[b["workload"] == wl].set_index("policy")
        a2ha = w.loc["A2HA conservative"]
        dask = w.loc["Dask adaptive (no billing)"]
        assert dask["charged_h_mean"] > 5 * a2ha["charged_h_mean"]
        assert dask["wall_min_mean"] < a2ha["wall_min_mean"]


def test_cli_reproduce_a2ha(tmp_path, capsys):
    from skylease.cli import main

    code = main(
        ["reproduce", "a2ha", "--quick", "--orderings", "3", "--processes", "2", "--out", str(tmp_path)]
    )
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "checks hold" in cap.out and "report.md" in cap.out
    assert (tmp_path / "report.md").exists() and (tmp_path / "grid_figs9_11.csv").exists()
    assert main(["reproduce", "a2ha", "--orderings", "0", "--out", str(tmp_path)]) == 2
