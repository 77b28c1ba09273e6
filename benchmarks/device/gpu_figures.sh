#!/usr/bin/env bash
# The device machine's checks, one command each (a device call runs at most 10 minutes):
#   bash benchmarks/device/gpu_figures.sh gpu    # benchmarks/speed/gpu_scale.py: MJX Ant, ours against Brax's PPO
#   bash benchmarks/device/gpu_figures.sh go1    # benchmarks/robots/robot_throughput.py on the host's 16 cores
#   bash benchmarks/device/gpu_figures.sh robots # Go1 rough and Go1Getup, seed 0, default settings, side by
#                                                # side on the host's 16 cores for ROBOT_SECONDS (default 420), then
#                                                # checkpointed: the runs resume on any machine (train resume=<dir>)
# Run from the repository root there, with carry [".whl", ".whl-cpu"] (bash benchmarks/device/prepare_wheels.sh
# here first). Results go to $OUT.
set -euo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl .whl-cpu/*.whl
export PYTHONPATH=/tmp/site:$PWD MUJOCO_GL=disable PYTHONUNBUFFERED=1  # no EGL libraries there, and these checks render nothing
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
case "${1:-}" in
    gpu) python3 -m benchmarks.speed.gpu_scale --parts mjx_raw,ours,brax --out "$OUT/gpu_scale.json" \
        --steps 30000000 --budget 120 --part-timeout 160 ;;
    go1) python3 -m benchmarks.robots.robot_throughput task=Go1JoystickFlatTerrain repeats=2 raw_seconds=6 \
        total_steps=262144 out="$OUT/throughput-Go1JoystickFlatTerrain-16cores.json" ;;
    robots)
        # ROBOT_TASKS (default both) share the host's cores; a run's files come back as one tarball
        # (a device call returns at most 8 files).
        tasks=(${ROBOT_TASKS:-Go1JoystickRoughTerrain Go1Getup})
        threads=$(( 16 / ${#tasks[@]} ))
        for task in "${tasks[@]}"; do
            timeout -s INT -k 60 "${ROBOT_SECONDS:-420}" python3 -m ppo_control.train task=$task seed=0 \
                env.num_threads=$(( threads * 3 / 4 )) torch_threads=$(( threads / 4 )) \
                run_dir="/tmp/robots/$task-s0" > "$OUT/$task-s0.log" 2>&1 &
        done
        wait || true
        tar czf "$OUT/robots.tgz" -C /tmp/robots . ;;
    *) echo "usage: gpu_figures.sh gpu|go1|robots" >&2; exit 2 ;;
esac
