"""What the organizer and the reorg loop work with: explicit collaborators, no service object."""

from __future__ import annotations

import attrs

from .._config import Settings
from .._core import Facts
from .._indexing import IndexHandle
from .._lanes import Lanes
from .._store.writer import Writer


@attrs.frozen
class OrganizeTools:
    """The settings, index, Writer, facts and lanes of one home, handed to organize and reorg."""

    settings: Settings
    index: IndexHandle
    writer: Writer
    facts: Facts
    lanes: Lanes
