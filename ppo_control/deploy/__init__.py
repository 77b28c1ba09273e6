"""What a robot controller runs: the exported module, loading an export or a run, the controller contract and loop."""
