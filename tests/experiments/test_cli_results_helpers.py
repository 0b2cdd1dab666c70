"""Figures the CLI prints that the library computes (the CLI holds presentation only): the JSON of
a SpeQuloS run that did not finish, Table 3.8's agreement with the thesis, and the working folder
on ``sys.path`` for a user's ``MODULE:CLASS``."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import pandas as pd

from skylease.control.plugins import find_in_working_folder
from skylease.experiments.spequlos import result_json
from skylease.experiments.thesis.mapping_agreement import oc_agreement


def test_an_unfinished_spequlos_run_is_json_with_nulls():
    res = {"completion_s": math.inf, "tre": -math.inf, "n": np.int64(3), "x": np.float64(0.5),
           "baseline": {"completion_s": 10.0, "predicted_s": math.nan}}
    assert json.loads(result_json(res)) == {"completion_s": None, "tre": None, "n": 3, "x": 0.5,
                                            "baseline": {"completion_s": 10.0, "predicted_s": None}}
    finished = {"completion_s": 5.0, "n": np.float32(2.0), "baseline": {"completion_s": 10.0}}
    assert json.loads(result_json(finished)) == {"completion_s": 5.0, "n": 2.0,
                                                 "baseline": {"completion_s": 10.0}}


def test_table_3_8_agreement_counts_the_oc_cells_the_thesis_gives():
    gains = pd.DataFrame({"consistency": ["oc", "oc", "oc", "fc"], "thesis_gain": [1.0, 2.0, None, 3.0],
                          "diff_pp": [-1.5, 2.5, 9.0, 0.0]})
    a = oc_agreement(gains)
    assert (a.within, a.cells, a.max_diff_pp) == (1, 2, 2.5)


def test_the_working_folder_is_put_first_on_the_path_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != os.getcwd()])
    find_in_working_folder()
    find_in_working_folder()
    assert sys.path[0] == str(tmp_path) and sys.path.count(str(tmp_path)) == 1
