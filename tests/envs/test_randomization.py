"""Domain randomization: seeded per-sub-env physics scales, noise, latency, pushes; resume; bad input."""

import numpy as np
import pytest
from omegaconf import OmegaConf

from ppo_control.config import ConfigError, compose, compose_resume
from ppo_control.config.errors import UserError
from ppo_control.envs import make_env_factory, make_vec_env
from ppo_control.envs.observations import find_wrapper
from ppo_control.envs.randomization import DomainRandomization, Randomization
from ppo_control.rl.evaluation import eval_randomization, make_eval_envs
from tests.helpers import TINY, run_module, tiny_overrides


def make_env(env_id="Hopper-v5", **settings):
    return make_env_factory(env_id, randomization=Randomization(**settings) if settings else None)()


def test_fixed_scales_multiply_the_nominal_model_exactly():
    nominal = make_env().unwrapped.model
    env = make_env(body_mass=(1.3, 1.3), friction=(0.5, 0.5), joint_damping=(2.0, 2.0), actuator_gain=(0.7, 0.7))
    env.reset(seed=0)
    model = env.unwrapped.model
    np.testing.assert_array_equal(model.body_mass[1:], nominal.body_mass[1:] * 1.3)
    assert model.body_mass[0] == nominal.body_mass[0]  # the world body is not a robot part
    np.testing.assert_array_equal(model.body_inertia[1:], nominal.body_inertia[1:] * 1.3)
    np.testing.assert_array_equal(model.geom_friction[:, 0], nominal.geom_friction[:, 0] * 0.5)
    np.testing.assert_array_equal(model.geom_friction[:, 1:], nominal.geom_friction[:, 1:])  # torsional/rolling untouched
    np.testing.assert_array_equal(model.dof_damping, nominal.dof_damping * 2.0)
    np.testing.assert_array_equal(model.actuator_gainprm[:, 0], nominal.actuator_gainprm[:, 0] * 0.7)
    assert model.body_subtreemass[0] == pytest.approx(nominal.body_subtreemass[0] * 1.3)  # derived constants follow


def test_scales_are_drawn_per_episode_per_element_and_reproducible_from_the_seed():
    def draws(seed, episodes=3):
        env = make_env(body_mass=(0.5, 1.5), friction=(0.8, 1.2))
        out = []
        for k in range(episodes):
            env.reset(seed=seed if k == 0 else None)  # later episodes: autoreset without a seed
            out.append({key: value.copy() for key, value in find_wrapper(env, DomainRandomization).scales.items()})
        return out

    a, b, c = draws(3), draws(3), draws(4)
    for episode_a, episode_b in zip(a, b):
        assert all(np.array_equal(episode_a[key], episode_b[key]) for key in episode_a)
    assert not np.array_equal(a[0]["body_mass"], c[0]["body_mass"])  # another sub-env seed, other draws
    assert not np.array_equal(a[0]["body_mass"], a[1]["body_mass"])  # a new draw every episode
    mass = np.concatenate([episode["body_mass"][1:] for episode in a])
    assert ((mass >= 0.5) & (mass <= 1.5)).all() and mass.std() > 0.1  # each body its own factor, within the range


def test_randomization_does_not_shift_the_envs_own_initial_state_noise():
    plain, randomized = make_env(), make_env(body_mass=(0.5, 1.5))
    np.testing.assert_array_equal(plain.reset(seed=7)[0], randomized.reset(seed=7)[0])


def test_initial_pose_noise_moves_the_actuated_joints_alone_and_the_observation_follows():
    plain, moved = make_env(), make_env(init_pose=0.2)
    plain_obs, _ = plain.reset(seed=7)
    obs, _ = moved.reset(seed=7)
    offsets = find_wrapper(moved, DomainRandomization).scales["init_pose"]
    base, nominal = moved.unwrapped, plain.unwrapped
    assert len(offsets) == 3 and np.abs(offsets).max() <= 0.2 and np.abs(offsets).min() > 0  # thigh, leg, foot
    low, high = base.model.jnt_range[3:].T  # the task's own start, then moved, within each joint's range
    np.testing.assert_allclose(base.data.qpos[3:], np.clip(nominal.data.qpos[3:] + offsets, low, high))
    assert np.abs(base.data.qpos[3:] - nominal.data.qpos[3:]).max() > 0
    np.testing.assert_array_equal(base.data.qpos[:3], nominal.data.qpos[:3])  # the root (x, z, angle) stays
    np.testing.assert_array_equal(obs, base._get_obs())  # the first observation is of the moved pose
    assert not np.allclose(obs, plain_obs)
    moved.reset()
    assert not np.array_equal(offsets, find_wrapper(moved, DomainRandomization).scales["init_pose"])  # drawn per episode


