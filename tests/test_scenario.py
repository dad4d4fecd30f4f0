"""The Scenario API: construction, validation errors, with_, TOML round trips."""

from __future__ import annotations

import json
import pickle

import pytest

import fabricemu
from fabricemu import Scenario, ScenarioError
from fabricemu.scenario import parse_value

from conftest import ERROR_CASES, SCENARIOS, SMALL, broken


def test_public_names():
    for name in ["Scenario", "run", "Result", "ScenarioError", "SimulationError", "open"]:
        assert hasattr(fabricemu, name), name
    assert isinstance(fabricemu.__version__, str) and fabricemu.__version__
    assert issubclass(fabricemu.ScenarioError, ValueError)
    assert issubclass(fabricemu.SimulationError, RuntimeError)


@pytest.mark.parametrize("name", ["quickstart", "incast", "permutation"])
def test_repository_scenarios_load(name):
    s = Scenario.load(SCENARIOS / f"{name}.toml")
    assert s.name == name
    assert s.seed == 1
    assert s.describe()["flows"] > 0
    assert s.source.endswith(f"{name}.toml")


def test_from_toml_keeps_the_dict_as_written():
    s = Scenario.from_toml(SMALL)
    d = s.to_dict()
    assert d["topology"] == {
        "kind": "fat_tree",
        "k": 4,
        "link_rate": "100Gbps",
        "link_delay": "500ns",
    }
    assert "switch" not in d  # defaults are not added to the user's dict ...
    full = s.to_dict(normalised=True)
    assert full["switch"]["buffer"] == "32MiB"  # ... but to the normalised one
    assert full["transport"]["mtu"] == "4KiB"


def test_from_dict_equals_from_toml():
    a = Scenario.from_toml(SMALL)
    b = Scenario.from_dict(a.to_dict())
    assert a == b
    assert hash(a) == hash(b)
    assert Scenario(a.to_dict()) == a


def test_to_toml_round_trip():
    for path in sorted(SCENARIOS.glob("*.toml")):
        s = Scenario.load(path)
        again = Scenario.from_toml(s.to_toml())
        assert again == s, path
        assert again.to_toml() == s.to_toml()


def test_with_dotted_paths_and_list_indices():
    s = Scenario.from_toml(SMALL)
    t = s.with_({"topology.k": 8, "workload.0.size": "2MB"})
    assert t is not s
    assert t.to_dict()["topology"]["k"] == 8
    assert t.to_dict()["workload"][0]["size"] == "2MB"
    assert t.describe()["topology"]["hosts"] == 128
    # the original is unchanged
    assert s.to_dict()["topology"]["k"] == 4
    assert s.to_dict()["workload"][0]["size"] == "64KiB"


def test_with_keywords_creates_tables_and_removes_keys():
    s = Scenario.from_toml(SMALL)
    t = s.with_({"switch.port_buffer": "512KiB"}, seed=7, name="other")
    assert t.seed == 7 and t.name == "other"
    assert t.to_dict()["switch"] == {"port_buffer": "512KiB"}
    u = t.with_({"switch.port_buffer": None, "name": None})
    assert "port_buffer" not in u.to_dict()["switch"]
    assert u.name == "scenario"


def test_with_whole_values():
    s = Scenario.from_toml(SMALL)
    flows = [{"src": 0, "dst": 5, "size": "1MB"}, {"src": 1, "dst": 6, "size": 4096, "start": "1us"}]
    t = s.with_({"workload": [{"kind": "flows", "flows": flows}]})
    assert t.describe()["flows"] == 2
    assert t.with_({"workload.0.flows.1.dst": 7}).to_dict()["workload"][0]["flows"][1]["dst"] == 7


def test_with_index_out_of_range_names_the_path():
    s = Scenario.from_toml(SMALL)
    with pytest.raises(ScenarioError) as info:
        s.with_({"workload.3.size": "1MB"})
    assert info.value.path == "workload.3"
    assert "out of range" in str(info.value)
    with pytest.raises(ScenarioError) as info:
        s.with_({"workload.first.size": "1MB"})
    assert info.value.path == "workload.first"
    with pytest.raises(ScenarioError) as info:
        s.with_({"topology.k.x": 1})
    assert info.value.path == "topology.k.x"


def test_with_validates():
    s = Scenario.from_toml(SMALL)
    with pytest.raises(ScenarioError) as info:
        s.with_({"topology.k": 7})
    e = info.value
    assert e.path == "topology.k"
    assert e.line is None  # a dictionary has no lines
    assert "even" in e.message
    with pytest.raises(ScenarioError) as info:
        s.with_({"topology.bogus": 1})
    assert info.value.path == "topology.bogus"


