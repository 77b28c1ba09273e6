"""Robot benchmarks on Playground tasks: rsl_rl, the MuJoCo reference, sim2sim, deployment (`python -m benchmarks.robots.<script>`)."""
