"""Validation: the range and consistency checks that types alone cannot express, one validator per
section of the training config. Each failure is one ConfigError line naming the key, its value and
what would be valid."""

from __future__ import annotations

import math
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from ppo_control.config.loading import available_presets
from ppo_control.config.schema import CHOICES, RANDOMIZE_PHYSICS_KEYS, RNN_TYPES, ConfigError, batch_size


def validate(cfg: DictConfig) -> None:
    """Range and consistency checks that types alone cannot express, one validator per section."""
    missing = OmegaConf.missing_keys(cfg)
    if missing:
        raise ConfigError(f"config keys without a value: {', '.join(sorted(missing))}")
    for key, choices in CHOICES.items():
        value = OmegaConf.select(cfg, key)
        if value not in choices:
            raise ConfigError(f"{key}={value!r} is not valid; choose one of: {', '.join(choices)}")
    for check in (_validate_top, _validate_env, _validate_normalize, _validate_policy, _validate_ppo, _validate_batch, _validate_eval):
        check(cfg)
    validate_randomize(cfg)
    _validate_log(cfg)
    _validate_checkpoint(cfg)


def _require(cfg: DictConfig, ok: bool, key: str, allowed: str) -> None:
    if not ok:
        raise ConfigError(f"{key}={OmegaConf.select(cfg, key)!r} is not allowed: {key} must be {allowed}")


def _finite(cfg: DictConfig, key: str) -> float:
    value = OmegaConf.select(cfg, key)
    _require(cfg, value is None or math.isfinite(value), key, "a finite number")
    return value


def _validate_top(cfg: DictConfig) -> None:
    _require(cfg, cfg.total_steps >= 1, "total_steps", ">= 1")
    _require(cfg, cfg.seed >= 0, "seed", ">= 0")
    _require(cfg, cfg.torch_threads >= 0, "torch_threads", ">= 0 (0 = 1 while collecting, every core for the update)")
    _require(cfg, _finite(cfg, "dist_timeout") > 0, "dist_timeout", "> 0 (seconds)")
    _require(cfg, cfg.preset in available_presets(), "preset", f"one of {', '.join(available_presets())}")


def _validate_env(cfg: DictConfig) -> None:
    env = cfg.env
    _require(
        cfg,
        env.id is not None and str(env.id).strip() != "",
        "env.id",
        "a Gymnasium id or package.module:EnvClass (set in the task file)",
    )
    _require(cfg, env.n_envs >= 1, "env.n_envs", ">= 1")
    _require(cfg, env.num_threads >= 0, "env.num_threads", ">= 0 (0 = one per CPU core)")
    _require(cfg, env.max_episode_steps is None or env.max_episode_steps >= 1, "env.max_episode_steps", "null or >= 1")


def _validate_normalize(cfg: DictConfig) -> None:
    _require(cfg, _finite(cfg, "normalize.obs_clip") > 0, "normalize.obs_clip", "> 0")
    _require(cfg, _finite(cfg, "normalize.reward_clip") > 0, "normalize.reward_clip", "> 0")


def _validate_policy(cfg: DictConfig) -> None:
    pol = cfg.policy
    _require(
        cfg,
        len(pol.hidden_sizes) >= 1 and all(h >= 1 for h in pol.hidden_sizes),
        "policy.hidden_sizes",
        "a non-empty list of positive ints, e.g. [64,64]",
    )
    _require(
        cfg,
        pol.critic_hidden_sizes is None or (len(pol.critic_hidden_sizes) >= 1 and all(h >= 1 for h in pol.critic_hidden_sizes)),
        "policy.critic_hidden_sizes",
        "null (the actor's hidden_sizes) or a non-empty list of positive ints, e.g. [256,256]",
    )
    _finite(cfg, "policy.log_std_init")
    for key in ("actor_obs", "critic_obs"):
        names = list(pol[key])
        _require(
            cfg,
            len(names) >= 1 and len(set(names)) == len(names),
            f"policy.{key}",
            "a non-empty list of distinct group names, e.g. [policy]",
        )
    for key in ("actor_history", "critic_history"):
        _require(cfg, pol[key] >= 1, f"policy.{key}", ">= 1 (the number of most recent frames read; 1 = the current one only)")
    _require(cfg, pol.rnn in RNN_TYPES, "policy.rnn", f"one of {', '.join(RNN_TYPES)}")
    _require(cfg, pol.rnn_size >= 1, "policy.rnn_size", ">= 1")
    _require(cfg, pol.rnn_sequence_length >= 1, "policy.rnn_sequence_length", ">= 1")


