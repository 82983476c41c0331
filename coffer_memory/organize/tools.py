"""What the organizer and the reorg loop work with: explicit collaborators, no service object."""

from __future__ import annotations

import attrs

from ..config import Settings
from ..core import Facts
from ..indexing import IndexHandle
from ..lanes import Lanes
from ..store.writer import Writer


@attrs.frozen
class OrganizeTools:
    """The settings, index, Writer, facts and lanes of one home, handed to organize and reorg."""

    settings: Settings
    index: IndexHandle
    writer: Writer
    facts: Facts
    lanes: Lanes
