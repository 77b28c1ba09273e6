"""Config composition and the one-line, exit-2 errors a user gets for bad input."""

import ast
import importlib
import os
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from ppo_control.config import ConfigError, all_keys, available_tasks, compose, saved_run_config
from ppo_control.config.composition import _preset_file
from tests.helpers import ROOT, run_module

DESIGN_KEYS = """task seed total_steps device run_dir
env.backend env.n_envs env.vectorization env.id env.kwargs env.max_episode_steps
normalize.obs normalize.obs_clip normalize.reward normalize.reward_clip
policy.hidden_sizes policy.activation policy.log_std_init
ppo.rollout_steps ppo.epochs ppo.minibatches ppo.learning_rate ppo.lr_schedule ppo.gamma ppo.gae_lambda
ppo.clip_range ppo.clip_value_loss ppo.ent_coef ppo.vf_coef ppo.max_grad_norm ppo.target_kl ppo.normalize_adv
eval.every_steps eval.episodes eval.video eval.video_dir
log.wandb log.wandb_mode log.project log.every_updates
checkpoint.every_steps checkpoint.keep""".split()


def test_every_contract_key_exists_and_is_documented_in_train_yaml():
    keys = set(all_keys())
    assert set(DESIGN_KEYS) <= keys
    text = (ROOT / "configs" / "train.yaml").read_text()
    for key in keys:
        leaf = key.split(".")[-1]
        line = next((row for row in text.splitlines() if row.strip().startswith(f"{leaf}:")), None)
        assert line is not None and "#" in line, f"{key} has no commented default in train.yaml"


def test_all_eleven_tasks_exist_and_compose():
    expected = {
        "HalfCheetah",
        "Hopper",
        "Walker2d",
        "Ant",
        "Humanoid",
        "HumanoidStandup",
        "Swimmer",
        "InvertedPendulum",
        "InvertedDoublePendulum",
        "Reacher",
        "Pusher",
    }
    assert expected <= set(available_tasks())
    for task in expected:
        assert compose([f"task={task}"]).env.id == f"{task}-v5"


def test_composition_order_train_yaml_then_task_then_cli(tmp_path):
    task_file = tmp_path / "MyTask.yaml"
    task_file.write_text("env:\n  id: Hopper-v5\n  n_envs: 3\nppo:\n  gamma: 0.95\n")
    cfg = compose([f"task={task_file}", "ppo.gamma=0.9", "total_steps=1e6", "policy.hidden_sizes=[32,16]"])
    assert cfg.task == "MyTask"
    assert cfg.env.n_envs == 3  # task file over train.yaml
    assert cfg.ppo.gamma == 0.9  # command line over task file
    assert cfg.total_steps == 1_000_000 and isinstance(cfg.total_steps, int)
    assert list(cfg.policy.hidden_sizes) == [32, 16]
    assert cfg.ppo.epochs == OmegaConf.load(ROOT / "configs" / "train.yaml").ppo.epochs  # untouched default


