"""Writes a benchmark table into docs/benchmarks.md between its own markers (the section
is appended, with `heading`, the first time). Shared by bench/pt2_bench.py and
bench/python_bench.py; run_bench.py keeps its own main table."""
import os

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "benchmarks.md")


def write_table(name, heading, table):
    """Replaces what stands between <!-- NAME-table:start --> and <!-- NAME-table:end -->."""
    start, end = f"<!-- {name}-table:start -->", f"<!-- {name}-table:end -->"
    with open(DOC) as f:
        text = f.read()
    if start in text and end in text:
        a, b = text.index(start) + len(start), text.index(end)
        text = text[:a] + "\n" + table + "\n" + text[b:]
    else:
        text += f"\n## {heading}\n\n{start}\n{table}\n{end}\n"
    with open(DOC, "w") as f:
        f.write(text)
