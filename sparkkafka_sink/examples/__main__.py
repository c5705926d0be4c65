"""``python -m sparkkafka_sink.examples``: where the installed example files are.

The spark-submit example needs its job script and two configuration files; they ship inside the
package, so a pip user finds them here::

    python -m sparkkafka_sink.examples                      # every file, one per line
    python -m sparkkafka_sink.examples spark-defaults.conf  # one path, for $(...) in a shell
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FILES = {"pipeline.py": HERE / "pipeline.py",
         "spark-defaults.conf": HERE / "conf" / "spark-defaults.conf",
         "producer.properties": HERE / "conf" / "producer.properties"}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        for name, path in FILES.items():
            print(f"{name}\t{path}")
        return 0
    if args[0] not in FILES:
        print(f"unknown example file {args[0]!r}; one of: {', '.join(FILES)}", file=sys.stderr)
        return 2
    print(FILES[args[0]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
