"""MuJoCo Playground's robot tasks: what each task is (groups, element names, PD contract) and its physics-only assets."""