def _validate_ppo(cfg: DictConfig) -> None:
    ppo = cfg.ppo
    _require(cfg, ppo.rollout_steps >= 1, "ppo.rollout_steps", ">= 1")
    _require(cfg, ppo.epochs >= 1, "ppo.epochs", ">= 1")
    _require(cfg, ppo.minibatches >= 1, "ppo.minibatches", ">= 1")
    _require(cfg, _finite(cfg, "ppo.learning_rate") > 0, "ppo.learning_rate", "> 0")
    _require(cfg, 0 < _finite(cfg, "ppo.gamma") <= 1, "ppo.gamma", "in (0, 1]")
    _require(cfg, ppo.gamma_end is None or 0 < _finite(cfg, "ppo.gamma_end") <= 1, "ppo.gamma_end", "null or in (0, 1]")
    _require(cfg, 0 <= _finite(cfg, "ppo.gae_lambda") <= 1, "ppo.gae_lambda", "in [0, 1]")
    _require(cfg, ppo.gae_lambda_end is None or 0 <= _finite(cfg, "ppo.gae_lambda_end") <= 1, "ppo.gae_lambda_end", "null or in [0, 1]")
    _require(cfg, 0 < _finite(cfg, "ppo.end_at_fraction") <= 1, "ppo.end_at_fraction", "in (0, 1]")
    _require(cfg, _finite(cfg, "ppo.clip_range") > 0, "ppo.clip_range", "> 0")
    _require(cfg, _finite(cfg, "ppo.ent_coef") >= 0, "ppo.ent_coef", ">= 0")
    _require(cfg, _finite(cfg, "ppo.vf_coef") > 0, "ppo.vf_coef", "> 0")
    _require(cfg, _finite(cfg, "ppo.mirror_loss_coef") >= 0, "ppo.mirror_loss_coef", ">= 0 (0 = off)")
    _require(cfg, 0 <= _finite(cfg, "ppo.penalty_curriculum_start") <= 1, "ppo.penalty_curriculum_start", "in [0, 1] (1 = off)")
    _require(cfg, ppo.penalty_curriculum_steps >= 0, "ppo.penalty_curriculum_steps", ">= 0")
    _require(cfg, ppo.max_grad_norm is None or _finite(cfg, "ppo.max_grad_norm") > 0, "ppo.max_grad_norm", "null or > 0")
    _require(cfg, ppo.target_kl is None or _finite(cfg, "ppo.target_kl") > 0, "ppo.target_kl", "null or > 0")
    if ppo.lr_schedule == "adaptive" and ppo.target_kl is None:
        raise ConfigError("ppo.lr_schedule=adaptive needs ppo.target_kl (the KL it aims at), e.g. ppo.target_kl=0.01")


def _validate_batch(cfg: DictConfig) -> None:
    """Across env, ppo and policy: the minibatches (and a recurrent policy's sequences) must divide the batch."""
    env, pol, ppo = cfg.env, cfg.policy, cfg.ppo
    batch = batch_size(cfg)
    if batch % ppo.minibatches != 0:
        raise ConfigError(
            f"ppo.minibatches={ppo.minibatches} does not divide the batch size env.n_envs*ppo.rollout_steps="
            f"{env.n_envs}*{ppo.rollout_steps}={batch}; choose a divisor of {batch}"
        )
    if pol.rnn != "none":
        if ppo.rollout_steps % pol.rnn_sequence_length != 0:
            raise ConfigError(
                f"policy.rnn_sequence_length={pol.rnn_sequence_length} does not divide ppo.rollout_steps={ppo.rollout_steps}; "
                f"choose a divisor of {ppo.rollout_steps}"
            )
        sequences = batch // pol.rnn_sequence_length
        if sequences % ppo.minibatches != 0:
            raise ConfigError(
                f"ppo.minibatches={ppo.minibatches} does not divide the {sequences} training sequences of a recurrent policy "
                f"(env.n_envs*ppo.rollout_steps/policy.rnn_sequence_length); choose a divisor of {sequences}"
            )


