"""The PPO update (Schulman et al., 2017): clipped surrogate, value loss, entropy bonus,
minibatch epochs with KL early stopping, and the learning-rate schedules.

Knows nothing about environments: it gets a flat batch of transitions and a policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial

import torch
from torch import nn

from ppo_control.config.errors import NonFiniteError
from ppo_control.rl.distributed import Distributed
from ppo_control.rl.storage import RolloutStorage
from ppo_control.rl.symmetry import Mirror, mirror_loss

MIN_ADAPTIVE_LR, MAX_ADAPTIVE_LR = 1e-6, 1e-2


@dataclass
class Batch:
    """Training data for one update. `obs` is already normalized.

    Feed-forward policies: flat [batch, ...] transitions. Recurrent ones: whole sequences
    [batch, L, ...], with the actor's state at each sequence's start (`states`) and where episodes
    start inside them (`episode_starts`); shuffling and minibatches then move whole sequences.
    With a mirror loss, `mirrored_obs` is each observation's mirror image, normalized."""

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    states: torch.Tensor | None = None
    episode_starts: torch.Tensor | None = None
    mirrored_obs: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.obs.shape[0]

    @property
    def memory(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        return None if self.states is None else (self.states, self.episode_starts)

    def _map(self, take) -> Batch:
        return Batch(*(None if (value := getattr(self, name)) is None else take(value) for name in self.__dataclass_fields__))

    def subset(self, index: torch.Tensor) -> Batch:
        return self._map(lambda x: x[index])

    def minibatches(self, count: int) -> list[Batch]:
        """`count` equal consecutive slices (views, no copies)."""
        size = len(self) // count
        return [self._map(lambda x, k=k: x[k * size : (k + 1) * size]) for k in range(count)]


def prepare_batch(
    policy: nn.Module,
    storage: RolloutStorage,
    last_values: torch.Tensor,
    gamma: float,
    gae_lambda: float,
    mirror: Mirror | None = None,
) -> Batch:
    """The rollout's log-probs and values in one batched pass, GAE, then flat [T*N, ...] tensors
    (with `mirror`, also the observations' mirror images).

    Observations are normalized with the statistics the policy acted with (the caller updates the
    normalizer only after this), so the stored log-probs are those of the acting policy.
    """
    if storage.sequence_length is not None:
        return prepare_sequence_batch(policy, storage, last_values, gamma, gae_lambda)
    raw_obs = storage.observations.view(-1, storage.observations.shape[-1])
    actions = storage.actions.view(-1, storage.actions.shape[-1])
    with torch.no_grad():
        norm_obs = policy.normalize(raw_obs)
        log_probs, _, values = policy.evaluate_actions(norm_obs, actions)
    advantages, returns = storage.compute_advantages(values.view(storage.num_steps, storage.num_envs), last_values, gamma, gae_lambda)
    return Batch(
        obs=norm_obs,
        actions=actions,
        log_probs=log_probs,
        values=values,
        advantages=advantages.view(-1),
        returns=returns.view(-1),
        mirrored_obs=None if mirror is None else policy.normalize(mirror.observations(raw_obs)),
    )


def prepare_sequence_batch(policy: nn.Module, storage: RolloutStorage, last_values: torch.Tensor, gamma: float, gae_lambda: float) -> Batch:
    """`prepare_batch` for a recurrent policy: the rollout cut into sequences of
    storage.sequence_length steps, the actor replayed over each from its stored starting state
    (exactly how the update will evaluate it), GAE over the rollout as usual."""
    seq = storage.to_sequences
    norm_obs = policy.normalize(seq(storage.observations))
    actions = seq(storage.actions)
    states = storage.sequence_states.reshape(-1, storage.sequence_states.shape[-1])
    starts = seq(storage.episode_starts())
    with torch.no_grad():
        log_probs, _, values = policy.evaluate_actions(norm_obs, actions, (states, starts))
    advantages, returns = storage.compute_advantages(storage.from_sequences(values), last_values, gamma, gae_lambda)
    return Batch(norm_obs, actions, log_probs, values, seq(advantages), seq(returns), states, starts)


def standardize(x: torch.Tensor) -> torch.Tensor:
    """Mean 0, std 1 (a single element is left as it is: it has no spread to divide by)."""
    return (x - x.mean()) / (x.std() + 1e-8) if x.numel() > 1 else x


def clipped_surrogate(ratio: torch.Tensor, advantages: torch.Tensor, clip_range: float) -> torch.Tensor:
    """Per-sample PPO objective (to maximize): min(r * A, clip(r, 1-eps, 1+eps) * A).

    Where the clipped term is the smaller one, the objective is constant in r: no gradient pushes
    the ratio further outside the trust region. Worked example, eps=0.2, A=+2, r=1.5: min(3.0, 2.4) = 2.4.
    """
    return torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - clip_range, 1.0 + clip_range) * advantages)


