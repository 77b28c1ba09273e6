"""Reading results: learning curves, the robustness grid, the benchmark suite."""
