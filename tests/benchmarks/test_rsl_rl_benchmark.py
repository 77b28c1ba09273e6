"""benchmarks/robots/rsl_rl_playground.py: the envpool bookkeeping under the rsl_rl wrapper (reset within the
step, time-outs, episode returns, tracking error, evaluation quotas) on a real envpool Go1 env, and
the same bookkeeping over our MuJoCo reference of the Go1 trot variant (its clock in both groups, its
task reward), neither of which needs rsl_rl; and, where the benchmark-only rsl-rl-lib is installed,
two-iteration runs of the script on both."""

import dataclasses
import json
import math

import numpy as np
import pytest

pytest.importorskip("envpool")
TASK = "Go1JoystickFlatTerrain"
TROT = "Go1JoystickFlatTerrainTrot"  # tasks/: the reference's trot-clock variant of TASK
CLOCK_SIZE = 8  # the trot clock's elements at the end of each group (every foot's phase as cos, sin)


@pytest.fixture(scope="module")
def script():
    from benchmarks.robots import rsl_rl_playground

    return rsl_rl_playground


def test_every_step_is_real_and_ended_episodes_restart_within_the_step(script):
    """Large random actions make the robot fall: each sub-env's episode length is envpool's own step
    count (a reset inside the step, no NEXT_STEP junk step), and the episodes' returns add up."""
    stepper = script.EnvpoolStepper(TASK, num_envs=3, threads=1, seed=0)
    rng = np.random.default_rng(0)
    running = np.zeros(3)
    ended_total = 0
    try:
        for _ in range(150):
            before = stepper.state
            out = stepper.step(rng.uniform(-1, 1, (3, stepper.num_actions)))
            assert out.state is not before  # fresh arrays: rsl_rl keeps the previous ones until it stores them
            running += out.reward
            expected_lengths = out.elapsed.copy()
            np.testing.assert_array_equal(out.ended, np.flatnonzero(out.terminated | out.truncated))
            np.testing.assert_allclose(out.episode_return, running[out.ended])
            np.testing.assert_array_equal(out.episode_length, expected_lengths[out.ended])
            running[out.ended] = 0.0
            not_ended = np.setdiff1d(np.arange(3), out.ended)
            np.testing.assert_array_equal(stepper.episode_lengths[not_ended], out.elapsed[not_ended])
            assert (stepper.episode_lengths[out.ended] == 0).all()
            ended_total += len(out.ended)
            assert not out.time_outs.any()  # falls, not time limits
            assert np.isfinite(out.state).all() and np.isfinite(out.privileged).all()
        assert ended_total > 0, "no episode ended: the check saw no reset"
        # After a reset inside the step, the next step is that episode's first: envpool counts 1.
        while True:
            out = stepper.step(rng.uniform(-1, 1, (3, stepper.num_actions)))
            if len(out.ended):
                ended = out.ended
                out = stepper.step(np.zeros((3, stepper.num_actions)))
                assert (out.elapsed[ended] == 1).all()
                break
        stats = stepper.stats.pop()
        assert stats["episodes"] >= ended_total and stats["episode_return"] is not None
        assert {"reward/tracking_lin_vel", "reward/feet_air_time"} <= set(stats)
        assert stepper.stats.pop()["episode_return"] is None  # popped: a new iteration
    finally:
        stepper.close()


def test_time_limit_is_a_time_out_and_the_tracking_error_reads_the_clean_velocities(script):
    """Standing still (zero action) until a 30-step limit: truncated, not terminated, so a time-out
    that rsl_rl bootstraps; the tracking error is the command against privileged_state's clean
    local linear velocity and gyro z."""
    stepper = script.EnvpoolStepper(TASK, num_envs=2, threads=1, seed=3, max_episode_steps=30)
    try:
        for t in range(30):
            out = stepper.step(np.zeros((2, stepper.num_actions)))
            if t < 29:  # (at the last step the observation returned is already the next episode's)
                command = out.state[:, 45:48]  # the command the env reports with this step's observation
                np.testing.assert_allclose(out.tracking_lin, np.linalg.norm(command[:, :2] - out.privileged[:, 57:59], axis=1), rtol=1e-5)
                np.testing.assert_allclose(out.tracking_ang, np.abs(command[:, 2] - out.privileged[:, 50]), rtol=1e-5, atol=1e-6)
        assert out.truncated.all() and not out.terminated.any() and out.time_outs.all()
        np.testing.assert_array_equal(out.episode_length, [30, 30])
        assert (out.episode_tracking_lin > 0).all() and (out.episode_tracking_ang >= 0).all()
    finally:
        stepper.close()

    privileged = np.zeros((1, 123), dtype=np.float32)
    privileged[0, 57:60] = [0.5, -0.2, 9.0]  # z is not part of the planar error
    privileged[0, 50] = 0.25
    lin, ang = script.tracking_errors(privileged, np.array([[0.5, 0.2, -0.25]]), script.GO1_JOYSTICK)
    np.testing.assert_allclose(lin, [0.4], rtol=1e-6)
    np.testing.assert_allclose(ang, [0.5], rtol=1e-6)