def approx_kl(log_ratio: torch.Tensor) -> torch.Tensor:
    """KL(old || new) estimate (r - 1) - log r: unbiased and never negative (Schulman's k3)."""
    return ((log_ratio.exp() - 1.0) - log_ratio).mean()


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip_range: float | None) -> torch.Tensor:
    """0.5 * squared error; with `clip_range`, the pessimistic max over a clipped value update."""
    loss = (values - returns).pow(2)
    if clip_range is not None:
        clipped = old_values + torch.clamp(values - old_values, -clip_range, clip_range)
        loss = torch.max(loss, (clipped - returns).pow(2))
    return 0.5 * loss.mean()


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """1 - Var(targets - predictions) / Var(targets): 1 is perfect, 0 is no better than a constant."""
    var = targets.var()
    return float("nan") if var == 0 else float(1.0 - (targets - predictions).var() / var)


def minibatch_loss(
    policy: nn.Module,
    mb: Batch,
    clip_range: float,
    vf_coef: float,
    ent_coef: float | torch.Tensor,
    value_clip: float | None,
    normalize_advantages: bool,
    mirror: Mirror | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One minibatch's loss to minimize, -surrogate + vf_coef * value loss - ent_coef * entropy
    (+ mirror.coef * the mirror loss, with `mirror`), with its diagnostics: (loss, [policy_loss,
    value_loss, entropy, clip_fraction, mirror_loss], approx KL), the last two detached.

    Everything between the minibatch and `backward()` lives here, so that it is one unit:
    `PPOLearner(compiled=True)` hands this function to `torch.compile`, which fuses the policy's
    forward pass, the loss and their backward pass into a few kernels instead of dozens of small
    ones; `ppo_update` calls it as it is otherwise.
    """
    log_probs, entropy, values = policy.evaluate_actions(mb.obs, mb.actions, mb.memory)
    log_ratio = log_probs - mb.log_probs
    ratio = log_ratio.exp()

    advantages = standardize(mb.advantages) if normalize_advantages else mb.advantages
    policy_loss = -clipped_surrogate(ratio, advantages, clip_range).mean()
    v_loss = value_loss(values, mb.values, mb.returns, value_clip)
    entropy_mean = entropy.mean()
    loss = policy_loss + vf_coef * v_loss - ent_coef * entropy_mean
    m_loss = torch.zeros((), device=loss.device)
    if mirror is not None:
        m_loss = mirror_loss(policy, mb.obs, mb.mirrored_obs, mirror)
        loss = loss + mirror.coef * m_loss

    with torch.no_grad():
        kl = approx_kl(log_ratio)
        clip_fraction = ((ratio - 1.0).abs() > clip_range).float().mean()
        diagnostics = torch.stack([policy_loss, v_loss, entropy_mean, clip_fraction, m_loss.detach()])
    return loss, diagnostics, kl


def compiled_minibatch_loss() -> Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """`minibatch_loss` through `torch.compile`: the same loss and gradients, up to floating-point
    rounding (fused kernels add and round in another order, and compute tanh, exp and expm1 with
    their own vectorized routines).

    Compiled for the minibatch's shapes on the first call (seconds to a minute; it needs a C++
    compiler) and never again in a run: every minibatch of a run has the same shapes
    (dynamic=False), and the entropy bonus, the one argument a schedule changes, goes in as a
    tensor, where as a float each new value would be compiled anew."""
    compiled = torch.compile(minibatch_loss, dynamic=False)

    def loss(policy, mb, clip_range, vf_coef, ent_coef, value_clip, normalize_advantages, mirror=None):
        ent_coef = torch.tensor(ent_coef, device=mb.obs.device)
        return compiled(policy, mb, clip_range, vf_coef, ent_coef, value_clip, normalize_advantages, mirror)

    return loss


def linear_decay(value: float, step: int, total_steps: int) -> float:
    """`value` at step 0, falling linearly to zero at total_steps (and staying there)."""
    return value * max(1.0 - step / total_steps, 0.0)


def scheduled_learning_rate(schedule: str, base_lr: float, current_lr: float, step: int, total_steps: int) -> float:
    """Rate for the next update. `linear` decays to zero at total_steps; `adaptive` keeps the
    current rate (it is changed by `adapt_learning_rate` after each update)."""
    if schedule == "linear":
        return linear_decay(base_lr, step, total_steps)
    if schedule == "adaptive":
        return current_lr
    return base_lr


def scheduled_entropy_coef(schedule: str, base_coef: float, step: int, total_steps: int) -> float:
    """Entropy bonus for the next update. `linear` decays it to zero at total_steps: a bonus large
    enough to keep exploring early would, held to the end, keep the final policy too noisy to
    commit to the gait it found."""
    return linear_decay(base_coef, step, total_steps) if schedule == "linear" else base_coef


def scheduled_value(start: float, end: float | None, step: int, end_step: float) -> float:
    """A setting with an optional end (`ppo.gamma_end`, `ppo.gae_lambda_end`): `start`, or moving
    linearly from `start` at step 0 to `end` at end_step, and staying there."""
    if end is None:
        return start
    return end + linear_decay(start - end, step, end_step)


def adapt_learning_rate(lr: float, kl: float, target_kl: float) -> float:
    """KL-adaptive rate: shrink when the update moved the policy > 2x target, grow when < 0.5x."""
    if kl > 2.0 * target_kl:
        lr /= 1.5
    elif kl < 0.5 * target_kl:
        lr *= 1.5
    return min(max(lr, MIN_ADAPTIVE_LR), MAX_ADAPTIVE_LR)


def kl_stop_threshold(schedule: str, target_kl: float | None) -> float | None:
    """KL beyond which the epoch loop stops. The adaptive schedule aims for KL in [0.5, 2] x target,
    so stopping at the target itself would fight it; it stops only beyond the band's upper edge."""
    if target_kl is None:
        return None
    return 2.0 * target_kl if schedule == "adaptive" else target_kl


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


