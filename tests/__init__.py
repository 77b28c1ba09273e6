"""The test suite, folder by folder as the package (tests/<folder>/ tests ppo_control/<folder>/), plus
commands/ (the commands, the API, help, install, packaging, docs) and benchmarks/ (the benchmark
scripts). Every folder is a package, so two test files may share a name; helpers the tests import
live in tests/helpers.py, fixtures in tests/conftest.py."""