def test_evaluation_runs_each_sub_envs_quota_of_full_episodes(script):
    seen = []

    def act(state, privileged):
        seen.append(len(state))
        return np.zeros((len(state), 12))

    spec = script.EnvSpec(TASK, max_episode_steps=20)
    result = script.evaluate(act, spec, seed=1_000_000, episodes=3)
    assert result["eval_episodes"] == 3 and result["eval_falls"] == 0
    assert result["eval_episode_length"] == 20.0
    assert set(seen) == {3}  # min(episodes, 16) sub-envs
    assert len(seen) == 20  # one episode each
    assert all(math.isfinite(result[k]) for k in ("eval_return", "eval_return_std", "eval_tracking_error_lin", "eval_tracking_error_ang"))
    again = script.evaluate(act, spec, seed=1_000_000, episodes=3)
    assert again["eval_return"] == result["eval_return"]  # a new env each time: the same episodes


def test_the_reference_trot_variant_steps_under_the_same_bookkeeping(script):
    """--task-file of the trot variant runs our MuJoCo reference with the task file's kwargs: both
    groups end with the clock (rsl_rl's actor reads it), the bookkeeping's episode lengths are the
    env's own, the returns add up the variant's full reward, and its task reward is kept apart."""
    spec = script.env_spec(script.parse_args(["--task-file", TROT, "--out", "unused"]))
    assert (spec.task, spec.backend) == (TASK, "mujoco") and spec.kwargs["gait_clock"] is True
    stepper = script.make_stepper(spec, num_envs=3, threads=1, seed=0)
    rng = np.random.default_rng(0)
    running, running_task = np.zeros(3), np.zeros(3)
    ended_total = 0
    try:
        assert stepper.state.shape == (3, 48 + CLOCK_SIZE) and stepper.privileged.shape == (3, 123 + CLOCK_SIZE)
        first_clock = stepper.state[:, -CLOCK_SIZE:].copy()
        for t in range(150):
            before = stepper.state
            out = stepper.step(rng.uniform(-1, 1, (3, stepper.num_actions)))
            assert out.state is not before and out.state.flags.c_contiguous
            clock = out.state[:, -CLOCK_SIZE:]
            np.testing.assert_array_equal(clock, out.privileged[:, -CLOCK_SIZE:])
            np.testing.assert_allclose(clock[:, :4] ** 2 + clock[:, 4:] ** 2, 1.0, rtol=1e-5)  # each foot's (cos, sin)
            if t == 10:
                assert not np.allclose(clock, first_clock)  # the clock runs
            running += out.reward
            running_task += out.task_reward
            np.testing.assert_array_equal(out.ended, np.flatnonzero(out.terminated | out.truncated))
            np.testing.assert_array_equal(out.episode_length, out.elapsed[out.ended])  # the env's own count
            np.testing.assert_allclose(out.episode_return, running[out.ended], rtol=1e-6)
            np.testing.assert_allclose(out.episode_task_return, running_task[out.ended], rtol=1e-6)
            running[out.ended] = running_task[out.ended] = 0.0
            assert (stepper.episode_lengths[out.ended] == 0).all()
            ended_total += len(out.ended)
            assert not out.time_outs.any() and np.isfinite(out.state).all() and np.isfinite(out.privileged).all()
        assert ended_total > 0, "no episode ended: the check saw no reset"
        stats = stepper.stats.pop()
        assert stats["episodes"] == ended_total and stats["episode_task_return"] is not None
        assert {"reward/tracking_lin_vel", "reward/feet_phase", "task_reward"} <= set(stats)
        assert stats["tracking_error_lin"] > 0
    finally:
        stepper.close()

    limited = script.make_stepper(dataclasses.replace(spec, max_episode_steps=30), num_envs=2, threads=1, seed=3)
    try:
        for _ in range(30):
            out = limited.step(np.zeros((2, limited.num_actions)))
        assert out.truncated.all() and not out.terminated.any() and out.time_outs.all()
        np.testing.assert_array_equal(out.episode_length, [30, 30])
    finally:
        limited.close()


