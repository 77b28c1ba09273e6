"""The training loop (collect, update, log, evaluate, checkpoint), its saved state and its metrics."""
