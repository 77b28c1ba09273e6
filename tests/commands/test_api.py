"""The Python API: the same config system and one-line errors as the commands; policies as callables."""

import numpy as np
import pytest

from tests.helpers import ROOT, run_module, tiny_overrides


@pytest.fixture(scope="module")
def api_run(tmp_path_factory):
    from ppo_control.api import train

    run_dir = tmp_path_factory.mktemp("api") / "run"
    result = train("InvertedPendulum", total_steps=256, run_dir=str(run_dir), **tiny_overrides(), **{"log.tensorboard": False})
    return result


def test_train_returns_the_run_and_its_final_evaluation(api_run):
    import json

    rows = [json.loads(line) for line in (api_run.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert api_run.step == 256 == rows[-1]["step"]
    assert api_run.eval_return == rows[-1]["eval_return"] and api_run.eval_return_std == rows[-1]["eval_return_std"]
    assert (api_run.run_dir / "checkpoints" / "last.pt").is_file()


def test_nested_and_dotted_overrides_compose_alike():
    from ppo_control.config import compose

    nested = compose({"task": "Hopper", "ppo": {"learning_rate": 1e-4, "epochs": 3}, "policy": {"hidden_sizes": [32, 16]}})
    dotted = compose({"task": "Hopper", "ppo.learning_rate": 1e-4, "ppo.epochs": 3, "policy.hidden_sizes": [32, 16]})
    cli = compose(["task=Hopper", "ppo.learning_rate=1e-4", "ppo.epochs=3", "policy.hidden_sizes=[32,16]"])
    assert nested == dotted == cli
    assert cli.ppo.epochs == 3 and list(cli.policy.hidden_sizes) == [32, 16]


@pytest.mark.parametrize(
    "api_call, cli",
    [
        (lambda api: api.train("Hopper", ppo={"lerning_rate": 1e-3}), ("ppo_control.train", "task=Hopper", "ppo.lerning_rate=1e-3")),
        (lambda api: api.train("HalfCheeta"), ("ppo_control.train", "task=HalfCheeta")),
        (lambda api: api.train("Hopper", env={"n_envs": 0}), ("ppo_control.train", "task=Hopper", "env.n_envs=0")),
        (lambda api: api.evaluate("/no/such/run"), ("ppo_control.evaluate", "run=/no/such/run")),
        (lambda api: api.export("/no/such/run", format="tflite"), ("ppo_control.export", "run=/no/such/run", "format=tflite")),
    ],
)
def test_bad_arguments_raise_one_error_type_with_the_cli_message(api_call, cli):
    from ppo_control import api
    from ppo_control.config.errors import UserError

    with pytest.raises(UserError) as caught:
        api_call(api)
    result = run_module(*cli)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"error: {caught.value}"


def test_evaluate_api_reproduces_the_training_evaluation(api_run):
    from ppo_control.api import evaluate

    report = evaluate(api_run.run_dir, episodes=2)
    assert report["return_mean"] == pytest.approx(api_run.eval_return)
    assert (api_run.run_dir / "eval.json").is_file()


def test_loaded_policies_act_alike_from_run_checkpoint_and_exports(api_run, tmp_path):
    from ppo_control.api import export, load_policy
    from ppo_control.config.errors import UserError

    from_run = load_policy(api_run.run_dir)
    from_checkpoint = load_policy(api_run.run_dir / "checkpoints" / "last.pt")
    torchscript = load_policy(export(api_run.run_dir, out=str(tmp_path / "p.pt")))
    onnx = load_policy(export(api_run.run_dir, format="onnx", out=str(tmp_path / "p.onnx")))
    obs = np.random.default_rng(0).normal(size=(16, from_run.obs_dim)).astype(np.float32) * 3
    expected = from_run(obs)
    assert expected.shape == (16, from_run.action_dim)
    assert np.array_equal(from_checkpoint(obs), expected)
    for exported in (torchscript, onnx):
        assert exported.obs_dim == from_run.obs_dim and exported.metadata["task"] == "InvertedPendulum"
        assert np.allclose(exported(obs), expected, atol=1e-5)
        assert np.allclose(exported(obs[0]), expected[0], atol=1e-5)  # a single observation, unbatched
    with pytest.raises(UserError, match=r"takes observations of shape \[4\]"):
        from_run(np.zeros(5))


@pytest.mark.slow
def test_python_api_example_runs(tmp_path):
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python_api.py"), "2048"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "trained 2,048 steps" in result.stdout
    assert "one episode driven by the loaded policy" in result.stdout
    assert "acts like the trained policy" in result.stdout