def _validate_eval(cfg: DictConfig) -> None:
    ev = cfg.eval
    _require(cfg, ev.every_steps >= 0, "eval.every_steps", ">= 0 (0 = evaluate only at the end)")
    _require(cfg, ev.episodes >= 1, "eval.episodes", ">= 1")
    _require(cfg, ev.video_episodes >= 1, "eval.video_episodes", ">= 1")
    even = "an even number >= 16 (H.264 needs even sizes)"
    _require(cfg, ev.video_width >= 16 and ev.video_width % 2 == 0, "eval.video_width", even)
    _require(cfg, ev.video_height >= 16 and ev.video_height % 2 == 0, "eval.video_height", even)
    _require(cfg, ev.video_fps is None or ev.video_fps >= 1, "eval.video_fps", "null (the env's rate) or >= 1")


def _validate_log(cfg: DictConfig) -> None:
    _require(cfg, cfg.log.every_updates >= 1, "log.every_updates", ">= 1")
    _require(cfg, _finite(cfg, "log.line_seconds") >= 0, "log.line_seconds", ">= 0 (0 = a line every log.every_updates updates)")


def _validate_checkpoint(cfg: DictConfig) -> None:
    _require(cfg, cfg.checkpoint.every_steps >= 0, "checkpoint.every_steps", ">= 0 (0 = only last.pt)")
    _require(cfg, cfg.checkpoint.keep >= 0, "checkpoint.keep", ">= 0")
    _require(cfg, _finite(cfg, "checkpoint.save_last_seconds") >= 0, "checkpoint.save_last_seconds", ">= 0")


def validate_randomize(cfg: DictConfig) -> None:
    """The `randomize` section: [low, high] scale ranges, non-negative noises, a delay range, pushes."""
    rnd = cfg.randomize

    def fail(key: str, allowed: str) -> None:
        raise ConfigError(f"randomize.{key}={_plain(rnd[key])!r} is not allowed: randomize.{key} must be {allowed}")

    for key in RANDOMIZE_PHYSICS_KEYS:
        pair = rnd[key]
        if pair is None:
            continue
        bound = "0 < low <= high" if key == "body_mass" else "0 <= low <= high"
        ok = len(pair) == 2 and all(math.isfinite(v) for v in pair) and pair[0] <= pair[1]
        ok = ok and (pair[0] > 0 if key == "body_mass" else pair[0] >= 0)
        if not ok:
            fail(key, f"null or [low, high] scale factors with {bound} (e.g. [0.8, 1.2])")
    for key in ("joint_friction", "armature"):
        pair = rnd[key]
        if pair is not None and not (len(pair) == 2 and all(math.isfinite(v) for v in pair) and 0 <= pair[0] <= pair[1]):
            fail(key, "null or [low, high] scale factors with 0 <= low <= high (e.g. [0.9, 1.1])")
    pair = rnd.added_mass
    if pair is not None and not (len(pair) == 2 and all(math.isfinite(v) for v in pair) and pair[0] <= pair[1]):
        fail("added_mass", "null or [low, high] kg with low <= high (e.g. [-1, 1]); a base left without mass is refused when drawn")
    for key in ("obs_noise", "action_noise", "push_velocity", "com_offset"):
        if not (math.isfinite(rnd[key]) and rnd[key] >= 0):
            fail(key, ">= 0 (0 = off)")
    if not (math.isfinite(rnd.init_pose) and 0 <= rnd.init_pose <= math.pi):
        fail("init_pose", "between 0 (off) and pi: the most each actuated joint starts off its initial pose (rad, or m)")
    delay = rnd.action_delay
    if delay is not None and not (len(delay) == 2 and 0 <= delay[0] <= delay[1]):
        fail("action_delay", "null or [min, max] control steps with 0 <= min <= max (e.g. [0, 2])")
    if rnd.push_interval < 0 or (rnd.push_velocity > 0 and rnd.push_interval < 1):
        fail("push_interval", ">= 1 when randomize.push_velocity > 0 (control steps between pushes)")


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value) if isinstance(value, (DictConfig, ListConfig)) else value
