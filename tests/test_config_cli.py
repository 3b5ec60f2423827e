import json
from pathlib import Path


from bon.cli import main
from bon.config import load_config
from bon.demo import demo_config

ROOT = Path(__file__).resolve().parents[1]


def _one_line_error(capsys, argv) -> str:
    rc = main(argv)
    err = capsys.readouterr().err.strip()
    assert rc == 2
    assert "\n" not in err and "Traceback" not in err
    return err


def test_demo_yaml_and_bon_demo_describe_the_same_study():
    from_yaml = load_config(ROOT / "configs" / "demo.yaml").as_dict()
    from_code = demo_config().as_dict()
    from_yaml.pop("out"), from_code.pop("out")
    assert from_yaml == from_code


def test_config_naming_unknown_judge(tmp_path, capsys):
    cfg = tmp_path / "study.yaml"
    cfg.write_text((ROOT / "configs" / "demo.yaml").read_text().replace("  - colour-hist\n", "  - gpt-9000\n"))
    err = _one_line_error(capsys, ["run", str(cfg)])
    assert str(cfg) in err and "judges[2]" in err and "unknown judge 'gpt-9000'" in err


def test_config_errors_name_the_key(tmp_path, capsys):
    cfg = tmp_path / "study.yaml"
    cfg.write_text("out: x\nn: 0\njudges: [random]\ngenerators: [synthetic]\n")
    assert "n must be at least 1" in _one_line_error(capsys, ["run", str(cfg)])
    cfg.write_text("out: x\ntasks: [video]\njudges: [random]\ngenerators: [synthetic]\n")
    assert "unknown task 'video'" in _one_line_error(capsys, ["run", str(cfg)])
    assert "config file not found" in _one_line_error(capsys, ["run", str(tmp_path / "nope.yaml")])


def _bench(tmp_path, pair) -> Path:
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "t2i.json").write_text(json.dumps({"pairs": [pair]}))
    return bench


PAIR = {
    "id": "p1", "prompt_source": "s", "prompt_metadata": {},
    "response_a": {"model_name": "m1", "response_content": [["image", "a.png"]]},
    "response_b": {"model_name": "m2", "response_content": [["image", "b.png"]]},
    "chosen": "A", "human_annotations": [6, 6, 5],
}


def test_preference_file_missing_chosen(tmp_path, capsys):
    bench = _bench(tmp_path, {k: v for k, v in PAIR.items() if k != "chosen"})
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"p1": {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "B"}]}}))
    err = _one_line_error(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "image", "--predictions", str(pred)])
    assert "t2i.json" in err and "p1" in err and "chosen" in err


def test_unknown_task_name(tmp_path, capsys):
    bench = _bench(tmp_path, PAIR)
    err = _one_line_error(capsys, ["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "video", "--predictions", "x.json"])
    assert "unknown MMRB2 task 'video'" in err


def test_accuracy_command_prints_and_writes_json(tmp_path, capsys):
    bench = _bench(tmp_path, PAIR)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"p1": {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "A"}]}}))
    out = tmp_path / "acc.json"
    assert main(["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "image", "--predictions", str(pred), "--json", str(out)]) == 0
    assert "50.00%" in capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["tasks"]["image"]["correct"] == 1 and data["tasks"]["image"]["judgements"] == 2


def test_diagnose_command_infers_task_from_ids(tmp_path, capsys):
    bench = _bench(tmp_path, PAIR)
    pred = tmp_path / "judge.json"
    pred.write_text(json.dumps({"p1": {"forward": [{"judgement": "A", "evaluator": "j"}], "reverse": [{"judgement": "B", "evaluator": "j"}]}}))
    assert main(["mmrb2", "diagnose", "--bench-dir", str(bench), "--predictions", str(pred), "--json", str(tmp_path / "d.json"), "--out", str(tmp_path / "rep")]) == 0
    data = json.loads((tmp_path / "d.json").read_text())
    assert data["tasks"]["image"]["judges"]["j"]["accuracy"]["correct"] == 2
    assert (tmp_path / "rep" / "report.md").exists()
    stray = tmp_path / "stray.json"
    stray.write_text(json.dumps({"zzz": {"forward": [{"judgement": "A"}]}}))
    err = _one_line_error(capsys, ["mmrb2", "diagnose", "--bench-dir", str(bench), "--predictions", str(stray)])
    assert "none of its pair ids" in err


def test_unknown_ids_are_counted_not_fatal(tmp_path, capsys):
    bench = _bench(tmp_path, PAIR)
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"p1": {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "B"}]},
                                "ghost": {"forward": [{"judgement": "A"}], "reverse": [{"judgement": "A"}]}}))
    assert main(["mmrb2", "accuracy", "--bench-dir", str(bench), "--task", "image", "--predictions", str(pred)]) == 0
    printed = capsys.readouterr().out
    assert "100.00%" in printed and "unknown ids 1 (ignored)" in printed
