"""The benchmark scripts, by purpose, and the helpers they share (`benchmarks.common`).

- `speed/`: steps/s, update cost, MJX overhead, CPU and GPU scaling, distributed, profiling, the CUDA check
- `scores/`: returns and time to a score (against Stable-Baselines3), robustness grids, archiving and
  thinning finished runs' metrics
- `robots/`: Playground robot tasks: against rsl_rl, the MuJoCo reference, sim2sim, the C++ controller,
  robot throughput and diagnoses
- `device/`: shell scripts for the GPU machine (not a Python package)

Every script runs as a module from the repository root, `python -m benchmarks.<folder>.<script> ...`
(its docstring gives the command), so that it imports `benchmarks.common` and `ppo_control` without
touching sys.path. Results are written under `benchmarks/results/`.
"""