def test_heavier_robot_moves_differently():
    action = np.full(3, 0.5)
    trajectories = []
    for settings in ({}, {"body_mass": (2.0, 2.0)}):
        env = make_env(**settings)
        env.reset(seed=0)
        trajectories.append(np.array([env.step(action)[0] for _ in range(20)]))
    assert np.abs(trajectories[0] - trajectories[1]).max() > 1e-2


def test_action_delay_applies_zeros_first_then_the_actions_in_order():
    rng = np.random.default_rng(0)
    actions = rng.uniform(-1, 1, size=(12, 3))
    delayed, reference = make_env(action_delay=(2, 2)), make_env()
    delayed.reset(seed=1)
    reference.reset(seed=1)
    applied = [np.zeros(3), np.zeros(3), *actions[:-2]]
    for action, expected in zip(actions, applied):
        np.testing.assert_array_equal(delayed.step(action)[0], reference.step(expected)[0])


def test_action_and_observation_noise_have_the_configured_size():
    env = make_env(obs_noise=0.5)
    env.reset(seed=0)
    clean = make_env()
    clean.reset(seed=0)
    diffs = np.array([env.step(np.zeros(3))[0] - clean.step(np.zeros(3))[0] for _ in range(50)])
    # the physics is the same (noise only on what the policy reads): the difference is the noise itself
    assert diffs.std() == pytest.approx(0.5, rel=0.1)


@pytest.mark.parametrize("env_id, push_dofs", [("InvertedPendulum-v5", 1), ("Ant-v5", 2)])
def test_pushes_change_the_root_velocity_every_interval(env_id, push_dofs):
    pushed, reference = make_env(env_id, push_velocity=1.0, push_interval=3), make_env(env_id)
    pushed.reset(seed=0)
    reference.reset(seed=0)
    action = np.zeros(pushed.action_space.shape)
    for step in range(1, 4):
        pushed.step(action)
        reference.step(action)
        kick = pushed.unwrapped.data.qvel[:push_dofs] - reference.unwrapped.data.qvel[:push_dofs]
        if step < 3:
            np.testing.assert_array_equal(kick, 0.0)
        else:
            assert np.linalg.norm(kick) > 0.5  # the push, changed a little by one step of dynamics


def test_push_on_a_robot_without_a_movable_root_is_one_clear_error():
    with pytest.raises(UserError, match="no free or sliding root joint"):
        make_env("Reacher-v5", push_velocity=1.0, push_interval=10)


def test_state_round_trip_continues_the_episode_exactly():
    settings = dict(body_mass=(0.5, 1.5), action_noise=0.1, action_delay=(1, 3), push_velocity=0.5, push_interval=4, obs_noise=0.05)
    a, b = make_env(**settings), make_env(**settings)
    a.reset(seed=3)
    b.reset(seed=99)  # a different episode, to be overwritten
    for _ in range(7):
        a.step(np.full(3, 0.3))
    b.sim_state = a.sim_state
    for _ in range(30):
        out_a, out_b = a.step(np.full(3, -0.2)), b.step(np.full(3, -0.2))
        np.testing.assert_array_equal(out_a[0], out_b[0])
        if out_a[2] or out_a[3]:
            break
    np.testing.assert_array_equal(a.unwrapped.model.body_mass, b.unwrapped.model.body_mass)


def test_evaluation_runs_the_nominal_robot_unless_asked():
    cfg = compose(["task=Hopper", "randomize.body_mass=[2.0,2.0]"])
    nominal = make_env().unwrapped.model.body_mass
    for eval_randomize, expected in ((False, nominal), (True, nominal * 2.0)):
        cfg.eval.randomize = eval_randomize
        envs = make_eval_envs(cfg.env, 2, eval_randomization(cfg.eval, cfg.randomize))
        envs.reset(0)
        masses = envs.envs.get_attr("unwrapped")[0].model.body_mass
        envs.close()
        np.testing.assert_array_equal(masses[1:], expected[1:])