# The diagnostics an update averages over its minibatches, in the order minibatch_loss returns the
# first five (the KL comes after the gradients' all-reduce).
UPDATE_STATS = ("policy_loss", "value_loss", "entropy", "clip_fraction", "mirror_loss", "approx_kl")


@dataclass(frozen=True)
class UpdateSettings:
    """The `ppo` numbers a minibatch uses, read once per update: a config lookup costs more than a
    small minibatch's arithmetic around it."""

    clip_range: float
    vf_coef: float
    ent_coef: float  # this update's entropy bonus (a schedule's value, or ppo.ent_coef)
    value_clip: float | None  # clip_range with ppo.clip_value_loss, else None
    max_grad_norm: float  # inf without ppo.max_grad_norm
    kl_limit: float | None  # kl_stop_threshold's
    normalize_minibatches: bool  # ppo.normalize_adv over each minibatch's own mean and std

    @classmethod
    def of(cls, hp, ent_coef: float | None = None) -> UpdateSettings:
        """`hp` is the `ppo` config section; `ent_coef` defaults to `hp.ent_coef`."""
        clip_range = float(hp.clip_range)
        return cls(
            clip_range=clip_range,
            vf_coef=float(hp.vf_coef),
            ent_coef=float(hp.ent_coef if ent_coef is None else ent_coef),
            value_clip=clip_range if hp.clip_value_loss else None,
            max_grad_norm=float(hp.max_grad_norm) if hp.max_grad_norm is not None else float("inf"),
            kl_limit=kl_stop_threshold(hp.lr_schedule, hp.target_kl),
            normalize_minibatches=hp.normalize_adv and hp.normalize_adv_over == "minibatch",
        )


