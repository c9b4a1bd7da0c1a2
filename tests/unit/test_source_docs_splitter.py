"""The docs source's splitters: Markdown (ATX and setext, fences), reStructuredText (underlined
and overlined titles, levels by first appearance), plain text windows, long sections."""

from __future__ import annotations

from ragloom.sources.docs import (
    MAX_SECTION_CHARS,
    TEXT_WINDOW_LINES,
    doc_kind,
    split_document,
    split_markdown,
    split_rst,
    split_text,
)


def test_markdown_title_paths_and_lines() -> None:
    text = (
        "Preamble line.\n\n# Guide\n\nIntro.\n\n## Install\n\npip.\n\n### From source\n\n"
        "clone.\n\n## Usage ##\n\nrun it.\n"
    )
    secs = split_markdown(text)
    assert [s.title for s in secs] == [
        "",
        "Guide",
        "Guide > Install",
        "Guide > Install > From source",
        "Guide > Usage",
    ]
    assert secs[0].text == "Preamble line."
    install = secs[2]
    assert (install.start_line, install.end_line) == (7, 10)
    assert install.text.startswith("## Install") and "pip." in install.text
    assert secs[-1].text.startswith("## Usage")


def test_markdown_ignores_headings_in_fences_and_reads_setext() -> None:
    text = (
        "Title\n=====\n\nSome text.\n\n```bash\n# not a heading\n```\n\n"
        "Part two\n--------\n\n~~~\n## nor this\n~~~\nend\n"
    )
    secs = split_markdown(text)
    assert [s.title for s in secs] == ["Title", "Title > Part two"]
    assert "# not a heading" in secs[0].text
    assert "## nor this" in secs[1].text


def test_markdown_thematic_break_after_paragraph_is_setext_but_not_after_blank() -> None:
    secs = split_markdown("# A\n\ntext\n\n---\n\nmore\n")
    assert [s.title for s in secs] == ["A"]


def test_rst_levels_follow_first_appearance() -> None:
    text = (
        "=======\nProject\n=======\n\nAbout.\n\nInstall\n-------\n\nSteps.\n\nDetails\n"
        "~~~~~~~\n\nMore.\n\nUsage\n-------\n\nRun.\n"
    )
    secs = split_rst(text)
    assert [s.title for s in secs] == [
        "Project",
        "Project > Install",
        "Project > Install > Details",
        "Project > Usage",
    ]
    assert secs[1].start_line == 7
    assert "Steps." in secs[1].text


def test_rst_short_underline_is_not_a_title() -> None:
    secs = split_rst("Long title here\n---\n\nbody\n")
    assert [s.title for s in secs] == [""]


def test_plain_text_windows_and_long_sections_are_cut() -> None:
    text = "\n".join(f"line {i}" for i in range(TEXT_WINDOW_LINES * 2 + 5))
    secs = split_text(text, "NOTES.txt")
    assert len(secs) == 3 and all(s.title == "NOTES.txt" for s in secs)
    assert secs[1].start_line == TEXT_WINDOW_LINES + 1
    big = "# Big\n\n" + "\n".join("word " * 20 for _ in range(200))
    parts = split_markdown(big)
    assert len(parts) > 1 and all(p.title == "Big" for p in parts)
    assert all(len(p.text) <= MAX_SECTION_CHARS for p in parts)
    assert parts[0].end_line + 1 == parts[1].start_line


def test_kinds_by_name() -> None:
    assert doc_kind("docs/a.md") == "markdown"
    assert doc_kind("docs/a.rst") == "rst"
    assert doc_kind("README") == "text"
    assert doc_kind("notes.txt") == "text"
    assert doc_kind("pkg/a.py") is None
    assert split_document("pkg/a.py", "# x") == []
