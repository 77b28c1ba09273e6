"""Tests of the commands as a user runs them, the Python API, --help, the installed wheel, packaging, the README and docs."""