def _non_finite_loss(diagnostics: torch.Tensor, epoch: int, minibatch: int) -> NonFiniteError:
    policy_loss, v_loss, entropy_mean = diagnostics[:3].tolist()
    return NonFiniteError(
        f"non-finite loss (policy {policy_loss:.4g}, value {v_loss:.4g}, entropy {entropy_mean:.4g}) "
        f"at epoch {epoch}, minibatch {minibatch}; the parameters were not changed by it"
    )


def _clipped_step(optimizer: torch.optim.Optimizer, params: list[nn.Parameter], max_norm: float, epoch: int, minibatch: int) -> float:
    """Clip the gradients' norm to `max_norm` and take the optimizer step; returns the norm before
    clipping. A non-finite norm stops the update before the step."""
    grad_norm = float(nn.utils.clip_grad_norm_(params, max_norm))
    if not math.isfinite(grad_norm):
        raise NonFiniteError(f"non-finite gradient norm at epoch {epoch}, minibatch {minibatch}; the step was not taken")
    optimizer.step()
    return grad_norm


def ppo_update(
    policy: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: Batch,
    hp,
    generator: torch.Generator,
    sync: Distributed | None = None,
    ent_coef: float | None = None,
    loss_fn: Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = minibatch_loss,
) -> dict[str, float]:
    """Run up to `hp.epochs` passes of `hp.minibatches` minibatches over `batch`.

    `hp` is the `ppo` config section; `ent_coef` (default `hp.ent_coef`) is this update's
    entropy bonus, for a schedule; `loss_fn` is `minibatch_loss` or its compiled form (a mirror
    bound to it needs `batch.mirrored_obs`). Before each minibatch's optimizer step the approximate
    KL of that minibatch is measured (averaged over ranks); once it exceeds the threshold the loop
    stops without taking that step. With `sync`, gradients are averaged over ranks every
    minibatch. Returns the diagnostics averaged over the minibatches evaluated.
    """
    sync = sync or Distributed()
    if hp.normalize_adv and hp.normalize_adv_over == "batch":
        # One mean and std for the whole rollout: a small minibatch's own are noisy estimates, and
        # centring on a minibatch's mean can turn an action that was worse than the rollout's average
        # into one that is reinforced.
        batch = replace(batch, advantages=standardize(batch.advantages))
    s = UpdateSettings.of(hp, ent_coef)
    params = [p for p in policy.parameters() if p.requires_grad]

    # Diagnostics are summed as tensors and read once at the end: no host sync per minibatch for
    # them (on a GPU each float() would stall the pipeline).
    totals = torch.zeros(len(UPDATE_STATS), device=batch.obs.device)
    grad_norm_total, minibatches_seen, steps_taken, epochs_run, stopped_early = 0.0, 0, 0, 0, False
    for _epoch in range(hp.epochs):
        epochs_run += 1
        # One gather per epoch into shuffled order, then contiguous slices: a gather per tensor per
        # minibatch would cost more than the small networks' forward pass.
        order = torch.randperm(len(batch), generator=generator).to(batch.obs.device)
        for mb in batch.subset(order).minibatches(hp.minibatches):
            loss, diagnostics, kl = loss_fn(policy, mb, s.clip_range, s.vf_coef, s.ent_coef, s.value_clip, s.normalize_minibatches)
            totals[:5] += diagnostics
            minibatches_seen += 1
            if not torch.isfinite(loss):
                raise _non_finite_loss(diagnostics, epochs_run, minibatches_seen)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            # One all-reduce carries the gradients and this minibatch's KL, so every rank sees the
            # same averaged KL and stops (or steps) together. Single process: a no-op.
            kl = sync.average_gradients(params, kl.reshape(1))[0]
            totals[5] += kl
            if s.kl_limit is not None and float(kl) > s.kl_limit:
                stopped_early = True
                break
            grad_norm_total += _clipped_step(optimizer, params, s.max_grad_norm, epochs_run, minibatches_seen)
            steps_taken += 1
        if stopped_early:
            break

    stats = {key: float(value) / minibatches_seen for key, value in zip(UPDATE_STATS, totals.tolist())}
    stats["grad_norm"] = grad_norm_total / steps_taken if steps_taken else 0.0
    return {**stats, "epochs_run": epochs_run, "optimizer_steps": steps_taken, "kl_early_stop": stopped_early}