@pytest.mark.parametrize(
    "args, must_contain",
    [
        (["task=HalfCheeta"], ["unknown task 'HalfCheeta'", "HalfCheetah", "Hopper"]),
        (["ppo.epochs=3"], ["no task given", "HalfCheetah"]),
        (["task=Hopper", "ppo.lerning_rate=1e-3"], ["lerning_rate", "learning_rate"]),
        (["task=Hopper", "env.n_envs=many"], ["env.n_envs", "many"]),
        (["task=Hopper", "env.n_envs=0"], ["env.n_envs", ">= 1"]),
        (["task=Hopper", "ppo.learning_rate=0"], ["ppo.learning_rate", "> 0"]),
        (["task=Hopper", "ppo.gamma=1.5"], ["ppo.gamma", "(0, 1]"]),
        (["task=Hopper", "ppo.clip_range=-0.1"], ["ppo.clip_range", "> 0"]),
        (["task=Hopper", "ppo.gae_lambda_end=1.5"], ["ppo.gae_lambda_end", "null or in [0, 1]"]),
        (["task=Hopper", "ppo.gamma_end=0"], ["ppo.gamma_end", "null or in (0, 1]"]),
        (["task=Hopper", "ppo.end_at_fraction=0"], ["ppo.end_at_fraction", "in (0, 1]"]),
        (["task=Hopper", "policy.critic_hidden_sizes=[]"], ["policy.critic_hidden_sizes", "null (the actor's hidden_sizes)"]),
        (["task=Hopper", "env.n_envs=3", "ppo.rollout_steps=10", "ppo.minibatches=4"], ["ppo.minibatches=4", "30"]),
        (["task=Hopper", "ppo.lr_schedule=cosine"], ["ppo.lr_schedule", "constant, linear, adaptive"]),
        (["task=Hopper", "ppo.lr_schedule=adaptive"], ["target_kl"]),
        (["task=Hopper", "device=tpu"], ["device", "auto, cpu, cuda"]),
        (["task=Hopper", "oops"], ["key=value"]),
        (["task=Hopper", "policy.actor_history=0"], ["policy.actor_history", ">= 1"]),
        (["task=Hopper", "policy.critic_history=two"], ["policy.critic_history", "two"]),
    ],
)
def test_bad_input_is_one_line_exit_2(args, must_contain):
    result = run_module("ppo_control.train", *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in result.stderr
    for text in must_contain:
        assert text in lines[0]
    assert result.stdout == ""


def test_unknown_env_id_is_a_clear_error(tmp_path):
    task_file = tmp_path / "Bogus.yaml"
    task_file.write_text("env:\n  id: NoSuchRobot-v5\n")
    result = run_module("ppo_control.train", f"task={task_file}", f"run_dir={tmp_path / 'run'}")
    assert result.returncode == 2 and "NoSuchRobot-v5" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_compose_raises_config_error_in_process():
    with pytest.raises(ConfigError, match="ppo.epochs"):
        compose(["task=Hopper", "ppo.epochs=0"])


def test_paper_preset_replaces_the_task_tuning_and_the_command_line_still_wins():
    paper = compose(["task=HalfCheetah", "preset=paper"])
    assert paper.preset == "paper"
    assert (paper.env.n_envs, paper.ppo.rollout_steps, paper.ppo.epochs, paper.ppo.minibatches) == (1, 2048, 10, 32)
    assert (paper.ppo.learning_rate, paper.ppo.lr_schedule, list(paper.policy.hidden_sizes), paper.policy.activation) == (
        3e-4,
        "linear",
        [64, 64],
        "tanh",
    )
    assert paper.ppo.target_kl is None and paper.env.id == "HalfCheetah-v5"
    assert compose(["task=HalfCheetah", "preset=paper", "ppo.epochs=3"]).ppo.epochs == 3
    assert compose(["task=HalfCheetah"]).preset == "fast"


@pytest.mark.parametrize("task", ["Ant", "Hopper", "Swimmer", "Humanoid"])  # each tunes keys the paper fixes
def test_paper_preset_is_the_paper_setting_whatever_the_task_file_tunes(task):
    paper_file = OmegaConf.load(_preset_file("paper"))  # the file compose reads for preset=paper
    tuned, paper = compose([f"task={task}"]), compose([f"task={task}", "preset=paper"])
    sections = list(paper_file)
    differs = [(section, key) for section in sections for key in paper_file[section] if tuned[section][key] != paper_file[section][key]]
    assert differs, f"tasks/{task}.yaml tunes none of the paper's keys: pick a task that does"
    for section in sections:
        for key, value in paper_file[section].items():
            assert paper[section][key] == value, f"preset=paper {task}: {section}.{key}"


def test_unknown_preset_is_one_line_exit_2():
    result = run_module("ppo_control.train", "task=HalfCheetah", "preset=fastest")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["error: preset='fastest' is not valid; choose one of: fast, paper"]


COMMANDS = ("train", "evaluate", "export", "robustness", "sim2sim", "plot", "benchmark", "tasks")


@pytest.mark.parametrize("user_setting, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_a_command_makes_idle_openmp_threads_sleep_unless_the_user_chose(user_setting, expected):
    # Spinning OpenMP waits made a 2-thread update 80x slower beside one other busy process.
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if user_setting:
        env["OMP_WAIT_POLICY"] = user_setting
    code = (
        "import os, runpy, sys; sys.argv = ['train', '--help']\n"
        "try: runpy.run_module('ppo_control.train', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print(os.environ['OMP_WAIT_POLICY'], file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stderr.strip() == expected


def test_importing_the_package_gives_the_api_and_sets_nothing():
    code = (
        "import os, sys; before = dict(os.environ); import ppo_control as pc\n"
        "assert dict(os.environ) == before, 'the environment changed'\n"
        "assert 'torch' not in sys.modules and 'mujoco' not in sys.modules, 'a heavy import'\n"
        "print(*sorted(n for n in pc.__all__ if callable(getattr(pc, n))))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "MUJOCO_GL")}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["TrainResult", "UserError", "evaluate", "export", "list_tasks", "load_policy", "robustness", "train"]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_module_sets_the_process_up_before_it_imports_anything_else(command):
    """The faces run `prepare_process()` before their library (and with it torch) loads."""
    tree = ast.parse((ROOT / "ppo_control" / f"{command}.py").read_text())
    statements = [node for node in tree.body if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Constant)]
    imports = [node.module for node in statements if isinstance(node, ast.ImportFrom) and node.module != "__future__"]
    calls = [i for i, node in enumerate(statements) if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)]
    first_other_import = next(
        i
        for i, node in enumerate(statements)
        if isinstance(node, ast.ImportFrom) and node.module not in ("__future__", "ppo_control.config.runtime")
    )
    assert imports[0] == "ppo_control.config.runtime"
    assert calls and ast.unparse(statements[calls[0]]) == "prepare_process()" and calls[0] < first_other_import


def test_resume_changeable_keys_have_one_source():
    from ppo_control.config import RESUME_CHANGEABLE_TEXT, compose_resume

    saved = OmegaConf.to_container(compose(["task=Hopper"]), resolve=True)
    with pytest.raises(ConfigError) as caught:
        compose_resume(["ppo.epochs=3"], saved, "somewhere")
    assert f"only {RESUME_CHANGEABLE_TEXT} may change" in str(caught.value)
    training_page = (ROOT / "docs" / "training.md").read_text()
    assert training_page.count(RESUME_CHANGEABLE_TEXT) >= 2  # the resume section and the error table
    for key in ("total_steps", "torch_threads", "eval.", "checkpoint."):  # each listed key is allowed to change
        assert key.rstrip(".") in RESUME_CHANGEABLE_TEXT


def test_a_regime_applies_before_the_task_file_and_an_unknown_one_is_one_line(tmp_path):
    cfg = compose(["task=Go1JoystickFlatTerrain"])  # regime: robot
    assert (cfg.env.n_envs, cfg.ppo.rollout_steps, list(cfg.policy.critic_obs)) == (256, 16, ["privileged"])
    assert list(compose(["task=PandaPickCube"]).policy.critic_obs) == ["policy"]  # the task file's own setting wins
    assert compose(["task=Go1JoystickFlatTerrain", "env.n_envs=32"]).env.n_envs == 32  # and the command line over both
    task = tmp_path / "Mine.yaml"
    task.write_text("regime: robto\nenv:\n  id: Go1JoystickFlatTerrain-v1\n")
    with pytest.raises(ConfigError, match=r"^Mine.yaml: regime 'robto' does not exist; valid regimes: robot$"):
        compose([f"task={task}"])


def test_a_run_saved_before_the_package_moved_reads_its_env_entry_point_at_the_new_place():
    saved = OmegaConf.to_container(compose(["task=HopperPositionsOnly"]), resolve=True)
    saved["env"]["id"] = "ppo_control.partial_observation:positions_only"  # as the task file said before the move
    cfg = saved_run_config(saved)
    assert cfg.env.id == "ppo_control.envs.partial_observation:positions_only"
    module, _, name = cfg.env.id.partition(":")
    assert callable(getattr(importlib.import_module(module), name))


def test_each_list_of_choices_is_written_once_and_every_implementation_covers_it():
    """config/schema.py holds the lists; the modules that implement a choice cover exactly its names."""
    from dataclasses import fields

    from torch import nn

    from ppo_control.config import ACTIVATIONS, BACKENDS, RNN_TYPES
    from ppo_control.config.arguments import EvaluateRandomizeArgs
    from ppo_control.config.schema import CHOICES, RandomizeConfig
    from ppo_control.envs import registry
    from ppo_control.envs.randomization import Randomization
    from ppo_control.rl.policy import MEMORIES

    assert CHOICES["env.backend"] == BACKENDS and CHOICES["policy.activation"] == tuple(ACTIVATIONS)
    assert tuple(registry.BACKENDS) == BACKENDS
    assert all(issubclass(getattr(nn, module), nn.Module) for module in ACTIVATIONS.values())
    assert ("none", *MEMORIES) == RNN_TYPES
    keys = [f.name for f in fields(RandomizeConfig)]
    assert [f.name for f in fields(EvaluateRandomizeArgs)] == keys
    assert [f.name for f in fields(Randomization)] == keys


def test_the_batch_and_minibatch_sizes_are_derived_in_one_place():
    from ppo_control.config.schema import batch_size, minibatch_size

    cfg = compose(["task=Hopper", "env.n_envs=6", "ppo.rollout_steps=32", "ppo.minibatches=4"])
    assert (batch_size(cfg), minibatch_size(cfg)) == (192, 48)
    with pytest.raises(ConfigError, match=r"does not divide the batch size env.n_envs\*ppo.rollout_steps=6\*32=192"):
        compose(["task=Hopper", "env.n_envs=6", "ppo.rollout_steps=32", "ppo.minibatches=5"])
