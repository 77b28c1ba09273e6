"""How hard a push a robot's policy recovers from: its deterministic policy over the same
evaluation episodes with every push of one size, for each size given, and under the task's own
pushes (a kick to the base in a random planar direction every few seconds, sized at random
between the task's `push_magnitude_min` and `push_magnitude_max`).

    python -m benchmarks.robots.push_recovery run=<run dir> [checkpoint=<name>] [episodes=64] \
        [magnitudes=[0.0,0.25,...,2.0]] [env_kwargs=[push_interval_min=5.0,...]] [out=<json>]

A magnitude of 0 turns the pushes off. Every other setting (the interval between pushes, the
backend, the evaluation seeds) is the run's, or `env_kwargs`' (task options over the run's, as
evaluate's env.kwargs: an arm trained under other pushes is measured under the task's own). Falls
are counted per episode, as `evaluate` counts them: an episode of the task's length meets several
pushes. The report gives, for each size, the share of episodes that fall, the return and the
planar tracking error, and the largest size up to which the share stays within `fall_share` (the
issue's 5% for the humanoids).
For the tasks with pushes: T1, G1 and Berkeley Humanoid (`env.kwargs.push_*`).
"""

from __future__ import annotations

from benchmarks.common import parse_args, run_directory
from benchmarks.robots.checkpoint_rollout import emit_report
from ppo_control.config.errors import UserError, run_cli

DEFAULTS = {
    "run": None,
    "checkpoint": None,
    "episodes": 64,
    "magnitudes": [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0],
    "fall_share": 0.05,
    "env_kwargs": [],
    "out": None,
}
PUSH_OPTIONS = ("push_enable", "push_magnitude_min", "push_magnitude_max")
# an evaluation summary's figures the report keeps, by the name it gives them
REPORTED = {"fall_rate": "fall_rate", "return": "return", "length": "length", "tracking_error_lin": "planar_error_m_s"}


def push_options(magnitude: float) -> dict:
    """The task options that make every push `magnitude` m/s (0: no pushes)."""
    if magnitude < 0:
        raise UserError(f"push_recovery: magnitude {magnitude} is not allowed: push sizes are m/s, 0 or more")
    if magnitude == 0:
        return {"push_enable": False}
    return {"push_enable": True, "push_magnitude_min": float(magnitude), "push_magnitude_max": float(magnitude)}


def recovered_up_to(rows: list[dict], fall_share: float) -> float | None:
    """The largest push size up to which every size measured falls in at most `fall_share` of the
    episodes (sizes in increasing order; None when the smallest already falls more)."""
    largest = None
    for row in sorted(rows, key=lambda row: row["magnitude"]):
        if row["fall_rate"] > fall_share:
            break
        largest = row["magnitude"]
    return largest


def check_task_has_pushes(env_id: str) -> None:
    from ppo_control.envs.envpool_backend import accepted_options

    if not set(PUSH_OPTIONS) <= set(accepted_options(env_id)):
        raise UserError(
            f"push_recovery: {env_id} has no pushes to size; give a run of a task with push_* options (T1, G1, Berkeley Humanoid)"
        )


def evaluate_under(loaded, options: dict, episodes: int) -> dict:
    """The run's deterministic policy over its evaluation episodes under `options` over its task's."""
    from ppo_control.analysis.evaluate_run import check_same_interface, with_task_options
    from ppo_control.envs.observations import needs_privileged
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs

    cfg = with_task_options(loaded.cfg, options)
    envs = make_eval_envs(cfg.env, episodes, None, needs_privileged(cfg.policy), "cpu")
    try:
        check_same_interface(envs.info, loaded.env_info, options)
        evaluation = evaluate_episodes(loaded.policy, envs, episodes, cfg.seed + EVAL_SEED_OFFSET)
    finally:
        envs.close()
    summary = evaluation.summary(prefix="")
    row = {name: summary[key] for key, name in REPORTED.items() if key in summary}
    return {name: round(value, 4) for name, value in row.items()}


def measure(run, checkpoint: str | None, episodes: int, magnitudes: list[float], fall_share: float, env_kwargs: list[str]) -> dict:
    from omegaconf import OmegaConf

    from ppo_control.runs.directory import load_run
    from ppo_control.runs.layout import checkpoint_to_load

    options_by_size = {float(m): push_options(float(m)) for m in magnitudes}  # refuses a bad size before loading
    loaded = load_run(run, checkpoint_to_load(run, checkpoint))
    env_id = str(loaded.cfg.env.id)
    check_task_has_pushes(env_id)
    given = OmegaConf.from_dotlist([str(item) for item in env_kwargs])
    rows = [{"magnitude": m, **evaluate_under(loaded, OmegaConf.merge(given, options), episodes)} for m, options in options_by_size.items()]
    return {
        "run": str(run),
        "checkpoint": loaded.checkpoint_path.name,
        "env_id": env_id,
        "episodes": episodes,
        "task_options": OmegaConf.to_container(OmegaConf.merge(loaded.cfg.env.kwargs or {}, given)),
        "by_push_size_m_s": rows,
        "under_the_task_pushes": evaluate_under(loaded, given, episodes),
        f"recovers_in_{1 - fall_share:.0%}_up_to_m_s": recovered_up_to(rows, fall_share),
    }


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    report = measure(
        run_directory(args),
        args["checkpoint"],
        int(args["episodes"]),
        list(args["magnitudes"]),
        float(args["fall_share"]),
        list(args["env_kwargs"]),
    )
    emit_report(report, args["out"])


if __name__ == "__main__":
    run_cli(main)