def test_envpool_with_randomization_falls_back_to_gymnasium_and_says_so(capsys):
    cfg = compose(["task=Hopper", "env.backend=envpool", "env.n_envs=2", "randomize.friction=[0.5,1.5]"])
    envs = make_vec_env(cfg.env, randomization=Randomization.from_config(cfg.randomize))
    envs.close()
    assert type(envs).__name__ == "GymnasiumVecEnv"
    assert "randomize.* needs per-sub-env MuJoCo models" in capsys.readouterr().err


def test_all_keys_off_means_no_randomization():
    assert Randomization.from_config(compose(["task=Hopper"]).randomize) is None


@pytest.mark.parametrize(
    "override, message",
    [
        ("randomize.body_mass=[1.2,0.8]", "randomize.body_mass must be null or [low, high] scale factors with 0 < low <= high"),
        ("randomize.friction=[-0.5,1.0]", "randomize.friction must be null or [low, high] scale factors with 0 <= low <= high"),
        ("randomize.action_delay=[-1,2]", "randomize.action_delay must be null or [min, max] control steps"),
        ("randomize.obs_noise=-0.1", "randomize.obs_noise must be >= 0"),
        ("randomize.push_velocity=1.0", "randomize.push_interval must be >= 1 when randomize.push_velocity > 0"),
        ("randomize.added_mass=[1.0,-1.0]", "randomize.added_mass must be null or [low, high] kg with low <= high"),
        ("randomize.com_offset=-0.01", "randomize.com_offset must be >= 0"),
        ("randomize.joint_friction=[1.2,0.8]", "randomize.joint_friction must be null or [low, high] scale factors"),
        ("randomize.armature=[-1.0,1.0]", "randomize.armature must be null or [low, high] scale factors"),
        ("randomize.init_pose=4", "randomize.init_pose must be between 0"),
    ],
)
def test_bad_randomization_is_one_line_exit_2(override, message, tmp_path):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        compose(["task=Hopper", override])
    if override.startswith("randomize.body_mass"):  # once through the command line: one line, exit 2, nothing written
        result = run_module("ppo_control.train", "task=Hopper", override, f"run_dir={tmp_path / 'run'}")
        assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr
        assert not (tmp_path / "run").exists()


def test_resume_refuses_a_change_of_randomization():
    saved = OmegaConf.to_container(compose(["task=Hopper", *TINY, "randomize.obs_noise=0.1"]), resolve=True)
    with pytest.raises(ConfigError, match=r"cannot change randomize.obs_noise on resume \(0.1 -> 0.2\)"):
        compose_resume(["randomize.obs_noise=0.2"], saved, "somewhere")


@pytest.fixture(scope="module")
def randomized_run(tmp_path_factory):
    from ppo_control.api import train

    run_dir = tmp_path_factory.mktemp("rnd") / "run"
    train("Hopper", total_steps=256, run_dir=str(run_dir), randomize={"body_mass": [0.5, 0.5]}, **tiny_overrides())
    return run_dir


def test_evaluate_runs_nominal_by_default_and_chosen_perturbations_on_request(randomized_run):
    import json

    from ppo_control.api import evaluate

    rows = [json.loads(line) for line in (randomized_run / "metrics.jsonl").read_text().splitlines()]
    nominal = evaluate(randomized_run, episodes=2)
    assert nominal["randomize"] is None
    assert nominal["return_mean"] == pytest.approx(rows[-1]["eval_return"])  # training evaluated the nominal robot too
    own = evaluate(randomized_run, episodes=2, eval={"randomize": True})
    assert own["randomize"]["body_mass"] == [0.5, 0.5] and own["return_mean"] != nominal["return_mean"]
    heavy = evaluate(randomized_run, episodes=2, randomize={"body_mass": [1.5, 1.5]})
    assert heavy["randomize"]["body_mass"] == [1.5, 1.5] and heavy["return_mean"] not in (nominal["return_mean"], own["return_mean"])
    assert json.loads((randomized_run / "eval.json").read_text())["randomize"]["body_mass"] == [1.5, 1.5]


