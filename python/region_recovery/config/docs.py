"""The generated tables of docs/configuration.md (``region-recovery config --update-docs``)."""

from __future__ import annotations

from .registry import registered_keys

_BEGIN = "<!-- generated from region_recovery.config: {section} -->"
_END = "<!-- end of generated table -->"


def markdown_table(section: str) -> str:
    """The table of one section of docs/configuration.md, from the declarations."""
    rows = ["| Key | Default | Accepted values | Meaning |", "|---|---|---|---|"]
    for k in registered_keys():
        if k.section == section:
            rows.append(f"| `{k.name}` | `{k.default_text}` | {k.accepted} | {k.doc} |")
    return "\n".join(rows)


def render_docs(text: str) -> str:
    """``text`` (docs/configuration.md) with every generated table replaced by the current one."""
    out: list[str] = []
    i = 0
    while True:
        start = text.find("<!-- generated from region_recovery.config: ", i)
        if start < 0:
            return "".join(out) + text[i:]
        header_end = text.index("-->", start) + 3
        section = text[start:header_end].split(": ", 1)[1].removesuffix(" -->")
        end = text.index(_END, header_end)
        out.append(text[i:header_end] + "\n" + markdown_table(section) + "\n")
        i = end
