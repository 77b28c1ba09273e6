"""benchmarks/scores/robustness_suite.py summarizes a committed suite from a clean checkout: the suite's
runs keep their robustness/robustness.csv but not their checkpoints (git-ignored)."""

from PIL import Image

from tests.helpers import ROOT

SUITE_DIR = ROOT / "tests" / "data" / "robust-1M"
SUITES = ["nominal", "randomized", "randomized-privileged"]


def load_script():
    from benchmarks.scores import robustness_suite

    return robustness_suite


def test_the_committed_robustness_table_is_rebuilt_from_the_runs_csv_files(tmp_path):
    out = tmp_path / "robustness.md"
    suites = ",".join(str(SUITE_DIR / name) for name in SUITES)
    load_script().main([f"suites=[{suites}]", f"out={out}"])

    assert out.read_text(encoding="utf-8") == (SUITE_DIR / "robustness.md").read_text(encoding="utf-8")
    for task in ("Hopper", "Walker2d"):
        with Image.open(tmp_path / f"robustness_{task}.png") as image:
            assert image.mode == "P"  # written through plot.save_figure, as the committed figures