@pytest.mark.parametrize(("case", "old", "new", "path", "line"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_from_toml(case, old, new, path, line):
    with pytest.raises(fabricemu.ScenarioError) as info:
        Scenario.from_toml(broken(old, new), source="bad.toml")
    e = info.value
    assert isinstance(e, fabricemu.ScenarioError)
    assert isinstance(e, ValueError)
    assert e.path == path
    assert e.line == line
    assert isinstance(e.column, int) and e.column >= 1
    assert e.source_name == "bad.toml"
    assert str(e).startswith(f"bad.toml:{line}:{e.column}: {path}: ")
    assert str(e).endswith(e.message)
    assert "\n" not in str(e)


@pytest.mark.parametrize(("case", "old", "new", "path", "line"), ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_errors_from_load(tmp_path, case, old, new, path, line):
    p = tmp_path / f"{case}.toml"
    p.write_text(broken(old, new))
    with pytest.raises(ScenarioError) as info:
        Scenario.load(p)
    assert info.value.path == path
    assert info.value.line == line
    assert str(p) in str(info.value)


def test_errors_from_dict():
    d = Scenario.from_toml(SMALL).to_dict()
    d["topology"]["link_rate"] = "100Gbs"
    with pytest.raises(ScenarioError) as info:
        Scenario.from_dict(d)
    assert info.value.path == "topology.link_rate"
    d["topology"]["link_rate"] = "100Gbps"
    d["workload"][0]["receiver"] = 99
    with pytest.raises(ScenarioError) as info:
        Scenario.from_dict(d)
    assert info.value.path == "workload.0.receiver"
    assert "out of range" in info.value.message


def test_toml_syntax_error_has_a_position():
    with pytest.raises(ScenarioError) as info:
        Scenario.from_toml('[topology]\nkind = "fat_tree\n', source="x.toml")
    assert info.value.line == 2
    assert str(info.value).startswith("x.toml:2:")


def test_error_is_picklable_and_constructible():
    e = ScenarioError("expected an even integer", path="topology.k", line=3, column=5, source_name="f.toml")
    assert str(e) == "f.toml:3:5: topology.k: expected an even integer"
    again = pickle.loads(pickle.dumps(e))
    assert (again.path, again.line, again.column, str(again)) == (e.path, e.line, e.column, str(e))
    assert str(ScenarioError("bad", path="seed")) == "seed: bad"


def test_scenario_is_picklable():
    s = Scenario.load(SCENARIOS / "quickstart.toml")
    assert pickle.loads(pickle.dumps(s)) == s


def test_numpy_values_are_accepted():
    np = pytest.importorskip("numpy")
    s = Scenario.from_toml(SMALL).with_({"topology.k": np.int64(6)})
    assert s.describe()["topology"]["hosts"] == 54


def test_repr_and_html():
    s = Scenario.load(SCENARIOS / "quickstart.toml")
    r = repr(s)
    assert "quickstart" in r and "fat_tree k=4" in r and "16 hosts" in r
    h = s._repr_html_()
    assert "<table>" in h and "fat_tree" in h


def test_parse_value():
    assert parse_value("8") == 8
    assert parse_value('"2MB"') == "2MB"
    assert parse_value("2MB") == "2MB"
    assert parse_value("true") is True
    assert parse_value("[1, 2]") == [1, 2]
    assert parse_value("fat_tree") == "fat_tree"
    assert parse_value('{kmin = "100KB"}') == {"kmin": "100KB"}


def test_type_errors():
    with pytest.raises(TypeError):
        Scenario(["not", "a", "dict"])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        fabricemu.run(42)  # type: ignore[arg-type]


def test_load_json_scenario_and_run_record(tmp_path):
    base = Scenario.from_toml(SMALL)
    as_dict = tmp_path / "s.json"
    as_dict.write_text(json.dumps(base.to_dict()))
    assert Scenario.load(as_dict) == base
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"version": "0.1.0", "scenario": base.to_dict(normalised=True)}))
    loaded = Scenario.load(record)
    assert loaded == base and loaded.source == str(record)
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    with pytest.raises(ScenarioError, match="not valid JSON"):
        Scenario.load(bad)
    bad.write_text("[1, 2]")
    with pytest.raises(ScenarioError, match="is an object, not list"):
        Scenario.load(bad)


def test_overrides_accumulate_and_survive_pickling():
    s = Scenario.from_toml(SMALL, source="small.toml")
    assert s.overrides == {}
    t = s.with_({"topology.k": 6}).with_(seed=3).with_({"topology.k": 8})
    assert t.overrides == {"topology.k": 8, "seed": 3}
    u = pickle.loads(pickle.dumps(t))
    assert u == t and u.overrides == t.overrides and u.source == "small.toml"
