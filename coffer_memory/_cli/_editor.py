"""``coffer facts edit ID`` with no flags: the fact in ``$VISUAL`` / ``$EDITOR``, saved with compare-and-swap."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._errors import CofferError, InvalidInput, safe_echo

if TYPE_CHECKING:
    from .._models import FactRecord, MutationResult
    from .._service import MemoryService

EDITABLE_KEYS = ("title", "description")


def editor_command() -> list[str]:
    """``$VISUAL``, else ``$EDITOR``, else ``vi``, split as a shell would (``code --wait`` works).

    ``vi`` only on a terminal: with neither variable set and stdin or stdout not a terminal (a
    script, an agent's shell tool), vi wrote its escape codes into the output, exited 1 and saved
    nothing. A command the user named is run anywhere (``code --wait`` needs no terminal)."""
    value = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not value:
        if not (_is_terminal(0) and _is_terminal(1)):
            raise InvalidInput(
                "facts edit with no options opens $VISUAL or $EDITOR, and neither is set: vi needs a "
                "terminal and this is not one; give --text, --title, --description or --tag, or set EDITOR",
                field="EDITOR",
            )
        value = "vi"
    try:
        return shlex.split(value)
    except ValueError as exc:  # an unclosed quote
        raise InvalidInput(
            f"cannot split the editor command {safe_echo(value)!r}: {exc}", field="EDITOR"
        ) from None


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def render_for_editor(record: FactRecord) -> str:
    """The text the user edits: title and description as frontmatter, then the body."""
    import yaml

    meta = {"title": record.fact.title, "description": record.fact.description}
    head = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=1_000_000)
    return f"---\n{head}---\n\n{record.fact.body}\n"


def parse_edited(text: str) -> tuple[dict[str, Any], str]:
    """The frontmatter and body of the edited text; only title and description may be set."""
    import frontmatter
    import yaml

    try:
        post = frontmatter.loads(text)
    except yaml.YAMLError as exc:  # its message spans lines (problem, then where): one line here
        problem = " ".join(str(exc).split())
        raise InvalidInput(f"the frontmatter is not valid YAML: {problem}", field="frontmatter") from None
    unknown = sorted(set(post.metadata) - set(EDITABLE_KEYS))
    if unknown:
        raise InvalidInput(
            f"only {' and '.join(EDITABLE_KEYS)} can be edited here, not {', '.join(unknown)}",
            field="frontmatter",
        )
    meta = {k: "" if post.metadata.get(k) is None else str(post.metadata[k]) for k in EDITABLE_KEYS}
    return meta, post.content


def _changes(record: FactRecord, meta: dict[str, Any], body: str) -> dict[str, str]:
    fact = record.fact
    changes = {k: v for k, v in meta.items() if v != (getattr(fact, k) or "")}
    if body.strip() != fact.body.strip():
        changes["body"] = body
    return changes


def edit_in_editor(
    svc: MemoryService, fact_id: str, args: argparse.Namespace, target: dict[str, Any]
) -> MutationResult | None:
    """Open the fact in the editor and save what changed, refusing if the file changed meanwhile.

    Returns None when nothing changed. When the save is refused (a conflict, an empty body, bad
    frontmatter) the edited text is kept in its temp file and the error says where.
    """
    command = editor_command()
    record = svc.get_fact(fact_id, **target)
    expected = args.expect_sha256 or record.sha256
    original = render_for_editor(record)
    fd, name = tempfile.mkstemp(prefix=f"coffer-{fact_id}-", suffix=".md")
    path = Path(name)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(original)
    try:
        status = subprocess.run([*command, str(path)], check=False).returncode
    except OSError as exc:
        path.unlink()
        raise InvalidInput(
            f"cannot start the editor {safe_echo(command[0])!r}: {exc}", field="EDITOR"
        ) from None
    # Bytes that are not UTF-8 become lone surrogates, which the write checks refuse (the text is kept).
    edited = path.read_bytes().decode("utf-8", "surrogateescape")
    if status != 0 or edited == original:
        path.unlink()
        if status != 0:
            raise InvalidInput(f"the editor exited with status {status}; nothing was saved", field="EDITOR")
        return None
    try:
        changes = _changes(record, *parse_edited(edited))
        if not changes:
            path.unlink()
            return None
        result = svc.edit_fact(
            fact_id,
            body=changes.get("body"),
            title=changes.get("title"),
            description=changes.get("description"),
            expected_sha256=expected,
            **target,
        )
    except CofferError as exc:
        exc.details["kept"] = str(path)
        exc.message += f" (your edited text is kept in {path})"
        raise
    path.unlink()
    return result
