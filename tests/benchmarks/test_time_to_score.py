"""benchmarks/scores/time_to_score.py resumes an interrupted benchmark: it keeps the runs already measured
under the same settings (and the wall-clock they took), and refuses an output measured under others."""

import json

import pytest

SETTINGS = ["tasks=[HalfCheetah]", "sb3=false", "eval_every=2048", "sb3_eval_every=2048", "budget_s=300"]


def load_script():
    from benchmarks.scores import time_to_score

    return time_to_score


def measured_run(seed: int, reached_at_s: float) -> dict:
    evals = [
        {"time_s": reached_at_s / 2, "step": 2048, "eval_return": 1000.0, "eval_return_std": 1.0},
        {"time_s": reached_at_s, "step": 4096, "eval_return": 3500.0, "eval_return_std": 1.0},
    ]
    return {"framework": "ours", "seed": seed, "evals": evals, "steps": 4096, "load_before": 0.0}


def interrupted_output(path, budget_s=300.0):
    """What an interrupted `seeds=2` benchmark left: both seeds done, `complete` still false."""
    data = {
        "budget_s": budget_s,
        "seeds": 2,
        "eval_episodes": 5,
        "eval_every_s": 15.0,
        "eval_intervals": {"ours": 2048, "sb3": 2048, "source": "given"},
        "ours_total_steps": None,
        "complete": False,
        "wall_s": 1000.0,
        "tasks": {"HalfCheetah": {"threshold": 3000.0, "runs": {"ours": [measured_run(0, 20.0), measured_run(1, 40.0)], "sb3": []}}},
    }
    path.write_text(json.dumps(data))


def test_resume_keeps_the_measured_runs_and_runs_none_again(tmp_path, monkeypatch, capsys):
    script = load_script()
    out = tmp_path / "tts.json"
    interrupted_output(out)
    monkeypatch.setattr(script, "run_ours", lambda *a, **k: pytest.fail("a kept seed was trained again"))
    script.main([*SETTINGS, "seeds=2", "resume=true", f"out={out}", f"png={tmp_path / 'tts.png'}"])
    data = json.loads(out.read_text())
    assert data["complete"]
    assert [r["seed"] for r in data["tasks"]["HalfCheetah"]["runs"]["ours"]] == [0, 1]
    assert data["tasks"]["HalfCheetah"]["summary"]["ours_time_to_threshold_s"] == [20.0, 40.0]
    assert "kept from the earlier benchmark" in capsys.readouterr().out
    assert 1000.0 <= data["wall_s"] < 1100.0  # the interrupted attempt's time counts, once


def test_resume_runs_only_the_missing_seed(tmp_path, monkeypatch):
    script = load_script()
    out = tmp_path / "tts.json"
    interrupted_output(out)
    trained = []

    def fake_run(task, seed, args, every, run_dir):
        trained.append(seed)
        return measured_run(seed, 60.0)

    monkeypatch.setattr(script, "run_ours", fake_run)
    script.main([*SETTINGS, "seeds=3", "resume=true", f"out={out}", f"png={tmp_path / 'tts.png'}"])
    assert trained == [2]
    assert json.loads(out.read_text())["tasks"]["HalfCheetah"]["summary"]["ours_time_to_threshold_s"] == [20.0, 40.0, 60.0]


def test_resume_refuses_an_output_measured_under_other_settings(tmp_path, monkeypatch):
    script = load_script()
    out = tmp_path / "tts.json"
    interrupted_output(out, budget_s=120.0)
    before = out.read_text()
    monkeypatch.setattr(script, "run_ours", lambda *a, **k: pytest.fail("trained despite the mismatch"))
    with pytest.raises(SystemExit, match="another budget_s"):
        script.main([*SETTINGS, "seeds=2", "resume=true", f"out={out}", f"png={tmp_path / 'tts.png'}"])
    assert out.read_text() == before
