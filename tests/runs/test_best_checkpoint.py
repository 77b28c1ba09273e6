"""checkpoints/best.pt: the best-evaluated policy, kept beside the last one."""

import json
import math

import pytest

from tests.helpers import TINY, run_module


def test_record_evaluation_keeps_the_first_strictly_best_and_ignores_non_finite():
    from ppo_control.training.run_state import Progress

    progress = Progress()
    outcomes = []
    for step, value in [(100, 5.0), (200, 7.0), (300, 7.0), (400, float("nan")), (500, 6.0), (600, 9.5)]:
        progress.step = step
        outcomes.append(progress.record_evaluation(value))
    assert outcomes == [True, True, False, False, False, True]
    assert (progress.best_eval_return, progress.best_step) == (9.5, 600)
    restored = Progress()
    restored.load_state_dict(progress.state_dict())
    assert (restored.best_eval_return, restored.best_step) == (9.5, 600)
    older = {k: v for k, v in progress.state_dict().items() if not k.startswith("best")}  # a run from before best.pt
    restored = Progress()
    restored.load_state_dict(older)
    assert restored.best_eval_return is None and restored.record_evaluation(-math.inf) is False


@pytest.mark.slow
def test_best_checkpoint_is_the_best_evaluation_and_evaluate_and_export_take_it_by_name(tmp_path):
    run = tmp_path / "run"
    overrides = [o for o in TINY if not o.startswith("eval.every")] + ["eval.every_steps=256"]
    result = run_module("ppo_control.train", "task=InvertedPendulum", "total_steps=2048", *overrides, f"run_dir={run}")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    evaluated = [r for r in rows if "eval_return" in r]
    best = max(evaluated, key=lambda r: r["eval_return"])  # max() keeps the first of ties, as training does
    assert len(evaluated) == 8
    # Only meaningful when the best is not the last: InvertedPendulum's tiny runs go up and down.
    assert best["step"] != rows[-1]["step"], [r["eval_return"] for r in evaluated]
    assert f"best evaluation: {best['eval_return']:.1f} at step {best['step']:,}" in result.stdout

    result = run_module("ppo_control.evaluate", f"run={run}", "checkpoint=best", "episodes=2")  # the run's eval.episodes
    assert result.returncode == 0, result.stderr
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["step"] == best["step"]
    assert evaluation["return_mean"] == pytest.approx(best["eval_return"], abs=1e-9)  # the run's own evaluation, reproduced

    result = run_module("ppo_control.export", f"run={run}", "checkpoint=best")
    assert result.returncode == 0, result.stderr
    assert "checkpoints/best.pt" in result.stdout

    result = run_module("ppo_control.evaluate", f"run={run}", "checkpoint=bset")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "best.pt, last.pt" in result.stderr
