"""The run directory: its layout, claiming and locking it, checkpoint files, loading a run."""
