"""Evaluation videos of a policy: scenes, frames, overlays and the files they are written to."""
