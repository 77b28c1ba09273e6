"""The MJX backend's cheaper dispatch keeps its semantics: the episodes carried packed (one array
per dtype) and donated to each step are the episodes of the engine's own reset and step with this
backend's bookkeeping done by hand, checkpoints keep the engine state's own leaves, and nothing
handed to torch is overwritten by a later step."""

import numpy as np
import pytest
import torch

from tests.helpers import MJX_LIMIT, random_actions

LIMIT = MJX_LIMIT


def test_a_layout_packs_a_tree_into_one_array_per_dtype_and_back():
    """Leaves of three dtypes (one of them empty, as MJX's unused fields are) in two packed arrays,
    each leaf's values back in place, on the host (numpy) and inside JAX alike."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from ppo_control.envs.mjx_backend import FlatLayout

    n = 3
    rng = np.random.default_rng(0)
    tree = {
        "a": rng.normal(size=(n, 2, 3)).astype(np.float32),
        "b": np.arange(n, dtype=np.int32),
        "c": (rng.normal(size=(n,)).astype(np.float32), np.zeros((n, 0), dtype=bool)),
    }
    shapes = jax.tree_util.tree_map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), tree)
    layout = FlatLayout.of(shapes, n)
    assert layout.leaf_shapes == [(n, 2, 3), (n,), (n,), (n, 0)]
    for xp in (np, jnp):
        packed = layout.pack(tree, xp)
        assert [(p.shape, p.dtype) for p in packed] == [((n, 7), np.float32), ((n, 1), np.int32)]
        back = layout.unpack(packed, xp)
        assert jax.tree_util.tree_structure(back) == jax.tree_util.tree_structure(tree)
        for got, want in zip(jax.tree_util.tree_leaves(back), jax.tree_util.tree_leaves(tree)):
            assert got.dtype == want.dtype and np.array_equal(np.asarray(got), want)


def reference_episodes(env, n, limit, seed, actions):
    """This backend's episode semantics restated step by step on the host around the engine's own
    vmapped reset and step (the module docstring's contract and batched_reset's key schedule):
    yields each step's outputs and, after the last, the leaves a checkpoint holds."""
    import jax
    import jax.numpy as jnp

    reset, step = jax.jit(jax.vmap(env.reset)), jax.jit(jax.vmap(env.step))
    states = reset(jax.vmap(jax.random.PRNGKey)(seed + jnp.arange(n)))
    key = jax.random.PRNGKey(seed + n)
    steps, returns = np.zeros(n, dtype=np.int32), np.zeros(n, dtype=np.float32)
    for action in actions:
        stepped = step(states, jnp.asarray(action.numpy()))
        steps, returns = steps + 1, returns + np.asarray(stepped.reward)
        terminated = np.asarray(stepped.done) > 0.5
        truncated = (steps >= limit) & ~terminated
        done = terminated | truncated
        key, reset_key = jax.random.split(key)
        states = stepped
        if done.any():
            fresh = reset(jax.random.split(reset_key, n))
            pick = lambda f, s, done=done: jnp.where(done.reshape((-1,) + (1,) * (s.ndim - 1)), f, s)
            states = jax.tree_util.tree_map(pick, fresh, stepped)
        yield {
            "obs": np.asarray(states.obs),
            "reward": np.asarray(stepped.reward),
            "terminated": terminated,
            "truncated": truncated,
            "final_obs": np.asarray(stepped.obs),
            "episode_return": returns.copy(),
            "episode_length": steps.copy(),
        }
        steps, returns = np.where(done, 0, steps).astype(np.int32), np.where(done, 0.0, returns).astype(np.float32)
    yield [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves((states, steps, returns, key))]


@pytest.mark.slow
def test_the_packed_step_runs_the_engines_episodes_and_checkpoints_their_leaves(hopper):
    """For a fixed seed and actions, every output of every step equals the hand-kept reference's:
    the same terminations, truncations and final observations, the same fresh initial states after
    them (same keys), the same episode returns and lengths; a checkpoint's leaves are the
    reference's (brax states, steps, returns, reset key), as before the carry was packed."""
    actions = random_actions(40, 4, 3, seed=0)  # with reset seed 3: three falls and nine time limits
    reference = reference_episodes(hopper.env, 4, LIMIT, 3, actions)
    hopper.reset_device(3)
    seen = np.zeros(2, dtype=int)
    for t, action in enumerate(actions):
        out, want = hopper.step_device(action), next(reference)
        for name, value in want.items():
            got = getattr(out, name).numpy()
            if value.dtype == np.float32:
                np.testing.assert_allclose(got, value, rtol=1e-5, atol=1e-5, err_msg=f"{name} at step {t}")
            else:
                assert np.array_equal(got, value), f"{name} at step {t}"
        seen += (want["terminated"].sum(), want["truncated"].sum())
    assert (seen > 0).all()  # both kinds of episode end, and so resets, were exercised
    saved, expected = hopper.get_state()["leaves"], next(reference)
    assert [(np.shape(s), np.asarray(s).dtype) for s in saved] == [(e.shape, e.dtype) for e in expected]
    for got, want in zip(saved, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_tensors_handed_to_torch_survive_the_steps_that_follow(hopper):
    """The step donates its carry (XLA may write the next carry over it): the observations, rewards
    and final observations already handed to torch must not live in that memory, or the collector,
    which stores a step's observation after the next step, would store the wrong one."""
    actions = random_actions(6, 4, 3, seed=6)
    first = hopper.reset_device(2)
    kept = [(first, first.clone())]
    for action in actions:
        out = hopper.step_device(action)
        kept += [(x, x.clone()) for x in (out.obs, out.reward, out.final_obs, out.episode_return)]
    for tensor, copy in kept:
        assert torch.equal(tensor, copy)
