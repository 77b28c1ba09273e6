"""export: TorchScript and ONNX files that load without ppo_control and act exactly like the trained policy.

Two real runs: HalfCheetah (obs normalization on, 6-D actions; exported from a checkpoint whose actor
head is scaled up so actions saturate and the action clip matters) and InvertedPendulum with
normalize.obs=false (the normalization-skipped path). The exported files are evaluated in a
subprocess that cannot import ppo_control, against outputs the package computed here. A third run,
Hopper with observation history, checks the stateful export step by step from C++. The C++ robot
controller loop steps Go1, T1, Spot and Panda exports as ppo_control.deploy.controller does.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.robots.cpp_controller import model_path
from tests.helpers import ROOT, TINY, run_module

ATOL = 1e-5
ROLLOUT_SEED = 4242
HC_WIDE_GAIN = 100.0  # scales the HalfCheetah actor head so many actions hit the +-1 bounds
BLOCK_PPO_CONTROL = textwrap.dedent(
    """
    import importlib.abc, sys

    class _BlockPpoControl(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "ppo_control" or name.startswith("ppo_control."):
                raise ImportError(f"{name} is blocked: exported policies must not need it")
            return None

    sys.meta_path.insert(0, _BlockPpoControl())
    """
)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def popen_module(module: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process: subprocess.Popen, timeout: float = 300) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, f"{process.args}\n{out[-2000:]}\n{err[-3000:]}"
    return out


# --- fixtures: runs, exports, expected outputs ------------------------------------------------


def compiler_missing() -> str | None:
    if shutil.which("cmake") is None:
        return "cmake is not installed"
    if not any(shutil.which(cxx) for cxx in ("c++", "g++", "clang++")):
        return "no C++ compiler (c++, g++ or clang++) is installed"
    return None


@pytest.fixture(scope="module", autouse=True)
def cpp_build(tmp_path_factory):
    """Start building examples/cpp right away: the compile (~50 s) overlaps training and exporting."""
    reason = compiler_missing()
    if reason is not None:
        yield {"skip": reason}
        return
    build = tmp_path_factory.mktemp("cpp") / "build"
    import mujoco

    script = (
        f"cmake -S {ROOT / 'examples' / 'cpp'} -B {build} -DCMAKE_BUILD_TYPE=Release "
        f"-DCMAKE_PREFIX_PATH='{torch.utils.cmake_prefix_path}' -DMUJOCO_DIR='{Path(mujoco.__file__).parent}' "
        f"&& cmake --build {build} -j2"
    )
    # Own session, so cmake, make and the compiler can be stopped together if the C++ test is deselected.
    process = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    yield {"process": process, "binary": build / "run_policy", "controller": build / "robot_controller"}
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from ppo_control.runs.checkpoint import save_checkpoint

    root = tmp_path_factory.mktemp("export_runs")
    hc, ip = root / "hc", root / "ip"
    trainings = [
        popen_module("ppo_control.train", "task=HalfCheetah", "total_steps=256", *TINY, f"run_dir={hc}"),
        popen_module("ppo_control.train", "task=InvertedPendulum", "normalize.obs=false", "total_steps=256", *TINY, f"run_dir={ip}"),
    ]
    for process in trainings:
        finish(process)

    state = torch.load(hc / "checkpoints" / "last.pt", weights_only=True)
    weights = [k for k in state["policy"] if k.startswith("actor_mean.") and k.endswith(".weight")]
    head = max(weights, key=lambda k: int(k.split(".")[1]))  # the output layer
    state["policy"][head] = state["policy"][head] * HC_WIDE_GAIN
    save_checkpoint(hc / "checkpoints" / "wide.pt", {k: v for k, v in state.items() if k != "format_version"})
    return {"hc": {"dir": hc, "checkpoint": "wide.pt"}, "ip": {"dir": ip, "checkpoint": None}}


@pytest.fixture(scope="module")
def exports(runs, tmp_path_factory):
    """Export both runs in both formats with the CLI, in parallel. IP torchscript uses the default out."""
    out_dir = tmp_path_factory.mktemp("exported")
    paths, processes = {}, []
    for name, run in runs.items():
        for fmt, suffix in (("torchscript", "pt"), ("onnx", "onnx")):
            default = name == "ip" and fmt == "torchscript"
            out = run["dir"] / "export" / "policy.pt" if default else out_dir / f"{name}.{suffix}"
            args = [f"run={run['dir']}", f"format={fmt}"] + ([] if default else [f"out={out}"])
            args += [f"checkpoint={run['checkpoint']}"] if run["checkpoint"] else []
            paths[name, fmt] = out
            processes.append(((name, fmt), popen_module("ppo_control.export", *args)))
    stdout = {key: finish(process) for key, process in processes}
    return {"paths": paths, "stdout": stdout}


@pytest.fixture(scope="module")
def expected(runs, tmp_path_factory):
    """What the package itself computes: actions for random and real observations, one episode's return."""
    from ppo_control.deploy.module import DeployedPolicy
    from ppo_control.envs import make_vec_env
    from ppo_control.rl.evaluation import evaluate_policy
    from ppo_control.runs.directory import load_run

    out_dir = tmp_path_factory.mktemp("expected")
    result = {}
    generator = torch.Generator().manual_seed(0)
    for name, run in runs.items():
        loaded = load_run(run["dir"], run["checkpoint"])
        policy, info = loaded.policy, loaded.env_info
        stats = policy.obs_normalizer
        std = torch.sqrt(stats.var + stats.epsilon).float()
        scale = torch.logspace(-1, 2, 64).unsqueeze(1)  # 0.1 .. 100 std: many past obs_clip=10
        obs_random = stats.mean.float() + torch.randn(64, info.obs_dim, generator=generator) * std * scale

        envs = make_vec_env(loaded.cfg.env, num_envs=1)
        obs_real, obs = [], envs.reset(ROLLOUT_SEED + 1)
        with torch.inference_mode():
            for _ in range(64):
                obs_real.append(obs[0].copy())
                obs = envs.step(policy.deterministic_action(torch.from_numpy(obs)).numpy()).obs
        obs_real = torch.from_numpy(np.stack(obs_real))
        returns, lengths = evaluate_policy(policy, make_vec_env(loaded.cfg.env, num_envs=1), 1, ROLLOUT_SEED)
        envs.close()

        arrays = {}
        with torch.inference_mode():
            for kind, obs_t in (("random", obs_random), ("real", obs_real)):
                arrays[f"obs_{kind}"] = obs_t.numpy()
                arrays[f"act_{kind}"] = policy.deterministic_action(obs_t).numpy()
                arrays[f"act_single_{kind}"] = np.stack([policy.deterministic_action(o).numpy() for o in obs_t])
        np.savez(out_dir / f"{name}.npz", **arrays)
        result[name] = {
            "npz": out_dir / f"{name}.npz",
            "arrays": arrays,
            "loaded": loaded,
            "hash": DeployedPolicy.from_actor_critic(policy).describe()["weights_sha256"],
            "episode_return": float(returns[0]),
            "episode_length": int(lengths[0]),
        }
    return result


ISOLATED_CHECK = BLOCK_PPO_CONTROL + textwrap.dedent(
    """
    import hashlib, json, warnings
    try:
        import ppo_control
        blocked = False
    except ImportError:
        blocked = True
    import gymnasium as gym
    import numpy as np
    import onnx
    import onnxruntime
    import torch

    warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated in torch >= 2.10


    def weights_sha256(state):  # the documented recipe, written out again without ppo_control
        digest = hashlib.sha256()
        for key in sorted(state):
            t = state[key].detach().cpu().contiguous()
            shape = ",".join(str(s) for s in t.shape)
            digest.update(f"{key}:{str(t.dtype).removeprefix('torch.')}:{shape}\\n".encode())
            digest.update(t.numpy().tobytes())
        return digest.hexdigest()


    cases = json.loads(sys.argv[1])
    report = {"blocked": blocked}
    for name, case in cases.items():
        data = np.load(case["npz"])
        extra = {"metadata.json": ""}
        ts = torch.jit.load(case["torchscript"], _extra_files=extra)
        session = onnxruntime.InferenceSession(case["onnx"], providers=["CPUExecutionProvider"])
        model = onnx.load(case["onnx"])
        outputs = {}
        with torch.inference_mode():
            for kind in ("random", "real"):
                obs = data[f"obs_{kind}"]
                outputs[f"ts_{kind}"] = ts(torch.from_numpy(obs)).numpy()
                outputs[f"ts_single_{kind}"] = np.stack([ts(torch.from_numpy(o)).numpy() for o in obs])
                outputs[f"onnx_{kind}"] = session.run(None, {"obs": obs})[0]
                outputs[f"onnx_single_{kind}"] = np.concatenate([session.run(None, {"obs": o[None]})[0] for o in obs])

            # Drive a fresh gymnasium env the way a controller would: raw float32 obs in, action out.
            # The obs goes in as [1, obs_dim], the shape evaluate_policy uses: HalfCheetah is chaotic
            # enough that a last-bit difference (matrix-vector vs matrix-matrix kernels) changes the
            # return by ~20%, and equal returns need bit-equal actions.
            meta = json.loads(extra["metadata.json"])
            env = gym.make(meta["env_id"], max_episode_steps=meta["max_episode_steps"], **meta["env_kwargs"])
            obs, _ = env.reset(seed=case["seed"])
            episode_return, length, done = 0.0, 0, False
            while not done:
                action = ts(torch.as_tensor(obs, dtype=torch.float32)[None])[0].numpy()
                obs, reward, terminated, truncated, _ = env.step(action)
                episode_return += float(np.float32(reward))  # ppo_control's vector env records float32 rewards
                length += 1
                done = terminated or truncated
            env.close()
        np.savez(case["result"], **outputs)
        report[name] = {
            "ts_metadata": meta,
            "ts_attr_metadata": json.loads(ts.metadata_json),
            "ts_attr_dims": [ts.obs_dim, ts.action_dim],
            "ts_hash": weights_sha256(ts.state_dict()),
            "onnx_props": {p.key: p.value for p in model.metadata_props},
            "onnx_opset": max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
            "onnx_input": [d.dim_param or d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim],
            "onnx_input_name": model.graph.input[0].name,
            "episode_return": episode_return,
            "episode_length": length,
        }
    print(json.dumps(report))
    """
)


@pytest.fixture(scope="module")
def isolated(exports, expected, tmp_path_factory):
    """Run every exported file in a python that cannot import ppo_control (and starts outside the repo)."""
    work = tmp_path_factory.mktemp("isolated")
    cases = {
        name: {
            "npz": str(expected[name]["npz"]),
            "torchscript": str(exports["paths"][name, "torchscript"]),
            "onnx": str(exports["paths"][name, "onnx"]),
            "seed": ROLLOUT_SEED,
            "result": str(work / f"{name}_out.npz"),
        }
        for name in expected
    }
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", ISOLATED_CHECK, json.dumps(cases)], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    outputs = {name: dict(np.load(case["result"])) for name, case in cases.items()}
    return report, outputs


# --- parity ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_isolated_process_really_cannot_import_ppo_control(isolated):
    report, _ = isolated
    assert report["blocked"] is True


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hc", "ip"])
@pytest.mark.parametrize("fmt", ["ts", "onnx"])
@pytest.mark.parametrize("kind", ["random", "real"])
def test_exported_policy_matches_the_package(isolated, expected, name, fmt, kind):
    _, outputs = isolated
    arrays = expected[name]["arrays"]
    np.testing.assert_allclose(outputs[name][f"{fmt}_{kind}"], arrays[f"act_{kind}"], rtol=0, atol=ATOL)
    np.testing.assert_allclose(outputs[name][f"{fmt}_single_{kind}"], arrays[f"act_single_{kind}"], rtol=0, atol=ATOL)
    assert outputs[name][f"{fmt}_single_{kind}"].shape == arrays[f"act_{kind}"].shape


@pytest.mark.slow
def test_parity_inputs_exercise_both_clips(expected):
    """The random observations must reach the obs clip and the action bounds, or parity proves little."""
    hc = expected["hc"]
    policy, arrays = hc["loaded"].policy, hc["arrays"]
    normalized = policy.normalize(torch.from_numpy(arrays["obs_random"]))
    assert (normalized.abs() == policy.obs_normalizer.clip).float().mean() > 0.05
    at_bound = np.isclose(np.abs(arrays["act_random"]), 1.0)
    assert 0.05 < at_bound.mean() < 0.95
    assert np.isclose(np.abs(arrays["act_real"]), 1.0).any()
    # InvertedPendulum skips normalization: observations far beyond +-obs_clip would expose a wrong clip.
    assert np.abs(expected["ip"]["arrays"]["obs_random"]).max() > 10 * expected["ip"]["loaded"].cfg.normalize.obs_clip


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hc", "ip"])
def test_exported_policy_drives_an_env_to_the_evaluate_policy_return(isolated, expected, name):
    report, _ = isolated
    assert report[name]["episode_length"] == expected[name]["episode_length"]
    assert report[name]["episode_return"] == pytest.approx(expected[name]["episode_return"], rel=1e-9, abs=1e-9)


# --- metadata --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hc", "ip"])
def test_metadata_is_complete_and_correct(isolated, expected, name):
    report, _ = isolated
    loaded = expected[name]["loaded"]
    info = loaded.env_info
    meta = report[name]["ts_metadata"]
    assert meta["task"] == loaded.cfg.task == {"hc": "HalfCheetah", "ip": "InvertedPendulum"}[name]
    assert meta["env_id"] == loaded.cfg.env.id
    assert (meta["obs_dim"], meta["action_dim"]) == (info.obs_dim, info.action_dim) == tuple(report[name]["ts_attr_dims"])
    assert meta["action_low"] == info.action_low.tolist() and meta["action_high"] == info.action_high.tolist()
    assert meta["step"] == loaded.state["step"] == 256
    assert meta["checkpoint"] == ("wide.pt" if name == "hc" else "last.pt")
    assert meta["normalize_obs"] is (name == "hc")
    assert meta["format"] == "torchscript" and meta["format_version"] == 1
    # the controller's contract, read from the task's MJCF
    assert meta["control_period_s"] == {"hc": 0.05, "ip": 0.04}[name]
    assert meta["action_names"] == {"hc": ["bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"], "ip": ["slide"]}[name]
    (group,) = meta["observation"]["groups"]
    assert group["name"] == "policy" and group["size"] == info.obs_dim and meta["observation"]["history"] == 1
    assert group["element_names"][:2] == {"hc": ["qpos:rootz", "qpos:rooty"], "ip": ["qpos:slider", "qpos:hinge"]}[name]
    # The hash names exactly these weights: recomputed from the loaded file, without ppo_control.
    assert meta["weights_sha256"] == report[name]["ts_hash"] == expected[name]["hash"]
    assert report[name]["ts_attr_metadata"] == meta

    props = report[name]["onnx_props"]
    onnx_meta = json.loads(props["metadata.json"])
    assert {**onnx_meta, "format": "torchscript"} == meta and onnx_meta["format"] == "onnx"
    assert props["task"] == meta["task"] and json.loads(props["obs_dim"]) == info.obs_dim
    assert json.loads(props["action_high"]) == meta["action_high"]
    assert report[name]["onnx_input_name"] == "obs"
    assert report[name]["onnx_input"] == ["batch", info.obs_dim]  # dynamic batch axis
    assert report[name]["onnx_opset"] >= 17


@pytest.mark.slow
def test_weight_hashes_differ_between_policies_and_follow_every_tensor(expected):
    from ppo_control.deploy.module import DeployedPolicy, weights_sha256

    assert expected["hc"]["hash"] != expected["ip"]["hash"]
    module = DeployedPolicy.from_actor_critic(expected["hc"]["loaded"].policy)
    state = module.state_dict()
    for key in state:
        changed = {k: v.clone() for k, v in state.items()}
        changed[key].view(-1)[0] += 1.0
        assert weights_sha256(changed) != expected["hc"]["hash"], key


@pytest.mark.slow
def test_cli_prints_where_it_wrote_the_metadata_and_how_to_load(exports, expected):
    out = exports["stdout"]["hc", "onnx"]
    assert f"wrote {exports['paths']['hc', 'onnx']}" in out
    assert f"weights_sha256: {expected['hc']['hash']}" in out and "task: HalfCheetah" in out
    assert "onnxruntime.InferenceSession" in out
    assert "torch.jit.load" in exports["stdout"]["ip", "torchscript"]


# --- in-process module behaviour -------------------------------------------------------------


@pytest.mark.parametrize("activation", ["relu", "elu", "gelu", "silu"])
def test_deployed_policy_scripts_for_every_activation(activation):
    from ppo_control.deploy.module import DeployedPolicy, to_torchscript
    from ppo_control.rl.policy import ActorCritic, Inputs, Networks

    torch.manual_seed(0)
    policy = ActorCritic(5, 2, np.array([-0.5, -2.0]), np.array([0.5, 2.0]), Networks([16, 16], activation), Inputs(obs_clip=3.0))
    policy.obs_normalizer.update(torch.randn(100, 5) * 4 + 2)
    policy.actor_mean[-1].weight.data.mul_(100)  # reach the action bounds
    scripted = to_torchscript(DeployedPolicy.from_actor_critic(policy, {"task": "unit"}))
    obs = torch.randn(50, 5) * 20
    with torch.inference_mode():
        reference = policy.deterministic_action(obs)
        torch.testing.assert_close(scripted(obs), reference, rtol=0, atol=ATOL)
        torch.testing.assert_close(scripted(obs[3]), reference[3], rtol=0, atol=ATOL)
    assert (reference.abs() == policy.action_high).any()
    assert json.loads(scripted.metadata_json)["task"] == "unit"


# --- C++ ---------------------------------------------------------------------------------------


def cpp_binary(cpp_build) -> Path:
    """The built run_policy, once the background build has finished (skips where it cannot be built)."""
    if "skip" in cpp_build:
        pytest.skip(f"C++ example not built: {cpp_build['skip']}")
    process = cpp_build["process"]
    if "log" not in cpp_build:  # the first C++ test waits for the build, the others reuse its result
        cpp_build["log"], _ = process.communicate(timeout=600)
    assert process.returncode == 0, cpp_build["log"][-4000:]
    return cpp_build["binary"]


def cpp_controller(cpp_build) -> Path:
    """The built robot_controller (examples/cpp/robot_controller.cpp), once the build has finished."""
    cpp_binary(cpp_build)
    return cpp_build["controller"]


def write_observations(path: Path, rows) -> None:
    """One line per row ("reset" stays as it is), numbers with %.9g so float32 values round-trip."""
    lines = [row if isinstance(row, str) else " ".join(f"{x:.9g}" for x in np.asarray(row).tolist()) for row in rows]
    path.write_text("\n".join(lines) + "\n")


def run_cpp(binary: Path, *args: str) -> tuple[list[str], np.ndarray]:
    """Run the C++ example; (its output lines, the actions it printed [lines, action_dim])."""
    result = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    return lines, np.array([[float(x) for x in line.split()[1:]] for line in lines if line.startswith("action:")])


@pytest.mark.slow
def test_cpp_example_builds_and_matches_python(cpp_build, exports, expected, tmp_path):
    binary = cpp_binary(cpp_build)
    policy = exports["paths"]["hc", "torchscript"]
    arrays = expected["hc"]["arrays"]
    obs = np.concatenate([arrays["obs_real"][:8], arrays["obs_random"][::8]])
    reference = np.concatenate([arrays["act_real"][:8], arrays["act_random"][::8]])
    obs_file = tmp_path / "obs.txt"
    write_observations(obs_file, obs)

    lines, actions = run_cpp(binary, str(policy), "--file", str(obs_file))
    metadata = json.loads(lines[0].removeprefix("metadata: "))
    assert metadata["weights_sha256"] == expected["hc"]["hash"] and metadata["obs_dim"] == obs.shape[1]
    assert "history: 1" in lines and "control period: 0.05 s" in lines
    assert "actions: bthigh bshin bfoot fthigh fshin ffoot" in lines
    np.testing.assert_allclose(actions, reference, rtol=0, atol=ATOL)

    _, action = run_cpp(binary, str(policy), *(f"{x:.9g}" for x in obs[0].tolist()))
    np.testing.assert_allclose(action[0], arrays["act_single_real"][0], rtol=0, atol=ATOL)

    # --episode on a policy without history: the same actions, one control step at a time
    _, stepped = run_cpp(binary, str(policy), "--episode", str(obs_file))
    np.testing.assert_allclose(stepped, reference, rtol=0, atol=ATOL)

    wrong = subprocess.run([str(binary), str(policy), "1", "2"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and "obs_dim=17" in wrong.stderr


@pytest.fixture(scope="module")
def go1_export(tmp_path_factory) -> Path:
    """A tiny envpool-trained Go1 run's TorchScript export."""
    run_dir = tmp_path_factory.mktemp("go1") / "go1"
    overrides = ("task=Go1JoystickFlatTerrain", "env.n_envs=4", "ppo.rollout_steps=16", "ppo.minibatches=2", "total_steps=64")
    finish(popen_module("ppo_control.train", *overrides, "eval.episodes=1", "env.max_episode_steps=20", f"run_dir={run_dir}"))
    finish(popen_module("ppo_control.export", f"run={run_dir}"))
    return run_dir / "export" / "policy.pt"


@pytest.mark.slow
def test_cpp_example_runs_a_go1_export_with_its_joint_names(cpp_build, go1_export, tmp_path):
    """A Playground robot's export (envpool-trained Go1) in the C++ loader: its joints in action
    order and the control period from the metadata, the actions the Python loader computes."""
    from ppo_control.api import load_policy

    binary = cpp_binary(cpp_build)
    policy = go1_export
    obs = np.random.default_rng(0).normal(size=(4, 48)).astype(np.float32)
    obs_file = tmp_path / "obs.txt"
    write_observations(obs_file, obs)
    lines, actions = run_cpp(binary, str(policy), "--file", str(obs_file))
    assert "control period: 0.02 s" in lines
    assert "actions: FR_hip_joint FR_thigh_joint FR_calf_joint FL_hip_joint" in " ".join(lines)
    np.testing.assert_allclose(actions, load_policy(policy)(obs), rtol=0, atol=ATOL)


def load_export(export: Path) -> tuple[torch.jit.ScriptModule, dict]:
    """The exported module and its metadata.json."""
    extra = {"metadata.json": ""}
    module = torch.jit.load(str(export), _extra_files=extra)
    return module, json.loads(extra["metadata.json"])


def steps_in_cpp_and_python(binary: Path, export: Path, command: list[float], steps: int, gait_frequency_hz: float | None = None):
    """examples/cpp/robot_controller.cpp and ppo_control.deploy.controller's drive on the export's
    robot model from its home keyframe: (C++ [steps, obs_dim + action_dim], Python the same, the C++'s
    output), each row a step's observation after its physics and the action that started it."""
    module, metadata = load_export(export)
    xml = model_path(metadata["env_id"])
    args = [str(binary), str(export), xml, "--steps", str(steps), "--trace"]
    args += ["--command", *map(str, command)] if command else []  # a robot without a joystick takes none
    args += ["--gait-frequency", str(gait_frequency_hz)] if gait_frequency_hz is not None else []
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in result.stdout.splitlines() if line.startswith("step ")]
    cpp = np.array([[float(v) for v in line[2:] if v not in ("obs", "action")] for line in lines], dtype=np.float32)
    from ppo_control.deploy.controller import drive

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the C++ loop runs libtorch on one thread: the same arithmetic
    try:
        python = drive(module, xml, metadata, np.asarray(command, dtype=np.float64), steps, gait_frequency_hz=gait_frequency_hz)
    finally:
        torch.set_num_threads(threads)
    return cpp, np.concatenate([python.observations, python.actions], axis=1), result.stdout


def assert_cpp_steps_as_python(binary: Path, export: Path, command: list[float], steps: int, gait_frequency_hz: float | None = None):
    """Both controllers give the same observations and actions at every step; (the C++'s
    observations, its actions, its output)."""
    cpp, python, out = steps_in_cpp_and_python(binary, export, command, steps, gait_frequency_hz)
    assert cpp.shape == python.shape and len(cpp) == steps
    np.testing.assert_allclose(cpp, python, rtol=0, atol=1e-5)
    obs_dim = len(policy_elements(export))
    return cpp[:, :obs_dim], cpp[:, obs_dim:], out


def policy_elements(export: Path) -> tuple[str, ...]:
    from ppo_control.deploy.controller import RobotContract

    return RobotContract.from_metadata(load_export(export)[1]).elements


def with_robot_edited(export: Path, path: Path, edit) -> Path:
    """`export`'s module saved at `path` with its metadata's robot block changed by `edit`."""
    from benchmarks.robots.sim2sim_suite import with_metadata

    metadata = load_export(export)[1]
    edit(metadata["robot"])
    return with_metadata(export, metadata, path)


@pytest.mark.slow
def test_cpp_robot_controller_steps_go1_as_the_python_controller_does(cpp_build, go1_export, tmp_path):
    """examples/cpp/robot_controller.cpp drives the Go1 model on MuJoCo's C API through the export's
    metadata alone, step for step as ppo_control.deploy.controller does in Python; an export whose joint
    order does not match the model is refused."""
    binary = cpp_controller(cpp_build)
    _, _, out = assert_cpp_steps_as_python(binary, go1_export, [-0.5, 0.2, 0.3], 100)
    assert "tracking: planar" in out

    def swap_first_hips(robot: dict) -> None:
        names = robot["joint_names"]
        names[0], names[3] = names[3], names[0]

    swapped = with_robot_edited(go1_export, tmp_path / "swapped.pt", swap_first_hips)
    xml = model_path("Go1JoystickFlatTerrain")
    refused = subprocess.run([str(binary), str(swapped), xml, "--steps", "5"], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "actuator 0 does not drive FL_hip_joint" in refused.stderr


@pytest.mark.slow
def test_cpp_robot_controller_runs_t1s_gait_clock_as_the_python_controller_does(cpp_build, tmp_path):
    """A humanoid's loop: T1's policy reads a gait clock, which the controller keeps (the frequency
    given, held at the export's hold_rad under a zero command); C++ and Python step alike."""
    run_dir = tmp_path / "t1"
    overrides = ("task=T1JoystickFlatTerrain", "env.n_envs=2", "ppo.rollout_steps=8", "ppo.minibatches=2", "total_steps=16")
    finish(popen_module("ppo_control.train", *overrides, "eval.episodes=1", "env.max_episode_steps=10", f"run_dir={run_dir}"))
    finish(popen_module("ppo_control.export", f"run={run_dir}"))
    export = run_dir / "export" / "policy.pt"
    binary = cpp_controller(cpp_build)
    names = policy_elements(export)
    for command in ([0.0, 0.0, 0.0], [0.5, 0.0, 0.2]):  # the clock held, the clock running
        observations, _, _ = assert_cpp_steps_as_python(binary, export, command, 20, gait_frequency_hz=1.5)
        clock = observations[1:, [i for i, name in enumerate(names) if name.startswith("phase_cos:")]]
        held = not any(command)
        assert np.all(clock == -1.0) == held  # cos(pi) on both feet from the first advance on, or a running clock


@pytest.mark.slow
def test_cpp_robot_controller_drives_the_trained_go1_trot_as_the_python_controller_does(cpp_build):
    """The committed Go1 trot export: a trained quadruped with a gait clock walks forward alike in
    C++ and Python."""
    binary = cpp_controller(cpp_build)
    export = ROOT / "benchmarks" / "results" / "robots" / "go1-trot" / "s0" / "policy.pt"
    frequency = load_export(export)[1]["robot"]["gait_phase"]["frequency_hz_range"][0]
    _, _, out = assert_cpp_steps_as_python(binary, export, [0.5, 0.0, 0.0], 100, gait_frequency_hz=frequency)
    assert "no fall" in out


@pytest.mark.slow
@pytest.mark.parametrize("task", ["SpotFlatTerrainJoystick", "SpotFlatTerrainJoystickTrot"])
def test_cpp_robot_controller_keeps_spots_joint_error_history_as_the_python_controller_does(cpp_build, tmp_path, task):
    """Spot's contract (its feet keyed by foot, the joint errors against the held targets over the
    last three observations, zero targets after the keyframe, the trot variant's clock) read alike
    in C++ and Python; the history the C++ keeps moves one observation per step."""
    from tests.deploy.test_sim2sim import spot_export

    export, _ = spot_export(tmp_path / "spot.pt", task)
    gait = load_export(export)[1]["robot"].get("gait_phase")
    frequency = gait["frequency_hz_range"][0] if gait else None
    binary = cpp_controller(cpp_build)
    observations, _, _ = assert_cpp_steps_as_python(binary, export, [0.5, 0.0, 0.3], 30, gait_frequency_hz=frequency)
    names = policy_elements(export)
    newest, older = ([names.index(f"qpos_error_hist{age}:fl_kn") for age in ages] for ages in ((0, 1), (1, 2)))
    np.testing.assert_array_equal(observations[1:, older], observations[:-1, newest])
    assert np.all(observations[:, names.index("qpos_error_hist0:fl_kn")] != 0.0)


@pytest.mark.slow
def test_cpp_robot_controller_moves_the_pandas_previous_targets_as_the_python_controller_does(cpp_build, tmp_path):
    """The committed Panda export: its incremental targets from the home keyframe's, clipped to the
    ctrl range, the gripper site, and as perception the box's free joint and the mocap target, read
    alike in C++ and Python; a rule no controller here drives is refused in one line."""
    binary = cpp_controller(cpp_build)
    export = ROOT / "benchmarks" / "results" / "robots" / "panda-tanh" / "PandaPickCube-s0" / "policy.pt"
    observations, actions, out = assert_cpp_steps_as_python(binary, export, [], 30)
    assert "perception" in out and " qpos:box " in out and "the policy reads no command" in out
    # the targets the C++ holds (target minus joint position, plus the joint position) move by the
    # scaled action from the previous ones, starting at robot.initial_target, within robot.ctrl_range
    robot, names = load_export(export)[1]["robot"], policy_elements(export)
    joints = robot["joint_names"]
    held = observations[:, [names.index(f"target_minus_qpos:{j}") for j in joints]].astype(np.float64)
    held += observations[:, [names.index(f"qpos:{j}") for j in joints]]
    previous = np.vstack([robot["initial_target"], held[:-1]])
    low, high = np.array(robot["ctrl_range"]).T
    np.testing.assert_allclose(held, np.clip(previous + robot["action_scale"] * actions, low, high), rtol=0, atol=1e-6)

    current_qpos = with_robot_edited(export, tmp_path / "current_qpos.pt", lambda robot: robot.update(action_rule="current_qpos"))
    xml = model_path("PandaPickCube")
    refused = subprocess.run([str(binary), str(current_qpos), xml], capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert refused.stderr == "error: robot.action_rule is current_qpos: this controller drives default_pose and previous_target\n"


def onnx_installed() -> bool:
    """The packages format=onnx needs: onnx and onnxscript to export, onnxruntime to run."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxscript", "onnxruntime"))


HISTORY = 3


STATEFUL = {  # the two kinds of state an exported policy keeps
    "history": {"settings": [f"policy.actor_history={HISTORY}"], "history": HISTORY, "rnn_state": 0},
    "lstm": {"settings": ["policy.rnn=lstm", "policy.rnn_size=16"], "history": 1, "rnn_state": 32},
}


@pytest.fixture(scope="module", params=sorted(STATEFUL))
def stateful_run(request, tmp_path_factory):
    """A tiny Hopper run with observation history or an LSTM, exported as TorchScript and (where
    the onnx packages are installed) ONNX, in parallel."""
    run_dir = tmp_path_factory.mktemp(request.param) / request.param
    overrides = ("task=Hopper", "total_steps=256", *STATEFUL[request.param]["settings"], *TINY, f"run_dir={run_dir}")
    finish(popen_module("ppo_control.train", *overrides))
    formats = ["torchscript"] + (["onnx"] if onnx_installed() else [])
    processes = [popen_module("ppo_control.export", f"run={run_dir}", f"format={fmt}") for fmt in formats]
    for process in processes:
        finish(process)
    return request.param, run_dir


@pytest.mark.slow
def test_cpp_episode_mode_steps_a_stateful_policy_like_python(cpp_build, stateful_run, tmp_path):
    """Two whole real Hopper episodes, stepped from C++ with reset() at each start, act exactly like
    the TorchScript module in Python, the ONNX graph with its state fed back, and the training policy."""
    import gymnasium as gym

    from ppo_control.api import load_policy

    kind, run_dir = stateful_run
    expected = STATEFUL[kind]
    binary, exported = cpp_binary(cpp_build), str(run_dir / "export" / "policy.pt")
    # (c) the training policy drives a real env: its observations are the episodes, its actions the reference
    policy = load_policy(run_dir)
    assert policy.history == expected["history"]
    env = gym.make("Hopper-v5")
    episodes, reference = [], []
    for seed in (ROLLOUT_SEED, ROLLOUT_SEED + 1):
        policy.reset()
        obs, _ = env.reset(seed=seed)
        frames, done = [], False
        while not done:  # the whole episode: this barely trained policy falls within tens of steps
            frames.append(np.asarray(obs, dtype=np.float32))
            reference.append(policy(frames[-1]))
            obs, _, terminated, truncated, _ = env.step(reference[-1])
            done = terminated or truncated
        assert len(frames) > HISTORY, "the episode must outlast the history, or the state is never exercised"
        episodes.append(frames)
    env.close()
    reference = np.stack(reference)

    obs_file = tmp_path / "episodes.txt"
    write_observations(obs_file, [*episodes[0], "reset", *episodes[1]])
    lines, actions = run_cpp(binary, exported, "--episode", str(obs_file))
    assert f"history: {expected['history']}" in lines and f"recurrent state: {expected['rnn_state']}" in lines
    assert "control period: 0.008 s" in lines
    assert "actions: thigh_joint leg_joint foot_joint" in lines
    assert actions.shape == reference.shape
    np.testing.assert_allclose(actions, reference, rtol=0, atol=ATOL)

    # (a) the TorchScript module in Python, reset() at the same points
    module = torch.jit.load(exported)
    scripted = []
    with torch.inference_mode():
        for frames in episodes:
            module.reset()
            scripted += [module(torch.from_numpy(frame)).numpy() for frame in frames]
    np.testing.assert_allclose(actions, np.stack(scripted), rtol=0, atol=ATOL)
    # the state matters: without it (every step an episode start) the actions are different
    memoryless = []
    with torch.inference_mode():
        for frame in [frame for frames in episodes for frame in frames]:
            module.reset()
            memoryless.append(module(torch.from_numpy(frame)).numpy())
    assert np.abs(np.stack(memoryless) - actions).max() > 100 * ATOL

    # (b) the ONNX graph, its state fed back explicitly: at a start the first frame repeated as the
    # history and a zero recurrent state
    if onnx_installed():
        import onnxruntime

        session = onnxruntime.InferenceSession(str(run_dir / "export" / "policy.onnx"), providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == ["obs", "history" if kind == "history" else "rnn_state"]
        graph = []
        for frames in episodes:
            if kind == "history":
                state = np.repeat(frames[0][None, None], HISTORY - 1, axis=1)
            else:
                state = np.zeros((1, expected["rnn_state"]), dtype=np.float32)
            for frame in frames:
                action, state = session.run(None, {"obs": frame[None], session.get_inputs()[1].name: state})
                graph.append(action[0])
        np.testing.assert_allclose(actions, np.stack(graph), rtol=0, atol=ATOL)

    # --file: a batch of robots at their first step (after reset()), which the output notes
    first_steps = tmp_path / "first_steps.txt"
    write_observations(first_steps, [frames[0] for frames in episodes])
    lines, batch = run_cpp(binary, exported, "--file", str(first_steps))
    assert any(line.startswith("note: a stateful policy") for line in lines)
    np.testing.assert_allclose(batch, actions[[0, len(episodes[0])]], rtol=0, atol=ATOL)
    # "reset" separates episodes only in --episode
    refused = subprocess.run([str(binary), exported, "--file", str(obs_file)], capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "'reset'" in refused.stderr and "--episode" in refused.stderr


# --- CLI errors ---------------------------------------------------------------------------------


def assert_one_line_error(result: subprocess.CompletedProcess, *needles: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_missing_run_dir(tmp_path):
    result = run_module("ppo_control.export", f"run={tmp_path / 'nope'}")
    assert_one_line_error(result, "nope", "does not exist")
    assert not (tmp_path / "nope").exists()


@pytest.mark.slow
def test_unknown_key_names_the_valid_ones(runs):
    result = run_module("ppo_control.export", f"run={runs['ip']['dir']}", "fromat=onnx")
    assert_one_line_error(result, "fromat", "format", "run", "out", "checkpoint", "overwrite")


@pytest.mark.slow
def test_bad_format_names_the_valid_ones(runs):
    result = run_module("ppo_control.export", f"run={runs['ip']['dir']}", "format=tflite")
    assert_one_line_error(result, "tflite", "torchscript", "onnx")


@pytest.mark.slow
def test_existing_output_is_refused_and_untouched(runs, exports, tmp_path):
    keep = tmp_path / "keep.onnx"
    keep.write_bytes(b"somebody's file")
    result = run_module("ppo_control.export", f"run={runs['ip']['dir']}", "format=onnx", f"out={keep}")
    assert_one_line_error(result, str(keep), "out=", "overwrite=true")
    assert keep.read_bytes() == b"somebody's file"

    default = exports["paths"]["ip", "torchscript"]  # the default out=<run>/export/policy.pt
    before = sha256(default)
    result = run_module("ppo_control.export", f"run={runs['ip']['dir']}")
    assert_one_line_error(result, str(default), "out=")
    assert sha256(default) == before
    assert sorted(p.name for p in default.parent.iterdir()) == ["policy.pt"]  # no temp files left behind

    result = run_module("ppo_control.export", f"run={runs['ip']['dir']}", "overwrite=true")
    assert result.returncode == 0, result.stderr
    assert f"wrote {default}" in result.stdout


@pytest.mark.slow
def test_onnx_without_the_extra_says_how_to_install_it(runs, tmp_path):
    """Simulate an install without onnx: the error names the missing package and the pip command."""
    code = BLOCK_PPO_CONTROL.replace('name == "ppo_control" or name.startswith("ppo_control.")', 'name.split(".")[0] == "onnxscript"')
    code += "import runpy; sys.argv = ['export', *sys.argv[1:]]; runpy.run_module('ppo_control.export', run_name='__main__')"
    out = tmp_path / "p.onnx"
    result = subprocess.run(
        [sys.executable, "-c", code, f"run={runs['ip']['dir']}", "format=onnx", f"out={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(result, "onnxscript", 'pip install -e ".[onnx]"')
    assert not out.exists()