def test_evaluate_refuses_a_bad_perturbation_in_one_line(randomized_run):
    result = run_module("ppo_control.evaluate", f"run={randomized_run}", "randomize.friction=[2.0,1.0]")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "randomize.friction must be null or [low, high] scale factors" in result.stderr


def test_a_run_saved_before_new_config_keys_still_evaluates(randomized_run, tmp_path):
    import shutil

    import torch

    from ppo_control.api import evaluate

    old = tmp_path / "old"
    shutil.copytree(randomized_run, old)
    path = old / "checkpoints" / "last.pt"
    state = torch.load(path, weights_only=True)
    for section, key in (("randomize", None), ("eval", "randomize"), ("eval", "video_overlay"), ("log", "tensorboard")):
        if key is None:
            del state["config"][section]
        else:
            del state["config"][section][key]
    torch.save(state, path)
    assert evaluate(old, episodes=2)["randomize"] is None  # the keys' defaults: the nominal robot


def test_robustness_grid_writes_table_and_heatmap_and_its_nominal_cell_is_the_evaluation(randomized_run):
    import csv

    from ppo_control.api import evaluate, robustness

    out, cells = robustness(randomized_run, episodes=2, mass=[0.5, 1.0], friction=[1.0, 1.5], delay=[0, 3])
    assert sorted(p.name for p in out.iterdir()) == ["robustness.csv", "robustness.md", "robustness.png"]
    rows = list(csv.DictReader(open(out / "robustness.csv")))
    # 2 x 2 mass x friction cells at delay 0, plus delay 3 at nominal (delay 0 at nominal is already a grid cell)
    assert [(float(r["mass_scale"]), float(r["friction_scale"]), int(r["action_delay"])) for r in rows] == [
        (0.5, 1.0, 0),
        (0.5, 1.5, 0),
        (1.0, 1.0, 0),
        (1.0, 1.5, 0),
        (1.0, 1.0, 3),
    ]
    nominal = next(c for c in cells if (c.mass, c.friction, c.delay) == (1.0, 1.0, 0))
    assert nominal.return_mean == pytest.approx(evaluate(randomized_run, episodes=2)["return_mean"])
    assert len({round(c.return_mean, 6) for c in cells}) > 1  # the perturbations change the outcome
    table = (out / "robustness.md").read_text()
    assert "| x0.5 |" in table and f"Nominal {nominal.return_mean:.1f}" in table
    assert (out / "robustness.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "arg, message",
    [
        ("mass=[0,1]", "mass must be a non-empty list of scales > 0"),
        ("delay=[-1]", "delay must be a non-empty list"),
        ("episodes=0", "episodes must be >= 1"),
        ("masses=[1]", "unknown argument 'masses'. Did you mean 'mass'?"),
    ],
)
def test_robustness_bad_input_is_one_line_exit_2(randomized_run, arg, message):
    def snapshot():
        return {p: p.stat().st_mtime_ns for p in randomized_run.rglob("*")}

    before = snapshot()
    result = run_module("ppo_control.robustness", f"run={randomized_run}", arg)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert snapshot() == before  # nothing written or changed


def test_the_base_and_joint_keys_work_on_a_gymnasium_robot_too():
    import gymnasium as gym

    env = gym.make("Hopper-v5")
    model = env.unwrapped.model
    mass, ipos, friction, armature = model.body_mass[1], model.body_ipos[1].copy(), model.dof_frictionloss.copy(), model.dof_armature.copy()
    settings = Randomization(added_mass=(1.0, 1.0), com_offset=0.02, joint_friction=(2.0, 2.0), armature=(3.0, 3.0))
    wrapped = DomainRandomization(env, settings)
    try:
        wrapped.reset(seed=0)
        assert model.body_mass[1] == pytest.approx(mass + 1.0)
        assert 0 < np.abs(model.body_ipos[1] - ipos).max() <= 0.02
        np.testing.assert_allclose(model.dof_frictionloss, 2.0 * friction)
        np.testing.assert_allclose(model.dof_armature, 3.0 * armature)
        wrapped.step(np.zeros(3))
    finally:
        wrapped.close()
