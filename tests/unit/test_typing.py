"""The package's signatures say what they take: ``Any`` (``x: Any``, ``-> Any``) is left where a
value's type is truly open -- a field of a generated protocol message, a JSON document, a
keyword passed on -- and its count may only fall."""

from __future__ import annotations

import re
from pathlib import Path

import sparkkafka_sink

ROOT = Path(sparkkafka_sink.__file__).parent
#: ``: Any`` / ``-> Any`` in the package today (191 when it was counted first, 2026-12-06)
ANY_LEFT = 88


def _any_annotations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"(: Any|-> Any)\b", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    return found


def test_no_new_any_in_the_package_s_annotations():
    found = _any_annotations()
    assert len(found) <= ANY_LEFT, (f"{len(found)} annotations say Any (at most {ANY_LEFT}): type the new one, "
                                    "or lower ANY_LEFT when one goes\n" + "\n".join(found))
