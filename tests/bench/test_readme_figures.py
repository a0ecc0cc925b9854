"""The README's performance figures are bench/RESULTS.md's: the block between the README's
markers is what ``bench.readme.block`` makes of the RESULTS.md in the same tree (``python -m
bench`` and ``python -m bench.tests`` write both; a hand-edited figure fails here)."""

from __future__ import annotations

from pathlib import Path

from bench import readme

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_quotes_results_md_and_nothing_else() -> None:
    text = (REPO / "README.md").read_text()
    results = (REPO / "bench" / "RESULTS.md").read_text()
    assert readme.readme_block(text), "README.md has no bench block (see bench/readme.py)"
    assert readme.readme_block(text) == readme.block(results), (
        "README.md's performance figures differ from bench/RESULTS.md: run `python -m bench.readme`"
    )


def test_the_block_carries_every_target_row_and_the_tests_figures() -> None:
    results = (REPO / "bench" / "RESULTS.md").read_text()
    block = readme.block(results)
    for row in readme._table(results, "## Against the targets"):
        assert f"| {row[0]} | {row[4]} | {row[5]} | {row[6]} | {row[7]} |" in block
    assert "MultiProcessTestCase" in block


def test_update_writes_the_block_between_the_markers(tmp_path: Path) -> None:
    results = REPO / "bench" / "RESULTS.md"
    target = tmp_path / "README.md"
    target.write_text(f"# x\n\n{readme.BEGIN}\nold figures\n{readme.END}\n\nrest\n")
    assert readme.update(target, results)
    text = target.read_text()
    assert "old figures" not in text and text.endswith("\nrest\n")
    assert readme.readme_block(text) == readme.block(results.read_text())
    plain = tmp_path / "PLAIN.md"
    plain.write_text("no markers\n")
    assert not readme.update(plain, results) and plain.read_text() == "no markers\n"