def test_env_choices_that_cannot_run_are_refused_with_one_line(script, tmp_path, capsys):
    def refusal(*argv):
        return script.env_spec(script.parse_args([*argv, "--out", "unused"]))

    assert "not both" in refusal("--task-file", TROT, "--task", TASK)
    assert "unknown task" in refusal("--task-file", "NoSuchTask")
    assert "not a joystick task" in refusal("--task", "PandaPickCube", "--backend", "mujoco")
    assert refusal("--task", TASK, "--backend", "mujoco").backend == "mujoco"
    randomized = tmp_path / "Randomized.yaml"
    randomized.write_text("regime: robot\nenv:\n  id: Go1JoystickFlatTerrain-v1\n  backend: mujoco\nrandomize:\n  obs_noise: 0.1\n")
    assert "randomize" in refusal("--task-file", str(randomized))
    out = tmp_path / "out"
    assert script.main(["--task-file", str(randomized), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not supported" in err[0] and not out.exists()


def test_unknown_task_layout_is_refused_with_one_line(script, tmp_path, capsys):
    assert script.main(["--task", "G1JoystickFlatTerrain", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not supported" in err[0]
    assert not (tmp_path / "out").exists()


def test_playground_settings_translate_to_rsl_rl_5(script):
    playground = script.playground_rsl_rl_config(TASK)
    cfg = script.rsl_rl_train_cfg(playground)
    assert playground["max_iterations"] == 1000 and script.playground_rsl_rl_config("Go1JoystickRoughTerrain")["max_iterations"] == 100000
    assert cfg["obs_groups"] == {"actor": ["state"], "critic": ["privileged_state"]}
    assert cfg["actor"]["hidden_dims"] == cfg["critic"]["hidden_dims"] == [512, 256, 128]
    assert cfg["actor"]["obs_normalization"] and cfg["critic"]["obs_normalization"]
    assert cfg["actor"]["distribution_cfg"]["init_std"] == 1.0
    assert cfg["algorithm"] == playground["algorithm"]


def two_iterations(script, task_args: list[str], out) -> tuple[list[dict], list[dict], list[dict]]:
    """Two 4-sub-env iterations of the script with one 2-episode evaluation: every row, the training
    rows and the evaluation rows."""
    argv = [*task_args, "--steps", str(2 * 4 * 24), "--num-envs", "4", "--eval-episodes", "2", "--out", str(out)]
    assert script.main(argv) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return rows, [r for r in rows if "tracking_error_lin" in r], [r for r in rows if "eval_return" in r]


def test_two_iterations_of_the_script(script, tmp_path):
    pytest.importorskip("rsl_rl")
    out = tmp_path / "run"
    rows, train, evals = two_iterations(script, ["--task", TASK], out)
    assert [r["step"] for r in train] == [96, 192]
    assert len(evals) == 1 and evals[0]["step"] == 192 and evals[0]["eval_episodes"] == 2
    for row in rows:
        for key, value in row.items():
            assert value is None or isinstance(value, str) or math.isfinite(value), (key, value)
    assert train[0]["time_s"] <= train[1]["time_s"] <= evals[0]["time_s"]
    assert any(k.startswith("reward/") for k in train[0])
    config = json.loads((out / "config.json").read_text())
    assert config["iterations"] == 2
    assert (config["scaled"]["num_envs"]["playground"], config["scaled"]["num_envs"]["used"]) == (4096, 4)
    assert config["versions"]["rsl-rl-lib"] and config["machine"]["cpu_count"]


def test_two_iterations_of_the_script_on_the_reference_trot_variant(script, tmp_path):
    """What robots_vs_rsl_rl reads, from a run on our reference's trot variant: rsl_rl's networks
    read the clock, the training rows carry the variant's terms and task reward, the evaluation row
    its falls, return and task return."""
    pytest.importorskip("rsl_rl")
    out = tmp_path / "run"
    rows, train, evals = two_iterations(script, ["--task-file", TROT], out)
    assert [r["step"] for r in train] == [96, 192]
    assert all("reward/feet_phase" in r and r["task_reward"] is not None for r in train)
    assert len(evals) == 1 and evals[0]["step"] == 192 and evals[0]["eval_episodes"] == 2
    assert isinstance(evals[0]["eval_falls"], int) and 0 <= evals[0]["eval_falls"] <= 2
    assert math.isfinite(evals[0]["eval_return"]) and math.isfinite(evals[0]["eval_task_return"])
    for row in rows:
        for key, value in row.items():
            assert value is None or isinstance(value, str) or math.isfinite(value), (key, value)
    config = json.loads((out / "config.json").read_text())
    assert config["input_sizes"] == {"actor": 48 + CLOCK_SIZE, "critic": 123 + CLOCK_SIZE}
    assert config["env"]["backend"] == "mujoco" and config["env"]["kwargs"]["gait_clock"] is True
    assert config["playground"]["max_iterations"] == 1000  # Go1JoystickFlatTerrain's Playground settings
    assert any("variant" in line for line in config["differences_from_playground"])