def _adam(parameters: list[nn.Parameter], learning_rate: float) -> torch.optim.Adam:
    """Adam with fused=True (one kernel for all parameters instead of a loop of small ops) where
    the installed torch supports it for these parameters' device (CPU: torch >= 2.4), else the
    default implementation, which computes the same update."""
    try:
        return torch.optim.Adam(parameters, lr=learning_rate, eps=1e-5, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.Adam(parameters, lr=learning_rate, eps=1e-5)


class PPOLearner:
    """The policy's optimizer and learning-rate schedule; `update(batch, step)` is one PPO update.

    `compiled=True` computes each minibatch's loss and gradients with `compiled_minibatch_loss`
    (feed-forward policies; a recurrent one's sequence replay cuts its sequences where episodes
    start, which depends on the data, so it stays eager). It pays a one-time compilation at the
    first update for cheaper minibatches after it: worth it for long runs, not for a short one.
    """

    def __init__(
        self,
        policy: nn.Module,
        hp,
        total_steps: int,
        generator: torch.Generator,
        sync: Distributed | None = None,
        compiled: bool = False,
        mirror: Mirror | None = None,
    ):
        self.policy, self.hp, self.total_steps, self.generator = policy, hp, total_steps, generator
        self.sync = sync or Distributed()
        self.optimizer = _adam(list(policy.parameters()), hp.learning_rate)
        loss_fn = compiled_minibatch_loss() if compiled and not policy.recurrent else minibatch_loss
        self.loss_fn = loss_fn if mirror is None else partial(loss_fn, mirror=mirror)

    def gamma(self, step: int) -> float:
        """The discount the rollout collected at `step` is prepared with (`ppo.gamma_end`). A short
        horizon early lets a policy that cannot yet move learn from the forward reward near it; a
        long one late makes a fall hundreds of steps ahead cost what it costs in the episode's return."""
        return scheduled_value(self.hp.gamma, self.hp.gamma_end, step, self.schedule_end_step)

    def gae_lambda(self, step: int) -> float:
        """The GAE lambda the rollout collected at `step` is prepared with (`ppo.gae_lambda_end`). A
        long advantage horizon early credits the actions that led, many steps later, to a fall or a
        gain; a short one late gives lower-variance advantages while the policy refines what it found."""
        return scheduled_value(self.hp.gae_lambda, self.hp.gae_lambda_end, step, self.schedule_end_step)

    @property
    def schedule_end_step(self) -> float:
        """Where gamma and lambda reach their `_end` values (`ppo.end_at_fraction` of the run). Ending
        before the run does gives the critic steps, at a learning rate that has not yet decayed
        away, to fit the values of the final discount instead of chasing a moving target."""
        return self.hp.end_at_fraction * self.total_steps

    @property
    def learning_rate(self) -> float:
        return self.optimizer.param_groups[0]["lr"]

    def update(self, batch: Batch, step: int) -> dict[str, float]:
        """Set the scheduled rate and entropy bonus for this update, run it, adapt the rate
        (adaptive schedule) after. The stats include the rate and bonus the update used."""
        lr = scheduled_learning_rate(self.hp.lr_schedule, self.hp.learning_rate, self.learning_rate, step, self.total_steps)
        ent_coef = scheduled_entropy_coef(self.hp.ent_schedule, self.hp.ent_coef, step, self.total_steps)
        set_learning_rate(self.optimizer, lr)
        stats = ppo_update(self.policy, self.optimizer, batch, self.hp, self.generator, self.sync, ent_coef, self.loss_fn)
        if self.hp.lr_schedule == "adaptive":
            set_learning_rate(self.optimizer, adapt_learning_rate(lr, stats["approx_kl"], self.hp.target_kl))
        stats["learning_rate"] = lr
        stats["ent_coef"] = ent_coef
        return stats
