"""`skylease map --heuristic FILE.py:CLASS` and `skylease place --algorithm FILE.py:CLASS`: a heuristic
and a placement algorithm of one's own load through the one plug-in loader, run, and their answers are
checked; the built-ins give exactly what they gave before the plug-in interface (values recorded on
2026-11-29 from main at 5465bb6, before any change)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from .cli_helpers import one_line, run

# 12 tasks x 4 machines: `skylease etc generate small.etc --tasks 12 --machines 4 --seed 3`
SMALL_ETC = """12 4 0
2385.1147881768725 4321.540504803115 2340.4483257125726 1901.2491486586653 1426.643489728628
1133.8482723471259 399.47270764033993 810.8427661523838 684.0659942672758 548.0550990406595
634.5748652336123 939.3930947495162 167.01451707116468 147.87267419038434 187.25065462204907
147.4449937911027 496.078853540541 567.3122979565896 268.1981111430587 339.9092386915477
491.0066706478425 1211.019221182965 468.03192046310585 1084.4155369246516 1111.0712482360068
788.414192754284 1058.1244569761627 631.6545804536756 637.7290805364295 495.77691184952084
441.1912463542183 308.18936036494506 1691.9348573796713 949.0846268804935 1224.8064976270853
762.0586906809068 1488.5403580748239 1861.365348718676 1351.1341850742872 1382.7704901888117
673.5947453892654 837.9881109568303 927.5959683140982 1325.9287016320193 591.8176262505332
980.3775088165194 539.0154044390191 1616.27102965514
"""

# heuristic: (makespan, flowtime, lambda, assignment), `map small.etc --heuristic H --json` before
MAP_BEFORE = {
    "min-min": (3467.939085075248, 13470.258203291261, None, [0, 2, 1, 3, 2, 0, 3, 3, 3, 2, 1, 0]),
    "max-min": (2948.274046489469, 16938.074007425836, None, [3, 1, 0, 3, 3, 0, 2, 1, 0, 2, 1, 2]),
    "sufferage": (2459.996250211904, 14574.362781564203, None, [3, 2, 1, 0, 2, 0, 1, 2, 1, 2, 0, 0]),
    "mct": (2789.362809222959, 16185.347988755808, None, [3, 2, 1, 0, 0, 2, 1, 0, 2, 0, 1, 2]),
    "met": (3750.5967739492953, 15284.104667845022, None, [3, 2, 1, 3, 2, 2, 3, 3, 3, 2, 0, 2]),
    "olb": (3950.099489743349, 20986.688505712427, None, [0, 1, 2, 3, 3, 3, 2, 1, 3, 1, 2, 3]),
    "luo1": (2285.5539186754368, 14939.481665309806, None, [3, 2, 1, 3, 2, 2, 1, 2, 1, 0, 0, 2]),
    "luo2": (2477.5172347376724, 15215.997855891248, None, [3, 2, 1, 2, 3, 0, 0, 2, 1, 2, 0, 1]),
    "luo2b": (2285.5539186754368, 13936.140774168987, None, [3, 2, 1, 0, 2, 0, 1, 3, 1, 0, 2, 2]),
    "low1": (2304.8111175913673, 14545.394457794722, 1.0, [3, 2, 0, 0, 1, 0, 1, 3, 1, 2, 0, 2]),
    "low2": (2285.5539186754368, 13640.688190802255, 0.4, [3, 2, 1, 0, 2, 0, 1, 3, 1, 2, 0, 0]),
    "low3": (2285.5539186754368, 13640.688190802255, 0.4, [3, 2, 1, 0, 2, 0, 1, 3, 1, 2, 0, 0]),
    "best": (2285.5539186754368, 13640.688190802255, 0.4, [3, 2, 1, 0, 2, 0, 1, 3, 1, 2, 0, 0]),
}
# algorithm: (desktops used, energy Wh, sha256[:16] of the whole sorted JSON), `place --desktops
# thesis-lab --vms synthetic:40 --users 0.5 --seed 3 --algorithm A --json` before
PLACE_BEFORE = {
    "ff": (24, 285126.5626798804, "fc0cc9d61bd38e8e"),
    "ffd": (25, 271501.8356317102, "d9c6ba76e0d54423"),
    "bf": (25, 285975.4834070076, "aee9a4155067e5bd"),
    "sorting": (16, 68241.68107026158, "500f2e78da04362e"),
    "similar": (16, 66266.38845679822, "9ebc8f3912a594ce"),
    "rr": (24, 285126.5626798804, "74408d5efc9bc2b8"),
    "bf-trace": (25, 331239.6058490846, "cb9e23df76da5847"),
}

ROUND_ROBIN = '''
from skylease.planning.mapping.plugin import MappingHeuristic


class RoundRobin(MappingHeuristic):
    def __init__(self, start: int = 0) -> None:
        if start < 0:
            raise ValueError(f"start must be >= 0, got {start}")
        self.start = start

    def assign(self, etc):
        return [(self.start + i) % etc.shape[1] for i in range(etc.shape[0])]


class Short(MappingHeuristic):
    def assign(self, etc):
        return [0] * (etc.shape[0] - 1)


class TooFar(MappingHeuristic):
    def assign(self, etc):
        return [etc.shape[1]] * etc.shape[0]


class Fractional(MappingHeuristic):
    def assign(self, etc):
        return [0.5] * etc.shape[0]


class Nothing(MappingHeuristic):
    def assign(self, etc):
        return None


class Writes(MappingHeuristic):
    def assign(self, etc):
        etc[0, 0] = 1.0
        return [0] * etc.shape[0]


class Boom(MappingHeuristic):
    def assign(self, etc):
        return {}["missing"]


class NoAssign(MappingHeuristic):
    pass


class Liar(MappingHeuristic):
    def schedule(self, etc, *, voltages=None):  # not asked: the base's schedule checks assign()
        raise AssertionError("never called")

    def assign(self, etc):
        return [-1] * etc.shape[0]
'''

ROOMIEST = '''
from skylease.planning.placement.plugin import PlacementAlgorithm


class Roomiest(PlacementAlgorithm):
    def __init__(self, min_free: int = 0) -> None:
        self.min_free = min_free

    def assign(self, vms, desktops, free, has_vm):
        out = []
        for cores in vms.cores:
            j = int(free.argmax())
            if free[j] - cores >= self.min_free:
                free[j] -= cores
                out.append(j)
            else:
                out.append(-1)
        return out


class AllOnFirst(PlacementAlgorithm):
    def assign(self, vms, desktops, free, has_vm):
        return [0] * len(vms)


class Nowhere(PlacementAlgorithm):
    def assign(self, vms, desktops, free, has_vm):
        return [len(desktops)] * len(vms)


class Short(PlacementAlgorithm):
    def assign(self, vms, desktops, free, has_vm):
        return []


class Boom(PlacementAlgorithm):
    def assign(self, vms, desktops, free, has_vm):
        return 1 / 0
'''

# desktops d0..d2 with 4, 8, 2 cores; VMs of 2, 4, 3, 1, 16 cores
DESKTOPS = "name,cores\nd0,4\nd1,8\nd2,2\n"
VMS = "name,cores,minutes\nv0,2,60\nv1,4,60\nv2,3,60\nv3,1,60\nv4,16,60\n"


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "small.etc").write_text(SMALL_ETC)
    (tmp_path / "rr.py").write_text(ROUND_ROBIN)
    (tmp_path / "roomiest.py").write_text(ROOMIEST)
    (tmp_path / "lab.csv").write_text(DESKTOPS)
    (tmp_path / "vms.csv").write_text(VMS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("heuristic", sorted(MAP_BEFORE))
def test_builtin_heuristics_give_what_they_gave_before(heuristic, folder, capsys):
    code, out, err = run(capsys, "map", "small.etc", "--heuristic", heuristic, "--json")
    assert code == 0, err
    res = json.loads(out)
    assert (res["makespan"], res["flowtime"], res["lambda"], res["assignment"]) == MAP_BEFORE[heuristic]
    assert "heuristic_class" not in res and res["heuristic"] == heuristic


def test_builtin_low2_with_lambda_and_voltages_as_before(folder, capsys):
    code, out, err = run(capsys, "map", "small.etc", "--heuristic", "low2", "--lambda", "0.3",
                         "--voltages", "5", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert (res["makespan"], res["flowtime"], res["energy"], res["lambda"]) == (
        2841.093089477286, 12862.86318181182, 25301.20302448129, 0.3)
    assert res["assignment"] == [3, 2, 1, 1, 2, 0, 3, 3, 1, 2, 0, 0]


@pytest.mark.parametrize("algorithm", sorted(PLACE_BEFORE))
def test_builtin_placements_give_what_they_gave_before(algorithm, capsys):
    code, out, err = run(capsys, "place", "--desktops", "thesis-lab", "--vms", "synthetic:40", "--users",
                         "0.5", "--seed", "3", "--algorithm", algorithm, "--json")
    assert code == 0, err
    res = json.loads(out)
    digest = hashlib.sha256(json.dumps(res, sort_keys=True).encode()).hexdigest()[:16]
    assert (res["desktops_used"], res["energy_wh"], digest) == PLACE_BEFORE[algorithm]


def test_a_round_robin_heuristic_from_a_file_runs(folder, capsys):
    code, out, err = run(capsys, "map", "small.etc", "--heuristic", "rr.py:RoundRobin",
                         "--heuristic-arg", "start=1", "--voltages", "5", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["assignment"] == [(1 + i) % 4 for i in range(12)]
    etc = np.array(SMALL_ETC.split()[3:], dtype=float).reshape(12, 4)
    loads = np.zeros(4)
    for i, j in enumerate(res["assignment"]):
        loads[j] += etc[i, j]
    assert res["makespan"] == pytest.approx(loads.max(), rel=1e-12)  # (summation order aside: exact)
    assert res["energy"] is not None and res["energy"] > 0
    assert res["heuristic_class"] == f"{folder / 'rr.py'}:RoundRobin(start=1)"
    # round robin ignores the ETC: worse than every built-in here
    assert res["makespan"] > max(v[0] for v in MAP_BEFORE.values())


def test_a_placement_algorithm_from_a_file_runs(folder, capsys):
    code, out, err = run(capsys, "place", "--desktops", "lab.csv", "--vms", "vms.csv",
                         "--algorithm", "roomiest.py:Roomiest", "--json")
    assert code == 0, err
    res = json.loads(out)
    # most free cores first: v0 (2) on d1 (8 -> 6), v1 (4) on d1 (6 -> 2), v2 (3) on d0 (4 -> 1),
    # v3 (1) on d1 or d2 (2 free each: the lower index, d1); v4 (16) fits nowhere
    assert res["placement"] == {"v0": "d1", "v1": "d1", "v2": "d0", "v3": "d1"}
    assert res["unplaced"] == [{"vm": "v4", "cores": 16,
                                "reason": "needs 16 cores; the largest desktop has 8"}]
    assert res["desktops_used"] == 2
    assert res["algorithm_class"] == f"{folder / 'roomiest.py'}:Roomiest(min_free=0)"
    # with a margin of 2 cores on every desktop: v2 (3) would leave 1 on d0, the roomiest, so it stays
    # out; v3 (1) then goes to d0 (4 -> 3)
    code, out, err = run(capsys, "place", "--desktops", "lab.csv", "--vms", "vms.csv",
                         "--algorithm", "roomiest.py:Roomiest", "--algorithm-arg", "min_free=2", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["placement"] == {"v0": "d1", "v1": "d1", "v3": "d0"}
    assert [u["vm"] for u in res["unplaced"]] == ["v2", "v4"]
    assert res["unplaced"][0]["reason"] == ("needs 3 cores; Roomiest left it unplaced "
                                            "(at most 3 free afterwards)")


@pytest.mark.parametrize(("spec", "needles"), [
    ("rr.py:Short", ("--heuristic", "rr.py:Short.assign(etc)", "returned 11 values", "(12)")),
    ("rr.py:TooFar", ("--heuristic", "TooFar.assign(etc)", "machine indices in [0, 4)")),
    ("rr.py:Fractional", ("--heuristic", "Fractional.assign(etc)", "integers")),
    ("rr.py:Nothing", ("--heuristic", "Nothing.assign(etc) returned None",)),
    ("rr.py:Writes", ("--heuristic", "Writes.assign(etc) fails: ValueError", "rr.py:")),
    ("rr.py:Boom", ("--heuristic", "Boom.assign(etc) fails: KeyError", "rr.py:")),
    ("rr.py:NoAssign", ("--heuristic", "NotImplementedError", "does not implement assign")),
    ("rr.py:Liar", ("--heuristic", "Liar.assign(etc)", "[0, 4)")),
])
def test_a_wrong_answer_of_a_heuristic_is_one_line(spec, needles, folder, capsys):
    one_line(capsys, ["map", "small.etc", "--heuristic", spec], *needles)


@pytest.mark.parametrize(("spec", "needles"), [
    ("roomiest.py:AllOnFirst", ("--algorithm", "AllOnFirst.assign()", "cores on desktop 0 (d0)", "4 free")),
    ("roomiest.py:Nowhere", ("--algorithm", "put VM 0 on desktop 3; there are 3 desktops")),
    ("roomiest.py:Short", ("--algorithm", "returned 0 values", "(5)")),
    ("roomiest.py:Boom", ("--algorithm", "Boom.assign() fails: ZeroDivisionError", "roomiest.py:")),
])
def test_a_wrong_answer_of_a_placement_algorithm_is_one_line(spec, needles, folder, capsys):
    one_line(capsys, ["place", "--desktops", "lab.csv", "--vms", "vms.csv", "--algorithm", spec], *needles)


@pytest.mark.parametrize(("argv", "needles"), [
    (["map", "small.etc", "--heuristic", "gone.py:X"], ("gone.py", "--heuristic", "no such file")),
    (["map", "small.etc", "--heuristic", "rr.py:Nope"], ("--heuristic", "no class 'Nope'")),
    (["map", "small.etc", "--heuristic", "json:JSONDecoder"], ("--heuristic", "not a mapping heuristic")),
    (["map", "small.etc", "--heuristic", "nope"],
     ("--heuristic", "unknown heuristic 'nope'", "MODULE:CLASS")),
    (["map", "small.etc", "--heuristic", "rr.py:RoundRobin", "--heuristic-arg", "start=-1"],
     ("--heuristic-arg", "start must be >= 0")),
    (["map", "small.etc", "--heuristic", "rr.py:RoundRobin", "--heuristic-arg", "zz=1"],
     ("--heuristic-arg", "unknown parameter 'zz'")),
    (["map", "small.etc", "--heuristic", "rr.py:RoundRobin", "--heuristic-arg", "start=x"],
     ("--heuristic-arg", "takes int")),
    (["map", "small.etc", "--heuristic", "min-min", "--heuristic-arg", "a=1"],
     ("--heuristic-arg", "takes no parameters")),
    (["place", "--desktops", "lab.csv", "--vms", "vms.csv", "--algorithm", "gone.py:X"],
     ("gone.py", "--algorithm", "no such file")),
    (["place", "--desktops", "lab.csv", "--vms", "vms.csv", "--algorithm", "json:JSONDecoder"],
     ("--algorithm", "not a placement algorithm")),
    (["place", "--desktops", "lab.csv", "--vms", "vms.csv", "--algorithm", "roomiest.py:Roomiest",
      "--algorithm-arg", "min_free=lots"], ("--algorithm-arg", "takes int")),
    (["place", "--desktops", "lab.csv", "--vms", "vms.csv", "--algorithm", "ff", "--algorithm-arg", "a=1"],
     ("--algorithm-arg", "takes no parameters")),
])
def test_a_bad_plugin_or_parameter_is_one_line(argv, needles, folder, capsys):
    one_line(capsys, argv, *needles)
